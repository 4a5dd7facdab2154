"""The bounded aggregate statements of a plan, built once as sqlglot trees.

A plan's statements read the declared table's rows from the placeholder :data:`SOURCE` and are
rendered per engine by :func:`dpcurator.curator._engine.render`; no SQL text is ever pasted
together. Every name an analyst chose (columns, literals) enters as a quoted identifier or a
literal node.

The statement, in steps (common table expressions):

``__rows``
    The analyst's rows: the privacy unit, the group keys (a histogram's bin), each numeric
    column clamped into its bounds (NULL and NaN: the midpoint, or NULL where the column is
    nullable); rows without a unit, outside the keys' public domains, or where the analyst's
    filter is not true (TRY semantics: a filter that fails on a row is false) are dropped.
``__over``
    The units beyond a contribution bound, computed on the table's rows *before* the
    analyst's filter (see :func:`over_statement`). It is a function of the table, the group-key
    columns and the bounds only, so a session may compute it once and reuse it for every query
    with the same keys and bounds while the table is unchanged: it is a superset of the units
    beyond their bounds after any filter, and bounding a unit within its bounds keeps all its
    rows, so the result is the same either way.
``__bounded``
    The rows of units within their bounds as they are, and the rows of the others truncated:
    at most ``g`` groups per unit (ranked by a hash of the group key), ``c`` rows per unit and
    group and ``k`` rows per unit (ranked by a hash of the row). The hash is MD5 of the row's
    text, the same on every engine, with the row's values breaking ties: every choice depends
    on the unit's own rows only, so removing a unit changes no other unit's rows.

Then one aggregation per group computes every measure: exact integer counts and fixed-point sums
(see :func:`value_sum`), and, for quantiles, a second statement of per-bucket counts.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import assert_never

from sqlglot import exp

from dpcurator.curator._engine import SOURCE
from dpcurator.curator._measures import (
    ColumnCount,
    Measure,
    QuantileCounts,
    RowCount,
    UnitCount,
    ValueSum,
)
from dpcurator.curator._specs import Contribution, KeySpec, Measurement, ValueSpec
from dpcurator.curator._table import Table

__all__ = [
    "OVER",
    "QUANTILE_BUCKETS",
    "SUM_CLAMP",
    "Statements",
    "build_statements",
    "over_statement",
    "with_over",
    "without_heavy",
]

QUANTILE_BUCKETS = 1024
"""Quantiles choose among ``QUANTILE_BUCKETS + 1`` evenly spaced points of ``[L, U]``."""
SUM_CLAMP = 2**62
"""Integer sums are clamped into ``[-2**62, 2**62]`` in the engine (a 1-Lipschitz map of the
sum, so no sensitivity changes), so that they and their noise fit int64 exactly."""
OVER = "__over"
"""The name of the step listing the units beyond their bounds."""
UNIT = "__u"


@dataclass(frozen=True)
class Statements:
    """A plan's statements (sqlglot trees reading :data:`SOURCE`).

    Attributes
    ----------
    main : sqlglot.exp.Query
        One row per group: the group keys and every measure but quantiles.
    quantiles : sqlglot.exp.Query or None
        Per group, column and bucket, the count of bounded rows (for quantiles).
    over : sqlglot.exp.Query or None
        The units beyond a bound (None when the table has no privacy unit).
    over_key : tuple
        What :attr:`over` depends on besides the table's rows: the unit, key columns, bounds.
    """

    main: exp.Query
    quantiles: exp.Query | None
    over: exp.Query | None
    over_key: tuple[object, ...]

    @property
    def all(self) -> list[exp.Query]:
        """The statements that read the rows, in the order they run."""
        return [self.main] if self.quantiles is None else [self.main, self.quantiles]


# -- small builders ----------------------------------------------------------------------------
def _source_column(name: str) -> exp.Column:
    return exp.column(name, quoted=True)


def _ref(alias: str) -> exp.Column:
    return exp.column(alias)


def _number(value: float) -> exp.Expr:
    return exp.Literal.number(repr(float(value)))


def _integer(value: int) -> exp.Expr:
    return exp.Literal.number(value)


def _clamp(value: exp.Expr, low: exp.Expr, high: exp.Expr) -> exp.Expr:
    """``value`` clamped into ``[low, high]``; NaN gives ``high`` and NULL stays NULL.

    A CASE, which DuckDB evaluates about twice as fast as ``LEAST(GREATEST(...))``; a NaN is
    greater than every number on both engines, as in ``LEAST(GREATEST(NaN, low), high)``.
    """
    below = exp.LT(this=value, expression=low)
    above = exp.GT(this=value.copy(), expression=high)
    return exp.Case().when(below, low.copy()).when(above, high.copy()).else_(value.copy())


def _double(value: exp.Expr) -> exp.Expr:
    return exp.cast(value, exp.DataType.build("DOUBLE"))


def _missing(name: str) -> exp.Expr:
    """``col IS NULL OR isnan(CAST(col AS DOUBLE))``."""
    return exp.or_(
        _source_column(name).is_(exp.null()), exp.func("ISNAN", _double(_source_column(name)))
    )


def _key_hash(aliases: Sequence[str]) -> exp.Expr:
    """MD5 of the group key's text (NULL parts skipped on every engine): ranks a unit's groups."""
    texts = [exp.cast(_ref(a), exp.DataType.build("VARCHAR")) for a in aliases]
    joined = exp.Anonymous(this="CONCAT_WS", expressions=[exp.Literal.string("|"), *texts])
    return exp.func("MD5", joined)


_MIX_PRIME = 2147483647
_MIX_FACTOR = 1000003
_MIX_STEPS = 1 << 20


def _row_mix(values: Sequence[ValueSpec], others: Sequence[exp.Expr]) -> exp.Expr | None:
    """Return a pseudo-random integer of a row's aggregated content, the same on every engine.

    Integer arithmetic only (``h = (h * 1000003 + v) mod (2**31 - 1)`` over the row's parts):
    each clamped value's step among ``2**20`` of its range (``FLOOR`` of an IEEE product, exact
    on every engine; NULL is -1), then ``others`` (a histogram's bin, NULL flags). Rows that
    tie have the same parts; the row's columns then order them.
    """
    parts: list[exp.Expr] = []
    for v in values:
        scale = _number(float(_MIX_STEPS / v.range.width))
        offset = exp.paren(exp.Sub(this=_ref(v.alias), expression=_number(v.lower)))
        step = exp.func("FLOOR", exp.Mul(this=offset, expression=scale))
        parts.append(
            exp.func("COALESCE", exp.cast(step, exp.DataType.build("BIGINT")), _integer(-1))
        )
    parts += others
    if not parts:
        return None
    mixed: exp.Expr = _integer(0)
    for part in parts:
        scaled = exp.Mul(this=exp.paren(mixed), expression=_integer(_MIX_FACTOR))
        mixed = exp.Mod(
            this=exp.paren(exp.Add(this=scaled, expression=part)), expression=_integer(_MIX_PRIME)
        )
    return mixed


def _window_filter(
    columns: Sequence[str], source: str, window: exp.Window, limit: int
) -> exp.Select:
    """``SELECT columns FROM source`` keeping rows whose window rank is at most ``limit``.

    Written with QUALIFY (DuckDB runs it fastest); sqlglot rewrites it into a filtered
    subquery for engines without QUALIFY (Spark).
    """
    kept = exp.LTE(this=window, expression=_integer(limit))
    return exp.select(*columns).from_(source).qualify(kept)


def _ordered(*items: exp.Expr) -> exp.Order:
    return exp.Order(expressions=[exp.Ordered(this=item, nulls_first=True) for item in items])


# -- the rows ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Rows:
    """The ``__rows`` step: its projections (name, expression) and its filters."""

    projections: tuple[tuple[str, exp.Expr], ...]
    filters: tuple[exp.Expr, ...]

    @property
    def names(self) -> list[str]:
        return [name for name, _ in self.projections]

    def select(self) -> exp.Select:
        items = [exp.alias_(e, name) for name, e in self.projections]
        select = exp.select(*items).from_(exp.to_table(SOURCE))
        return select.where(exp.and_(*self.filters)) if self.filters else select


def _clamped(value: ValueSpec) -> exp.Expr:
    x = _double(_source_column(value.column))
    fill = exp.null() if value.nullable else _number(value.mid)
    clamp = _clamp(x, _number(value.lower), _number(value.upper))
    return exp.Case().when(_missing(value.column), fill).else_(clamp)


def _bin(key: KeySpec, nullable: bool) -> exp.Expr:
    assert key.edges is not None
    edges = key.edges
    x: exp.Expr = _double(_source_column(key.column))
    if not nullable:
        mid = _number((edges[0] + edges[-1]) / 2.0)
        x = exp.Case().when(_missing(key.column), mid).else_(x)
    case = exp.Case()
    for i, edge in enumerate(edges[1:-1]):
        case = case.when(exp.LT(this=x.copy(), expression=_number(edge)), _integer(i))
    return case.else_(_integer(len(edges) - 2)) if len(edges) > 2 else _integer(0)


def _rows(
    table: Table,
    where: exp.Expr | None,
    keys: Sequence[KeySpec],
    values: Sequence[ValueSpec],
    counted: Sequence[tuple[str, str]],
) -> _Rows:
    projections: list[tuple[str, exp.Expr]] = []
    filters: list[exp.Expr] = []
    unit = table.unit_column
    if unit is not None:
        projections.append((UNIT, _source_column(unit)))
        filters.append(exp.not_(_source_column(unit).is_(exp.null())))
    if where is not None:
        # TRY semantics: a row on which the analyst's filter fails (a CAST, an overflow, a
        # division by zero) is not selected, instead of an error that depends on its value.
        filters.append(exp.func("COALESCE", exp.Try(this=where.copy()), exp.false()))
    for key in keys:
        if key.is_bin:
            nullable = table.column(key.column).nullable
            if nullable:
                filters.append(exp.not_(_missing(key.column)))
            projections.append((key.alias, _bin(key, nullable)))
            continue
        projections.append((key.alias, _key_value(key)))
        if key.domain is not None:
            filters.append(_in_domain(_key_value(key), key.domain))
    projections += [(v.alias, _clamped(v)) for v in values]
    projections += [(alias, _source_column(column)) for column, alias in counted]
    if not projections:
        projections.append(("__one", _integer(1)))
    return _Rows(tuple(projections), tuple(filters))


_RANGE_MIN = 16


def _key_value(key: KeySpec) -> exp.Expr:
    """Return a group key's value per row: its column, or a computed key's expression."""
    if key.expression is not None:
        return key.expression.copy()
    return _source_column(key.column)


def _in_domain(x: exp.Expr, domain: Sequence[object]) -> exp.Expr:
    """``x IN (domain)``; for a run of consecutive integers, a range test instead.

    Safe without TRY: the engine refuses a text column with a domain of non-text values (the
    one case where an engine would cast each row's value, and could fail). A domain of
    ``n >= 16`` consecutive integers ``a, ..., a + n - 1`` is tested as ``a <= x <= a + n - 1``
    and ``FLOOR(x) = x`` (the same rows, for integer and floating-point columns alike), so
    its SQL does not grow with ``n``.
    """
    integers = [v for v in domain if type(v) is int]
    if len(integers) == len(domain) >= _RANGE_MIN:
        low, high = min(integers), max(integers)
        if high - low + 1 == len(set(integers)) == len(integers):
            inside = exp.Between(this=x, low=_integer(low), high=_integer(high))
            whole = exp.EQ(this=exp.func("FLOOR", x.copy()), expression=x.copy())
            return exp.and_(inside, whole)
    return exp.In(this=x, expressions=[exp.convert(v) for v in domain])


# -- the units beyond their bounds ---------------------------------------------------------------
def _grouped(keys: Sequence[KeySpec]) -> list[str]:
    return [k.alias for k in keys if not k.is_bin]


def over_statement(
    table: Table, keys: Sequence[KeySpec], contribution: Contribution
) -> exp.Select | None:
    """Return the units beyond a bound among all the table's rows (None without a unit).

    A unit is beyond its bounds if it has more than ``k`` rows, rows in more than ``g`` groups,
    or more than ``c`` rows in one group. Computed before any filter, it is a superset of the
    units beyond their bounds among the rows a query keeps.
    """
    unit = table.unit_column
    if unit is None:
        return None
    grouped = [k for k in keys if not k.is_bin]
    items = [exp.alias_(_source_column(unit), UNIT)]
    items += [exp.alias_(_key_value(k), k.alias) for k in grouped]
    rows = exp.select(*items).from_(exp.to_table(SOURCE))
    rows = rows.where(exp.not_(_source_column(unit).is_(exp.null())))
    k, g, c = contribution.rows, contribution.groups, contribution.per_group
    aliases = [key.alias for key in grouped]
    limit_groups = bool(aliases) and g < k
    limit_per_group = bool(aliases) and c < k
    if limit_groups and g == 1:
        return _over_one_group(rows, aliases, min(k, c))
    if limit_groups or limit_per_group:
        per = exp.select(UNIT, "COUNT(*) AS __n").from_(rows.subquery("__all"))
        per = per.group_by(UNIT, *aliases)
        conditions = [f"SUM(__n) > {k}"]
        conditions += [f"COUNT(*) > {g}"] if limit_groups else []
        conditions += [f"MAX(__n) > {c}"] if limit_per_group else []
        over = exp.select(UNIT).from_(per.subquery("__per")).group_by(UNIT)
        return over.having(exp.or_(*conditions))
    return exp.select(UNIT).from_(rows.subquery("__all")).group_by(UNIT).having(f"COUNT(*) > {k}")


def _over_one_group(rows: exp.Select, aliases: Sequence[str], limit: int) -> exp.Select:
    """One group per unit: beyond it iff some key has two values (or NULL and a value)."""
    conditions: list[exp.Expr | str] = [f"COUNT(*) > {limit}"]
    for a in aliases:
        conditions.append(f"MIN({a}) <> MAX({a})")
        conditions.append(f"(COUNT({a}) > 0 AND COUNT({a}) < COUNT(*))")
    over = exp.select(UNIT).from_(rows.subquery("__all")).group_by(UNIT)
    return over.having(exp.or_(*conditions))


# -- bounding ---------------------------------------------------------------------------------
def _bounding(
    rows: _Rows, keys: Sequence[KeySpec], values: Sequence[ValueSpec], contribution: Contribution
) -> list[tuple[str, exp.Select]]:
    """Return the steps from ``__rows`` to ``__bounded`` (after ``__over``)."""
    k, g, c = contribution.rows, contribution.groups, contribution.per_group
    columns = rows.names
    grouped = _grouped(keys)
    others: list[exp.Expr] = [_ref(k.alias) for k in keys if k.is_bin]
    others += [
        exp.Case().when(_ref(name).is_(exp.null()), _integer(1)).else_(_integer(0))
        for name in columns
        if name.startswith("__cc")
    ]
    mix = _row_mix(values, others)
    row_order = _ordered(*([] if mix is None else [mix]), *[_ref(n) for n in columns])
    steps: list[tuple[str, exp.Select]] = []
    # An inner join, not a semi-join: __over lists each unit once, and DuckDB runs the inner
    # join about three times faster.
    on = exp.EQ(this=exp.column(UNIT, "__rows"), expression=exp.column(UNIT, OVER))
    heavy = exp.select(*[exp.column(c, "__rows") for c in columns]).from_("__rows")
    heavy = heavy.join(OVER, on=on)
    steps.append(("__heavy", heavy))
    current = "__heavy"
    if grouped and g < k:
        steps += _group_limit(columns, grouped, g)
        current = "__groups"
    if grouped and c < k:
        partition = [_ref(UNIT), *map(_ref, grouped)]
        number = exp.Window(this=exp.RowNumber(), partition_by=partition, order=row_order.copy())
        steps.append(("__per_group", _window_filter(columns, current, number, c)))
        current = "__per_group"
    number = exp.Window(this=exp.RowNumber(), partition_by=[_ref(UNIT)], order=row_order)
    steps.append(("__truncated", _window_filter(columns, current, number, k)))
    light = exp.select(*columns).from_("__rows").join(OVER, using=[UNIT], join_type="ANTI")
    bounded = exp.union(light, exp.select(*columns).from_("__truncated"), distinct=False)
    steps.append(("__bounded", exp.select(*columns).from_(bounded.subquery("__all_rows"))))
    return steps


def _group_limit(
    columns: Sequence[str], grouped: Sequence[str], limit: int
) -> list[tuple[str, exp.Select]]:
    """Keep each heavy unit's ``limit`` groups of smallest key hash (ties: the keys' order).

    The groups are ranked once per (unit, group) pair, not per row (MD5 per row is the costly
    part); rows are then kept by a join on the unit and the key, NULL keys matching NULL keys.
    """
    pairs = exp.select(UNIT, *grouped, exp.alias_(_key_hash(grouped), "__h")).from_("__heavy")
    pairs = pairs.group_by(UNIT, *grouped)
    order = _ordered(_ref("__h"), *map(_ref, grouped))
    rank = exp.Window(this=exp.func("DENSE_RANK"), partition_by=[_ref(UNIT)], order=order)
    chosen = _window_filter([UNIT, *grouped], "__pairs", rank, limit)
    # An equi-join on the unit, then the keys compared NULL-safely: the chosen pairs are
    # distinct, so each row matches at most once (a NULL-safe join key is slow in DuckDB).
    same = exp.EQ(this=exp.column(UNIT, "__heavy"), expression=exp.column(UNIT, "__chosen"))
    keys = [
        exp.NullSafeEQ(this=exp.column(a, "__heavy"), expression=exp.column(a, "__chosen"))
        for a in grouped
    ]
    kept = exp.select(*[exp.column(c, "__heavy") for c in columns]).from_("__heavy")
    kept = kept.join("__chosen", on=same).where(exp.and_(*keys))
    return [("__pairs", pairs), ("__chosen", chosen), ("__groups", kept)]


# -- the measures --------------------------------------------------------------------------------
def value_sum(value: ValueSpec, measure: ValueSum, bits: int) -> exp.Expr:
    """Exact integer sum of the rows' fixed-point indices (the rule of :mod:`dpcurator.noise`).

    Each row's index is the encoding's float expression clamped into ``[min_index, max_index]``
    (integers, exact as floats) and rounded, so it is an integer in that range: floating-point
    error (a midpoint or a multiplier that is not a float, the engine's arithmetic) can cost
    accuracy, never sensitivity, since one row moves the sum by at most ``2**bits`` whatever the
    floats did. The sum is exact (DuckDB: HUGEINT; Spark: DECIMAL(38, 0)), then clamped into
    ``[-2**62, 2**62]`` (a 1-Lipschitz map: the sensitivity is unchanged). A NULL row stays
    NULL through the clamp, so it adds nothing.
    """
    enc = value.range.encoding(bits, measure.encoding)
    x = _ref(value.alias)
    scaled = exp.Sub(
        this=exp.Mul(
            this=exp.paren(exp.Sub(this=x, expression=_number(enc.offset))),
            expression=_number(enc.multiplier),
        ),
        expression=_number(enc.shift),
    )
    expression: exp.Expr
    match measure.encoding:
        case "raw":
            expression = exp.Mul(this=x.copy(), expression=_number(enc.multiplier))
        case "squares":
            product = exp.Mul(this=exp.paren(scaled), expression=exp.paren(scaled.copy()))
            expression = exp.Mul(this=product, expression=_number(2.0**-bits))
        case "centred":
            expression = scaled
        case _:
            assert_never(measure.encoding)
    clamped = _clamp(expression, _number(enc.min_index), _number(enc.max_index))
    index = exp.cast(exp.func("ROUND", clamped), exp.DataType.build("BIGINT"))
    total = exp.func("COALESCE", exp.Sum(this=index), _integer(0))
    return _clamp(total, _integer(-SUM_CLAMP), _integer(SUM_CLAMP))


def _aggregate(
    m: Measurement, values: dict[str, ValueSpec], counted: dict[str, str], has_unit: bool
) -> exp.Expr | None:
    measure: Measure = m.measure
    match measure:
        case RowCount():
            return exp.Count(this=exp.Star())
        case UnitCount():
            if not has_unit:
                return exp.Count(this=exp.Star())
            return exp.Count(this=exp.Distinct(expressions=[_ref(UNIT)]))
        case ColumnCount(column=column):
            alias = values[column].alias if column in values else counted[column]
            return exp.Count(this=_ref(alias))
        case ValueSum(column=column):
            return value_sum(values[column], measure, m.bits)
        case QuantileCounts():
            return None
        case _:
            assert_never(measure)


def _quantile_part(keys: Sequence[str], value: ValueSpec) -> exp.Select:
    per_unit = float(QUANTILE_BUCKETS / value.range.width)
    offset = exp.Sub(this=_ref(value.alias), expression=_number(value.lower))
    scaled = exp.Mul(this=exp.paren(offset), expression=_number(per_unit))
    index = exp.cast(exp.func("FLOOR", scaled), exp.DataType.build("BIGINT"))
    bucket = _clamp(index, _integer(0), _integer(QUANTILE_BUCKETS - 1))
    items: list[exp.Expr | str] = [*keys, exp.alias_(exp.Literal.string(value.column), "__column")]
    items += [exp.alias_(bucket, "__bucket"), "COUNT(*) AS __n"]
    part = exp.select(*items).from_("__bounded")
    part = part.where(exp.not_(_ref(value.alias).is_(exp.null())))
    return part.group_by(*keys, bucket.copy())


# -- the statements -----------------------------------------------------------------------------
def build_statements(
    table: Table,
    where: exp.Expr | None,
    *,
    keys: Sequence[KeySpec],
    values: Sequence[ValueSpec],
    measurements: Sequence[Measurement],
    contribution: Contribution,
) -> Statements:
    """Build the plan's bounded statements (see the module's description)."""
    by_column = {v.column: v for v in values}
    counted = _counted_columns(measurements, by_column)
    rows = _rows(table, where, keys, values, list(counted.items()))
    over = over_statement(table, keys, contribution)
    steps: list[tuple[str, exp.Select]] = [("__rows", rows.select())]
    if over is not None:
        steps.append((OVER, over))
        steps += _bounding(rows, keys, values, contribution)
    else:
        steps.append(("__bounded", exp.select(*rows.names).from_("__rows")))
    aliases = [k.alias for k in keys]
    aggregates = []
    for m in measurements:
        sql = _aggregate(m, by_column, counted, over is not None)
        if sql is not None:
            aggregates.append(exp.alias_(sql, m.result))
    if not aggregates:  # quantiles only: the main statement lists the groups
        aggregates.append(exp.alias_(exp.Count(this=exp.Star()), "__rows_total"))
    main = exp.select(*aliases, *aggregates).from_("__bounded")
    main = _with_steps(main.group_by(*aliases) if aliases else main, steps)
    quantile_columns = {m.column for m in measurements if isinstance(m.measure, QuantileCounts)}
    quantiles = None
    if quantile_columns:
        parts = [_quantile_part(aliases, v) for v in values if v.column in quantile_columns]
        union: exp.Query = parts[0]
        for part in parts[1:]:
            union = exp.union(union, part, distinct=False)
        outer = exp.select("*").from_(union.subquery("__buckets"))
        quantiles = _with_steps(outer, steps)
    over_key = (table.unit_column, tuple(k.column for k in keys if not k.is_bin), contribution)
    return Statements(main=main, quantiles=quantiles, over=over, over_key=over_key)


def _counted_columns(
    measurements: Sequence[Measurement], values: dict[str, ValueSpec]
) -> dict[str, str]:
    """Columns counted (COUNT(col)) that are not clamped values, with their aliases."""
    out: dict[str, str] = {}
    for m in measurements:
        if isinstance(m.measure, ColumnCount) and m.measure.column not in values:
            out.setdefault(m.measure.column, f"__cc{len(out)}")
    return out


def _with_steps(select: exp.Select, steps: Sequence[tuple[str, exp.Select]]) -> exp.Select:
    for name, step in steps:
        # __rows is read twice (light and heavy units): DuckDB should not materialize it.
        materialized = False if name == "__rows" else None
        select = select.with_(name, as_=step.copy(), materialized=materialized, copy=False)
    return select


def with_over(statement: exp.Query, units: exp.Table) -> exp.Query:
    """Return ``statement`` reading the units beyond their bounds from ``units`` (a cache)."""

    def replace(node: exp.Expr) -> exp.Expr:
        if isinstance(node, exp.CTE) and node.alias == OVER:
            return exp.CTE(this=exp.select(UNIT).from_(units.copy()), alias=exp.to_identifier(OVER))
        return node

    out = statement.transform(replace)
    assert isinstance(out, exp.Query)
    return out


_BOUNDING_STEPS = frozenset(
    {OVER, "__heavy", "__pairs", "__chosen", "__groups", "__per_group", "__truncated"}
)


def without_heavy(statement: exp.Query) -> exp.Query:
    """Return ``statement`` for a table where no unit is beyond its bounds: rows as they are.

    Only for a table whose units beyond their bounds are known to be none (an empty cached
    :data:`OVER`); the result is then the same, without the bounding steps.
    """

    def replace(node: exp.Expr) -> exp.Expr | None:
        if isinstance(node, exp.CTE) and node.alias in _BOUNDING_STEPS:
            return None
        if isinstance(node, exp.CTE) and node.alias == "__bounded":
            rows = exp.select("*").from_("__rows")
            return exp.CTE(this=rows, alias=exp.to_identifier("__bounded"))
        return node

    out = statement.transform(replace)
    assert isinstance(out, exp.Query)
    return out
