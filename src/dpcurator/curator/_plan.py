"""From a checked query to a plan: measurements, their budget and sensitivity, and bounded SQL.

Everything here is a function of the query, the declaration and the privacy parameters, never of
the data: the plan's privacy events are known before a single row is read, so a budget check can
refuse the query first.

Neighbour relation: add or remove all the rows of one privacy unit. After the plan's bounding a
unit contributes at most ``k`` rows (``max_rows_per_unit``), in at most ``g`` groups
(``max_groups_per_unit``), at most ``c`` rows per group (``max_rows_per_group``); with ``g' =
min(g, k)`` groups touched, one unit changes

- the vector of group counts by at most ``min(k, g' c)`` in L1 norm,
- the vector of distinct-unit counts by at most ``g'`` in L1 norm (one per group),
- a sum of values clamped into ``[L, U]`` by ``min(k, g' c) max(|L|, |U|)``, and a sum of
  centred values ``x - (L + U)/2`` by ``min(k, g' c) (U - L)/2``,
- the rank of any point among a group's values by at most ``c``.

Sums are computed exactly in integers: each clamped value is mapped to an index of a public
fixed-point grid (``2**-b`` of its range, the rule of :mod:`dpcurator.noise._fixed_point`),
clamped to the index range after the float arithmetic and rounded, then summed as integers. The
engine's floating-point summation order (Casacuberta et al. 2022, "Widespread underestimation
of sensitivity in differentially private libraries") and a midpoint that is not a float (the
declared range ``[2**53, 2**53 + 2]``) can then cost accuracy, never sensitivity.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from itertools import pairwise, product
from typing import Any

import sqlglot
import sqlglot.errors
from sqlglot import exp

from dpcurator._validation import check_delta, check_epsilon
from dpcurator.accounting import ApproxDPEvent, PrivacyEvent, PureDPEvent
from dpcurator.curator._engine import quote
from dpcurator.curator._sql import ParsedQuery
from dpcurator.curator._table import MAX_DOMAIN, Column, Table
from dpcurator.errors import InvalidParameterError, QueryError
from dpcurator.mechanisms import geometric_mechanism
from dpcurator.noise import (
    FixedPointRange,
    InsecureSeededSource,
    dlap_tail_bounds,
    floor_log2,
)
from dpcurator.noise._fixed_point import EncodingKind

__all__ = ["KeySpec", "Measurement", "Plan", "ValueSpec", "make_plan"]

QUANTILE_BUCKETS = 1024
"""Quantiles choose among ``QUANTILE_BUCKETS + 1`` evenly spaced points of ``[L, U]``."""

MIN_EPSILON = 2.0**-40
"""Smallest epsilon a query may be given (about 9.1e-13)."""
MAX_EPSILON = 2.0**20
"""Largest epsilon a query may be given (about 1.05e6: noise far below any rounding)."""

_SUM_BITS = 30
_SQUARE_BITS = 24
_MAX_NOISE_BITS = 36
_ENCODINGS: dict[str, EncodingKind] = {
    "centered_sum": "centred",
    "centered_squares": "squares",
    "sum": "raw",
}
_SUM_CLAMP = 2**62
"""Integer sums are clamped into ``[-2**62, 2**62]`` in the engine (a 1-Lipschitz map of the
sum, so no sensitivity changes), so that they and their noise fit int64 exactly."""


@dataclass(frozen=True)
class Measurement:
    """One noisy measurement of a query: what it measures and its share of the budget.

    Attributes
    ----------
    name : str
        What is measured, e.g. ``"COUNT(*)"`` or ``"SUM(income - 100000)"``.
    kind : str
        ``count``, ``count_distinct``, ``count_column``, ``sum``, ``centered_sum``,
        ``centered_squares``, ``quantile`` or ``selection``.
    column : str or None
        The column measured.
    mechanism : str
        ``geometric`` (two-sided geometric on exact integers), ``exponential`` or
        ``geometric threshold`` (partition selection).
    epsilon, delta : float
        Its share of the query's budget.
    sensitivity : float
        L1 sensitivity of the measured vector in the column's units (utility sensitivity per
        group for the exponential mechanism; L1 of the distinct-unit counts for selection).
    scale : float
        Noise scale in the column's units (NaN for the exponential mechanism).
    """

    name: str
    kind: str
    column: str | None
    mechanism: str
    epsilon: float
    delta: float
    sensitivity: float
    scale: float
    units: int = field(default=1, repr=False)
    unit_value: float = field(default=1.0, repr=False)
    quantile: float | None = field(default=None, repr=False)
    bits: int = field(default=0, repr=False)
    result: str = field(default="", repr=False)


@dataclass(frozen=True)
class KeySpec:
    """A group key of the plan: its column, SQL alias and public domain (None: selected)."""

    column: str
    alias: str
    domain: tuple[Any, ...] | None
    labels: tuple[str, ...] | None = None


@dataclass(frozen=True)
class ValueSpec:
    """A numeric column the plan aggregates, clamped into its declared range (held exactly).

    Sensitivities and fixed-point grids come from :attr:`range`; the float views (``lower``,
    ``mid`` ...) serve the SQL's clamps and the post-processing only.
    """

    column: str
    alias: str
    range: FixedPointRange
    nullable: bool

    @property
    def lower(self) -> float:
        """The lower bound (a float, as declared)."""
        return self.range.lower_float

    @property
    def upper(self) -> float:
        """The upper bound (a float, as declared)."""
        return self.range.upper_float

    @property
    def mid(self) -> float:
        """The float nearest the midpoint: for post-processing only, never for sensitivity."""
        return self.range.mid_float

    @property
    def half(self) -> float:
        """The float nearest the half-width (post-processing only)."""
        return self.range.half_float

    @property
    def magnitude(self) -> float:
        """``max(|L|, |U|)`` as the nearest float (post-processing only)."""
        return self.range.magnitude_float


@dataclass(frozen=True)
class Plan:
    """A query plan: measurements with their budget, privacy events and the SQL to run.

    Attributes
    ----------
    query : ParsedQuery
    epsilon, delta : float
        The budget of the whole query.
    keys : tuple of KeySpec
        Group keys (a histogram's bins are the last key).
    values : tuple of ValueSpec
        Clamped numeric columns.
    measurements : tuple of Measurement
        What gets noise, with its share of the budget (the split the release reports).
    events : tuple of PrivacyEvent
        What the query does, as privacy events (known before reading data).
    sql : str
        The bounded aggregate query the engine runs.
    quantile_sql : str or None
        The bounded query of per-bucket counts for quantiles.
    threshold : int or None
        Partition selection keeps groups whose noisy distinct-unit count is at least this.
    """

    query: ParsedQuery
    epsilon: float
    delta: float
    keys: tuple[KeySpec, ...]
    values: tuple[ValueSpec, ...]
    measurements: tuple[Measurement, ...]
    events: tuple[PrivacyEvent, ...]
    sql: str
    quantile_sql: str | None
    threshold: int | None
    groups_touched: int
    rows_per_group: int
    portable_sql: tuple[str, str | None] = field(default=("", None), repr=False)

    @property
    def selects_partitions(self) -> bool:
        """True when group keys are discovered by private partition selection."""
        return any(k.domain is None for k in self.keys)

    def sql_for(self, dialect: str) -> tuple[str, str | None]:
        """Render the bounded SQL (and the quantile SQL) for another engine, e.g. ``"spark"``.

        The plan is written once in portable SQL (no engine-specific joins or hints) and
        transpiled by sqlglot; ``__source`` stands for the table. :attr:`sql` is the DuckDB
        rendering the session runs.
        """
        try:
            out = [
                None if text is None else sqlglot.transpile(text, read="duckdb", write=dialect)[0]
                for text in self.portable_sql
            ]
        except (ValueError, KeyError, sqlglot.errors.SqlglotError) as error:
            raise InvalidParameterError(
                "dialect", dialect, f"cannot be rendered: {error}"
            ) from None
        assert out[0] is not None
        return out[0], out[1]

    def measurement_for_quantile(self, column: str, quantile: float) -> Measurement:
        """Return the exponential-mechanism measurement of quantile ``quantile`` of ``column``."""
        for m in self.measurements:
            if m.kind == "quantile" and m.column == column and m.quantile == quantile:
                return m
        raise KeyError((column, quantile))


# -- SQL rendering helpers -------------------------------------------------------------------
def literal(value: object) -> str:
    """Render a literal for DuckDB: strings with quotes doubled, numbers exactly, booleans."""
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    return exp.convert(value).sql(dialect="duckdb")


def _number(value: float) -> str:
    return repr(float(value))


# -- contribution parameters -------------------------------------------------------------------
@dataclass(frozen=True)
class _Contribution:
    rows: int  # k: rows per unit in total
    groups: int  # g': groups of the declared keys a unit touches
    per_group: int  # c: rows per unit and group
    cells: int  # group-and-bin cells a unit touches

    @property
    def rows_l1(self) -> int:
        """Largest L1 change of the vector of per-group row counts."""
        return min(self.rows, self.groups * self.per_group)


def _contribution(table: Table, key_cells: int, bins: int, grouped: bool) -> _Contribution:
    k = table.max_rows_per_unit
    # Rows per group bound groups of declared keys; without them, the one group is the table.
    c = min(table.max_rows_per_group or k, k) if grouped else k
    g = max(1, min(table.max_groups_per_unit, k, key_cells))
    cells = max(1, min(k, g * min(c, bins)))
    return _Contribution(rows=k, groups=g, per_group=c, cells=cells)


# -- the measurements --------------------------------------------------------------------------
@dataclass
class _Needs:
    count: bool = False
    distinct: bool = False
    count_columns: list[str] = field(default_factory=list)
    centered: list[str] = field(default_factory=list)
    squares: list[str] = field(default_factory=list)
    direct: list[str] = field(default_factory=list)
    quantiles: list[tuple[str, float]] = field(default_factory=list)


def _add(items: list[Any], item: Any) -> None:
    if item not in items:
        items.append(item)


def _needs(query: ParsedQuery, selection: bool, contribution: _Contribution) -> _Needs:
    table = query.table
    needs = _Needs()

    def count_for(column: str) -> None:
        if table.column(column).nullable:
            _add(needs.count_columns, column)
        else:
            needs.count = True

    for agg in query.aggregates:
        col = agg.column
        if agg.function in {"count", "histogram"}:
            needs.count = True
        elif agg.function == "count_distinct":
            needs.distinct = True
        elif agg.function == "count_column":
            assert col is not None
            count_for(col)
        elif agg.function in {"avg", "var", "stddev"}:
            assert col is not None
            count_for(col)
            _add(needs.centered, col)
            if agg.function != "avg":
                _add(needs.squares, col)
        elif agg.function == "quantile":
            assert col is not None and agg.quantile is not None
            _add(needs.quantiles, (col, agg.quantile))
    # SUM: from a centred sum and a count when both are measured anyway, else directly.
    for agg in query.aggregates:
        if agg.function == "sum":
            col = agg.column
            assert col is not None
            nullable = table.column(col).nullable
            counted = col in needs.count_columns if nullable else needs.count or needs.distinct
            if not (col in needs.centered and counted):
                _add(needs.direct, col)
    needs.distinct = needs.distinct or selection
    # With at most one row per unit and group, a group's row count is its distinct-unit count.
    if contribution.per_group == 1 and needs.distinct:
        needs.count = False
    return needs


def _bits(base: int, rows: int, epsilon: float) -> int:
    """Fixed-point bits per value: fine, but keeping the noise below ``2**36`` grid units."""
    room = floor_log2(Fraction(epsilon) / rows) + _MAX_NOISE_BITS
    bits = min(base, room)
    if bits < 8:
        raise InvalidParameterError(
            "epsilon", epsilon, "is too small for this query's contribution bounds"
        )
    return bits


def _predicted_event(units: int, epsilon: float) -> PrivacyEvent:
    """Return the geometric mechanism's event for these parameters (a dry run on zero)."""
    release = geometric_mechanism(
        0, epsilon=epsilon, sensitivity=units, source=InsecureSeededSource(0)
    )
    return release.event


def _selection_threshold(scale: float, cells: int, delta: float) -> int:
    """Smallest ``tau`` with ``cells * P[1 + Z >= tau] <= delta`` for ``Z ~ DLap(scale)``.

    ``P[Z >= m] = a^m / (1 + a)`` for ``m >= 1``, ``a = exp(-1/scale)`` (the discrete Laplace
    of Canonne, Kamath and Steinke 2020, Definition 28).

    The decision is exact: a float formula only guesses ``m``, and each candidate is checked
    against a rigorous upper bound of the tail (:func:`dpcurator.noise.dlap_tail_bounds`), so
    floating-point error can raise the threshold but never lower it below what delta needs.
    """
    a = math.exp(-1.0 / scale)  # 0.0 for a tiny scale: then m = 1 is the guess
    m = 1 if a == 0.0 else max(1, math.ceil(math.log(delta * (1.0 + a) / cells) / math.log(a)))
    while not _tail_fits(m, scale, cells, delta):
        m += 1
    while m > 1 and _tail_fits(m - 1, scale, cells, delta):
        m -= 1
    return 1 + m


def _tail_fits(m: int, scale: float, cells: int, delta: float) -> bool:
    """Whether ``cells * P[Z >= m] <= delta`` (``m >= 1``), by an upper bound of the tail.

    ``P[Z >= m]`` is half the two-sided tail ``P[|Z| >= m]`` that :func:`dlap_tail_bounds`
    encloses in units of ``2**-bits``; ``bits`` resolves delta to 64 bits.
    """
    bits = 64 - floor_log2(Fraction(delta))
    _, two_sided = dlap_tail_bounds(m, 1 / Fraction(scale), bits)
    return cells * two_sided <= Fraction(delta) * (1 << (bits + 1))


def _split(epsilon: float, parts: int) -> list[float]:
    """``parts`` shares of ``epsilon``, equal up to rounding, whose exact sum is at most it."""
    share = epsilon / parts
    shares = [share] * (parts - 1)
    rest = Fraction(epsilon) - sum((Fraction(s) for s in shares), Fraction(0))
    last = float(rest)
    if Fraction(last) > rest:
        last = math.nextafter(last, 0.0)
    return [*shares, last]


def make_plan(query: ParsedQuery, *, epsilon: float, delta: float = 0.0) -> Plan:
    r"""Plan ``query`` under ``(epsilon, delta)``: split the budget and write the bounded SQL.

    The query's budget is split evenly over its measurements; partition selection (when group
    keys have no public domain) is one of them and takes all of ``delta``. Each measurement is
    the two-sided geometric mechanism on exact integers with scale ``Delta / epsilon_i``
    (epsilon_i-DP for its L1 sensitivity ``Delta``: Ghosh, Roughgarden and Sundararajan 2009),
    or the exponential mechanism for quantiles (McSherry and Talwar 2007; lecture 003), and by
    basic composition (lecture 002) the whole query is ``(epsilon, delta)``-DP under
    add/remove of one privacy unit.

    Partition selection (Korolova et al. 2009; Wilson et al. 2020, "Differentially private SQL
    with bounded user contribution", Section 3) adds discrete Laplace noise of scale
    ``t = m / epsilon_s`` to each present group's count of distinct units (L1 sensitivity
    ``m``, the cells one unit touches) and keeps the groups whose noisy count reaches
    ``tau``, the smallest integer with ``m P[1 + Z >= tau] <= delta``: a group that exists only
    because of the removed unit has one unit, and at most ``m`` such groups exist, so the
    selection is ``(epsilon_s, delta)``-DP.

    Parameters
    ----------
    query : ParsedQuery
    epsilon : float
        > 0.
    delta : float, default 0
        Needed (> 0) only for partition selection.

    Returns
    -------
    Plan

    Raises
    ------
    QueryError
        If group keys need partition selection and ``delta`` is 0, or the product of the
        public domains is too large.
    """
    eps = check_epsilon(epsilon)
    if not MIN_EPSILON <= eps <= MAX_EPSILON:
        raise InvalidParameterError(
            "epsilon",
            epsilon,
            f"must be in [2**-40, 2**20] (about [{MIN_EPSILON:.3g}, {MAX_EPSILON:.3g}]) for a "
            "curator query",
        )
    dlt = check_delta(delta)
    table = query.table
    keys = _keys(query)
    selection = any(k.domain is None for k in keys)
    if selection and dlt == 0.0:
        undeclared = [k.column for k in keys if k.domain is None]
        raise QueryError(
            f"GROUP BY {', '.join(undeclared)}: no public domain is declared, so the groups must "
            "be discovered privately (partition selection), which needs delta > 0: pass "
            "delta=1e-6 for example, or declare the domain of the column."
        )
    key_cells = 1
    for key in keys:
        if key.alias != "__bin":
            key_cells *= len(key.domain) if key.domain is not None else MAX_DOMAIN
    hist = query.histogram
    bins = len(hist.edges) - 1 if hist is not None and hist.edges is not None else 1
    contribution = _contribution(table, key_cells, bins, bool(query.group_by))
    needs = _needs(query, selection, contribution)
    values = _values(query)
    by_column = {v.column: v for v in values}
    value_alias = {v.column: v.alias for v in values}

    slots: list[tuple[str, str | None, float | None]] = []
    if needs.distinct:
        slots.append(("selection" if selection else "count_distinct", None, None))
    if needs.count:
        slots.append(("count", None, None))
    slots += [("count_column", col, None) for col in needs.count_columns]
    slots += [("centered_sum", col, None) for col in needs.centered]
    slots += [("centered_squares", col, None) for col in needs.squares]
    slots += [("sum", col, None) for col in needs.direct]
    slots += [("quantile", col, q) for col, q in needs.quantiles]
    shares = _split(eps, len(slots))
    measurements: list[Measurement] = []
    events: list[PrivacyEvent] = []
    threshold: int | None = None
    rows_l1 = contribution.rows_l1
    for (kind, col, q), share in zip(slots, shares, strict=True):
        if kind == "quantile":
            assert col is not None and q is not None
            measurements.append(
                Measurement(
                    f"QUANTILE({col}, {q:g})",
                    "quantile",
                    col,
                    "exponential",
                    share,
                    0.0,
                    max(q, 1.0 - q) * contribution.per_group,
                    math.nan,
                    quantile=q,
                )
            )
            events.append(PureDPEvent(epsilon=share))
            continue
        bits = 0
        unit_value = 1.0
        if kind in {"selection", "count_distinct"}:
            units, name, result = contribution.cells, "COUNT(DISTINCT unit)", "__units"
        elif kind == "count":
            units, name, result = rows_l1, "COUNT(*)", "__n"
        else:
            assert col is not None
            alias = value_alias.get(col) or f"__cc{needs.count_columns.index(col)}"
            if kind == "count_column":
                units, name, result = rows_l1, f"COUNT({col})", f"__c_{alias}"
            else:
                spec = by_column[col]
                base = _SQUARE_BITS if kind == "centered_squares" else _SUM_BITS
                bits = _bits(base, rows_l1, share)
                encoding = spec.range.encoding(bits, _ENCODINGS[kind])
                units = rows_l1 * encoding.row_units
                unit_value = float(encoding.unit)
                if kind == "centered_squares":
                    name, result = f"SUM(({col} - {spec.mid:g})^2)", f"__q_{alias}"
                elif kind == "centered_sum":
                    name, result = f"SUM({col} - {spec.mid:g})", f"__s_{alias}"
                else:
                    name, result = f"SUM({col})", f"__d_{alias}"
        event = _predicted_event(units, share)
        scale = float(getattr(event, "scale"))  # noqa: B009 - a DiscreteLaplaceEvent
        if kind == "selection":
            threshold = _selection_threshold(scale, units, dlt)
            name = "partition selection: COUNT(DISTINCT unit) >= threshold"
            events.append(ApproxDPEvent(epsilon=share, delta=dlt))
        else:
            events.append(event)
        measurements.append(
            Measurement(
                name,
                kind,
                col,
                "geometric threshold" if kind == "selection" else "geometric",
                share,
                dlt if kind == "selection" else 0.0,
                units * unit_value,
                scale * unit_value,
                units=units,
                unit_value=unit_value,
                bits=bits,
                result=result,
            )
        )
    sql, quantile_sql = _render(query, keys, values, measurements, contribution)
    portable = _render(query, keys, values, measurements, contribution, portable=True)
    return Plan(
        query=query,
        epsilon=eps,
        delta=dlt if selection else 0.0,
        keys=keys,
        values=values,
        measurements=tuple(measurements),
        events=tuple(events),
        sql=sql,
        quantile_sql=quantile_sql,
        portable_sql=portable,
        threshold=threshold,
        groups_touched=contribution.groups,
        rows_per_group=contribution.per_group,
    )


def _keys(query: ParsedQuery) -> tuple[KeySpec, ...]:
    table = query.table
    keys = [
        KeySpec(name, f"__k{i}", table.column(name).domain) for i, name in enumerate(query.group_by)
    ]
    hist = query.histogram
    if hist is not None:
        assert hist.edges is not None and hist.column is not None
        edges = hist.edges
        last = len(edges) - 2
        labels = tuple(
            f"[{a:g}, {b:g}{']' if i == last else ')'}" for i, (a, b) in enumerate(pairwise(edges))
        )
        keys.append(KeySpec(hist.column, "__bin", tuple(range(len(edges) - 1)), labels))
    size = 1
    for key in keys:
        if key.domain is not None:
            size *= len(key.domain)
    if size > MAX_DOMAIN:
        raise QueryError(
            f"The public domains of the group keys have {size} combinations, more than "
            f"{MAX_DOMAIN}: group by fewer keys."
        )
    return tuple(keys)


def _values(query: ParsedQuery) -> tuple[ValueSpec, ...]:
    table = query.table
    seen: list[str] = []
    for agg in query.aggregates:
        if agg.function in {"sum", "avg", "var", "stddev", "quantile"}:
            assert agg.column is not None
            _add(seen, agg.column)
    out = []
    for i, name in enumerate(seen):
        column: Column = table.column(name)
        bounds = column.bounds
        assert bounds is not None
        exact = FixedPointRange.from_bounds(*bounds, name=name)
        out.append(ValueSpec(name, f"__x{i}", exact, column.nullable))
    return tuple(out)


def _clamped(value: ValueSpec) -> str:
    x = f"CAST({quote(value.column)} AS DOUBLE)"
    clamp = f"LEAST(GREATEST({x}, {_number(value.lower)}), {_number(value.upper)})"
    missing = f"{quote(value.column)} IS NULL OR isnan({x})"
    fill = "NULL" if value.nullable else _number(value.mid)
    return f"CASE WHEN {missing} THEN {fill} ELSE {clamp} END"


def _bin_expression(column: str, edges: Sequence[float]) -> str:
    x = f"CAST({quote(column)} AS DOUBLE)"
    cases = " ".join(f"WHEN {x} < {_number(edge)} THEN {i}" for i, edge in enumerate(edges[1:-1]))
    return f"CASE {cases} ELSE {len(edges) - 2} END" if cases else "0"


def _fixed_point(value: ValueSpec, kind: str, bits: int) -> str:
    """Exact integer sum of the rows' fixed-point indices (the rule of :mod:`dpcurator.noise`).

    Each row's index is the encoding's float expression clamped into ``[min_index, max_index]``
    (integers, exact as floats) and rounded, so it is an integer in that range: floating-point
    error (a midpoint or a multiplier that is not a float, the engine's arithmetic) can cost
    accuracy, never sensitivity, since one row moves the sum by at most ``2**bits`` whatever the
    floats did. The sum is exact (HUGEINT), then
    clamped into ``[-2**62, 2**62]`` (a 1-Lipschitz map: the sensitivity is unchanged).
    """
    enc = value.range.encoding(bits, _ENCODINGS[kind])
    x = value.alias
    scaled = f"(({x} - {_number(enc.offset)}) * {_number(enc.multiplier)} - {_number(enc.shift)})"
    if kind == "sum":
        expression = f"({x} * {_number(enc.multiplier)})"
    elif kind == "centered_squares":
        expression = f"({scaled} * {scaled} * {_number(2.0**-bits)})"
    else:
        expression = scaled
    # The clamp is to [min_index, max_index], integers that are exact floats: rounding a value
    # between them gives an integer between them (and a NaN clamps to max_index), so the
    # rounded row is in range whatever the float arithmetic did, and the cast cannot overflow.
    # COALESCE first where values may be NULL: DuckDB's LEAST/GREATEST skip NULLs, so a NULL
    # would become a bound (a non-nullable column's NULLs were already filled with the midpoint).
    # A NULL row adds nothing to a SUM, and the sum of no rows is 0, as 0 does.
    low, high = _number(enc.min_index), _number(enc.max_index)
    present = f"COALESCE({expression}, 0.0)" if value.nullable else expression
    clamped = f"LEAST(GREATEST({present}, {low}), {high})"
    total = f"COALESCE(SUM(CAST(ROUND({clamped}) AS BIGINT)), 0)"
    return f"LEAST(GREATEST({total}, {-_SUM_CLAMP}), {_SUM_CLAMP})"


def _bounding(
    columns: Sequence[str],
    keys: Sequence[KeySpec],
    contribution: _Contribution,
    *,
    portable: bool,
) -> list[str]:
    """CTEs bounding each unit's contribution: ``__rows`` in, ``__bounded`` out.

    Units already within the bounds keep all their rows (found by one aggregation, without
    sorting); only the rows of units beyond a bound go through the window functions that keep
    ``max_groups_per_unit`` groups (ranked by a hash of the group key), ``max_rows_per_group``
    rows per group and ``max_rows_per_unit`` rows (ranked by a hash of the row). Every choice
    depends on the unit's own rows only, so removing a unit changes no other unit's rows.

    ``portable`` writes semi and anti joins as ``IN`` / ``NOT IN`` (the unit is never NULL
    here), which every SQL engine reads; DuckDB runs its own join syntax faster.
    """
    k, g, c = contribution.rows, contribution.groups, contribution.per_group
    cols = ", ".join(columns)
    grouped = [k_.alias for k_ in keys if k_.alias != "__bin"]
    limit_groups = bool(grouped) and g < k
    limit_per_group = bool(grouped) and c < k
    ctes: list[str] = []
    if limit_groups and g == 1:
        # One group per unit: a unit spans several groups iff some key has two values (or
        # both NULL and a value); then within its one group it may keep c rows. One pass.
        spans = [
            f"MIN({a}) <> MAX({a}) OR (COUNT({a}) > 0 AND COUNT({a}) < COUNT(*))" for a in grouped
        ]
        conditions = [f"COUNT(*) > {min(k, c)}", *spans]
        ctes.append(
            f"__over AS (SELECT __u FROM __rows GROUP BY __u HAVING {' OR '.join(conditions)})"
        )
    elif limit_groups or limit_per_group:
        key_list = ", ".join(grouped)
        ctes.append(f"__per AS (SELECT __u, COUNT(*) AS __n FROM __rows GROUP BY __u, {key_list})")
        conditions = [f"SUM(__n) > {k}"]
        if limit_groups:
            conditions.append(f"COUNT(*) > {g}")
        if limit_per_group:
            conditions.append(f"MAX(__n) > {c}")
        ctes.append(
            f"__over AS (SELECT __u FROM __per GROUP BY __u HAVING {' OR '.join(conditions)})"
        )
    else:
        ctes.append(f"__over AS (SELECT __u FROM __rows GROUP BY __u HAVING COUNT(*) > {k})")
    if portable:
        ctes.append(f"__heavy AS (SELECT {cols} FROM __rows WHERE __u IN (SELECT __u FROM __over))")
    else:
        ctes.append(f"__heavy AS (SELECT {cols} FROM __rows SEMI JOIN __over USING (__u))")
    current = "__heavy"
    row_hash = f"hash({cols})"
    if limit_groups:
        key_list = ", ".join(grouped)
        ctes.append(
            f"__groups AS (SELECT {cols} FROM {current} QUALIFY DENSE_RANK() OVER "
            f"(PARTITION BY __u ORDER BY hash({key_list}), {key_list}) <= {g})"
        )
        current = "__groups"
    if limit_per_group:
        ctes.append(
            f"__per_group AS (SELECT {cols} FROM {current} QUALIFY ROW_NUMBER() OVER "
            f"(PARTITION BY __u, {', '.join(grouped)} ORDER BY {row_hash}) <= {c})"
        )
        current = "__per_group"
    ctes.append(
        f"__truncated AS (SELECT {cols} FROM {current} QUALIFY ROW_NUMBER() OVER "
        f"(PARTITION BY __u ORDER BY {row_hash}) <= {k})"
    )
    light = (
        f"SELECT {cols} FROM __rows WHERE __u NOT IN (SELECT __u FROM __over)"
        if portable
        else f"SELECT {cols} FROM __rows ANTI JOIN __over USING (__u)"
    )
    ctes.append(f"__bounded AS ({light} UNION ALL SELECT {cols} FROM __truncated)")
    return ctes


def _render(
    query: ParsedQuery,
    keys: tuple[KeySpec, ...],
    values: tuple[ValueSpec, ...],
    measurements: Sequence[Measurement],
    contribution: _Contribution,
    *,
    portable: bool = False,
) -> tuple[str, str | None]:
    table = query.table
    unit = table.unit_column
    by_column = {v.column: v for v in values}
    projections: list[str] = []
    filters: list[str] = []
    if unit is not None:
        projections.append(f"{quote(unit)} AS __u")
        filters.append(f"{quote(unit)} IS NOT NULL")
    if query.where is not None:
        where_sql = query.where.sql(dialect="duckdb")
        # TRY semantics: a row on which the analyst's filter fails (a CAST, an overflow, a
        # division by zero) is not selected, instead of an error that depends on its value.
        filters.append(f"({where_sql})" if portable else f"COALESCE(TRY({where_sql}), FALSE)")
    hist = query.histogram
    for key in keys:
        if key.alias == "__bin":
            assert hist is not None and hist.edges is not None
            spec = table.column(key.column)
            x = f"CAST({quote(key.column)} AS DOUBLE)"
            if spec.nullable:
                filters.append(f"{quote(key.column)} IS NOT NULL AND NOT isnan({x})")
                projections.append(f"{_bin_expression(key.column, hist.edges)} AS __bin")
            else:
                mid = _number((hist.edges[0] + hist.edges[-1]) / 2.0)
                filled = (
                    f"(CASE WHEN {quote(key.column)} IS NULL OR isnan({x}) THEN {mid} ELSE {x} END)"
                )
                projections.append(
                    f"{_bin_expression(key.column, hist.edges).replace(x, filled)} AS __bin"
                )
            continue
        projections.append(f"{quote(key.column)} AS {key.alias}")
        if key.domain is not None:
            # Safe without TRY: the engine refuses a text column with a domain of non-text
            # values (the one case where DuckDB would cast each row's value, and could fail).
            filters.append(f"{quote(key.column)} IN ({', '.join(literal(v) for v in key.domain)})")
    for value in values:
        projections.append(f"{_clamped(value)} AS {value.alias}")
    for m in measurements:
        if m.kind == "count_column" and m.column not in by_column:
            projections.append(f"{quote(str(m.column))} AS {m.result.removeprefix('__c_')}")
    if not projections:
        projections.append("1 AS __one")
    where = f" WHERE {' AND '.join(filters)}" if filters else ""
    hint = "" if portable else " NOT MATERIALIZED"
    ctes = [f"__rows AS{hint} (SELECT {', '.join(projections)} FROM __source{where})"]
    current = "__rows"
    key_aliases = [k.alias for k in keys]
    if unit is not None:
        columns = [p.rsplit(" AS ", 1)[1] for p in projections]
        ctes += _bounding(columns, keys, contribution, portable=portable)
        current = "__bounded"
    aggregates: list[str] = []
    for m in measurements:
        if m.kind == "quantile":
            continue
        if m.kind in {"selection", "count_distinct"}:
            aggregates.append(
                "COUNT(DISTINCT __u) AS __units" if unit is not None else "COUNT(*) AS __units"
            )
        elif m.kind == "count":
            aggregates.append("COUNT(*) AS __n")
        elif m.kind == "count_column":
            aggregates.append(f"COUNT({m.result.removeprefix('__c_')}) AS {m.result}")
        else:
            expression = _fixed_point(by_column[str(m.column)], m.kind, m.bits)
            aggregates.append(f"{expression} AS {m.result}")
    with_clause = "WITH " + ",\n  ".join(ctes)
    group = f" GROUP BY {', '.join(key_aliases)}" if key_aliases else ""
    if not aggregates:  # quantiles only: the main query just lists the groups
        aggregates.append("COUNT(*) AS __rows_total")
    sql = f"{with_clause}\nSELECT {', '.join([*key_aliases, *aggregates])} FROM {current}{group}"
    quantile_sql = None
    quantile_columns = [m.column for m in measurements if m.kind == "quantile"]
    if quantile_columns:
        parts = []
        prefix = "".join(f"{a}, " for a in key_aliases)
        for value in values:
            if value.column in quantile_columns:
                per_unit = float(QUANTILE_BUCKETS / value.range.width)
                index = (
                    f"CAST(FLOOR(({value.alias} - {_number(value.lower)}) * "
                    f"{_number(per_unit)}) AS BIGINT)"
                )
                bucket = f"LEAST(GREATEST({index}, 0), {QUANTILE_BUCKETS - 1})"
                parts.append(
                    f"SELECT {prefix}{literal(value.column)} AS __column, {bucket} AS __bucket, "
                    f"COUNT(*) AS __n FROM {current} WHERE {value.alias} IS NOT NULL "
                    f"GROUP BY ALL"
                )
        quantile_sql = f"{with_clause}\n{' UNION ALL '.join(parts)}"
    return sql, quantile_sql


def domain_product(keys: Sequence[KeySpec]) -> list[tuple[Any, ...]]:
    """Every combination of the keys' public domains, in declaration order."""
    domains = [k.domain for k in keys]
    assert all(d is not None for d in domains)
    return list(product(*[d for d in domains if d is not None]))
