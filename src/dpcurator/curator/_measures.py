"""What a query measures with noise: one small class per kind of noisy measurement.

Aggregates (:mod:`dpcurator.curator._aggregates`) say which measures they need; equal measures
are measured once and shared (AVG and SUM of a column share its count and centred sum). Each
measure is a per-group vector of exact integers over the bounded rows (the geometric mechanism
adds noise to it), except :class:`QuantileCounts`, per-group counts of a column's values in
public buckets, from which the exponential mechanism picks a quantile (several quantiles of one
column jointly: :func:`joint_quantiles`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from fractions import Fraction
from typing import TYPE_CHECKING, assert_never

from dpcurator._validation import floor_float, sqrt_down
from dpcurator.noise._fixed_point import EncodingKind

if TYPE_CHECKING:
    from dpcurator.accounting import PrivacyEvent
    from dpcurator.curator._specs import Measurement

__all__ = [
    "JOINT",
    "ColumnCount",
    "Measure",
    "QuantileCounts",
    "RowCount",
    "UnitCount",
    "ValueSum",
    "joint_epsilon",
    "joint_quantiles",
    "kind_of",
    "label_of",
]


@dataclass(frozen=True)
class RowCount:
    """Bounded rows per group: ``COUNT(*)``."""


@dataclass(frozen=True)
class UnitCount:
    """Privacy units per group: ``COUNT(DISTINCT unit)``.

    With ``selection``, the count that partition selection thresholds (the groups are then
    discovered, not public).
    """

    selection: bool = False


@dataclass(frozen=True)
class ColumnCount:
    """Bounded rows per group whose ``column`` is not NULL: ``COUNT(column)``."""

    column: str


@dataclass(frozen=True)
class ValueSum:
    """The exact integer sum of a clamped column's fixed-point indices per group.

    ``encoding`` (see :class:`~dpcurator.noise.FixedPointEncoding`): ``"centred"`` sums
    ``x - mid``, ``"squares"`` sums ``(x - mid)**2``, ``"raw"`` sums ``x``.
    """

    column: str
    encoding: EncodingKind


@dataclass(frozen=True)
class QuantileCounts:
    """Rows per public bucket of ``column``'s range, per group, for quantile ``level``."""

    column: str
    level: float


Measure = RowCount | UnitCount | ColumnCount | ValueSum | QuantileCounts
"""Any noisy measurement of a query."""

_SUM_KINDS: dict[EncodingKind, str] = {
    "centred": "centered_sum",
    "squares": "centered_squares",
    "raw": "sum",
}


def kind_of(measure: Measure) -> str:
    """Return the measurement's kind as reported in a release's budget split.

    >>> kind_of(ValueSum("income", "centred")), kind_of(UnitCount(selection=True))
    ('centered_sum', 'selection')
    """
    match measure:
        case RowCount():
            return "count"
        case UnitCount(selection=selection):
            return "selection" if selection else "count_distinct"
        case ColumnCount():
            return "count_column"
        case ValueSum(encoding=encoding):
            return _SUM_KINDS[encoding]
        case QuantileCounts():
            return "quantile"
        case _:
            assert_never(measure)


def label_of(measure: Measure, mid: float = 0.0) -> str:
    """Return what the measurement measures, in SQL-like words (``mid``: a centred sum's).

    >>> label_of(ValueSum("income", "centred"), mid=500.0)
    'SUM(income - 500)'
    """
    match measure:
        case RowCount():
            return "COUNT(*)"
        case UnitCount(selection=True):
            return "partition selection: COUNT(DISTINCT unit) >= threshold"
        case UnitCount():
            return "COUNT(DISTINCT unit)"
        case ColumnCount(column=column):
            return f"COUNT({column})"
        case ValueSum(column=column, encoding="centred"):
            return f"SUM({column} - {mid:g})"
        case ValueSum(column=column, encoding="squares"):
            return f"SUM(({column} - {mid:g})^2)"
        case ValueSum(column=column):
            return f"SUM({column})"
        case QuantileCounts(column=column, level=level):
            return f"QUANTILE({column}, {level:g})"
        case _:
            assert_never(measure)


JOINT = "joint exponential"
"""The mechanism of quantiles of one column released jointly (:func:`joint_quantiles`)."""


def joint_quantiles(
    planned: Sequence[tuple[Measurement, PrivacyEvent]], *, per_group: int, zcdp: bool
) -> list[tuple[Measurement, PrivacyEvent]]:
    r"""Return the plan's measurements with each column's quantiles released jointly.

    Where a query asks ``m >= 2`` quantiles of one column, their ``m`` shares are pooled into
    one exponential mechanism over sorted ``m``-tuples
    (:func:`~dpcurator.mechanisms._joint_quantiles.joint_quantile_mechanism`, JointExp) at

    .. math:: \epsilon_J = \sum_i \epsilon_i \ \text{(pure DP)}, \qquad
              \epsilon_J = \sqrt{\textstyle\sum_i \epsilon_i^2} \ \text{(a zCDP query: }
              \epsilon_J^2 / 2 = \textstyle\sum_i \epsilon_i^2 / 2 \le \sum_i \rho_i),

    rounded down, charged once: the first level's event is ``PureDPEvent(epsilon_J)``, the
    others' :class:`~dpcurator.accounting.NoOpEvent` (so every accountant composes the one
    mechanism that runs, never ``m`` mechanisms that do not). Each level's row reports
    ``epsilon_J / m`` and the joint utility's sensitivity
    ``c (1 - min_j (q_j - q_{j-1}))`` (``c`` rows per unit and group), with which the
    single-quantile rank-error formula ``(2 Delta / epsilon) ln(|C| / beta)`` over ``|C|``
    points bounds each joint quantile's rank error too: the joint bound
    ``(2 Delta / epsilon_J)(ln C(|C| + m - 1, m) + ln(1 / beta))`` is at most
    ``(2 Delta m / epsilon_J)(ln |C| + ln(1 / beta))``. (The draw chooses among positions
    within the points, which break ties: :func:`~dpcurator.curator._measure._joint_runs`; their
    number adds at most ``m 2**-20`` to ``ln C(|C| + m - 1, m)`` for at most ``2**20`` rows per
    bucket, below the slack ``(m - 1) ln(1 / beta)``.)

    >>> from dpcurator.accounting import PureDPEvent
    >>> from dpcurator.curator._specs import Measurement
    >>> def row(q: float) -> tuple[Measurement, PureDPEvent]:
    ...     m = Measurement(f"QUANTILE(x, {q})", "quantile", "x", "exponential", 0.25, 0.0,
    ...                     max(q, 1 - q), float("nan"), QuantileCounts("x", q), quantile=q)
    ...     return m, PureDPEvent(epsilon=0.25)
    >>> out = joint_quantiles([row(0.25), row(0.5), row(0.75)], per_group=1, zcdp=False)
    >>> [(m.mechanism, m.epsilon, m.sensitivity) for m, _ in out][0], [e for _, e in out][1:]
    (('joint exponential', 0.25, 0.75), [NoOpEvent(), NoOpEvent()])
    >>> out[0][1]
    PureDPEvent(epsilon=0.75)
    """
    from dpcurator.accounting import NoOpEvent, PureDPEvent  # noqa: PLC0415 - light module
    from dpcurator.mechanisms._joint_quantiles import (  # noqa: PLC0415
        joint_quantile_sensitivity,
    )

    columns: dict[str, list[int]] = {}
    for i, (m, _) in enumerate(planned):
        if isinstance(m.measure, QuantileCounts):
            columns.setdefault(m.measure.column, []).append(i)
    out = list(planned)
    for column, rows in columns.items():
        if len(rows) < 2:
            continue
        shares = [Fraction(planned[i][0].epsilon) for i in rows]
        measures = [planned[i][0].measure for i in rows]
        levels = sorted(q.level for q in measures if isinstance(q, QuantileCounts))
        squares = sum((s * s for s in shares), Fraction(0))
        total = sqrt_down(squares) if zcdp else floor_float(sum(shares, Fraction(0)))
        each = floor_float(Fraction(total) / len(rows))
        sensitivity = joint_quantile_sensitivity(levels, rows=per_group)
        why = (
            f"released jointly with the other quantiles of {column} "
            f"({', '.join(f'{q:g}' for q in levels)}) by one exponential mechanism over sorted "
            f"tuples at epsilon {total:.6g} (JointExp, Gillenwater, Joseph and Kulesza 2021)"
        )
        for position, i in enumerate(rows):
            m, _ = planned[i]
            joint = replace(m, mechanism=JOINT, epsilon=each, sensitivity=sensitivity, why=why)
            event: PrivacyEvent = PureDPEvent(epsilon=total) if position == 0 else NoOpEvent()
            out[i] = (joint, event)
    return out


def joint_epsilon(events: Sequence[PrivacyEvent]) -> float:
    """Return the epsilon of the one mechanism of a joint group (its first level's event)."""
    from dpcurator.accounting import PureDPEvent  # noqa: PLC0415
    from dpcurator.errors import InternalError  # noqa: PLC0415

    for event in events:
        if isinstance(event, PureDPEvent):
            return float(event.epsilon)
    raise InternalError("A joint group of quantiles has no PureDPEvent.")
