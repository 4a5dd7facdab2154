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
from dataclasses import dataclass
from fractions import Fraction
from itertools import pairwise, product
from typing import Any, assert_never

import sqlglot
import sqlglot.errors

from dpcurator._validation import check_delta, check_epsilon
from dpcurator.accounting import ApproxDPEvent, PrivacyEvent, PureDPEvent
from dpcurator.curator._aggregates import Count, CountColumn, CountUnits, Histogram, Sum, needs
from dpcurator.curator._engine import SOURCE, render
from dpcurator.curator._measures import (
    ColumnCount,
    Measure,
    QuantileCounts,
    RowCount,
    UnitCount,
    ValueSum,
    kind_of,
    label_of,
)
from dpcurator.curator._specs import Contribution, KeySpec, Measurement, ValueSpec
from dpcurator.curator._sql import ParsedQuery
from dpcurator.curator._statements import QUANTILE_BUCKETS, Statements, build_statements
from dpcurator.curator._table import MAX_DOMAIN, Table
from dpcurator.errors import InvalidParameterError, QueryError
from dpcurator.mechanisms import geometric_event
from dpcurator.noise import FixedPointRange, dlap_tail_bounds, floor_log2

__all__ = [
    "MAX_EPSILON",
    "MIN_EPSILON",
    "QUANTILE_BUCKETS",
    "Contribution",
    "KeySpec",
    "Measurement",
    "Plan",
    "ValueSpec",
    "domain_product",
    "make_plan",
]

MIN_EPSILON = 2.0**-40
"""Smallest epsilon a query may be given (about 9.1e-13)."""
MAX_EPSILON = 2.0**20
"""Largest epsilon a query may be given (about 1.05e6: noise far below any rounding)."""

_SUM_BITS = 30
_SQUARE_BITS = 24
_MAX_NOISE_BITS = 36


@dataclass(frozen=True)
class Plan:
    """A query plan: measurements with their budget, privacy events and the statements to run.

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
    statements : Statements
        The bounded statements, as sqlglot trees (rendered per engine).
    threshold : int or None
        Partition selection keeps groups whose noisy distinct-unit count is at least this.
    contribution : Contribution
        What one unit may contribute after bounding.
    """

    query: ParsedQuery
    epsilon: float
    delta: float
    keys: tuple[KeySpec, ...]
    values: tuple[ValueSpec, ...]
    measurements: tuple[Measurement, ...]
    events: tuple[PrivacyEvent, ...]
    statements: Statements
    threshold: int | None
    contribution: Contribution

    @property
    def selects_partitions(self) -> bool:
        """True when group keys are discovered by private partition selection."""
        return any(k.domain is None for k in self.keys)

    @property
    def groups_touched(self) -> int:
        """Groups of the declared keys one unit touches after bounding."""
        return self.contribution.groups

    @property
    def rows_per_group(self) -> int:
        """Rows one unit keeps per group after bounding."""
        return self.contribution.per_group

    @property
    def sql(self) -> str:
        """The bounded aggregate statement in DuckDB's SQL (``__source`` stands for the rows)."""
        return self.sql_for("duckdb")[0]

    @property
    def quantile_sql(self) -> str | None:
        """The per-bucket counts for quantiles in DuckDB's SQL, if the query has quantiles."""
        return self.sql_for("duckdb")[1]

    def sql_for(self, dialect: str) -> tuple[str, str | None]:
        """Render the bounded statement (and the quantile one) for an engine, e.g. ``"spark"``.

        The statements are sqlglot trees; ``__source`` stands for the table's rows.
        """
        source = sqlglot.exp.to_table(SOURCE)
        try:
            main = render(self.statements.main, source, dialect)
            quantiles = self.statements.quantiles
            rendered = None if quantiles is None else render(quantiles, source, dialect)
        except (ValueError, KeyError, sqlglot.errors.SqlglotError) as error:
            raise InvalidParameterError(
                "dialect", dialect, f"cannot be rendered: {error}"
            ) from None
        return main, rendered

    def measurement_for(self, measure: Measure) -> Measurement:
        """Return the measurement of ``measure``."""
        for m in self.measurements:
            if m.measure == measure:
                return m
        raise KeyError(measure)


# -- contribution parameters -------------------------------------------------------------------
def _contribution(table: Table, key_cells: int, bins: int, grouped: bool) -> Contribution:
    k = table.max_rows_per_unit
    # Rows per group bound groups of declared keys; without them, the one group is the table.
    c = min(table.max_rows_per_group or k, k) if grouped else k
    g = max(1, min(table.max_groups_per_unit, k, key_cells))
    cells = max(1, min(k, g * min(c, bins)))
    return Contribution(rows=k, groups=g, per_group=c, cells=cells)


# -- the measures --------------------------------------------------------------------------------
_ORDER: tuple[type, ...] = (UnitCount, RowCount, ColumnCount, ValueSum, QuantileCounts)
_ENCODING_ORDER = {"centred": 0, "squares": 1, "raw": 2}


def _measures(query: ParsedQuery, selection: bool, contribution: Contribution) -> list[Measure]:
    """Return the query's measures, each once, in the order the budget split reports them.

    A SUM comes from a centred sum and a count when both are measured anyway, else directly;
    partition selection needs the distinct-unit count; with at most one row per unit and group,
    a group's row count is its distinct-unit count.
    """
    table = query.table
    found: list[Measure] = []
    for aggregate in query.aggregates:
        found += [m for m in needs(aggregate, table) if m not in found]
    units = UnitCount() in found
    for aggregate in query.aggregates:
        if isinstance(aggregate, Sum):
            column = aggregate.column
            count = ColumnCount(column) if table.column(column).nullable else None
            counted = count in found if count is not None else RowCount() in found or units
            if not (ValueSum(column, "centred") in found and counted):
                found += [m for m in [ValueSum(column, "raw")] if m not in found]
    if selection or units:
        found = [m for m in found if m != UnitCount()]
        found.append(UnitCount(selection=selection))
        if contribution.per_group == 1:
            found = [m for m in found if m != RowCount()]
    return sorted(found, key=_measure_rank)


def _measure_rank(measure: Measure) -> tuple[int, int]:
    position = _ORDER.index(type(measure))
    if isinstance(measure, ValueSum):
        return position, _ENCODING_ORDER[measure.encoding]
    return position, 0


def _bits(base: int, rows: int, epsilon: float) -> int:
    """Fixed-point bits per value: fine, but keeping the noise below ``2**36`` grid units."""
    room = floor_log2(Fraction(epsilon) / rows) + _MAX_NOISE_BITS
    bits = min(base, room)
    if bits < 8:
        raise InvalidParameterError(
            "epsilon", epsilon, "is too small for this query's contribution bounds"
        )
    return bits


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


@dataclass(frozen=True)
class _Sizing:
    """A measure's sensitivity in grid units, the value of a unit, and its fixed-point bits."""

    units: int
    unit_value: float = 1.0
    bits: int = 0


def _sizing(
    measure: Measure, share: float, contribution: Contribution, values: dict[str, ValueSpec]
) -> _Sizing:
    match measure:
        case UnitCount():
            return _Sizing(contribution.cells)
        case RowCount() | ColumnCount():
            return _Sizing(contribution.rows_l1)
        case ValueSum(column=column, encoding=encoding):
            base = _SQUARE_BITS if encoding == "squares" else _SUM_BITS
            bits = _bits(base, contribution.rows_l1, share)
            grid = values[column].range.encoding(bits, encoding)
            return _Sizing(contribution.rows_l1 * grid.row_units, float(grid.unit), bits)
        case QuantileCounts():
            return _Sizing(contribution.per_group)
        case _:
            assert_never(measure)


def _measurement(
    measure: Measure,
    position: int,
    *,
    share: float,
    delta: float,
    contribution: Contribution,
    values: dict[str, ValueSpec],
) -> tuple[Measurement, PrivacyEvent]:
    """One measurement with its event (from the mechanism's own event function: no dry run)."""
    column = getattr(measure, "column", None)
    mid = values[column].mid if column in values else 0.0
    name, kind = label_of(measure, mid), kind_of(measure)
    if isinstance(measure, QuantileCounts):
        sensitivity = max(measure.level, 1.0 - measure.level) * contribution.per_group
        event: PrivacyEvent = PureDPEvent(epsilon=share)
        m = Measurement(
            name,
            kind,
            column,
            "exponential",
            share,
            0.0,
            sensitivity,
            math.nan,
            measure,
            quantile=measure.level,
        )
        return m, event
    sizing = _sizing(measure, share, contribution, values)
    geometric = geometric_event(epsilon=share, sensitivity=sizing.units)
    selection = isinstance(measure, UnitCount) and measure.selection
    event = ApproxDPEvent(epsilon=share, delta=delta) if selection else geometric
    m = Measurement(
        name,
        kind,
        column,
        "geometric threshold" if selection else "geometric",
        share,
        delta if selection else 0.0,
        sizing.units * sizing.unit_value,
        geometric.scale * sizing.unit_value,
        measure,
        units=sizing.units,
        unit_value=sizing.unit_value,
        bits=sizing.bits,
        result=f"__m{position}",
    )
    return m, event


def make_plan(query: ParsedQuery, *, epsilon: float, delta: float = 0.0) -> Plan:
    r"""Plan ``query`` under ``(epsilon, delta)``: split the budget and build the statements.

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
    eps = _check_query_epsilon(epsilon)
    dlt = check_delta(delta)
    keys = _keys(query)
    selection = any(k.domain is None for k in keys)
    if selection and dlt == 0.0:
        undeclared = [k.column for k in keys if k.domain is None]
        raise QueryError(
            f"GROUP BY {', '.join(undeclared)}: no public domain is declared, so the groups must "
            "be discovered privately (partition selection), which needs delta > 0: pass "
            "delta=1e-6 for example, or declare the domain of the column."
        )
    contribution = _contribution_of(query, keys)
    measures = _measures(query, selection, contribution)
    values = _values(query)
    by_column = {v.column: v for v in values}
    shares = _split(eps, len(measures))
    planned = [
        _measurement(
            measure, i, share=share, delta=dlt, contribution=contribution, values=by_column
        )
        for i, (measure, share) in enumerate(zip(measures, shares, strict=True))
    ]
    measurements = tuple(m for m, _ in planned)
    threshold = None
    if selection:
        chosen = next(m for m in measurements if isinstance(m.measure, UnitCount))
        threshold = _selection_threshold(chosen.scale, chosen.units, dlt)
    statements = build_statements(
        query.table,
        query.where,
        keys=keys,
        values=values,
        measurements=measurements,
        contribution=contribution,
    )
    return Plan(
        query=query,
        epsilon=eps,
        delta=dlt if selection else 0.0,
        keys=keys,
        values=values,
        measurements=measurements,
        events=tuple(e for _, e in planned),
        statements=statements,
        threshold=threshold,
        contribution=contribution,
    )


def _check_query_epsilon(epsilon: float) -> float:
    eps = check_epsilon(epsilon)
    if not MIN_EPSILON <= eps <= MAX_EPSILON:
        raise InvalidParameterError(
            "epsilon",
            epsilon,
            f"must be in [2**-40, 2**20] (about [{MIN_EPSILON:.3g}, {MAX_EPSILON:.3g}]) for a "
            "curator query",
        )
    return eps


def _contribution_of(query: ParsedQuery, keys: Sequence[KeySpec]) -> Contribution:
    key_cells = 1
    for key in keys:
        if not key.is_bin:
            key_cells *= len(key.domain) if key.domain is not None else MAX_DOMAIN
    hist = query.histogram
    bins = len(hist.edges) - 1 if hist is not None else 1
    return _contribution(query.table, key_cells, bins, bool(query.group_by))


def _key(query: ParsedQuery, name: str, alias: str) -> KeySpec:
    computed = query.computed.get(name)
    if computed is not None:
        return KeySpec(name, alias, computed.domain, expression=computed.expression)
    return KeySpec(name, alias, query.table.column(name).domain)


def _keys(query: ParsedQuery) -> tuple[KeySpec, ...]:
    keys = [_key(query, name, f"__k{i}") for i, name in enumerate(query.group_by)]
    hist = query.histogram
    if hist is not None:
        keys.append(_bin_key(hist))
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


def _bin_key(hist: Histogram) -> KeySpec:
    edges = hist.edges
    last = len(edges) - 2
    labels = tuple(
        f"[{a:g}, {b:g}{']' if i == last else ')'}" for i, (a, b) in enumerate(pairwise(edges))
    )
    return KeySpec(hist.column, "__bin", tuple(range(len(edges) - 1)), labels, edges)


def _values(query: ParsedQuery) -> tuple[ValueSpec, ...]:
    """Return the clamped numeric columns: those of sums, means, variances, quantiles."""
    table = query.table
    seen: list[str] = []
    for aggregate in query.aggregates:
        if isinstance(aggregate, Count | CountColumn | CountUnits | Histogram):
            continue
        if aggregate.column not in seen:
            seen.append(aggregate.column)
    out = []
    for i, name in enumerate(seen):
        column = table.column(name)
        assert column.bounds is not None
        exact = FixedPointRange.from_bounds(*column.bounds, name=name)
        out.append(ValueSpec(name, f"__x{i}", exact, column.nullable))
    return tuple(out)


def domain_product(keys: Sequence[KeySpec]) -> list[tuple[Any, ...]]:
    """Every combination of the keys' public domains, in declaration order."""
    domains = [k.domain for k in keys]
    assert all(d is not None for d in domains)
    return list(product(*[d for d in domains if d is not None]))
