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
>>> t = Table("people", pd.DataFrame(), privacy_unit="pid", columns=[
...     Column("state", domain=["CA", "NY"]), Column("income", lower=0, upper=1000)])
>>> q = parse_query("SELECT state, COUNT(*), AVG(income) FROM people GROUP BY state", {"people": t})
>>> q.group_by, [a.function for a in q.aggregates], [a.alias for a in q.aggregates]
(('state',), ['count', 'avg'], ['count', 'avg_income'])
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError, TokenError

from dpcurator.curator._table import Table, check_bins
from dpcurator.errors import InvalidParameterError, QueryError

__all__ = [
    "AGGREGATES",
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

AGGREGATES = (
    "count",
    "count_column",
    "count_distinct",
    "sum",
    "avg",
    "var",
    "stddev",
    "quantile",
    "histogram",
)
"""Aggregate functions the curator answers."""

_SIMPLE_AGGREGATES: dict[type[exp.Expr], str] = {
    exp.Sum: "sum",
    exp.Avg: "avg",
    exp.Variance: "var",
    exp.Stddev: "stddev",
    exp.StddevSamp: "stddev",
}
_POPULATION = (exp.VariancePop, exp.StddevPop)

# Row-wise operations a WHERE clause may use: comparisons, logic, arithmetic, a few pure functions.
_WHERE_NODES: tuple[type[exp.Expr], ...] = (
    exp.Column,
    exp.Identifier,
    exp.Literal,
    exp.Boolean,
    exp.Null,
    exp.Paren,
    exp.Tuple,
    exp.And,
    exp.Or,
    exp.Not,
    exp.Xor,
    exp.EQ,
    exp.NEQ,
    exp.GT,
    exp.GTE,
    exp.LT,
    exp.LTE,
    exp.NullSafeEQ,
    exp.NullSafeNEQ,
    exp.Is,
    exp.In,
    exp.Between,
    exp.Like,
    exp.ILike,
    exp.Add,
    exp.Sub,
    exp.Mul,
    exp.Div,
    exp.IntDiv,
    exp.Mod,
    exp.Neg,
    exp.Abs,
    exp.Lower,
    exp.Upper,
    exp.Length,
    exp.Coalesce,
    exp.Substring,
    exp.Trim,
    exp.Round,
    exp.Floor,
    exp.Ceil,
    exp.Year,
    exp.Month,
    exp.Day,
    exp.Cast,
    exp.DataType,
    exp.Case,
    exp.If,
    exp.Concat,
    exp.DPipe,
)


@dataclass(frozen=True)
class Aggregate:
    """One aggregate of a query: its function, column, output name and parameters."""

    function: str
    column: str | None
    alias: str
    text: str
    quantile: float | None = None
    edges: tuple[float, ...] | None = None
    population: bool = False


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
        Declared group-key columns, in GROUP BY order.
    aggregates : tuple of Aggregate
        The aggregates, in SELECT order.
    outputs : tuple of (str, str)
        The released columns in SELECT order: ``("key", column)`` or ``("agg", alias)``; a
        key's output name is its alias (``key_names``).
    key_names : dict
        Output name of each group key.
    order_by : tuple of (str, bool)
        Output column and descending flag, applied to the released table (post-processing).
    limit : int or None
        Rows kept after ordering (post-processing).
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

    @property
    def histogram(self) -> Aggregate | None:
        """The HISTOGRAM aggregate, if the query is one."""
        for agg in self.aggregates:
            if agg.function == "histogram":
                return agg
        return None


def _refuse(message: str) -> QueryError:
    return QueryError(message)


def _sql(node: exp.Expr) -> str:
    return node.sql(dialect="duckdb")


def _column_name(node: exp.Expr, query: _Context) -> str:
    """Return the declared column a column reference names (qualifiers must name the table)."""
    if not isinstance(node, exp.Column) or isinstance(node.this, exp.Star):
        raise _refuse(
            f"{_sql(node)!r} is not a column: aggregates and GROUP BY take a declared column "
            "(compute expressions in the WHERE clause or declare a derived column)."
        )
    qualifier = node.table
    if qualifier and qualifier.lower() not in query.qualifiers:
        raise _refuse(
            f"{_sql(node)!r} names table {qualifier!r}; this query reads {query.table.name!r} only."
        )
    if node.args.get("db") or node.args.get("catalog"):
        raise _refuse(f"{_sql(node)!r}: qualify columns with the table name only.")
    return query.table.column(node.name).name


@dataclass
class _Context:
    table: Table
    qualifiers: set[str]


def _literal_number(node: exp.Expr, what: str) -> float:
    value = node
    sign = 1.0
    if isinstance(value, exp.Neg):
        sign, value = -1.0, value.this
    if isinstance(value, exp.Paren):
        value = value.this
    if not isinstance(value, exp.Literal) or value.is_string:
        raise _refuse(f"{what} must be a number literal, got {_sql(node)!r}.")
    try:
        number = sign * float(value.this)
    except ValueError:
        raise _refuse(f"{what} must be a number literal, got {_sql(node)!r}.") from None
    if not math.isfinite(number):
        raise _refuse(f"{what} must be finite, got {_sql(node)!r}.")
    return number


def _position(node: exp.Expr, clause: str, count: int) -> int | None:
    """Return the SELECT position (1-based) a number in GROUP BY / ORDER BY names, or None."""
    if not isinstance(node, exp.Literal) or node.is_string:
        return None
    text = str(node.this)
    if not text.isdigit() or len(text) > 6:
        raise _refuse(
            f"{clause} {text}: a position must be a whole number between 1 and {count} "
            "(the number of SELECT items)."
        )
    position = int(text)
    if not 1 <= position <= count:
        raise _refuse(f"{clause} {position}: there is no SELECT item {position}.")
    return position


def _quantile_level(node: exp.Expr | None, text: str) -> float:
    if node is None:
        raise _refuse(f"{text}: give the quantile level, e.g. QUANTILE(income, 0.9).")
    q = _literal_number(node, f"the quantile level of {text}")
    if not 0.0 <= q <= 1.0:
        raise _refuse(f"{text}: the quantile level must be in [0, 1], got {q}.")
    return q


def _numeric(name: str, query: _Context, text: str) -> None:
    column = query.table.column(name)
    if column.bounds is None:
        raise _refuse(
            f"{text} needs bounds on column {name!r}: declare lower and upper for it "
            "(values are clamped into them, which is what makes the sensitivity finite)."
        )


def _aggregate(node: exp.Expr, alias: str | None, query: _Context) -> Aggregate:
    text = _sql(node)
    unit = query.table.unit_column
    if isinstance(node, exp.Count):
        arg = node.this
        if isinstance(arg, exp.Star):
            return Aggregate("count", None, alias or "count", text)
        if isinstance(arg, exp.Distinct):
            args = arg.expressions
            if len(args) != 1:
                raise _refuse(f"{text}: COUNT(DISTINCT ...) takes one column.")
            name = _column_name(args[0], query)
            if name != unit:
                raise _refuse(
                    f"{text}: COUNT(DISTINCT ...) is supported for the privacy unit only "
                    f"({unit!r}); count distinct values of {name!r} with "
                    f"SELECT {name}, COUNT(*) ... GROUP BY {name} instead."
                    if unit is not None
                    else f"{text}: each row is a privacy unit here; use COUNT(*)."
                )
            return Aggregate("count_distinct", name, alias or f"count_distinct_{name}", text)
        name = _column_name(arg, query)
        return Aggregate("count_column", name, alias or f"count_{name}", text)
    for kind, function in _SIMPLE_AGGREGATES.items():
        if type(node) is kind:
            name = _column_name(node.this, query)
            _numeric(name, query, text)
            return Aggregate(function, name, alias or f"{function}_{name}", text)
    if isinstance(node, _POPULATION):
        name = _column_name(node.this, query)
        _numeric(name, query, text)
        function = "var" if isinstance(node, exp.VariancePop) else "stddev"
        default = f"{function}_pop_{name}"
        return Aggregate(function, name, alias or default, text, population=True)
    if isinstance(node, exp.Median):
        name = _column_name(node.this, query)
        _numeric(name, query, text)
        return Aggregate("quantile", name, alias or f"median_{name}", text, quantile=0.5)
    if isinstance(node, exp.Quantile | exp.PercentileCont | exp.PercentileDisc):
        name = _column_name(node.this, query)
        _numeric(name, query, text)
        level_node = node.args.get("quantile") or node.args.get("expression")
        q = _quantile_level(level_node, text)
        return Aggregate("quantile", name, alias or _quantile_name(name, q), text, quantile=q)
    if isinstance(node, exp.WithinGroup) and isinstance(
        node.this, exp.PercentileCont | exp.PercentileDisc
    ):
        order = node.expression
        ordered = order.expressions if isinstance(order, exp.Order) else []
        if len(ordered) != 1:
            raise _refuse(f"{text}: WITHIN GROUP (ORDER BY <one column>) expected.")
        name = _column_name(ordered[0].this, query)
        _numeric(name, query, text)
        q = _quantile_level(node.this.this, text)
        return Aggregate("quantile", name, alias or _quantile_name(name, q), text, quantile=q)
    if isinstance(node, exp.Anonymous) and str(node.this).lower() in {"histogram", "quantile"}:
        args = node.expressions
        if not args:
            raise _refuse(f"{text}: give the column.")
        name = _column_name(args[0], query)
        _numeric(name, query, text)
        if str(node.this).lower() == "quantile":
            q = _quantile_level(args[1] if len(args) > 1 else None, text)
            return Aggregate("quantile", name, alias or _quantile_name(name, q), text, quantile=q)
        column = query.table.column(name)
        if len(args) > 1:
            numbers = [_literal_number(a, f"a histogram edge of {text}") for a in args[1:]]
            try:
                edges = check_bins(numbers, "bins")
            except InvalidParameterError as error:
                raise _refuse(f"{text}: {error}") from None
        elif column.bins is not None:
            edges = column.bins
        else:
            raise _refuse(
                f"{text}: declare bins for column {name!r} or give the edges, e.g. "
                f"HISTOGRAM({name}, 0, 10, 20, 50)."
            )
        return Aggregate("histogram", name, alias or "count", text, edges=edges)
    if isinstance(node, exp.AggFunc):
        raise _refuse(
            f"Aggregate {text!r} is not supported; supported: COUNT(*), COUNT(column), "
            "COUNT(DISTINCT <privacy unit>), SUM, AVG, VARIANCE, STDDEV, MEDIAN, QUANTILE, "
            "PERCENTILE_CONT, HISTOGRAM."
        )
    raise _refuse(
        f"{text!r} is neither a group key nor an aggregate. Released columns are GROUP BY keys "
        "and aggregates (raw rows and expressions of aggregates are never released: "
        "post-process the released table instead)."
    )


def _quantile_name(column: str, q: float) -> str:
    if q == 0.5:
        return f"median_{column}"
    label = f"{100 * q:g}".replace(".", "_")
    return f"p{label}_{column}"


def _check_where(node: exp.Expr, query: _Context) -> exp.Expr:
    for sub in node.walk():
        if isinstance(sub, exp.AggFunc):
            raise _refuse(
                f"WHERE cannot contain the aggregate {_sql(sub)!r}: it filters rows before "
                "aggregation (HAVING-like filters on released values are post-processing)."
            )
        if isinstance(sub, exp.Select | exp.Subquery | exp.Query):
            raise _refuse("Subqueries are not supported in WHERE: filter on declared columns.")
        if isinstance(sub, exp.Star):
            raise _refuse("WHERE cannot contain '*'.")
        if not isinstance(sub, _WHERE_NODES):
            raise _refuse(
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


def _group_keys(select: exp.Select, query: _Context, aliases: dict[str, exp.Expr]) -> list[str]:
    group = select.args.get("group")
    if group is None:
        return []
    if group.args.get("rollup") or group.args.get("cube") or group.args.get("grouping_sets"):
        raise _refuse("ROLLUP, CUBE and GROUPING SETS are not supported: run one query per level.")
    keys: list[str] = []
    items = list(select.expressions)
    for node in group.expressions:
        target = node
        position = _position(node, "GROUP BY", len(items))
        if position is not None:
            target = items[position - 1]
            target = target.this if isinstance(target, exp.Alias) else target
        elif (
            isinstance(node, exp.Column)
            and not node.table
            and node.name in aliases
            and node.name not in {c.name for c in query.table.columns}
        ):
            target = aliases[node.name]
        name = _column_name(target, query)
        if name == query.table.unit_column:
            raise _refuse(
                f"GROUP BY {name!r} would release one group per privacy unit: group by other "
                "declared columns."
            )
        if name in keys:
            raise _refuse(f"GROUP BY names {name!r} twice.")
        keys.append(name)
    return keys


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
    for clause, message in _REFUSED_CLAUSES.items():
        if select.args.get(clause) or select.args.get(f"{clause}_"):
            raise QueryError(message)
    if select.args.get("distinct"):
        raise QueryError(
            "SELECT DISTINCT would release raw values: use GROUP BY with an aggregate."
        )
    source = select.args.get("from_") or select.args.get("from")
    if source is None:
        raise QueryError("The query has no FROM clause: name a declared table.")
    if source.expressions if hasattr(source, "expressions") else False:
        raise QueryError("Give one table in FROM.")
    table_node = source.this
    if not isinstance(table_node, exp.Table) or not isinstance(table_node.this, exp.Identifier):
        raise QueryError(
            "FROM must name one declared table (subqueries, table functions and joins are not "
            "supported)."
        )
    if table_node.args.get("db") or table_node.args.get("catalog"):
        raise QueryError(f"FROM {_sql(table_node)!r}: name the declared table without a schema.")
    by_name = {name.lower(): table for name, table in tables.items()}
    table = by_name.get(table_node.name.lower())
    if table is None:
        raise QueryError(
            f"Table {table_node.name!r} is not declared in this session; declared: "
            f"{', '.join(sorted(tables))}."
        )
    qualifiers = {table.name.lower(), table_node.name.lower()}
    if table_node.alias:
        qualifiers.add(table_node.alias.lower())
    query = _Context(table, qualifiers)
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

    aliases = {item.alias: item.this for item in select.expressions if isinstance(item, exp.Alias)}
    keys = _group_keys(select, query, aliases)
    aggregates: list[Aggregate] = []
    outputs: list[tuple[str, str]] = []
    key_names: dict[str, str] = {}
    for item in select.expressions:
        alias = item.alias if isinstance(item, exp.Alias) else None
        node = item.this if isinstance(item, exp.Alias) else item
        if isinstance(node, exp.Star) or (isinstance(node, exp.Column) and node.is_star):
            raise QueryError(
                "SELECT * would release raw rows: the curator answers aggregates only, e.g. "
                f"SELECT COUNT(*) FROM {table.name}."
            )
        if isinstance(node, exp.Column):
            name = _column_name(node, query)
            if name not in keys:
                raise QueryError(
                    f"Column {name!r} is selected but is not a GROUP BY key: raw values are "
                    f"never released; add GROUP BY {name} or aggregate it."
                )
            key_names[name] = alias or name
            outputs.append(("key", name))
            continue
        agg = _aggregate(node, alias, query)
        aggregates.append(agg)
        outputs.append(("agg", agg.alias))
    if not aggregates:
        raise QueryError(
            "The query has no aggregate: the curator releases aggregates (COUNT, SUM, AVG ...)."
        )
    histograms = [a for a in aggregates if a.function == "histogram"]
    if histograms and len(aggregates) > 1:
        raise QueryError("HISTOGRAM must be the only aggregate of its query.")
    for key in keys:
        key_names.setdefault(key, key)
    names = [key_names[n] if kind == "key" else n for kind, n in outputs]
    extra_keys = [
        key_names[k] for k in keys if k not in {n for kind, n in outputs if kind == "key"}
    ]
    all_names = names + extra_keys
    released = output_columns(
        [key_names[k] for k in keys],
        [a.alias for a in aggregates],
        histograms[0].column if histograms else None,
    )
    repeated = sorted({n.lower() for n in released if _count_folded(released, n) > 1})
    if repeated:
        raise QueryError(
            f"Output column name(s) {', '.join(map(repr, repeated))} would appear twice in the "
            "released table (each aggregate also releases <name>_std, <name>_ci_low and "
            "<name>_ci_high): give other aliases with AS."
        )
    where = select.args.get("where")
    where_expr = _check_where(where.this, query) if where is not None else None
    order = _order_by(select, all_names, names)
    limit = _limit(select)
    return ParsedQuery(
        text=text,
        table=table,
        where=where_expr,
        group_by=tuple(keys),
        aggregates=tuple(aggregates),
        outputs=tuple(outputs),
        key_names=key_names,
        order_by=order,
        limit=limit,
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
    select: exp.Select, all_names: list[str], names: list[str]
) -> tuple[tuple[str, bool], ...]:
    order = select.args.get("order")
    if order is None:
        return ()
    out: list[tuple[str, bool]] = []
    for ordered in order.expressions:
        node = ordered.this
        position = _position(node, "ORDER BY", len(names))
        if position is not None:
            name = names[position - 1]
        elif isinstance(node, exp.Column) and not node.table and node.name in all_names:
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
