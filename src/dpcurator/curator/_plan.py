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

The bounds are the same whether the statement truncates a unit beyond its bounds to whole rows
(quantiles, histograms) or scales its per-group sums
(:mod:`dpcurator.curator._statements`): a scaled unit counts ``m_j <= c`` rows in group ``j``,
``sum m_j <= min(k, g' c)`` over at most ``g'`` groups, and each of its sums there is
``(s_j m_j) DIV n_j`` for an exact sum ``s_j`` of ``n_j`` rows' indices (or non-NULL flags), so
its magnitude is at most ``m_j`` rows' worth (and it is in group ``j``'s distinct-unit count
only where ``m_j >= 1``): the L1 bounds above and the squared L2 bound of the discrete Gaussian
(``_l2_squared``), which hold for ``m_j`` whole rows per group, hold as they are.

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
from typing import Any, Literal, assert_never, get_args

import sqlglot
import sqlglot.errors

from dpcurator._validation import check_delta, check_epsilon, check_positive, floor_float, sqrt_up
from dpcurator.accounting import (
    ApproxDPEvent,
    DiscreteGaussianEvent,
    PrivacyEvent,
    PureDPEvent,
    zcdp_rho_for,
)
from dpcurator.curator._aggregates import Count, CountColumn, CountUnits, Histogram, Sum, needs
from dpcurator.curator._engine import SOURCE, render
from dpcurator.curator._measures import (
    ColumnCount,
    Measure,
    QuantileCounts,
    RowCount,
    UnitCount,
    ValueSum,
    joint_quantiles,
    kind_of,
    label_of,
)
from dpcurator.curator._specs import Contribution, GaussianNoise, KeySpec, Measurement, ValueSpec
from dpcurator.curator._sql import ParsedQuery
from dpcurator.curator._statements import QUANTILE_BUCKETS, Statements, build_statements
from dpcurator.curator._table import MAX_DOMAIN, Table
from dpcurator.errors import InvalidParameterError, QueryError
from dpcurator.mechanisms import ErrorModel, geometric_event
from dpcurator.noise import FixedPointRange, dlap_tail_bounds, floor_log2

__all__ = [
    "MAX_EPSILON",
    "MIN_EPSILON",
    "NOISES",
    "QUANTILE_BUCKETS",
    "Contribution",
    "KeySpec",
    "Measurement",
    "Noise",
    "Plan",
    "ValueSpec",
    "domain_product",
    "make_plan",
]

MIN_EPSILON = 2.0**-40
"""Smallest epsilon a query may be given (about 9.1e-13)."""
MAX_EPSILON = 2.0**20
"""Largest epsilon a query may be given (about 1.05e6: noise far below any rounding)."""

Noise = Literal["auto", "laplace", "gaussian"]
"""Which noise a session's counts and sums get: the more accurate one, or one of the two."""
NOISES: tuple[str, ...] = get_args(Noise)

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
        The budget of the whole query (epsilon is NaN for a zCDP query).
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
    rho : float or None
        The budget of a zCDP query (None for an (epsilon, delta) query).
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
    rho: float | None = None

    @property
    def selects_partitions(self) -> bool:
        """True when group keys are discovered by private partition selection."""
        return any(k.domain is None for k in self.keys)

    @property
    def groups_touched(self) -> int:
        """Groups of the declared keys one unit touches after bounding."""
        return self.contribution.groups

    def per_group(self, epsilon: float) -> float:
        """Return ``epsilon`` split over the groups one unit touches, rounded down exactly.

        A choice made per group (a quantile's exponential mechanism) runs at this epsilon, so
        that the ``g`` groups a unit can change compose to at most ``epsilon``.
        """
        return floor_float(Fraction(epsilon) / self.groups_touched)

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


@dataclass(frozen=True)
class _Share:
    """A measurement's share of the query's budget.

    ``epsilon`` sizes the geometric and exponential mechanisms (and the fixed-point grids);
    ``delta`` goes to partition selection or to a discrete Gaussian; ``rho``, when set, is the
    discrete Gaussian's zCDP parameter.
    """

    epsilon: float
    delta: float = 0.0
    rho: float | None = None


def _l2_squared(measure: Measure, sizing: _Sizing, contribution: Contribution) -> int:
    """Return the largest squared L2 change one unit makes to a measure's vector (grid units).

    Distinct-unit counts: one per cell touched. Row counts and sums: at most ``c`` rows per
    group and ``min(k, g' c)`` in all, each row moving its cell by at most ``r`` grid units, so
    the square is largest with the rows packed ``c`` to a group: ``r^2 (q c^2 + s^2)`` for
    ``min(k, g' c) = q c + s``.
    """
    if isinstance(measure, UnitCount):
        return contribution.cells
    rows, per = contribution.rows_l1, contribution.per_group
    row_units = sizing.units // rows
    full, rest = divmod(rows, per)
    return row_units * row_units * (full * per * per + rest * rest)


def _gaussian_noise(l2_squared: int, rho: float) -> GaussianNoise:
    """Return the discrete Gaussian of a vector of squared L2 sensitivity ``l2_squared`` at ``rho``.

    ``sigma`` and ``l2`` are rounded up so that ``l2^2 / (2 sigma^2) <= rho`` holds exactly.
    """
    sigma = sqrt_up(Fraction(l2_squared) / (2 * Fraction(rho)))
    l2 = sqrt_up(Fraction(l2_squared))
    while Fraction(l2) ** 2 / (2 * Fraction(sigma) ** 2) > Fraction(rho):
        sigma = math.nextafter(sigma, math.inf)
    return GaussianNoise(sigma, l2, l2_squared)


def _gaussian_event(noise: GaussianNoise) -> DiscreteGaussianEvent:
    dimension = max(1, min(2**31, noise.l2_squared))
    return DiscreteGaussianEvent(sigma=noise.sigma, sensitivity=noise.l2, dimension=dimension)


def _std(distribution: str, scale: float) -> float:
    return ErrorModel(distribution, noise_scale=scale).std


def _quantile_measurement(
    measure: QuantileCounts, name: str, kind: str, share: _Share, contribution: Contribution
) -> tuple[Measurement, PrivacyEvent]:
    sensitivity = max(measure.level, 1.0 - measure.level) * contribution.per_group
    m = Measurement(
        name,
        kind,
        measure.column,
        "exponential",
        share.epsilon,
        0.0,
        sensitivity,
        math.nan,
        measure,
        quantile=measure.level,
        why="the exponential mechanism chooses among candidate points",
    )
    return m, PureDPEvent(epsilon=share.epsilon)


def _measurement(
    measure: Measure,
    position: int,
    *,
    share: _Share,
    contribution: Contribution,
    values: dict[str, ValueSpec],
    gaussian_events: bool,
    why: str = "",
) -> tuple[Measurement, PrivacyEvent]:
    """One measurement with its event (from the mechanism's own event function: no dry run).

    With ``share.rho`` set the measurement is a discrete Gaussian; its event is the
    :class:`DiscreteGaussianEvent` when the session's accountant composes it
    (``gaussian_events``), else the ``(epsilon, delta)`` guarantee it was calibrated to.
    """
    column = getattr(measure, "column", None)
    mid = values[column].mid if column in values else 0.0
    name, kind = label_of(measure, mid), kind_of(measure)
    if isinstance(measure, QuantileCounts):
        return _quantile_measurement(measure, name, kind, share, contribution)
    sizing = _sizing(measure, share.epsilon, contribution, values)
    parts: dict[str, Any] = {
        "units": sizing.units,
        "unit_value": sizing.unit_value,
        "bits": sizing.bits,
        "result": f"__m{position}",
        "why": why,
    }
    if share.rho is not None:
        noise = _gaussian_noise(_l2_squared(measure, sizing, contribution), share.rho)
        event: PrivacyEvent = (
            _gaussian_event(noise)
            if gaussian_events
            else ApproxDPEvent(epsilon=share.epsilon, delta=share.delta)
        )
        m = Measurement(
            name,
            kind,
            column,
            "discrete gaussian",
            share.epsilon,
            share.delta,
            noise.l2 * sizing.unit_value,
            noise.sigma * sizing.unit_value,
            measure,
            gaussian=noise,
            **parts,
        )
        return m, event
    geometric = geometric_event(epsilon=share.epsilon, sensitivity=sizing.units)
    selection = isinstance(measure, UnitCount) and measure.selection
    event = ApproxDPEvent(epsilon=share.epsilon, delta=share.delta) if selection else geometric
    m = Measurement(
        name,
        kind,
        column,
        "geometric threshold" if selection else "geometric",
        share.epsilon,
        share.delta if selection else 0.0,
        sizing.units * sizing.unit_value,
        geometric.scale * sizing.unit_value,
        measure,
        **parts,
    )
    return m, event


def _noise_choice(
    measure: Measure,
    epsilon: float,
    delta: float,
    contribution: Contribution,
    values: dict[str, ValueSpec],
) -> tuple[float, float, str]:
    """``(Laplace std, Gaussian std, a sentence)`` of one measurement at (epsilon, delta).

    Both in grid units, the Gaussian calibrated through zCDP (:func:`zcdp_rho_for`).
    """
    sizing = _sizing(measure, epsilon, contribution, values)
    laplace = _std(
        "discrete_laplace", geometric_event(epsilon=epsilon, sensitivity=sizing.units).scale
    )
    noise = _gaussian_noise(
        _l2_squared(measure, sizing, contribution), zcdp_rho_for(epsilon, delta)
    )
    gaussian = _std("discrete_gaussian", noise.sigma)
    unit = sizing.unit_value
    sentence = (
        f"noise std {min(laplace, gaussian) * unit:.4g} against {max(laplace, gaussian) * unit:.4g}"
        f" for the {'Laplace' if gaussian < laplace else 'Gaussian'} at the same epsilon and "
        f"delta (one unit moves it by {sizing.units * unit:.4g} in L1, {noise.l2 * unit:.4g} in L2)"
    )
    return laplace, gaussian, sentence


def _gaussian_choice(
    candidates: Sequence[tuple[Measure, float]],
    delta: float,
    *,
    others: int,
    noise: Noise,
    contribution: Contribution,
    values: dict[str, ValueSpec],
) -> tuple[list[Measure], dict[Measure, str]]:
    """Return the measures that get a discrete Gaussian, and why each gets its noise.

    ``delta`` is shared evenly by partition selection (``others``) and the Gaussian measures.
    With ``noise="auto"``, ``k`` measures are Gaussian for the largest ``k`` such that at least
    ``k`` have the smaller std as a Gaussian with a ``1 / (others + k)`` share of delta (the
    ``k`` that gain most, by the ratio of the two stds).
    """
    if delta == 0.0 or noise == "laplace" or not candidates:
        why = "Laplace: the query's delta is 0 (pure DP)" if noise != "laplace" else ""
        return [], dict.fromkeys((m for m, _ in candidates), why)
    if noise == "gaussian":
        return [m for m, _ in candidates], dict.fromkeys(
            (m for m, _ in candidates), "discrete Gaussian, as the session asks"
        )
    verdicts: dict[Measure, tuple[float, float, str]] = {}
    for k in range(len(candidates), 0, -1):
        share = min(_split(delta, others + k))
        verdicts = {m: _noise_choice(m, eps, share, contribution, values) for m, eps in candidates}
        better = [m for m, (lap, gau, _) in verdicts.items() if gau < lap]
        if len(better) >= k:
            chosen = sorted(better, key=lambda m: verdicts[m][1] / verdicts[m][0])[:k]
            return chosen, {
                m: ("discrete Gaussian: " if m in chosen else "Laplace: ") + verdicts[m][2]
                for m in verdicts
            }
    return [], {m: "Laplace: " + sentence for m, (_, _, sentence) in verdicts.items()}


def make_plan(
    query: ParsedQuery,
    *,
    epsilon: float | None = None,
    delta: float = 0.0,
    rho: float | None = None,
    noise: Noise = "auto",
    gaussian_events: bool = False,
    integer_columns: frozenset[str] = frozenset(),
) -> Plan:
    r"""Plan ``query`` under ``(epsilon, delta)`` or ``rho``: split the budget, build the SQL.

    The query's budget is split evenly over its measurements. Each count or sum is the
    two-sided geometric mechanism on exact integers with scale ``Delta_1 / epsilon_i``
    (epsilon_i-DP for its L1 sensitivity: Ghosh, Roughgarden and Sundararajan 2009) or the
    discrete Gaussian with parameter ``sigma`` (``Delta_2^2 / (2 sigma^2)``-zCDP for its L2
    sensitivity: Canonne, Kamath and Steinke 2020, Theorem 14); a quantile is the exponential
    mechanism (McSherry and Talwar 2007; lecture 003). One unit touching ``m`` cells moves
    a vector of counts by ``m`` in L1 but ``sqrt(m)`` in L2, which is where the Gaussian wins.

    - ``(epsilon, delta)``: with ``delta = 0`` every count and sum is geometric (pure DP). With
      ``delta > 0``, ``noise="auto"`` gives a measurement the discrete Gaussian calibrated to
      ``(epsilon_i, delta_i)`` through zCDP (:func:`~dpcurator.accounting.zcdp_rho_for`) when
      its std is the smaller (each measurement says why, :attr:`Measurement.why`);
      ``"gaussian"`` always, ``"laplace"`` never. Delta is shared evenly by partition
      selection and the Gaussian measurements. By basic composition (lecture 002) the query is
      ``(epsilon, delta)``-DP under add/remove of one privacy unit.
    - ``rho`` (zCDP, Bun and Steinke 2016): every count and sum is a discrete Gaussian with a
      ``rho_i`` share, a quantile the exponential mechanism at ``epsilon_i = sqrt(2 rho_i)``
      (epsilon-DP is ``epsilon^2 / 2``-zCDP); the query is ``rho``-zCDP. Partition selection
      has no zCDP guarantee: group keys need public domains.

    The events of Gaussian measurements are :class:`~dpcurator.accounting.DiscreteGaussianEvent`
    when ``gaussian_events`` (the session's accountant composes them: zCDP, RDP), else the
    ``(epsilon_i, delta_i)`` they were calibrated to.

    Partition selection (Korolova et al. 2009; Wilson et al. 2020, "Differentially private SQL
    with bounded user contribution", Section 3) adds discrete Laplace noise of scale
    ``t = m / epsilon_s`` to each present group's count of distinct units (L1 sensitivity
    ``m``, the cells one unit touches) and keeps the groups whose noisy count reaches
    ``tau``, the smallest integer with ``m P[1 + Z >= tau] <= delta_s``: a group that exists
    only because of the removed unit has one unit, and at most ``m`` such groups exist, so the
    selection is ``(epsilon_s, delta_s)``-DP.

    Parameters
    ----------
    query : ParsedQuery
    epsilon : float, optional
        > 0; exactly one of ``epsilon`` and ``rho``.
    delta : float, default 0
        Needed (> 0) for partition selection; lets ``noise`` choose the Gaussian.
    rho : float, optional
        > 0: a zCDP query.
    noise : {"auto", "laplace", "gaussian"}, default "auto"
    gaussian_events : bool, default False
    integer_columns : frozenset of str, default empty
        The source's columns of integer types (lower-cased): their keys' domain tests skip
        testing that values are whole.

    Returns
    -------
    Plan

    Raises
    ------
    QueryError
        If group keys need partition selection and ``delta`` is 0 (or the query is a zCDP
        one), or the product of the public domains is too large.
    """
    if (epsilon is None) == (rho is None):
        raise InvalidParameterError(
            "epsilon", epsilon, "or rho must be given, not both: a query's budget is one of them"
        )
    if noise not in NOISES:
        raise InvalidParameterError("noise", noise, f"must be one of {', '.join(NOISES)}")
    dlt = check_delta(delta)
    keys = _keys(query, integer_columns)
    selection = any(k.domain is None for k in keys)
    if selection and (dlt == 0.0 or rho is not None):
        undeclared = [k.column for k in keys if k.domain is None]
        raise QueryError(
            f"GROUP BY {', '.join(undeclared)}: no public domain is declared, so the groups must "
            "be discovered privately (partition selection), which needs an (epsilon, delta) "
            "query with delta > 0: pass delta=1e-6 for example, or declare the domain of the "
            "column."
        )
    contribution = _contribution_of(query, keys)
    measures = _measures(query, selection, contribution)
    values = _values(query)
    by_column = {v.column: v for v in values}
    why: dict[Measure, str] = {}
    if rho is not None:
        shares = _rho_shares(measures, _check_query_rho(rho))
        why = {m: "discrete Gaussian: a zCDP query (rho)" for m in measures}
    else:
        assert epsilon is not None
        if noise == "gaussian" and dlt == 0.0:
            raise InvalidParameterError(
                "delta", delta, "must be > 0 for Gaussian noise on an (epsilon, delta) query"
            )
        shares, why = _epsilon_shares(
            measures,
            _check_query_epsilon(epsilon),
            dlt,
            noise=noise,
            contribution=contribution,
            values=by_column,
        )
    planned = [
        _measurement(
            measure,
            i,
            share=share,
            contribution=contribution,
            values=by_column,
            gaussian_events=gaussian_events,
            why=why.get(measure, ""),
        )
        for i, (measure, share) in enumerate(zip(measures, shares, strict=True))
    ]
    planned = joint_quantiles(planned, per_group=contribution.per_group, zcdp=rho is not None)
    measurements = tuple(m for m, _ in planned)
    threshold = None
    if selection:
        chosen = next(m for m in measurements if isinstance(m.measure, UnitCount))
        threshold = _selection_threshold(chosen.scale, chosen.units, chosen.delta)
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
        epsilon=math.nan if epsilon is None else float(epsilon),
        delta=dlt if any(m.delta > 0 for m in measurements) else 0.0,
        keys=keys,
        values=values,
        measurements=measurements,
        events=tuple(e for _, e in planned),
        statements=statements,
        threshold=threshold,
        contribution=contribution,
        rho=rho,
    )


def _epsilon_shares(
    measures: Sequence[Measure],
    epsilon: float,
    delta: float,
    *,
    noise: Noise,
    contribution: Contribution,
    values: dict[str, ValueSpec],
) -> tuple[list[_Share], dict[Measure, str]]:
    """Each measure's share of ``(epsilon, delta)``, and why each count or sum gets its noise."""
    epsilons = _split(epsilon, len(measures))
    selections = sum(isinstance(m, UnitCount) and m.selection for m in measures)
    candidates = [
        (m, e)
        for m, e in zip(measures, epsilons, strict=True)
        if not isinstance(m, QuantileCounts) and not (isinstance(m, UnitCount) and m.selection)
    ]
    gaussian, why = _gaussian_choice(
        candidates,
        delta,
        others=selections,
        noise=noise,
        contribution=contribution,
        values=values,
    )
    users = selections + len(gaussian)
    deltas = iter(_split(delta, users) if users else [])
    shares = []
    for m, e in zip(measures, epsilons, strict=True):
        if isinstance(m, UnitCount) and m.selection:
            shares.append(_Share(e, next(deltas)))
        elif m in gaussian:
            d = next(deltas)
            shares.append(_Share(e, d, zcdp_rho_for(e, d)))
        else:
            shares.append(_Share(e))
    return shares, why


def _rho_shares(measures: Sequence[Measure], rho: float) -> list[_Share]:
    """Each measure's share of ``rho``: a Gaussian's ``rho_i``, a quantile's ``sqrt(2 rho_i)``."""
    shares = []
    for r in _split(rho, len(measures)):
        e = math.sqrt(2.0 * r)
        while Fraction(e) ** 2 / 2 > Fraction(r):
            e = math.nextafter(e, 0.0)
        shares.append(_Share(e, 0.0, r))
    return shares


def _check_query_rho(rho: float) -> float:
    value = check_positive(rho, "rho")
    if not MIN_EPSILON**2 <= value <= MAX_EPSILON:
        raise InvalidParameterError("rho", rho, "must be in [2**-80, 2**20] for a curator query")
    return value


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


def _key(query: ParsedQuery, name: str, alias: str, integers: frozenset[str]) -> KeySpec:
    computed = query.computed.get(name)
    if computed is not None:
        return KeySpec(name, alias, computed.domain, expression=computed.expression)
    domain = query.table.column(name).domain
    return KeySpec(name, alias, domain, whole=name.lower() in integers)


def _keys(query: ParsedQuery, integers: frozenset[str]) -> tuple[KeySpec, ...]:
    keys = [_key(query, name, f"__k{i}", integers) for i, name in enumerate(query.group_by)]
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
