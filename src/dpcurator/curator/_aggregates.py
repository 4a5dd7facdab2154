"""Typed aggregates: one class per aggregate function an analyst may write.

The parser (:mod:`dpcurator.curator._sql`) turns each aggregate of a query into one of these
frozen dataclasses; the planner asks each what it measures (:func:`needs`) and the release step
turns the noisy measurements into its released value (:func:`release`). Dispatch is on the type,
and :func:`typing.assert_never` makes mypy catch a missed case: adding an aggregate means adding
a class here and its two branches.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, assert_never

from dpcurator.curator._estimates import (
    Measured,
    Noisy,
    Output,
    chosen,
    derived_sum,
    mean,
    variance,
)
from dpcurator.curator._measures import (
    ColumnCount,
    Measure,
    QuantileCounts,
    RowCount,
    UnitCount,
    ValueSum,
)

if TYPE_CHECKING:
    from dpcurator.curator._table import Table

__all__ = [
    "Aggregate",
    "Count",
    "CountColumn",
    "CountUnits",
    "Histogram",
    "Mean",
    "Quantile",
    "Sum",
    "Variance",
    "count_of",
    "needs",
    "release",
]


@dataclass(frozen=True, kw_only=True)
class Count:
    """``COUNT(*)``: rows per group."""

    alias: str
    text: str

    @property
    def column(self) -> None:
        """No column: every row counts."""
        return None


@dataclass(frozen=True, kw_only=True)
class CountColumn:
    """``COUNT(column)``: rows whose ``column`` is not NULL."""

    column: str
    alias: str
    text: str


@dataclass(frozen=True, kw_only=True)
class CountUnits:
    """``COUNT(DISTINCT <privacy unit>)``: privacy units per group."""

    column: str
    alias: str
    text: str


@dataclass(frozen=True, kw_only=True)
class Sum:
    """``SUM(column)`` of values clamped into the column's declared bounds."""

    column: str
    alias: str
    text: str


@dataclass(frozen=True, kw_only=True)
class Mean:
    """``AVG(column)`` of clamped values."""

    column: str
    alias: str
    text: str


@dataclass(frozen=True, kw_only=True)
class Variance:
    """``VARIANCE`` / ``VAR_POP`` (``root=False``) or ``STDDEV`` / ``STDDEV_POP`` (``root=True``).

    ``population`` selects the population formula (divide by ``n``) over the sample one
    (``n - 1``).
    """

    column: str
    alias: str
    text: str
    population: bool = False
    root: bool = False


@dataclass(frozen=True, kw_only=True)
class Quantile:
    """``QUANTILE(column, level)``, ``MEDIAN``, ``PERCENTILE_CONT``: a level in ``[0, 1]``."""

    column: str
    alias: str
    text: str
    level: float


@dataclass(frozen=True, kw_only=True)
class Histogram:
    """``HISTOGRAM(column [, edges ...])``: counts per bin of ``edges`` (the query's only one)."""

    column: str
    alias: str
    text: str
    edges: tuple[float, ...]


Aggregate = Count | CountColumn | CountUnits | Sum | Mean | Variance | Quantile | Histogram
"""Any aggregate of a query."""


def needs(aggregate: Aggregate, table: Table) -> tuple[Measure, ...]:
    """Return the measures ``aggregate`` is computed from (a SUM's are chosen by the plan).

    A count of a column's non-NULL rows is ``COUNT(*)`` when the column is declared NOT NULL.

    >>> from dpcurator.curator import Column, Table
    >>> t = Table("t", None, columns=[Column("x", lower=0, upper=1, nullable=False)])
    >>> needs(Variance(column="x", alias="v", text="VARIANCE(x)"), t)
    (RowCount(), ValueSum(column='x', encoding='centred'), ValueSum(column='x', encoding='squares'))
    """
    match aggregate:
        case Count() | Histogram():
            return (RowCount(),)
        case CountUnits():
            return (UnitCount(),)
        case CountColumn(column=column):
            return (count_of(column, table),)
        case Mean(column=column):
            return (count_of(column, table), ValueSum(column, "centred"))
        case Variance(column=column):
            count = count_of(column, table)
            return (count, ValueSum(column, "centred"), ValueSum(column, "squares"))
        case Quantile(column=column, level=level):
            return (QuantileCounts(column, level),)
        case Sum():
            return ()
        case _:
            assert_never(aggregate)


def count_of(column: str, table: Table) -> Measure:
    """Return the count of ``column``'s non-NULL rows (``COUNT(*)`` if declared NOT NULL)."""
    return ColumnCount(column) if table.column(column).nullable else RowCount()


def release(aggregate: Aggregate, measured: Measured) -> Output:
    """Return the released value of ``aggregate`` from the query's noisy measurements."""
    match aggregate:
        case Count() | Histogram():
            return measured.direct(measured.count_for(None), integral=True)
        case CountUnits():
            return measured.direct(_unit_count(measured), integral=True)
        case CountColumn(column=column):
            return measured.direct(measured.count_for(column), integral=True)
        case Sum(column=column):
            return _sum(column, measured)
        case Mean(column=column):
            centred = measured.noisy[ValueSum(column, "centred")]
            spec = measured.values[column]
            return mean(spec, measured.count_for(column), centred, measured.z)
        case Variance(column=column, population=population, root=root):
            return variance(
                measured.values[column],
                measured.count_for(column),
                measured.noisy[ValueSum(column, "centred")],
                measured.noisy[ValueSum(column, "squares")],
                measured.z,
                sample=not population,
                root=root,
            )
        case Quantile(column=column, level=level):
            return chosen(measured.quantiles[QuantileCounts(column, level)])
        case _:
            assert_never(aggregate)


def _unit_count(measured: Measured) -> Noisy:
    selected = UnitCount(selection=True)
    return measured.noisy[selected if selected in measured.noisy else UnitCount()]


def _sum(column: str, measured: Measured) -> Output:
    raw = ValueSum(column, "raw")
    if raw in measured.noisy:
        return measured.direct(measured.noisy[raw])
    centred = measured.noisy[ValueSum(column, "centred")]
    mid = measured.values[column].mid
    return derived_sum(measured, mid, measured.count_for(column), centred)
