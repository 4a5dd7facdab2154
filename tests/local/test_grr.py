"""Generalised randomized response: exact probabilities, unbiasedness and exact variance.

Also holds the statistical helpers the other protocol tests share (:func:`replicate`,
:func:`mean_matches`, :func:`variance_matches`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from fractions import Fraction

import mpmath
import numpy as np
import pytest
from numpy.typing import NDArray
from scipy import stats

from dpcurator.errors import InvalidParameterError
from dpcurator.local._grr import (
    GeneralizedRandomizedResponse,
    _best_lower,
    _largest_b,
    grr_integers,
)
from dpcurator.local._protocol import FrequencyOracle
from dpcurator.noise import InsecureSeededSource, uniform_integers

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


def _exact_log_ratio(grr: GeneralizedRandomizedResponse) -> mpmath.mpf:
    ratio = grr.p / grr.q
    return mpmath.log(mpmath.mpf(ratio.numerator) / ratio.denominator)


def test_probabilities_round_towards_privacy() -> None:
    mpmath.mp.dps = 50
    # (0.5, 10**9): (d - 1) B cannot fit 2**32 with enough precision; the 2**63 range is used
    for eps, d in [
        (0.1, 2),
        (1.0, 3),
        (1.0, 100),
        (1.0, 1000),
        (3.0, 7),
        (8.0, 1000),
        (0.5, 10**9),
    ]:
        grr = GeneralizedRandomizedResponse(eps, d)
        e = mpmath.exp(mpmath.mpf(eps))
        exact_p = e / (e + d - 1)
        assert mpmath.mpf(grr.p.numerator) / grr.p.denominator <= exact_p
        assert float(grr.p) == pytest.approx(float(exact_p), rel=1e-10)
        assert grr.q == (1 - grr.p) / (d - 1)
        # one draw in [0, M): M is the common denominator, the fast 32-bit range when it fits
        a, b, m = grr_integers(eps, d)
        assert (grr.p, grr.q) == (Fraction(a, m), Fraction(b, m))
        assert m == a + (d - 1) * b
        assert (m <= 2**32) == (d < 10**9)
        # exactly at most eps-LDP, and tight: the achieved epsilon loses at most 2**-32 min(1,eps)
        # (the rational approximation) plus 2**-40 (the margin over libm's exp), relatively
        achieved = _exact_log_ratio(grr)
        assert achieved <= eps
        assert achieved >= eps - 2.0**-32 * min(1.0, eps) - 2.0**-39
        # the event never understates the epsilon actually achieved, and never exceeds eps
        assert grr.event.epsilon >= achieved
        assert grr.event.epsilon <= eps
        assert grr.event.epsilon == pytest.approx(float(achieved), rel=1e-13)


def test_event_is_an_upper_bound_close_to_the_exact_ratio() -> None:
    # float(p) is rarely exact (M is not a power of two): the event's p is rounded up until
    # its float epsilon is >= ln(A/B) rounded up. Exact comparison with mpmath.
    mpmath.mp.dps = 50
    for eps in [0.05, 0.3, 0.7, 1.3, 2.0, 4.0, 6.5]:
        for d in [2, 3, 17, 250]:
            grr = GeneralizedRandomizedResponse(eps, d)
            achieved = _exact_log_ratio(grr)
            assert achieved <= eps, (eps, d)
            assert grr.event.epsilon >= achieved, (eps, d)
            assert grr.event.epsilon <= eps, (eps, d)
            assert grr.event.epsilon - achieved <= 1e-13 * max(1.0, eps), (eps, d)


def test_best_lower_approximation_matches_brute_force() -> None:
    xs = [Fraction(0), Fraction(1), Fraction(7, 3), Fraction(355, 113), Fraction(2**52 + 1, 2**51)]
    xs += [Fraction(math.exp(0.1 * k)) for k in range(1, 30)]
    for x in xs:
        for bmax in [1, 2, 3, 7, 50, 113, 400]:
            a, b = _best_lower(x, bmax)
            brute = max(Fraction(math.floor(x * j), j) for j in range(1, bmax + 1))
            assert Fraction(a, b) == brute, (x, bmax)
            assert b in range(1, bmax + 1), (x, bmax, b)  # the denominator respects the cap
    # negative control: the nearest approximation (limit_denominator) may lie above x
    x = Fraction(math.pi)
    assert x.limit_denominator(113) > x
    assert Fraction(*_best_lower(x, 113)) < x


def test_largest_b_matches_brute_force() -> None:
    for ratio in [Fraction(1, 3), Fraction(5, 2), Fraction(math.e), Fraction(1000)]:
        for others in [1, 2, 9]:
            for limit in [1, 10, 97, 1000]:
                b = _largest_b(ratio, others, limit)
                fits = [
                    j for j in range(0, limit + 1) if math.floor(ratio * j) + others * j <= limit
                ]
                assert b == max(fits), (ratio, others, limit)


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
        ({"epsilon": 1.0, "domain_size": 2**63}, "epsilon"),
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
        grr.privatize(np.array([-1, 0]))
    assert info.value.name == "values"
    with pytest.raises(InvalidParameterError) as info:
        grr.privatize([])
    assert info.value.name == "values"
    with pytest.raises(InvalidParameterError) as info:
        grr.aggregate([-1, 0])
    assert info.value.name == "reports"
    with pytest.raises(InvalidParameterError) as info:
        grr.aggregate(np.array([0, 3], dtype=np.int32))
    assert info.value.name == "reports"
    assert "1 entries out of range" in str(info.value)
    with pytest.raises(InvalidParameterError) as info:
        grr.variance(0)
    assert info.value.name == "n"
    with pytest.raises(InvalidParameterError) as info:
        grr.variance(10, np.zeros(4))
    assert info.value.name == "counts"


def test_one_uniform_draw_per_device() -> None:
    # r uniform in [0, M): o = r // B; r < (d - 1) B reports the o-th other value, else the
    # truth. (A, B, M) are scaled by floor(2**32 / M) (same p, q; fewer rejected lanes).
    d = 5
    grr = GeneralizedRandomizedResponse(1.5, d)
    _, b, m = grr_integers(1.5, d)
    scale = 2**32 // m
    assert (grr._range, grr._lie) == (m * scale, b * scale)
    assert 2**32 - m < grr._range <= 2**32
    b, m = b * scale, m * scale
    values = np.arange(d).repeat(40)
    ours = grr.privatize(values, source=InsecureSeededSource(9))
    r = uniform_integers(m, values.size, source=InsecureSeededSource(9))
    expected = [
        v if x >= (d - 1) * b else x // b + (x // b >= v)
        for x, v in zip(r.tolist(), values, strict=True)
    ]
    np.testing.assert_array_equal(ours, expected)
    assert ours.dtype == np.int64
    assert np.all((ours == values) == (r >= (d - 1) * b))
    # negative control: a draw from another seed gives other reports
    assert not np.array_equal(ours, grr.privatize(values, source=InsecureSeededSource(10)))


def test_wide_range_for_huge_domains() -> None:
    # (d - 1) >= 2**32: the draw is in the 2**63 range, and reports still are in [0, d)
    d = 2**33
    grr = GeneralizedRandomizedResponse(2.0, d)
    _, _, m = grr_integers(2.0, d)
    assert 2**32 < m <= 2**63
    values = np.array([0, 5, d - 1] * 30)
    reports = grr.privatize(values, source=InsecureSeededSource(3))
    assert np.all((reports >= 0) & (reports < d))


def test_input_forms() -> None:
    grr = GeneralizedRandomizedResponse(3.0, 2)
    source = InsecureSeededSource(4)
    bools = grr.privatize(np.array([True, False] * 50), source=source)
    assert set(bools.tolist()) <= {0, 1}
    small = grr.privatize(np.array([[0, 1], [1, 0]], dtype=np.uint8), source=source)
    assert small.shape == (4,) and small.dtype == np.int64
    strided = np.arange(20)[::2] % 2
    assert grr.privatize(strided, source=source).shape == (10,)
    # privatize does not modify its input
    values = np.array([0, 1, 1, 0])
    grr.privatize(values, source=source)
    np.testing.assert_array_equal(values, [0, 1, 1, 0])


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
