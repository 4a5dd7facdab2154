"""Binary randomized response: the lectures' numbers, the estimator A and its RMSE."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from dpcurator.accounting import RandomizedResponseEvent
from dpcurator.errors import InvalidParameterError
from dpcurator.local._binary import BinaryRandomizedResponse
from dpcurator.mechanisms import (
    coin_randomized_response,
    die_randomized_response,
    posterior_probability,
)
from dpcurator.noise import InsecureSeededSource
from tests.local.test_grr import check_estimator


def test_die_is_ln2_and_coin_is_ln3() -> None:
    die = BinaryRandomizedResponse.die()
    coin = BinaryRandomizedResponse.coin()
    assert die.p == Fraction(2, 3) and coin.p == Fraction(3, 4)
    # lecture 001: every report's probability changes by a factor of at most 2 (die), 3 (coin)
    for rr, ratio in ((die, 2), (coin, 3)):
        probs = {(y, v): rr.report_probability(y, v) for y in (0, 1) for v in (0, 1)}
        assert max(probs[y, 0] / probs[y, 1] for y in (0, 1)) == ratio
        assert max(probs[y, 1] / probs[y, 0] for y in (0, 1)) == ratio
    assert die.event.epsilon == pytest.approx(math.log(2), rel=1e-12)
    assert die.event.epsilon >= math.log(2)  # never understated
    assert coin.event == RandomizedResponseEvent(p_truth=0.75, categories=2)
    assert coin.event.epsilon == pytest.approx(math.log(3), rel=1e-15)
    assert repr(coin) == "BinaryRandomizedResponse.coin()"


def test_tammys_posterior() -> None:
    # Lecture 003 / 004: prior 0.02 that Bob dodged, he answered "yes" under the coin protocol.
    coin = BinaryRandomizedResponse.coin()
    yes_if_dodged = float(coin.report_probability(1, 1))
    yes_if_not = float(coin.report_probability(1, 0))
    posterior = posterior_probability(0.02, yes_if_dodged, yes_if_not)
    assert round(posterior, 3) == 0.058
    # epsilon-DP bounds the shift of the odds by e^eps = 3
    odds = posterior / (1 - posterior)
    assert odds / (0.02 / 0.98) == pytest.approx(math.exp(coin.event.epsilon), rel=1e-12)


def test_coin_and_die_run_the_lecture_mechanisms() -> None:
    values = np.array([0, 1, 1, 0, 1] * 20)
    coin = BinaryRandomizedResponse.coin().privatize(values, source=InsecureSeededSource(4))
    expected = coin_randomized_response(values, source=InsecureSeededSource(4)).value
    np.testing.assert_array_equal(coin, expected)
    die = BinaryRandomizedResponse.die().privatize(values, source=InsecureSeededSource(5))
    expected = die_randomized_response(values, source=InsecureSeededSource(5)).value
    np.testing.assert_array_equal(die, expected)


def test_estimator_constants_are_the_lectures() -> None:
    for eps in (0.1, 1.0, 3.0):
        rr = BinaryRandomizedResponse(eps)
        e = math.exp(eps)
        assert rr.a == pytest.approx((e + 1) / (e - 1), rel=1e-10)
        assert rr.b == pytest.approx(1 / (e - 1), rel=1e-10)
        assert rr.rmse(400) == pytest.approx(math.exp(eps / 2) * 20 / (e - 1), rel=1e-10)
        assert rr.event.epsilon <= eps
        assert rr.event.epsilon == pytest.approx(eps, rel=1e-9)


def test_estimate_sum_is_the_grr_estimator() -> None:
    rr = BinaryRandomizedResponse(0.7)
    reports = rr.privatize(np.array([1] * 40 + [0] * 60), source=InsecureSeededSource(1))
    total = rr.estimate_sum(reports)
    est = rr.aggregate(reports)
    assert total == pytest.approx(est.counts[1], rel=1e-12)
    assert est.counts.sum() == pytest.approx(100.0)
    # the variance does not depend on the data: n p (1 - p) / (2p - 1)^2 = RMSE^2
    np.testing.assert_allclose(est.variances, rr.rmse(100) ** 2, rtol=1e-12)


def test_bools_and_bad_inputs() -> None:
    rr = BinaryRandomizedResponse(1.0)
    assert rr.privatize([True, False], source=InsecureSeededSource(0)).dtype == np.int64
    with pytest.raises(InvalidParameterError) as info:
        rr.privatize([0, 2])
    assert info.value.name == "values"
    with pytest.raises(InvalidParameterError) as info:
        rr.estimate_sum([0, 1, 3])
    assert info.value.name == "reports"
    with pytest.raises(InvalidParameterError) as info:
        BinaryRandomizedResponse(0.0)
    assert info.value.name == "epsilon"
    with pytest.raises(InvalidParameterError) as info:
        rr.rmse(0)
    assert info.value.name == "n"


@pytest.mark.statistical
@pytest.mark.parametrize(
    "make",
    [lambda: BinaryRandomizedResponse(1.0), BinaryRandomizedResponse.coin],
    ids=["exponential", "coin"],
)
def test_proposition_rmse(make: object) -> None:
    # Lecture 001, proposition: sqrt(E (A - sum x)^2) = e^(eps/2) sqrt(n) / (e^eps - 1).
    # A is unbiased, so R * MSE / RMSE^2 ~ chi2(R) (A is a sum of n = 2000 terms: normal).
    rr = make()  # type: ignore[operator]
    n, reps = 2000, 400
    values = np.array([1] * 300 + [0] * (n - 300))
    source = InsecureSeededSource(3)
    errors = np.array(
        [rr.estimate_sum(rr.privatize(values, source=source)) - 300 for _ in range(reps)]
    )
    statistic = float(np.sum(errors**2))
    alpha = 1e-3

    def inside(rmse: float) -> bool:
        scaled = statistic / rmse**2
        return bool(
            stats.chi2.ppf(alpha / 2, reps) <= scaled <= stats.chi2.ppf(1 - alpha / 2, reps)
        )

    assert inside(rr.rmse(n))
    assert abs(errors.mean()) <= 4.5 * rr.rmse(n) / math.sqrt(reps)  # unbiased
    if rr.variant == "exponential":
        e = math.e
        assert rr.rmse(n) == pytest.approx(math.sqrt(e) * math.sqrt(n) / (e - 1), rel=1e-9)
        # negative control: the small-epsilon approximation 2 sqrt(n) / eps is off by 2x at 1
        assert not inside(2 * math.sqrt(n) / 1.0)
    else:
        # negative control: the die's RMSE (p = 2/3) is 1.6 times the coin's (p = 3/4)
        die = BinaryRandomizedResponse.die()
        assert not inside(die.rmse(n))


@pytest.mark.statistical
def test_unbiased_with_exact_variance() -> None:
    def die_variance(n: int, counts: object) -> np.ndarray:
        return np.full(2, BinaryRandomizedResponse.die().rmse(n) ** 2)

    check_estimator(
        lambda: BinaryRandomizedResponse(2.0), die_variance, domain_size=2, n=2000, seed=6
    )
