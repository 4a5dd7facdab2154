"""From noisy measurements to released values, with standard deviations and intervals.

Every function here post-processes noisy measurements (and public bounds) only:

- counts and sums measured directly: the exact interval of the two-sided geometric noise;
- SUM derived as ``mid * N + S`` from a centred sum ``S`` and a count ``N``: standard deviation
  exact (independent noises), interval by a union bound over both noises (coverage at least the
  level);
- AVG, VARIANCE, STDDEV: ratios of noisy measurements; standard deviation by the delta method and
  a normal interval, marked approximate;
- quantiles: chosen by the exponential mechanism (several of one column jointly), no standard
  deviation (NaN).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpcurator.curator._measures import ColumnCount, Measure, QuantileCounts, RowCount, UnitCount
from dpcurator.curator._specs import ValueSpec
from dpcurator.curator._table import Table
from dpcurator.errors import InternalError
from dpcurator.mechanisms import ErrorModel

__all__ = ["Measured", "Noisy", "Output", "quantile_rank_error"]

FloatArray = NDArray[np.float64]


@dataclass
class Output:
    """A released column: values with their standard deviation and interval."""

    value: NDArray[Any]
    std: FloatArray
    low: FloatArray
    high: FloatArray
    exact: str  # "exact", "conservative", "approximate" or "none"


class HalfWidths(Mapping[float, float]):
    """An error model's interval half-widths at the given levels, each computed when first read.

    A release reads the one at its confidence; an average's union bound may read the others.
    """

    def __init__(self, error: ErrorModel, levels: Sequence[float]) -> None:
        self._error = error
        self._levels = tuple(levels)
        self._known: dict[float, float] = {}

    def __getitem__(self, level: float) -> float:
        if level not in self._levels:
            raise KeyError(level)
        if level not in self._known:
            self._known[level] = self._error.half_width(level)
        return self._known[level]

    def __iter__(self) -> Iterator[float]:
        return iter(self._levels)

    def __len__(self) -> int:
        return len(self._levels)


@dataclass
class Noisy:
    """A noisy measurement per group, in its units, with its noise's std and half-widths."""

    value: NDArray[np.int64]
    unit: float
    std: float  # in units
    half: Mapping[float, float]  # level -> half-width in units

    def real(self) -> FloatArray:
        """Return the values in the column's units."""
        return self.value.astype(np.float64) * self.unit

    def keep(self, kept: NDArray[np.bool_]) -> None:
        """Keep the groups partition selection kept."""
        self.value = self.value[kept]


@dataclass
class Measured:
    """The noisy measurements of one query, and what its estimates need."""

    table: Table
    values: Mapping[str, ValueSpec]
    confidence: float
    noisy: dict[Measure, Noisy] = field(default_factory=dict)
    quantiles: dict[QuantileCounts, FloatArray] = field(default_factory=dict)

    @property
    def miss(self) -> float:
        """The interval's miss probability."""
        return 1.0 - self.confidence

    @property
    def levels(self) -> list[float]:
        """The levels at which a union bound over two noises may split the miss probability."""
        return [self.confidence, *(1.0 - a for a in self.splits)]

    @property
    def splits(self) -> list[float]:
        """Shares of the miss probability tried by union bounds."""
        return [self.miss * t for t in np.linspace(0.05, 0.95, 19)]

    @property
    def z(self) -> float:
        """The normal quantile of the level."""
        return statistics.NormalDist().inv_cdf(0.5 + self.confidence / 2.0)

    def count_for(self, column: str | None) -> Noisy:
        """Return the noisy count that divides ``column``'s sums (its non-NULL rows)."""
        if column is not None and self.table.column(column).nullable:
            return self.noisy[ColumnCount(column)]
        for measure in (RowCount(), UnitCount(), UnitCount(selection=True)):
            if measure in self.noisy:
                return self.noisy[measure]
        raise InternalError("The plan has no count for this aggregate.")

    def direct(self, item: Noisy, *, integral: bool = False) -> Output:
        """Release a measurement as it is, with its exact noise interval."""
        value = item.real()
        size = value.size
        half = item.half.get(self.confidence, math.nan) * item.unit
        out = Output(
            value, np.full(size, item.std * item.unit), value - half, value + half, "exact"
        )
        if integral:
            out.value = item.value.copy()
        return out


def derived_sum(measured: Measured, mid: float, count: Noisy, centred: Noisy) -> Output:
    """``mid * N + S``: exact std; interval by the best union-bound split of the miss rate."""
    value = mid * count.real() + centred.real()
    std = math.sqrt((mid * count.std * count.unit) ** 2 + (centred.std * centred.unit) ** 2)
    half = min(
        abs(mid) * count.half.get(1.0 - a, math.nan) * count.unit
        + centred.half.get(1.0 - (measured.miss - a), math.nan) * centred.unit
        for a in measured.splits
    )
    size = value.size
    return Output(value, np.full(size, std), value - half, value + half, "conservative")


def mean(spec: ValueSpec, count: Noisy, centred: Noisy, z: float) -> Output:
    """``mid + clip(S / N)`` with a delta-method standard deviation."""
    n = np.maximum(count.real(), 1.0)
    s = centred.real()
    mean_c = np.clip(s / n, -spec.half, spec.half)
    value = spec.mid + mean_c
    var_s = (centred.std * centred.unit) ** 2
    var_n = (count.std * count.unit) ** 2
    std = np.sqrt(var_s + mean_c**2 * var_n) / n
    low = np.clip(value - z * std, spec.lower, spec.upper)
    high = np.clip(value + z * std, spec.lower, spec.upper)
    return Output(value, std, low, high, "approximate")


def variance(
    spec: ValueSpec,
    count: Noisy,
    centred: Noisy,
    squares: Noisy,
    z: float,
    *,
    sample: bool,
    root: bool,
) -> Output:
    """``factor * (Q/N - (S/N)**2)`` clipped into ``[0, half**2]``; its root for STDDEV."""
    n = np.maximum(count.real(), 2.0)
    s = centred.real()
    q = squares.real()
    factor = n / (n - 1.0) if sample else np.ones_like(n)
    pop = q / n - (s / n) ** 2
    cap = spec.half**2
    var = np.clip(pop, 0.0, cap) * factor
    # Delta method on var = factor * (Q/N - S^2/N^2).
    var_q = (squares.std * squares.unit) ** 2
    var_s = (centred.std * centred.unit) ** 2
    var_n = (count.std * count.unit) ** 2
    d_q = factor / n
    d_s = factor * (-2.0 * s / n**2)
    d_n = factor * (-q / n**2 + 2.0 * s**2 / n**3)
    std = np.sqrt(d_q**2 * var_q + d_s**2 * var_s + d_n**2 * var_n)
    upper = cap * factor
    if root:
        value = np.sqrt(var)
        std = std / (2.0 * np.maximum(value, math.sqrt(cap) * 1e-3))
        top = np.sqrt(upper)
        low, high = np.clip(value - z * std, 0.0, top), np.clip(value + z * std, 0.0, top)
        return Output(value, std, low, high, "approximate")
    low, high = np.clip(var - z * std, 0.0, upper), np.clip(var + z * std, 0.0, upper)
    return Output(var, std, low, high, "approximate")


def chosen(values: FloatArray) -> Output:
    """Quantiles chosen by the exponential mechanism: no standard deviation or interval.

    Their error statement is a bound on their rank error (:func:`quantile_rank_error`).
    """
    nan = np.full(values.size, math.nan)
    return Output(values, nan, nan.copy(), nan.copy(), "none")


def quantile_rank_error(epsilon: float, sensitivity: float, candidates: int, level: float) -> float:
    r"""Return the rank error that the exponential mechanism exceeds w.p. below ``1 - level``.

    With utility ``u(c) = -|rank(c) - q n|`` of sensitivity ``Delta`` (``rank``: the curator's
    mid-rank, the values below ``c`` plus half of those at it), the mechanism's choice
    has ``u >= OPT - (2 Delta / epsilon)(ln |C| + t)`` but with probability ``e^{-t}``
    (McSherry and Talwar 2007; Dwork and Roth 2014, Theorem 3.11): its rank is within
    ``(2 Delta / epsilon) ln(|C| / (1 - level))`` of the rank error of the best candidate.
    ``|C|`` counts every candidate point, ``quantile_buckets + 1`` (about ``2**20``: see
    :func:`~dpcurator.curator._statements.quantile_buckets`), even though the choice is
    computed per run of points between data values.

    Quantiles of one column released jointly (JointExp,
    :func:`~dpcurator.mechanisms.joint_quantile_mechanism`, at ``epsilon_J`` with sensitivity
    ``Delta_J``) get the same formula at ``epsilon_J / m`` and ``Delta_J``: with probability
    ``level`` every one of the ``m`` rank errors is at most
    ``-OPT + (2 Delta_J / epsilon_J)(ln C(|C| + m - 1, m) + ln(1 / (1 - level)))``, which is
    below ``-OPT + (2 Delta_J m / epsilon_J) ln(|C| / (1 - level))`` since
    ``C(|C| + m - 1, m) <= |C|**m``; ``-OPT`` is at most the sum of the levels' best rank errors.

    >>> round(quantile_rank_error(1.0, 1.0, 1025, 0.95), 2)
    19.86
    >>> round(quantile_rank_error(1.0, 1.0, 1_000_001, 0.95), 2)  # wages in [0, 250,000]
    33.62
    """
    return 2.0 * sensitivity / epsilon * math.log(candidates / (1.0 - level))
