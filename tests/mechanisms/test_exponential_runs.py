"""The exponential mechanism over points in runs (issue 14): its exact law, both proposals."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from numpy.typing import NDArray
from scipy import stats

from dpcurator.accounting import PureDPEvent
from dpcurator.errors import InvalidParameterError
from dpcurator.mechanisms._exponential import (
    _bernoulli_length_exp,
    _log_bounds,
    _runs_indices,
    exponential_mechanism_runs,
)
from dpcurator.noise import InsecureSeededSource

LEVEL = 1e-4  # chi-square goodness-of-fit level
LENGTHS = [3, 1, 40, 2, 7, 1, 12]
UTILITIES = [0.0, 2.0, -1.5, 3.0, 1.0, 2.5, -3.0]


def _point_law(
    lengths: list[int], utilities: list[float], coefficient: float
) -> NDArray[np.float64]:
    """``P[p] ∝ exp(coefficient u_r(p))`` over all points (McSherry and Talwar 2007)."""
    u = np.repeat(np.array(utilities), lengths)
    w = np.exp(coefficient * (u - u.max()))
    return w / w.sum()


def _pvalue(points: NDArray[np.int64], law: NDArray[np.float64]) -> float:
    counts = np.bincount(points, minlength=law.size)
    return float(stats.chisquare(counts, law * points.size).pvalue)


@pytest.mark.statistical
@pytest.mark.parametrize("proposal", ["points", "runs", "auto"])
@pytest.mark.parametrize("monotonic", [False, True])
def test_runs_sample_the_exponential_mechanism_over_the_points(
    proposal: str, monotonic: bool
) -> None:
    eps, sensitivity, size = 1.0, 1.0, 30_000
    draws = _runs_indices(
        LENGTHS,
        UTILITIES,
        epsilon=eps,
        sensitivity=sensitivity,
        monotonic=monotonic,
        size=size,
        source=InsecureSeededSource(7),
        proposal=proposal,
    )
    assert draws.min() >= 0 and draws.max() < sum(LENGTHS)
    coefficient = eps / (sensitivity if monotonic else 2 * sensitivity)
    assert _pvalue(draws, _point_law(LENGTHS, UTILITIES, coefficient)) > LEVEL
    # Negative controls: a mechanism 25 % less private, and one that ignores the lengths.
    assert _pvalue(draws, _point_law(LENGTHS, UTILITIES, 1.25 * coefficient)) < LEVEL
    ones = [1] * len(LENGTHS)
    per_run = np.repeat(_point_law(ones, UTILITIES, coefficient) / LENGTHS, LENGTHS)
    assert _pvalue(draws, per_run) < LEVEL


@pytest.mark.statistical
def test_long_runs_far_from_the_best_keep_their_weight() -> None:
    """A run of 2**20 points 10 utility units below a single best point: both are likely."""
    lengths, utilities = [1, 2**20], [0.0, -10.0]
    draws = _runs_indices(
        lengths,
        utilities,
        epsilon=2.0,
        sensitivity=1.0,
        monotonic=False,
        size=20_000,
        source=InsecureSeededSource(3),
    )
    p_best = 1.0 / (1.0 + 2**20 * math.exp(-10.0))  # about 0.0207
    hits = int(np.count_nonzero(draws == 0))
    assert stats.binomtest(hits, draws.size, p_best).pvalue > LEVEL
    assert stats.binomtest(hits, draws.size, 1.0 / (1.0 + 2**20 * math.exp(-9.0))).pvalue < LEVEL


@pytest.mark.statistical
@pytest.mark.parametrize("length", [2, 3, 1000, 2**20 - 1])
def test_length_times_exp_is_exact(length: int) -> None:
    """Bernoulli(L exp(-x)) for x = ln L + 0.7 (rounded to a dyadic): rate exp(-0.7)."""
    exponent = Fraction(math.log(length) + 0.7)
    source = InsecureSeededSource(length)
    hits = sum(_bernoulli_length_exp(length, exponent, source) for _ in range(20_000))
    p = length * math.exp(-float(exponent))
    assert stats.binomtest(hits, 20_000, p).pvalue > LEVEL
    assert stats.binomtest(hits, 20_000, p * 0.94).pvalue < LEVEL  # negative control


@pytest.mark.parametrize("value", [2, 3, 7, 10, 2**20 + 5, 999_983])
def test_log_bounds_enclose_the_logarithm(value: int) -> None:
    lo, hi = _log_bounds(value, 80)
    assert hi - lo <= Fraction(1, 2**80)
    assert lo <= Fraction(math.log(value)) + Fraction(1, 2**40)
    assert hi >= Fraction(math.log(value)) - Fraction(1, 2**40)
    # exp(lo) <= value <= exp(hi), with exp by its alternating-free Taylor lower bound.
    assert sum(lo**k / math.factorial(k) for k in range(60)) <= value


def test_release_and_bad_parameters() -> None:
    release = exponential_mechanism_runs(
        [5, 1], [0.0, 1.0], epsilon=0.5, sensitivity=1.0, source=InsecureSeededSource(0)
    )
    assert 0 <= release.value < 6 and release.event == PureDPEvent(epsilon=0.5)
    with pytest.raises(InvalidParameterError, match="lengths"):
        exponential_mechanism_runs([0, 1], [0.0, 1.0], epsilon=1.0, sensitivity=1.0)
    with pytest.raises(InvalidParameterError, match="lengths"):
        exponential_mechanism_runs([1], [0.0, 1.0], epsilon=1.0, sensitivity=1.0)
    with pytest.raises(InvalidParameterError, match="utilities"):
        exponential_mechanism_runs([], [], epsilon=1.0, sensitivity=1.0)
