"""Tests of ``dpcurator.audit._canary``: the one-run audit of Steinke, Nasr and Jagielski 2023."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from numpy.typing import NDArray
from scipy import special, stats

from dpcurator.audit import (
    canary_audit,
    one_run_epsilon_lower_bound,
    one_run_p_value,
    score_canaries,
)
from dpcurator.errors import InvalidParameterError
from dpcurator.mechanisms import laplace_mechanism, randomized_response
from dpcurator.noise import InsecureSeededSource


@pytest.mark.parametrize(
    ("guesses", "correct", "expected"),
    # Research note B.7, "checked here": r = 100 all correct -> 3.49; r = 1000: 100 % -> 5.81,
    # 90 % -> 2.02, 70 % -> 0.73; r = 10000 all correct -> 8.11 (95 % confidence, delta = 0).
    [
        (100, 100, 3.49),
        (1000, 1000, 5.81),
        (1000, 900, 2.02),
        (1000, 700, 0.73),
        (10_000, 10_000, 8.11),
    ],
)
def test_bounds_match_the_research_note(guesses: int, correct: int, expected: float) -> None:
    bound = one_run_epsilon_lower_bound(guesses, correct, canaries=10 * guesses)
    assert bound == pytest.approx(expected, abs=0.006)
    # At the bound, the p-value equals 1 - confidence (pure DP: the binomial tail).
    q = float(special.expit(bound))
    assert stats.binom.sf(correct - 1, guesses, q) == pytest.approx(0.05, rel=1e-4)


def test_p_value_is_monotone_and_delta_costs() -> None:
    values = [one_run_p_value(200, 150, canaries=1000, epsilon=e) for e in (0.0, 0.5, 1.0, 2.0)]
    assert values == sorted(values)
    pure = one_run_p_value(200, 150, canaries=1000, epsilon=0.5)
    approx = one_run_p_value(200, 150, canaries=1000, epsilon=0.5, delta=1e-4)
    assert approx > pure
    # The delta term, computed directly from its definition (Theorem 3.3 of the paper).
    q = float(special.expit(0.5))
    tail = stats.binom.sf(149, 200, q)
    worst = max(
        (stats.binom.cdf(149, 200, q) - stats.binom.cdf(149 - i, 200, q)) / i for i in range(1, 151)
    )
    assert approx == pytest.approx(tail + 2 * 1000 * 1e-4 * worst, rel=1e-9)
    assert one_run_epsilon_lower_bound(200, 150, canaries=1000, delta=1e-4) < (
        one_run_epsilon_lower_bound(200, 150, canaries=1000)
    )
    assert one_run_epsilon_lower_bound(200, 100, canaries=1000) == 0.0  # chance: nothing


def _noisy_canaries(epsilon: float, source: InsecureSeededSource) -> Any:
    """One release of ``m`` counts, canary ``i`` adding 1 to count ``i``: epsilon-DP per canary."""

    def run(included: NDArray[np.bool_]) -> NDArray[np.float64]:
        release = laplace_mechanism(
            included.astype(float),
            epsilon=epsilon,
            sensitivity=1.0,
            changed_coordinates=1,
            source=source,
        )
        return release.value

    return run


@pytest.mark.statistical
@pytest.mark.parametrize(("actual", "claimed"), [(1.0, 1.0), (4.0, 1.0)])
def test_canary_audit_of_laplace_counts(actual: float, claimed: float) -> None:
    source = InsecureSeededSource(21 if actual == claimed else 22)
    audit = canary_audit(
        _noisy_canaries(actual, source), 10_000, guesses_in=500, guesses_out=500, source=source
    )
    assert audit.guesses == 1000 and audit.canaries == 10_000
    assert 0 <= audit.correct <= 1000
    assert audit.included.sum() == pytest.approx(5000, abs=4 * 50)  # Bernoulli(1/2) each
    if actual == claimed:
        assert 0.3 < audit.epsilon_lower_bound <= claimed
    else:  # negative control: noise for epsilon = 4 claimed as epsilon = 1
        assert audit.epsilon_lower_bound > claimed


@pytest.mark.statistical
def test_one_run_bound_is_valid_over_many_runs() -> None:
    # 100 audits of an exactly ln 3-DP release per canary: each exceeds ln 3 with probability at
    # most 0.2 at confidence 0.8, so the count is dominated by Binomial(100, 0.2) (0.999 quantile
    # 33). Ties make the guesses exactly 3/4 right here, so about 20 exceed: the bound is exact.
    source = InsecureSeededSource(23)
    truth = math.log(3)

    def run(included: NDArray[np.bool_]) -> NDArray[np.int64]:
        return randomized_response(included.astype(int), p_truth="3/4", source=source).value

    exceed, naive = 0, 0
    for _ in range(100):
        audit = canary_audit(
            run, 400, guesses_in=100, guesses_out=100, confidence=0.8, source=source
        )
        exceed += audit.epsilon_lower_bound > truth
        # Negative control: the plug-in estimate ln(accuracy / (1 - accuracy)), no confidence.
        naive += math.log(audit.correct / max(audit.guesses - audit.correct, 1)) > truth
    assert exceed <= stats.binom.ppf(0.999, 100, 0.2), exceed
    assert naive > stats.binom.ppf(0.999, 100, 0.2), naive


def test_score_canaries_guesses_the_extremes() -> None:
    included = np.array([True, False, True, False, True, False])
    scores = np.array([5.0, -5.0, 4.0, -4.0, 3.0, -3.0])
    audit = score_canaries(scores, included, guesses_in=2, guesses_out=2)
    assert audit.correct == 4  # top two are in, bottom two are out
    assert audit.accuracy == 1.0
    wrong = score_canaries(-scores, included, guesses_in=2, guesses_out=2)
    assert wrong.correct == 0 and wrong.epsilon_lower_bound == 0.0
    none = score_canaries(scores, included, guesses_in=0, guesses_out=0)
    assert none.guesses == 0 and math.isnan(none.accuracy) and none.epsilon_lower_bound == 0.0


@pytest.mark.parametrize(
    ("call", "name"),
    [
        (lambda: one_run_epsilon_lower_bound(10, 11, canaries=100), "correct"),
        (lambda: one_run_epsilon_lower_bound(101, 10, canaries=100), "guesses"),
        (lambda: one_run_epsilon_lower_bound(10, 5, canaries=0), "canaries"),
        (lambda: one_run_p_value(10, 5, canaries=100, epsilon=-1.0), "epsilon"),
        (lambda: score_canaries([1.0, 2.0], [True], guesses_in=1, guesses_out=0), "scores"),
        (lambda: score_canaries([1.0], [1], guesses_in=1, guesses_out=0), "included"),
        (
            lambda: score_canaries([1.0, 2.0], [True, False], guesses_in=2, guesses_out=1),
            "guesses_in",
        ),
        (lambda: canary_audit("train", 10, guesses_in=1, guesses_out=1), "run"),
    ],
)
def test_bad_parameters_name_the_argument(call: Any, name: str) -> None:
    with pytest.raises(InvalidParameterError, match=name):
        call()
