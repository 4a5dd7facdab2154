"""Tests of ``dpcurator._stats``: the Clopper-Pearson bounds shared by attacks and audit."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from dpcurator._stats import clopper_pearson_bounds
from dpcurator.audit import clopper_pearson
from dpcurator.errors import InvalidParameterError
from tests.privacy_check import clopper_pearson as reference


def test_vectorised_bounds_match_the_scalar_reference() -> None:
    ks = np.array([0, 1, 7, 50, 99, 100])
    lower, upper = clopper_pearson_bounds(ks, 100, 0.01)
    for k, lo, hi in zip(ks, lower, upper, strict=True):
        assert (lo, hi) == pytest.approx(reference(int(k), 100, 0.01), rel=1e-12)
        assert (lo, hi) == clopper_pearson(int(k), 100, 0.01)  # audit's scalar form: same numbers


def test_closed_forms_at_the_ends_and_broadcasting() -> None:
    # k = 0: UCB = 1 - alpha^(1/n); k = n: LCB = alpha^(1/n) (the Beta(1, n) quantiles).
    lower, upper = clopper_pearson_bounds([0, 20], [20, 20], 0.05)
    assert lower[0] == 0.0 and upper[1] == 1.0
    assert upper[0] == pytest.approx(1 - 0.05 ** (1 / 20), rel=1e-12)
    assert lower[1] == pytest.approx(0.05 ** (1 / 20), rel=1e-12)
    grid_lower, _ = clopper_pearson_bounds(np.array([[1], [2]]), np.array([10, 20, 40]), 0.1)
    assert grid_lower.shape == (2, 3)
    assert np.all(np.diff(grid_lower, axis=1) < 0)  # the same count in more trials: lower rate


@pytest.mark.statistical
def test_bounds_cover_at_the_nominal_level() -> None:
    # Exact coverage: P[UCB(K) < p] for K ~ Binomial(n, p) summed over the binomial pmf is at
    # most alpha for every p (computed, not sampled). Negative control: the plug-in estimate k/n
    # is below p about half of the time.
    n, alpha = 60, 0.05
    ks = np.arange(n + 1)
    lower, upper = clopper_pearson_bounds(ks, n, alpha)
    for p in np.linspace(0.01, 0.99, 49):
        pmf = stats.binom.pmf(ks, n, p)
        assert pmf[upper < p].sum() <= alpha + 1e-12
        assert pmf[lower > p].sum() <= alpha + 1e-12
    assert stats.binom.pmf(ks, n, 0.5)[ks / n < 0.5].sum() > 0.4


@pytest.mark.parametrize(
    ("successes", "trials", "alpha", "name"),
    [
        ([3, 11], 10, 0.05, "successes"),
        (-1, 10, 0.05, "successes"),
        (1.5, 10, 0.05, "successes"),
        ([True], 10, 0.05, "successes"),
        (1, 0, 0.05, "trials"),
        (1, [10, 0], 0.05, "trials"),
        (1, 10, 0.0, "alpha"),
        (1, 10, 1.0, "alpha"),
    ],
)
def test_bad_input_names_the_argument(
    successes: object, trials: object, alpha: float, name: str
) -> None:
    with pytest.raises(InvalidParameterError, match=name):
        clopper_pearson_bounds(successes, trials, alpha)  # type: ignore[arg-type]
