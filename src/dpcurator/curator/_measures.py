"""What a query measures with noise: one small class per kind of noisy measurement.

Aggregates (:mod:`dpcurator.curator._aggregates`) say which measures they need; equal measures
are measured once and shared (AVG and SUM of a column share its count and centred sum). Each
measure is a per-group vector of exact integers over the bounded rows (the geometric mechanism
adds noise to it), except :class:`QuantileCounts`, per-group counts of a column's values in
public buckets, from which the exponential mechanism picks a quantile.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import assert_never

from dpcurator.noise._fixed_point import EncodingKind

__all__ = [
    "ColumnCount",
    "Measure",
    "QuantileCounts",
    "RowCount",
    "UnitCount",
    "ValueSum",
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
