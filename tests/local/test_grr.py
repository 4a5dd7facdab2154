"""Generalised randomized response: exact probabilities, unbiasedness and exact variance.

Also holds the statistical helpers the other protocol tests share (:func:`replicate`,
:func:`mean_matches`, :func:`variance_matches`).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import mpmath
import numpy as np
import pytest
from numpy.typing import NDArray
from scipy import stats

from dpcurator.errors import InvalidParameterError
from dpcurator.local._grr import GeneralizedRandomizedResponse
from dpcurator.local._protocol import FrequencyOracle
from dpcurator.noise import InsecureSeededSource

# --------------------------------------------------------------------------------------------
# shared statistical helpers

MEAN_Z = 4.5
"""Mean of R estimates vs truth: |mean - truth| <= 4.5 SE (CLT; two-sided 7e-6 per value)."""
VARIANCE_ALPHA = 1e-3
"""Family-wise level of the chi-square interval of each variance test (Bonferroni over d)."""


def skewed_values(domain_size: int, n: int) -> tuple[NDArray[np.int64], NDArray[np.float64]]:
    """Fixed, Zipf-like data (weights 1/(v+1)^1.3): the values and their true counts."""
    weights = 1.0 / np.arange(1, domain_size + 1) ** 1.3
    counts = np.floor(n * weights / weights.sum()).astype(np.int64)
    counts[0] += n - int(counts.sum())
    values = np.repeat(np.arange(domain_size), counts)
    return values, counts.astype(np.float64)


def replicate(
    protocol: FrequencyOracle, values: NDArray[np.int64], reps: int, seed: int
) -> NDArray[np.float64]:
    """``reps`` independent runs of privatize + aggregate on the same data: (reps, d) counts."""
    source = InsecureSeededSource(seed)
    return np.stack([protocol.estimate(values, source=source).counts for _ in range(reps)])


def mean_matches(
    estimates: NDArray[np.float64], truth: NDArray[np.float64], variance: NDArray[np.float64]
) -> bool:
    """The mean of the R estimates lies within ``MEAN_Z`` standard errors of the truth."""
    se = np.sqrt(variance / estimates.shape[0])
    return bool(np.all(np.abs(estimates.mean(axis=0) - truth) <= MEAN_Z * se))


def variance_matches(estimates: NDArray[np.float64], variance: NDArray[np.float64]) -> bool:
    """Each empirical variance lies in the chi-square interval of the claimed one.

    ``(R - 1) s^2 / sigma^2 ~ chi2(R - 1)`` for (near-)normal estimates (each is a sum of
    thousands of independent bounded terms), i.e. a relative standard error ``sqrt(2/(R-1))``
    (research note D).
    """
    reps, d = estimates.shape
    ratio = estimates.var(axis=0, ddof=1) / variance
    alpha = VARIANCE_ALPHA / (2 * d)
    low = stats.chi2.ppf(alpha, reps - 1) / (reps - 1)
    high = stats.chi2.ppf(1 - alpha, reps - 1) / (reps - 1)
    return bool(np.all((ratio >= low) & (ratio <= high)))


def check_estimator(
    make: Callable[[], FrequencyOracle],
    wrong_variance: Callable[[int, NDArray[np.float64]], NDArray[np.float64]],
    *,
    domain_size: int,
    n: int = 3000,
    reps: int = 300,
    seed: int = 0,
) -> None:
    """Unbiasedness and exact variance of a protocol, with a negative control for each."""
    protocol = make()
    values, truth = skewed_values(domain_size, n)
    estimates = replicate(protocol, values, reps, seed)
    exact = protocol.variance(n, truth)
    assert mean_matches(estimates, truth, exact)
    assert variance_matches(estimates, exact)
    # Negative controls: a biased estimator (the debiasing left out: raw support counts, which
    # are affine in the estimates) and the variance formula of another protocol must fail.
    p, q = float(protocol.p), float(protocol.q)  # type: ignore[attr-defined]
    raw_supports = estimates * (p - q) + n * q
    assert not mean_matches(raw_supports, truth, exact)
    assert not variance_matches(estimates, wrong_variance(n, truth))


# --------------------------------------------------------------------------------------------
# parameters


def test_probabilities_round_towards_privacy() -> None:
    mpmath.mp.dps = 50
    # (0.5, 10**9): p is about 1.6e-9 and is rounded relatively, not to a 2**-52 grid
    for eps, d in [(0.1, 2), (1.0, 3), (1.0, 100), (3.0, 7), (8.0, 1000), (0.5, 10**9)]:
        grr = GeneralizedRandomizedResponse(eps, d)
        e = mpmath.exp(mpmath.mpf(eps))
        exact_p = e / (e + d - 1)
        assert mpmath.mpf(grr.p.numerator) / grr.p.denominator <= exact_p
        assert float(grr.p) == pytest.approx(float(exact_p), rel=1e-11)
        assert grr.p.denominator & (grr.p.denominator - 1) == 0  # dyadic: exact Bernoulli
        assert grr.q == (1 - grr.p) / (d - 1)
        # the event never understates the epsilon actually achieved, and never exceeds eps
        achieved = mpmath.log(
            mpmath.mpf(grr.p.numerator)
            / grr.p.denominator
            / (mpmath.mpf(grr.q.numerator) / grr.q.denominator)
        )
        assert grr.event.epsilon >= float(achieved) * (1 - 1e-15)
        assert grr.event.epsilon <= eps * (1 + 1e-15)
        assert grr.event.epsilon == pytest.approx(eps, rel=1e-9)


def test_huge_epsilon_stays_private() -> None:
    # 1 - p cannot go below 2**-52: the achieved epsilon is reported, not the requested one.
    grr = GeneralizedRandomizedResponse(60.0, 5)
    assert grr.q > 0 and grr.p < 1
    assert grr.event.epsilon < 60.0
    assert grr.event.epsilon == pytest.approx(math.log(float(grr.p / grr.q)), rel=1e-12)
    assert GeneralizedRandomizedResponse(1000.0, 3).event.epsilon < 40


def test_variance_closed_form() -> None:
    e = math.exp(1.0)
    grr = GeneralizedRandomizedResponse(1.0, 6)
    assert grr.variance(1000) == pytest.approx(1000 * (e + 4) / (e - 1) ** 2, rel=1e-9)
    counts = np.array([500.0, 100, 100, 100, 100, 100])
    p, q = e / (e + 5), 1 / (e + 5)
    expected = 1000 * q * (1 - q) / (p - q) ** 2 + counts * (1 - p - q) / (p - q)
    np.testing.assert_allclose(grr.variance(1000, counts), expected, rtol=1e-9)


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"epsilon": 0.0, "domain_size": 3}, "epsilon"),
        ({"epsilon": -1.0, "domain_size": 3}, "epsilon"),
        ({"epsilon": float("nan"), "domain_size": 3}, "epsilon"),
        ({"epsilon": 1.0, "domain_size": 1}, "domain_size"),
        ({"epsilon": 1.0, "domain_size": 2.5}, "domain_size"),
        ({"epsilon": 1e-300, "domain_size": 3}, "epsilon"),
    ],
)
def test_bad_parameters(kwargs: dict[str, float], name: str) -> None:
    with pytest.raises(InvalidParameterError) as info:
        GeneralizedRandomizedResponse(**kwargs)  # type: ignore[arg-type]
    assert info.value.name == name


def test_bad_values_and_reports() -> None:
    grr = GeneralizedRandomizedResponse(1.0, 3)
    with pytest.raises(InvalidParameterError) as info:
        grr.privatize([0, 3])
    assert info.value.name == "values"
    with pytest.raises(InvalidParameterError) as info:
        grr.privatize([0.5])
    assert info.value.name == "values"
    with pytest.raises(InvalidParameterError) as info:
        grr.aggregate([-1, 0])
    assert info.value.name == "reports"
    with pytest.raises(InvalidParameterError) as info:
        grr.variance(0)
    assert info.value.name == "n"
    with pytest.raises(InvalidParameterError) as info:
        grr.variance(10, np.zeros(4))
    assert info.value.name == "counts"


def test_reuses_the_randomized_response_mechanism() -> None:
    from dpcurator.mechanisms import randomized_response

    grr = GeneralizedRandomizedResponse(1.5, 5)
    values = np.arange(5).repeat(20)
    ours = grr.privatize(values, source=InsecureSeededSource(9))
    theirs = randomized_response(
        values, p_truth=grr.p, categories=5, source=InsecureSeededSource(9)
    ).value
    np.testing.assert_array_equal(ours, theirs)


def test_aggregate_is_the_debiased_histogram() -> None:
    grr = GeneralizedRandomizedResponse(2.0, 3)
    reports = np.array([0, 0, 0, 1, 2, 2])
    est = grr.aggregate(reports)
    p, q = float(grr.p), float(grr.q)
    np.testing.assert_allclose(est.counts, (np.array([3, 1, 2]) - 6 * q) / (p - q))
    assert est.counts.sum() == pytest.approx(6.0)  # GRR estimates always sum to n
    np.testing.assert_allclose(est.variances, grr.variance(6, np.clip(est.counts, 0, 6)))


# --------------------------------------------------------------------------------------------
# statistical


@pytest.mark.statistical
def test_unbiased_with_exact_variance() -> None:
    # d = 4 < 3e + 2: GRR's variance is well below OUE's, which serves as the negative control.
    def oue_variance(n: int, counts: NDArray[np.float64]) -> NDArray[np.float64]:
        e = math.e
        return n * 4 * e / (e - 1) ** 2 + counts

    check_estimator(
        lambda: GeneralizedRandomizedResponse(1.0, 4), oue_variance, domain_size=4, seed=1
    )


@pytest.mark.statistical
def test_confidence_intervals_cover() -> None:
    # Over independent runs each value's 90% interval covers its true count a Binomial(R, 0.9)
    # number of times (normal approximation of a sum of 2000 terms); z = 4.5 per value.
    grr = GeneralizedRandomizedResponse(1.0, 5)
    values, truth = skewed_values(5, 2000)
    source = InsecureSeededSource(2)
    reps = 400
    covered = np.zeros(5)
    narrow = np.zeros(5)
    for _ in range(reps):
        est = grr.estimate(values, source=source)
        low, high = est.confidence_interval(0.9)
        covered += (low <= truth) & (truth <= high)
        low, high = est.confidence_interval(0.5)  # negative control: too narrow for 90%
        narrow += (low <= truth) & (truth <= high)
    tolerance = 4.5 * math.sqrt(0.9 * 0.1 / reps)
    assert np.all(np.abs(covered / reps - 0.9) <= tolerance)
    assert np.all(np.abs(narrow / reps - 0.9) > tolerance)
