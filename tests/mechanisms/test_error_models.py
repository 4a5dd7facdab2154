"""Error models against the mechanisms' actual outputs: L1 error, tails, std, coverage.

"Zero the signal, measure the noise": each test releases a known statistic many times (one
vectorised call, the same parameters per coordinate, checked) and compares the empirical error
with the model, within a tolerance derived from theory (CLT for means, the variance of a sample
variance, binomial for coverages), at about five standard errors. Each test has a negative
control: a wrong claim (off by a few percent, or a narrower interval) must be rejected.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pytest
from numpy.typing import NDArray

from dpcurator.mechanisms import (
    ErrorModel,
    Release,
    discrete_gaussian_mechanism,
    gaussian_mechanism,
    geometric_mechanism,
    laplace_mechanism,
)
from dpcurator.noise import InsecureSeededSource

pytestmark = pytest.mark.statistical

R = 100_000  # releases per statistical check
Z = 5.0  # tolerance in standard errors


def _binomial_tolerance(p: float, n: int) -> float:
    return Z * math.sqrt(p * (1 - p) / n)


def test_laplace_expected_l1_error_is_k_delta_over_epsilon() -> None:
    # Lecture 000: E||M(D) - f(D)||_1 = k Delta / eps. k = 10 coordinates, off the grid.
    k, repeats, epsilon, sensitivity = 10, 20_000, 0.5, 2.0
    truth = np.linspace(-3.3, 7.1, k)
    values = np.tile(truth, (repeats, 1))
    release = laplace_mechanism(
        values,
        epsilon=epsilon,
        sensitivity=sensitivity,
        changed_coordinates=k,
        source=InsecureSeededSource(31),
    )
    single = laplace_mechanism(truth, epsilon=epsilon, sensitivity=sensitivity)
    assert release.event == single.event  # each row is one 10-coordinate release
    l1 = np.abs(release.value - truth).sum(axis=1)
    claim = k * sensitivity / epsilon
    # Var|Lap(b)| = b^2, so the L1 norm of k coordinates has standard deviation sqrt(k) b.
    standard_error = math.sqrt(k) * (sensitivity / epsilon) / math.sqrt(repeats)
    assert abs(l1.mean() - claim) < Z * standard_error
    assert single.error is not None
    assert abs(l1.mean() - single.error.expected_l1) < Z * standard_error
    # Negative control: a claim 5 % off is rejected.
    assert abs(l1.mean() - 1.05 * claim) > Z * standard_error


def test_laplace_tail_bound_holds_and_is_tight() -> None:
    # Lecture 000: P(||M(D) - f(D)||_inf > (Delta/eps) ln(k/beta)) < beta.
    k, repeats, epsilon, beta = 10, 20_000, 1.0, 0.1
    truth = np.linspace(0.05, 0.95, k)
    release = laplace_mechanism(
        np.tile(truth, (repeats, 1)),
        epsilon=epsilon,
        sensitivity=1.0,
        changed_coordinates=k,
        source=InsecureSeededSource(32),
    )
    model = laplace_mechanism(truth, epsilon=epsilon, sensitivity=1.0).error
    assert model is not None
    radius = model.tail_bound(beta)
    assert radius <= (1.0 / epsilon) * math.log(k / beta) + 2 * model.unit
    sup = np.abs(release.value - truth).max(axis=1)
    tolerance = _binomial_tolerance(beta, repeats)
    assert (sup > radius).mean() <= beta + tolerance
    assert (sup > radius).mean() >= beta - 2 * tolerance  # exact tail: not loose either
    # Negative control: a radius 20 % smaller fails the guarantee.
    assert (sup > 0.8 * radius).mean() > beta + tolerance


Sampler = Callable[[NDArray[np.float64], int], Release[NDArray[np.float64]]]


def _real_laplace(values: NDArray[np.float64], seed: int) -> Release[NDArray[np.float64]]:
    return laplace_mechanism(
        values,
        epsilon=0.5,
        sensitivity=1.5,
        changed_coordinates=1,
        source=InsecureSeededSource(seed),
    )


def _real_gaussian(values: NDArray[np.float64], seed: int) -> Release[NDArray[np.float64]]:
    return gaussian_mechanism(
        values,
        epsilon=1.0,
        delta=1e-6,
        sensitivity=0.25,
        changed_coordinates=1,
        source=InsecureSeededSource(seed),
    )


def _geometric(values: NDArray[np.float64], seed: int) -> Release[NDArray[np.float64]]:
    release = geometric_mechanism(
        values.astype(np.int64), epsilon=0.3, sensitivity=1, source=InsecureSeededSource(seed)
    )
    return Release(release.value.astype(np.float64), release.event, release.error)


def _small_discrete_gaussian(
    values: NDArray[np.float64], seed: int
) -> Release[NDArray[np.float64]]:
    release = discrete_gaussian_mechanism(
        values.astype(np.int64), sigma=1.7, source=InsecureSeededSource(seed)
    )
    return Release(release.value.astype(np.float64), release.event, release.error)


@pytest.mark.parametrize(
    ("sampler", "truth", "kurtosis"),
    [
        (_real_laplace, 12.34567, 3.0),
        (_real_gaussian, -0.123, 0.0),
        (_geometric, 40.0, 3.0),
        (_small_discrete_gaussian, 7.0, 0.0),
    ],
    ids=["laplace", "gaussian", "geometric", "discrete-gaussian"],
)
def test_std_and_confidence_interval_coverage(
    sampler: Sampler, truth: float, kurtosis: float
) -> None:
    release = sampler(np.full(R, truth), 33)
    model = release.error
    assert model is not None
    noise = release.value - truth
    # Standard deviation: the sample variance has relative standard error sqrt((kurt + 2) / R).
    relative_se = math.sqrt((kurtosis + 2) / R) / 2
    assert abs(noise.std() / model.std - 1) < Z * relative_se
    assert abs(noise.std() / (1.05 * model.std) - 1) > Z * relative_se  # negative control
    # Coverage of the 95 % intervals: exact (or one unit conservative) noise quantiles.
    lo, hi = model.confidence_interval(0.95)
    covered = (lo <= truth) & (truth <= hi)
    tolerance = _binomial_tolerance(0.95, R)
    assert covered.mean() >= 0.95 - tolerance
    narrow = ErrorModel(
        model.distribution,
        noise_scale=model.noise_scale * 0.5,
        unit=model.unit,
        rounding=model.rounding,
        center=release.value,
    )
    narrow_lo, narrow_hi = narrow.confidence_interval(0.95)
    narrow_coverage = ((narrow_lo <= truth) & (truth <= narrow_hi)).mean()
    assert narrow_coverage < 0.95 - tolerance  # negative control: noise halved
    # Not wastefully wide either: above 95 % only by the mass of the last integer kept
    # (below 0.02 for these noise scales).
    assert covered.mean() <= 0.95 + tolerance + 0.02
