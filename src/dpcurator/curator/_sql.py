"""The SQL front end: parse an analyst's query (sqlglot) and check it is a supported aggregate.

Only this shape is accepted::

    SELECT <group keys and aggregates> FROM <one declared table> [WHERE <row filter>]
    [GROUP BY <declared columns>] [ORDER BY <output columns>] [LIMIT n]

Everything else (raw rows, joins, subqueries, set operations, window functions, HAVING,
functions outside a short list of row-wise ones, undeclared columns) is refused with a
:class:`~dpcurator.errors.QueryError` that says why and what would work, before any data is read.
The WHERE clause is re-rendered from the checked syntax tree with every column reference quoted,
so names and literals cannot inject SQL.

Examples
--------
>>> import pandas as pd
>>> from dpcurator.curator import Column, Table
>>> t = Table("people", pd.DataFrame(), privacy_unit="pid", max_rows_per_unit=1, columns=[
...     Column("state", domain=["CA", "NY"]), Column("income", lower=0, upper=1000)])
>>> q = parse_query("SELECT state, COUNT(*), AVG(income) FROM people GROUP BY state", {"people": t})
>>> q.group_by, [type(a).__name__ for a in q.aggregates], [a.alias for a in q.aggregates]
(('state',), ['Count', 'Mean'], ['count', 'avg_income'])
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence, Set
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError, TokenError

from dpcurator.curator._aggregates import (
    Aggregate,
    Count,
    CountColumn,
    CountUnits,
    Histogram,
    Mean,
    Quantile,
    Sum,
    Variance,
)
from dpcurator.curator._keys import ComputedKey, computed_key
from dpcurator.curator._rowwise import ROW_NODES
from dpcurator.curator._table import Table, check_bins
from dpcurator.errors import InvalidParameterError, QueryError

__all__ = [
    "MAX_LITERAL_CHARS",
    "MAX_PARENTHESES",
    "MAX_QUERY_CHARS",
    "MAX_QUERY_DEPTH",
    "Aggregate",
    "ParsedQuery",
    "output_columns",
    "parse_query",
]

MAX_QUERY_CHARS = 20_000
"""Longest query text accepted (characters)."""
MAX_QUERY_DEPTH = 128
"""Deepest parsed syntax tree accepted (a chain of 120 ORs is fine; 5,000 NOTs are not)."""
MAX_PARENTHESES = 64
"""Deepest nesting of parentheses accepted in the text."""
MAX_LITERAL_CHARS = 1_000
"""Longest string literal or identifier accepted (characters)."""

_WHERE_NODES = ROW_NODES


@dataclass(frozen=True)
class ParsedQuery:
    """A checked aggregate query.

    Attributes
    ----------
    text : str
        The query as the analyst wrote it.
    table : Table
        The declared table it reads.
    where : sqlglot.exp.Expr or None
        The row filter, with every column reference replaced by a quoted declared name.
    group_by : tuple of str
        The group keys in GROUP BY order: declared columns, and computed keys named by their
        SQL (see ``computed``).
    aggregates : tuple of Aggregate
        The typed aggregates (:mod:`dpcurator.curator._aggregates`), in SELECT order.
    outputs : tuple of (str, str)
        The released columns in SELECT order: ``("key", column)`` or ``("agg", alias)``; a
        key's output name is its alias (``key_names``).
    key_names : dict
        Output name of each group key.
    order_by : tuple of (str, bool)
        Output column and descending flag, applied to the released table (post-processing).
    limit : int or None
        Rows kept after ordering (post-processing).
    computed : dict
        The computed group keys (bands of a bounded column), by name
        (:mod:`dpcurator.curator._keys`).
    """

    text: str
    table: Table
    where: exp.Expr | None
    group_by: tuple[str, ...]
    aggregates: tuple[Aggregate, ...]
    outputs: tuple[tuple[str, str], ...]
    key_names: Mapping[str, str]
    order_by: tuple[tuple[str, bool], ...]
    limit: int | None
    computed: Mapping[str, ComputedKey] = field(default_factory=dict)

    @property
    def histogram(self) -> Histogram | None:
        """The HISTOGRAM aggregate, if the query is one."""
        return _histogram_of(self.aggregates)


def _histogram_of(aggregates: Sequence[Aggregate]) -> Histogram | None:
    return next((a for a in aggregates if isinstance(a, Histogram)), None)


@dataclass(frozen=True)
class _Context:
    """The declared table a query reads, and the names that may qualify its columns."""

    table: Table
    qualifiers: frozenset[str]


def _sql(node: exp.Expr) -> str:
    return node.sql(dialect="duckdb")


def _column_name(node: exp.Expr, query: _Context) -> str:
    """Return the declared column a column reference names (qualifiers must name the table)."""
    if not isinstance(node, exp.Column) or isinstance(node.this, exp.Star):
        raise QueryError(
            f"{_sql(node)!r} is not a column: aggregates and GROUP BY take a declared column "
            "(compute expressions in the WHERE clause or declare a derived column)."
        )
    qualifier = node.table
    if qualifier and qualifier.lower() not in query.qualifiers:
        raise QueryError(
            f"{_sql(node)!r} names table {qualifier!r}; this query reads {query.table.name!r} only."
        )
    if node.args.get("db") or node.args.get("catalog"):
        raise QueryError(f"{_sql(node)!r}: qualify columns with the table name only.")
    return query.table.column(node.name).name


def _literal_number(node: exp.Expr, what: str) -> float:
    value = node
    sign = 1.0
    if isinstance(value, exp.Neg):
        sign, value = -1.0, value.this
    if isinstance(value, exp.Paren):
        value = value.this
    if not isinstance(value, exp.Literal) or value.is_string:
        raise QueryError(f"{what} must be a number literal, got {_sql(node)!r}.")
    try:
        number = sign * float(value.this)
    except ValueError:
        raise QueryError(f"{what} must be a number literal, got {_sql(node)!r}.") from None
    if not math.isfinite(number):
        raise QueryError(f"{what} must be finite, got {_sql(node)!r}.")
    return number


def _position(node: exp.Expr, clause: str, count: int) -> int | None:
    """Return the SELECT position (1-based) a number in GROUP BY / ORDER BY names, or None."""
    if not isinstance(node, exp.Literal) or node.is_string:
        return None
    text = str(node.this)
    if not text.isdigit() or len(text) > 6:
        raise QueryError(
            f"{clause} {text}: a position must be a whole number between 1 and {count} "
            "(the number of SELECT items)."
        )
    position = int(text)
    if not 1 <= position <= count:
        raise QueryError(f"{clause} {position}: there is no SELECT item {position}.")
    return position


# --- Aggregates: one builder per sqlglot node type -------------------------------------------


@dataclass(frozen=True)
class _Written:
    """One aggregate as the analyst wrote it: its SQL text, its alias (if any), its table."""

    text: str
    alias: str | None
    query: _Context

    def numeric_column(self, node: exp.Expr) -> str:
        """Return the declared column ``node`` names, which must have bounds."""
        name = _column_name(node, self.query)
        if self.query.table.column(name).bounds is None:
            raise QueryError(
                f"{self.text} needs bounds on column {name!r}: declare lower and upper for it "
                "(values are clamped into them, which is what makes the sensitivity finite)."
            )
        return name


def _count(node: exp.Expr, written: _Written) -> Count | CountColumn | CountUnits:
    """``COUNT(*)``, ``COUNT(DISTINCT <privacy unit>)`` or ``COUNT(column)``."""
    arg = node.this
    if isinstance(arg, exp.Star):
        return Count(alias=written.alias or "count", text=written.text)
    if isinstance(arg, exp.Distinct):
        return _count_units(arg, written)
    if arg is None:
        raise QueryError(f"{written.text}: give a column, or * to count rows: COUNT(*).")
    name = _column_name(arg, written.query)
    return CountColumn(column=name, alias=written.alias or f"count_{name}", text=written.text)


def _count_units(distinct: exp.Distinct, written: _Written) -> CountUnits:
    """``COUNT(DISTINCT <privacy unit>)``: the only COUNT DISTINCT answered."""
    text, args = written.text, distinct.expressions
    if len(args) != 1:
        raise QueryError(f"{text}: COUNT(DISTINCT ...) takes one column.")
    name = _column_name(args[0], written.query)
    unit = written.query.table.unit_column
    if unit is None:
        raise QueryError(f"{text}: each row is a privacy unit here; use COUNT(*).")
    if name != unit:
        raise QueryError(
            f"{text}: COUNT(DISTINCT ...) is supported for the privacy unit only ({unit!r}); "
            f"count distinct values of {name!r} with SELECT {name}, COUNT(*) ... GROUP BY "
            f"{name} instead."
        )
    return CountUnits(column=name, alias=written.alias or f"count_distinct_{name}", text=text)


def _sum(node: exp.Expr, written: _Written) -> Sum:
    name = written.numeric_column(node.this)
    return Sum(column=name, alias=written.alias or f"sum_{name}", text=written.text)


def _mean(node: exp.Expr, written: _Written) -> Mean:
    name = written.numeric_column(node.this)
    return Mean(column=name, alias=written.alias or f"avg_{name}", text=written.text)


def _variance(
    node: exp.Expr, written: _Written, *, population: bool = False, root: bool = False
) -> Variance:
    """``VARIANCE``/``VAR_POP`` or (``root``) ``STDDEV``/``STDDEV_POP``."""
    name = written.numeric_column(node.this)
    default = ("stddev" if root else "var") + ("_pop" if population else "") + f"_{name}"
    return Variance(
        column=name,
        alias=written.alias or default,
        text=written.text,
        population=population,
        root=root,
    )


def _quantile(column: str, level: float, written: _Written) -> Quantile:
    return Quantile(
        column=column,
        alias=written.alias or _quantile_name(column, level),
        text=written.text,
        level=level,
    )


def _quantile_name(column: str, q: float) -> str:
    if q == 0.5:
        return f"median_{column}"
    label = f"{100 * q:g}".replace(".", "_")
    return f"p{label}_{column}"


def _quantile_level(node: exp.Expr | None, text: str) -> float:
    if node is None:
        raise QueryError(f"{text}: give the quantile level, e.g. QUANTILE(income, 0.9).")
    q = _literal_number(node, f"the quantile level of {text}")
    if not 0.0 <= q <= 1.0:
        raise QueryError(f"{text}: the quantile level must be in [0, 1], got {q}.")
    return q


def _median(node: exp.Expr, written: _Written) -> Quantile:
    return _quantile(written.numeric_column(node.this), 0.5, written)


def _quantile_call(node: exp.Expr, written: _Written) -> Quantile:
    """``QUANTILE(column, level)``, ``PERCENTILE_CONT(column, level)`` and the like."""
    name = written.numeric_column(node.this)
    level = node.args.get("quantile") or node.args.get("expression")
    return _quantile(name, _quantile_level(level, written.text), written)


def _within_group(node: exp.Expr, written: _Written) -> Quantile:
    """``PERCENTILE_CONT(level) WITHIN GROUP (ORDER BY column)`` (or PERCENTILE_DISC)."""
    if not isinstance(node.this, exp.PercentileCont | exp.PercentileDisc):
        raise _not_an_output(written.text)
    order = node.expression
    ordered = order.expressions if isinstance(order, exp.Order) else []
    if len(ordered) != 1:
        raise QueryError(f"{written.text}: WITHIN GROUP (ORDER BY <one column>) expected.")
    name = written.numeric_column(ordered[0].this)
    return _quantile(name, _quantile_level(node.this.this, written.text), written)


def _named_call(node: exp.Expr, written: _Written) -> Quantile | Histogram:
    """Build ``HISTOGRAM(...)`` or ``QUANTILE(...)``, functions sqlglot does not know by name."""
    build = _NAMED_CALLS.get(str(node.this).lower())
    if build is None:
        raise _not_an_output(written.text)
    args = node.expressions
    if not args:
        raise QueryError(f"{written.text}: give the column.")
    return build(written.numeric_column(args[0]), args[1:], written)


def _named_quantile(column: str, args: Sequence[exp.Expr], written: _Written) -> Quantile:
    level = _quantile_level(args[0] if args else None, written.text)
    return _quantile(column, level, written)


def _histogram(column: str, args: Sequence[exp.Expr], written: _Written) -> Histogram:
    """``HISTOGRAM(column [, edges ...])``: the edges given, else the column's declared bins."""
    edges = _histogram_edges(args, written) if args else written.query.table.column(column).bins
    if edges is None:
        raise QueryError(
            f"{written.text}: declare bins for column {column!r} or give the edges, e.g. "
            f"HISTOGRAM({column}, 0, 10, 20, 50)."
        )
    return Histogram(column=column, alias=written.alias or "count", text=written.text, edges=edges)


def _histogram_edges(args: Sequence[exp.Expr], written: _Written) -> tuple[float, ...]:
    numbers = [_literal_number(a, f"a histogram edge of {written.text}") for a in args]
    try:
        return check_bins(numbers, "bins")
    except InvalidParameterError as error:
        raise QueryError(f"{written.text}: {error}") from None


_NAMED_CALLS: dict[str, Callable[[str, Sequence[exp.Expr], _Written], Quantile | Histogram]] = {
    "histogram": _histogram,
    "quantile": _named_quantile,
}

_BUILDERS: dict[type[exp.Expr], Callable[[exp.Expr, _Written], Aggregate]] = {
    exp.Count: _count,
    exp.Sum: _sum,
    exp.Avg: _mean,
    exp.Variance: _variance,
    exp.VariancePop: partial(_variance, population=True),
    exp.Stddev: partial(_variance, root=True),
    exp.StddevSamp: partial(_variance, root=True),
    exp.StddevPop: partial(_variance, population=True, root=True),
    exp.Median: _median,
    exp.Quantile: _quantile_call,  # also APPROX_QUANTILE, a subclass
    exp.PercentileCont: _quantile_call,
    exp.PercentileDisc: _quantile_call,
    exp.WithinGroup: _within_group,
    exp.Anonymous: _named_call,
}
"""The builder of each aggregate node type (a subclass uses its nearest listed base)."""


def _aggregate(node: exp.Expr, alias: str | None, query: _Context) -> Aggregate:
    """Build the typed aggregate a SELECT item that is not a group key writes, or refuse it."""
    written = _Written(_sql(node), alias, query)
    build = next((_BUILDERS[t] for t in type(node).__mro__ if t in _BUILDERS), None)
    if build is not None:
        return build(node, written)
    if isinstance(node, exp.AggFunc):
        raise QueryError(
            f"Aggregate {written.text!r} is not supported; supported: COUNT(*), COUNT(column), "
            "COUNT(DISTINCT <privacy unit>), SUM, AVG, VARIANCE, STDDEV, MEDIAN, QUANTILE, "
            "PERCENTILE_CONT, HISTOGRAM."
        )
    raise _not_an_output(written.text)


def _not_an_output(text: str) -> QueryError:
    return QueryError(
        f"{text!r} is neither a group key nor an aggregate. Released columns are GROUP BY keys "
        "and aggregates (raw rows and expressions of aggregates are never released: "
        "post-process the released table instead)."
    )


# --- Clauses ----------------------------------------------------------------------------------


def _check_where(node: exp.Expr, query: _Context) -> exp.Expr:
    for sub in node.walk():
        if isinstance(sub, exp.AggFunc):
            raise QueryError(
                f"WHERE cannot contain the aggregate {_sql(sub)!r}: it filters rows before "
                "aggregation (HAVING-like filters on released values are post-processing)."
            )
        if isinstance(sub, exp.Select | exp.Subquery | exp.Query):
            raise QueryError("Subqueries are not supported in WHERE: filter on declared columns.")
        if isinstance(sub, exp.Star):
            raise QueryError("WHERE cannot contain '*'.")
        if not isinstance(sub, _WHERE_NODES):
            raise QueryError(
                f"WHERE uses {_sql(sub)!r} ({type(sub).__name__}), which is not allowed: "
                "use comparisons, AND/OR/NOT, IN, BETWEEN, LIKE, IS NULL, arithmetic and the "
                "functions ABS, LOWER, UPPER, LENGTH, COALESCE, SUBSTRING, TRIM, ROUND, FLOOR, "
                "CEIL, YEAR, MONTH, DAY, CAST, CASE."
            )

    def quote(sub: exp.Expr) -> exp.Expr:
        if isinstance(sub, exp.Column):
            name = _column_name(sub, query)
            return exp.column(name, quoted=True)
        return sub

    return node.copy().transform(quote)


def _group_keys(select: exp.Select, query: _Context) -> tuple[list[str], dict[str, ComputedKey]]:
    """Return the group keys' names in GROUP BY order, and the computed ones (``_keys``)."""
    group = select.args.get("group")
    if group is None:
        return [], {}
    if group.args.get("rollup") or group.args.get("cube") or group.args.get("grouping_sets"):
        raise QueryError(
            "ROLLUP, CUBE and GROUPING SETS are not supported: run one query per level."
        )
    keys: list[str] = []
    computed: dict[str, ComputedKey] = {}
    for node in group.expressions:
        target = _group_target(node, select, query)
        if not isinstance(target, exp.Column):
            key = _computed_key(target, query)
            if key.name in keys:
                raise QueryError(f"GROUP BY names {key.name!r} twice.")
            keys.append(key.name)
            computed[key.name] = key
            continue
        name = _column_name(target, query)
        if name == query.table.unit_column:
            raise QueryError(
                f"GROUP BY {name!r} would release one group per privacy unit: group by other "
                "declared columns."
            )
        if name in keys:
            raise QueryError(f"GROUP BY names {name!r} twice.")
        keys.append(name)
    return keys, computed


def _computed_key(node: exp.Expr, query: _Context) -> ComputedKey:
    """Return the computed group key ``node`` (refused unless its domain is public)."""
    for column in node.find_all(exp.Column):
        if column.name == query.table.unit_column:
            raise QueryError(
                f"GROUP BY {_sql(node)!r} is computed from the privacy unit: group by other "
                "declared columns."
            )
    if isinstance(node.unnest(), exp.Case):
        _check_where(node, query)  # conditions: the row-wise operations a WHERE may use
    return computed_key(node, query.table, lambda c: _column_name(c, query))


def _group_target(node: exp.Expr, select: exp.Select, query: _Context) -> exp.Expr:
    """Return what a GROUP BY item names: a SELECT position, a SELECT alias, or itself."""
    items = list(select.expressions)
    position = _position(node, "GROUP BY", len(items))
    if position is not None:
        return _unaliased(items[position - 1])
    if isinstance(node, exp.Column) and not node.table:
        aliases = {i.alias: _unaliased(i) for i in items if isinstance(i, exp.Alias)}
        if node.name in aliases and node.name not in query.table.column_names:
            return aliases[node.name]
    return node


def _unaliased(item: exp.Expr) -> exp.Expr:
    """Return a SELECT item without its ``AS`` alias."""
    if isinstance(item, exp.Alias):
        inner: exp.Expr = item.this
        return inner
    return item


_REFUSED_CLAUSES = {
    "joins": "Joins are not supported: the curator answers queries over one declared table.",
    "having": "HAVING is not supported: filter rows with WHERE, or filter the released table.",
    "windows": "Window functions are not supported.",
    "qualify": "QUALIFY is not supported.",
    "offset": "OFFSET is not supported.",
    "laterals": "LATERAL is not supported.",
    "pivots": "PIVOT is not supported.",
    "with": "WITH (common table expressions) is not supported: query the declared table.",
    "into": "SELECT INTO is not supported.",
    "sample": "TABLESAMPLE is not supported.",
}


def parse_query(text: str, tables: Mapping[str, Table]) -> ParsedQuery:
    """Parse ``text`` and check it against the declared ``tables``.

    Parameters
    ----------
    text : str
        One SQL SELECT statement (DuckDB dialect).
    tables : mapping of str to Table
        The declared tables, by SQL name.

    Returns
    -------
    ParsedQuery

    Raises
    ------
    QueryError
        For anything that is not a supported aggregate query over one declared table.
    """
    select = _one_select(text)
    _refuse_clauses(select)
    query = _source(select, tables)
    _refuse_nested(select)
    keys, computed = _group_keys(select, query)
    selected = _select_list(select, query, keys, computed)
    aggregates = selected.aggregates
    if not aggregates:
        raise QueryError(
            "The query has no aggregate: the curator releases aggregates (COUNT, SUM, AVG ...)."
        )
    histogram = _histogram_of(aggregates)
    if histogram is not None and len(aggregates) > 1:
        raise QueryError("HISTOGRAM must be the only aggregate of its query.")
    key_names = selected.key_names
    _check_released_names([key_names[k] for k in keys], aggregates, histogram)
    names = [key_names[n] if kind == "key" else n for kind, n in selected.outputs]
    where = select.args.get("where")
    return ParsedQuery(
        text=text,
        table=query.table,
        where=_check_where(where.this, query) if where is not None else None,
        group_by=tuple(keys),
        computed=computed,
        aggregates=tuple(aggregates),
        outputs=tuple(selected.outputs),
        key_names=key_names,
        order_by=_order_by(select, names, {*names, *key_names.values()}),
        limit=_limit(select),
    )


def _one_select(text: str) -> exp.Select:
    """Parse ``text`` into its one SELECT statement, or refuse it."""
    if not isinstance(text, str):
        raise InvalidParameterError("query", text, "must be an SQL string")
    if not text.strip():
        raise QueryError("The query is empty: write SELECT <aggregates> FROM <table> ...")
    statements = _parse(text)
    if len(statements) != 1:
        raise QueryError(f"Give exactly one SELECT statement, got {len(statements)} statements.")
    select = statements[0]
    if not isinstance(select, exp.Select):
        raise QueryError(
            f"Only SELECT aggregate queries are answered, got a {type(select).__name__.upper()} "
            "statement."
        )
    return select


def _refuse_clauses(select: exp.Select) -> None:
    """Refuse joins, HAVING, windows, CTEs, SELECT DISTINCT and the other unanswered clauses."""
    for clause, message in _REFUSED_CLAUSES.items():
        if select.args.get(clause) or select.args.get(f"{clause}_"):
            raise QueryError(message)
    if select.args.get("distinct"):
        raise QueryError(
            "SELECT DISTINCT would release raw values: use GROUP BY with an aggregate."
        )


def _source(select: exp.Select, tables: Mapping[str, Table]) -> _Context:
    """Return the declared table FROM names, with the names that may qualify its columns."""
    source = select.args.get("from_") or select.args.get("from")
    if source is None:
        raise QueryError("The query has no FROM clause: name a declared table.")
    if source.expressions:
        raise QueryError("Give one table in FROM.")
    node = source.this
    if not isinstance(node, exp.Table) or not isinstance(node.this, exp.Identifier):
        raise QueryError(
            "FROM must name one declared table (subqueries, table functions and joins are not "
            "supported)."
        )
    if node.args.get("db") or node.args.get("catalog"):
        raise QueryError(f"FROM {_sql(node)!r}: name the declared table without a schema.")
    by_name = {name.lower(): table for name, table in tables.items()}
    table = by_name.get(node.name.lower())
    if table is None:
        raise QueryError(
            f"Table {node.name!r} is not declared in this session; declared: "
            f"{', '.join(sorted(tables))}."
        )
    qualifiers = {table.name, node.name, node.alias} - {""}
    return _Context(table, frozenset(q.lower() for q in qualifiers))


def _refuse_nested(select: exp.Select) -> None:
    """Refuse subqueries, set operations, table samples and windows anywhere in the query."""
    for node in select.walk():
        if node is not select and isinstance(node, exp.Select | exp.Subquery | exp.SetOperation):
            raise QueryError("Subqueries and set operations are not supported.")
        if isinstance(node, exp.TableSample):
            raise QueryError(
                "TABLESAMPLE / USING SAMPLE is not supported: the curator answers over all rows "
                "(a sample of the rows would need its own privacy analysis)."
            )
        if isinstance(node, exp.Window):
            raise QueryError("Window functions are not supported.")


@dataclass
class _SelectList:
    """The SELECT items: aggregates, released columns in order, each group key's output name."""

    aggregates: list[Aggregate] = field(default_factory=list)
    outputs: list[tuple[str, str]] = field(default_factory=list)
    key_names: dict[str, str] = field(default_factory=dict)


def _select_list(
    select: exp.Select, query: _Context, keys: Sequence[str], computed: Mapping[str, ComputedKey]
) -> _SelectList:
    selected = _SelectList()
    for item in select.expressions:
        alias = item.alias if isinstance(item, exp.Alias) else None
        node = _unaliased(item)
        name = _selected_computed(node, query, computed)
        if isinstance(node, exp.Star | exp.Column) or name is not None:
            name = name or _selected_key(node, query, keys)
            selected.key_names[name] = alias or name
            selected.outputs.append(("key", name))
        else:
            agg = _aggregate(node, alias, query)
            selected.aggregates.append(agg)
            selected.outputs.append(("agg", agg.alias))
    for key in keys:
        selected.key_names.setdefault(key, key)
    return selected


def _selected_computed(
    node: exp.Expr, query: _Context, computed: Mapping[str, ComputedKey]
) -> str | None:
    """Return the name of the computed group key ``node`` writes, if it writes one."""
    if not computed or isinstance(node, exp.Column | exp.Star) or node.find(exp.AggFunc):
        return None
    try:
        name = _computed_key(node, query).name
    except QueryError:
        return None
    return name if name in computed else None


def _selected_key(node: exp.Expr, query: _Context, keys: Sequence[str]) -> str:
    """Return the group key a selected column names (raw values and ``*`` are never released)."""
    if isinstance(node, exp.Star) or node.is_star:
        raise QueryError(
            "SELECT * would release raw rows: the curator answers aggregates only, e.g. "
            f"SELECT COUNT(*) FROM {query.table.name}."
        )
    name = _column_name(node, query)
    if name not in keys:
        raise QueryError(
            f"Column {name!r} is selected but is not a GROUP BY key: raw values are "
            f"never released; add GROUP BY {name} or aggregate it."
        )
    return name


def _check_released_names(
    keys: Sequence[str], aggregates: Sequence[Aggregate], histogram: Histogram | None
) -> None:
    """Refuse output names that would repeat (case-insensitively) in the released table."""
    released = output_columns(
        keys, [a.alias for a in aggregates], histogram.column if histogram else None
    )
    repeated = sorted({n.lower() for n in released if _count_folded(released, n) > 1})
    if repeated:
        raise QueryError(
            f"Output column name(s) {', '.join(map(repr, repeated))} would appear twice in the "
            "released table (each aggregate also releases <name>_std, <name>_ci_low and "
            "<name>_ci_high): give other aliases with AS."
        )


def output_columns(keys: Sequence[str], aliases: Sequence[str], histogram: str | None) -> list[str]:
    """Every column of the released table: group keys, a histogram's bin, each aggregate's four.

    >>> output_columns(["state"], ["n"], None)
    ['state', 'n', 'n_std', 'n_ci_low', 'n_ci_high']
    """
    out = list(keys)
    if histogram is not None:
        out.append(f"{histogram}_bin")
    for alias in aliases:
        out += [alias, f"{alias}_std", f"{alias}_ci_low", f"{alias}_ci_high"]
    return out


def _count_folded(names: Sequence[str], name: str) -> int:
    return sum(1 for n in names if n.lower() == name.lower())


def _parse(text: str) -> list[exp.Expr]:
    """Parse one statement, within the size, nesting and literal bounds (else refuse)."""
    if len(text) > MAX_QUERY_CHARS:
        raise QueryError(
            f"The query has {len(text)} characters, more than {MAX_QUERY_CHARS}: write a "
            "shorter query."
        )
    depth = _paren_depth(text)
    if depth > MAX_PARENTHESES:
        raise QueryError(
            f"The query nests parentheses {depth} deep, more than {MAX_PARENTHESES}: simplify it."
        )
    failure = None
    try:
        statements = [s for s in sqlglot.parse(text, dialect="duckdb") if s is not None]
    except (ParseError, TokenError) as error:
        failure = f"The query is not valid SQL: {str(error)[:500]}"
    except RecursionError:
        failure = "The query nests too deeply to be read (operators, NOTs): simplify it."
    if failure is not None:
        raise QueryError(failure)
    for statement in statements:
        _check_tree(statement)
    return statements


def _paren_depth(text: str) -> int:
    """Deepest nesting of parentheses outside quoted strings and identifiers."""
    deepest = depth = 0
    quote: str | None = None
    for char in text:
        if quote is not None:
            if char == quote:
                quote = None
        elif char in "'\"":
            quote = char
        elif char == "(":
            depth += 1
            deepest = max(deepest, depth)
        elif char == ")":
            depth -= 1
    return deepest


def _check_tree(root: exp.Expr) -> None:
    """Refuse trees deeper than MAX_QUERY_DEPTH and literals longer than MAX_LITERAL_CHARS."""
    stack: list[tuple[exp.Expr, int]] = [(root, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_QUERY_DEPTH:
            raise QueryError(
                f"The query nests more than {MAX_QUERY_DEPTH} levels deep (operators, NOTs, "
                "parentheses): simplify it."
            )
        if isinstance(node, exp.Literal | exp.Identifier) and len(str(node.this)) > (
            MAX_LITERAL_CHARS
        ):
            raise QueryError(
                f"The query has a literal or name of {len(str(node.this))} characters, more "
                f"than {MAX_LITERAL_CHARS}."
            )
        stack.extend((child, depth + 1) for child in node.iter_expressions())


def _order_by(
    select: exp.Select, names: Sequence[str], orderable: Set[str]
) -> tuple[tuple[str, bool], ...]:
    """Output columns to sort the released table by: SELECT positions or output names.

    ``names`` are the SELECT items' output names; ``orderable`` adds unselected group keys.
    """
    order = select.args.get("order")
    if order is None:
        return ()
    out: list[tuple[str, bool]] = []
    for ordered in order.expressions:
        node = ordered.this
        position = _position(node, "ORDER BY", len(names))
        if position is not None:
            name = names[position - 1]
        elif isinstance(node, exp.Column) and not node.table and node.name in orderable:
            name = node.name
        else:
            raise QueryError(
                f"ORDER BY {_sql(node)!r}: order by an output column (a group key or an "
                "aggregate's alias), which sorts the released table."
            )
        out.append((name, bool(ordered.args.get("desc"))))
    return tuple(out)


def _limit(select: exp.Select) -> int | None:
    limit = select.args.get("limit")
    if limit is None:
        return None
    node: Any = limit.expression
    if not isinstance(node, exp.Literal) or node.is_string:
        raise QueryError("LIMIT takes a number.")
    try:
        value = int(node.this)
    except ValueError:
        raise QueryError("LIMIT takes a whole number.") from None
    if value < 0:
        raise QueryError("LIMIT must be >= 0.")
    return value
