"""Randomized response: the lectures' numbers exactly, the estimators statistically."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from numpy.typing import NDArray
from scipy import stats

from dpcurator.errors import InvalidParameterError
from dpcurator.mechanisms import (
    coin_randomized_response,
    die_randomized_response,
    estimate_frequencies,
    estimate_proportion,
    posterior_probability,
    randomized_response,
)
from dpcurator.mechanisms._randomized_response import _p_truth_for_epsilon
from dpcurator.noise import InsecureSeededSource, RandomSource


class CyclingSource(RandomSource):
    """Hands out a fixed cycle of words: enumerates the outcomes of a die or of coins."""

    def __init__(self, cycle: list[int]) -> None:
        self._cycle = np.array(cycle, dtype=np.uint64)
        self._position = 0

    @property
    def secure(self) -> bool:
        return False

    def words(self, n: int) -> NDArray[np.uint64]:
        index = (self._position + np.arange(n)) % self._cycle.size
        self._position += n
        return self._cycle[index]


def test_die_protocol_is_exactly_ln2() -> None:
    # uniform_integers(6) turns each accepted 32-bit lane x into the face floor(6 x / 2**32)
    # (Lemire's exact method: lanes whose low product half is below 2**32 mod 6 = 4 are
    # rejected); the lanes below give the faces 0..5 in turn, so six respondents see every face
    # once: the report frequencies are the exact probabilities (lecture 001: truth on 1-4,
    # opposite on 5 or 6).
    lanes = [-(-(k * 2**32 + 4) // 6) for k in range(6)]
    faces = [lanes[i] | lanes[i + 1] << 32 for i in (0, 2, 4)]
    yes_if_true = die_randomized_response([1] * 6, source=CyclingSource(faces)).value
    yes_if_false = die_randomized_response([0] * 6, source=CyclingSource(faces)).value
    p_true = Fraction(int(yes_if_true.sum()), 6)
    p_false = Fraction(int(yes_if_false.sum()), 6)
    assert (p_true, p_false) == (Fraction(2, 3), Fraction(1, 3))
    # Every report's probability changes by a factor of exactly 2, in both directions.
    assert p_true / p_false == 2 and (1 - p_false) / (1 - p_true) == 2
    event = die_randomized_response([1], source=CyclingSource(faces)).event
    assert event.epsilon == pytest.approx(math.log(2), rel=1e-12)
    assert event.epsilon >= math.log(2)  # its p_truth is rounded up, never understated


def test_coin_protocol_is_exactly_ln3() -> None:
    # Four respondents see the four (first coin, second coin) outcomes once each: the first
    # call reads the low bits of words 0, 0, 1, 1, the second call those of 0, 1, 0, 1.
    cycle = [0, 0, 1, 1, 0, 1, 0, 1]
    yes_if_true = coin_randomized_response([1] * 4, source=CyclingSource(cycle)).value
    yes_if_false = coin_randomized_response([0] * 4, source=CyclingSource(cycle)).value
    p_true = Fraction(int(yes_if_true.sum()), 4)
    p_false = Fraction(int(yes_if_false.sum()), 4)
    assert (p_true, p_false) == (Fraction(3, 4), Fraction(1, 4))  # lecture 003's table
    assert p_true / p_false == 3 and (1 - p_false) / (1 - p_true) == 3
    event = coin_randomized_response(True).event
    assert event.p_truth == 0.75
    assert event.epsilon == pytest.approx(math.log(3), rel=1e-15)


def test_tax_dodging_posterior() -> None:
    # Lecture 003: prior 0.02, answer "yes" under the coin protocol -> about 0.058.
    posterior = posterior_probability(0.02, 0.75, 0.25)
    assert posterior == pytest.approx(0.015 / 0.26, rel=1e-12)
    assert round(posterior, 3) == 0.058
    # epsilon-DP bounds the shift of the odds by e^eps = 3.
    assert posterior / (1 - posterior) == pytest.approx(3 * 0.02 / 0.98)
    with pytest.raises(InvalidParameterError, match="p_yes_given_false"):
        posterior_probability(0.0, 0.75, 0.0)


@pytest.mark.parametrize("categories", [2, 3, 10])
@pytest.mark.parametrize("epsilon", [1e-6, 0.1, 1.0, math.log(3), 5.0, 40.0, 800.0])
def test_p_truth_from_epsilon_is_rational_and_never_more_than_requested(
    categories: int, epsilon: float
) -> None:
    p = _p_truth_for_epsilon(epsilon, categories)
    assert p.denominator <= 2**52
    # Exact check with high precision: p (k - 1) / (1 - p) <= e^eps.
    ratio = p * (categories - 1) / (1 - p)
    assert math.log(ratio.numerator) - math.log(ratio.denominator) <= epsilon
    release = randomized_response([0, 1], epsilon=epsilon, categories=categories)
    assert release.event.epsilon <= epsilon
    assert release.event.p_truth == float(p)  # exact: a multiple of 2**-52
    if epsilon <= 5.0:
        assert release.event.epsilon == pytest.approx(epsilon, rel=1e-6, abs=1e-9)


def test_given_p_truth_is_used_exactly_and_reported_rounded_up() -> None:
    release = randomized_response([1, 0, 1], p_truth="2/3", source=InsecureSeededSource(0))
    assert release.event.p_truth >= 2 / 3
    assert Fraction(release.event.p_truth) >= Fraction(2, 3)
    assert release.event.epsilon == pytest.approx(math.log(2), rel=1e-12)


def test_output_types_and_shapes() -> None:
    src = InsecureSeededSource(1)
    assert isinstance(randomized_response(1, epsilon=1.0, source=src).value, int)
    assert isinstance(coin_randomized_response(True, source=src).value, int)
    matrix = randomized_response(np.zeros((3, 4), dtype=int), epsilon=1.0, categories=5)
    assert matrix.value.shape == (3, 4) and matrix.value.dtype == np.int64
    assert set(np.unique(matrix.value)) <= set(range(5))
    bools = randomized_response(np.array([True, False]), epsilon=2.0, source=src).value
    assert bools.dtype == np.int64 and set(bools.tolist()) <= {0, 1}
    assert randomized_response([], epsilon=1.0).value.shape == (0,)


@pytest.mark.statistical
def test_kary_report_frequencies_match_p_and_q() -> None:
    # Chi-square goodness of fit at level 1e-4 (the tolerance), 200 000 reports of the value 2.
    n, k, eps = 200_000, 5, 1.0
    release = randomized_response(
        np.full(n, 2), epsilon=eps, categories=k, source=InsecureSeededSource(3)
    )
    counts = np.bincount(release.value, minlength=k)

    def expected(epsilon: float) -> NDArray[np.float64]:
        p = math.exp(epsilon) / (math.exp(epsilon) + k - 1)
        probs = np.full(k, (1 - p) / (k - 1))
        probs[2] = p
        return n * probs

    assert stats.chisquare(counts, expected(eps)).pvalue > 1e-4
    # Negative control: the frequencies of a mechanism 10 % less private are rejected.
    assert stats.chisquare(counts, expected(1.1 * eps)).pvalue < 1e-4


def _surveys(
    values: NDArray[np.int64], surveys: int, *, epsilon: float, k: int, seed: int
) -> NDArray[np.int64]:
    data = np.tile(values, surveys)
    release = randomized_response(
        data, epsilon=epsilon, categories=k, source=InsecureSeededSource(seed)
    )
    return release.value.reshape(surveys, values.size)


def _variance_interval(variance: float, surveys: int) -> tuple[float, float]:
    # (R - 1) s^2 / var ~ chi^2(R - 1) for normal estimates (n = 400 reports each: CLT).
    lo = variance * stats.chi2.ppf(1e-4, surveys - 1) / (surveys - 1)
    hi = variance * stats.chi2.ppf(1 - 1e-4, surveys - 1) / (surveys - 1)
    return lo, hi


@pytest.mark.statistical
def test_proportion_estimator_is_unbiased_with_the_stated_variance() -> None:
    n, surveys, eps = 400, 3000, 1.0
    values = (np.arange(n) < 120).astype(np.int64)  # true proportion 0.3
    reports = _surveys(values, surveys, epsilon=eps, k=2, seed=4)
    p = randomized_response([0], epsilon=eps).event.p_truth
    estimates = [estimate_proportion(row, p) for row in reports]
    values_hat = np.array([e.estimate for e in estimates])
    variance = estimates[0].variance
    # Lecture 001: the count's standard deviation is e^{eps/2} sqrt(n) / (e^eps - 1).
    count_std = math.exp(eps / 2) * math.sqrt(n) / (math.expm1(eps))
    assert math.sqrt(variance) * n == pytest.approx(count_std, rel=1e-9)
    # Unbiased: the mean of 3000 estimates is within 5 standard errors of 0.3.
    standard_error = math.sqrt(variance / surveys)
    assert abs(values_hat.mean() - 0.3) < 5 * standard_error
    lo, hi = _variance_interval(variance, surveys)
    assert lo < values_hat.var(ddof=1) < hi
    # Negative controls: the naive mean of the reports is biased, and the non-private
    # variance pi (1 - pi) / n is far too small for these estimates.
    naive = reports.mean(axis=1)
    assert abs(naive.mean() - 0.3) > 5 * standard_error
    lo_naive, hi_naive = _variance_interval(0.3 * 0.7 / n, surveys)
    assert not lo_naive < values_hat.var(ddof=1) < hi_naive


@pytest.mark.statistical
def test_frequency_estimator_is_unbiased_with_the_stated_variance() -> None:
    n, surveys, k, eps = 400, 3000, 4, 2.0
    values = np.repeat(np.arange(k), [200, 100, 60, 40])
    truth = np.array([0.5, 0.25, 0.15, 0.1])
    reports = _surveys(values, surveys, epsilon=eps, k=k, seed=5)
    p = randomized_response([0], epsilon=eps, categories=k).event.p_truth
    estimates = np.array([estimate_frequencies(row, p, categories=k).estimates for row in reports])
    q = (1 - p) / (k - 1)
    exact = (truth * p * (1 - p) + (1 - truth) * q * (1 - q)) / (n * (p - q) ** 2)
    plug_in = estimate_frequencies(reports[0], p, categories=k).variances
    assert plug_in == pytest.approx(exact, rel=0.5)  # a plug-in from one survey
    assert np.all(np.abs(estimates.mean(axis=0) - truth) < 5 * np.sqrt(exact / surveys))
    for j in range(k):
        lo, hi = _variance_interval(float(exact[j]), surveys)
        assert lo < estimates[:, j].var(ddof=1) < hi
    # Negative control: the variance that ignores the randomization is rejected.
    lo, hi = _variance_interval(float(truth[0] * (1 - truth[0]) / n), surveys)
    assert not lo < estimates[:, 0].var(ddof=1) < hi


@pytest.mark.parametrize(
    ("call", "name"),
    [
        (lambda: randomized_response([0], epsilon=1.0, p_truth=0.7), "epsilon"),
        (lambda: randomized_response([0]), "epsilon"),
        (lambda: randomized_response([0], epsilon=-1.0), "epsilon"),
        (lambda: randomized_response([0], epsilon=math.nan), "epsilon"),
        (lambda: randomized_response([0], epsilon=math.inf), "epsilon"),
        (lambda: randomized_response([0], epsilon=1e-15), "epsilon"),
        (lambda: randomized_response([0], p_truth=0.5), "p_truth"),
        (lambda: randomized_response([0], p_truth=1.0), "p_truth"),
        (lambda: randomized_response([0], p_truth=0.3, categories=3), "p_truth"),
        (lambda: randomized_response([0], epsilon=1.0, categories=1), "categories"),
        (lambda: randomized_response([2], epsilon=1.0), "values"),
        (lambda: randomized_response([0.5], epsilon=1.0), "values"),
        (lambda: coin_randomized_response([3]), "values"),
        (lambda: estimate_proportion([0, 1], 0.5), "p_truth"),
        (lambda: estimate_proportion([], 0.75), "reports"),
        (lambda: estimate_frequencies([0, 3], 0.6, categories=3), "reports"),
        (lambda: posterior_probability(1.5, 0.75, 0.25), "prior"),
    ],
)
def test_bad_parameters_name_the_argument(call: object, name: str) -> None:
    with pytest.raises(InvalidParameterError) as info:
        call()  # type: ignore[operator]
    assert info.value.name == name
    assert name in str(info.value)


def test_domain_errors_do_not_echo_private_values() -> None:
    secret = [0, 1, 1, 0, 7]
    with pytest.raises(InvalidParameterError) as info:
        randomized_response(secret, epsilon=1.0)
    assert "7" not in str(info.value) and "shape (5,)" in str(info.value)
