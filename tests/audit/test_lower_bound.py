"""Tests of ``dpcurator.audit._lower_bound``: the bounds, the auditor's power and its validity.

The done-means of issue 7 for the auditor live here:

- it certifies a bound at or below the claim and within 30 % of it (tight) for the project's
  Laplace, Gaussian, randomized response and exponential mechanisms;
- it catches planted faults: textbook floating-point Laplace (Mironov 2012; built in this file,
  the library itself has no float noise), a sensitivity off by 2x, a Gaussian with the wrong
  sigma, an accountant that forgets a composition.

Every audit is seeded. The certified bound fails (exceeds the true epsilon) with probability at
most ``1 - confidence`` by construction; the validity test checks that rate over many seeds, with
the point estimate as a negative control that must fail it.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from numpy.typing import NDArray
from scipy import stats

from dpcurator.accounting import BasicAccountant, PrivacyEvent, discrete_gaussian_sigma
from dpcurator.audit import (
    AuditResult,
    Event,
    audit_mechanism,
    audit_samples,
    clopper_pearson,
    delta_lower_bound,
    epsilon_lower_bound,
)
from dpcurator.errors import InvalidParameterError
from dpcurator.mechanisms import (
    discrete_gaussian_mechanism,
    exponential_mechanism,
    gaussian_mechanism,
    laplace_mechanism,
    randomized_response,
)
from dpcurator.mechanisms._exponential import _exponential_indices
from dpcurator.noise import InsecureSeededSource, RandomSource, uniform_integers
from tests.privacy_check import clopper_pearson as reference_clopper_pearson


# -- the arithmetic ----------------------------------------------------------------------------
@pytest.mark.parametrize(("k", "n"), [(0, 10), (3, 10), (10, 10), (500, 1000), (1, 100_000)])
def test_clopper_pearson_matches_reference_and_closed_forms(k: int, n: int) -> None:
    lower, upper = clopper_pearson(k, n, 0.025)
    assert (lower, upper) == pytest.approx(reference_clopper_pearson(k, n, 0.025), rel=1e-12)
    if k == 0:  # closed forms at the ends: 1 - alpha^(1/n)
        assert upper == pytest.approx(1 - 0.025 ** (1 / n), rel=1e-9)
    if k == n:
        assert lower == pytest.approx(0.025 ** (1 / n), rel=1e-9)
    assert 0 <= lower <= k / n <= upper <= 1


def test_clopper_pearson_covers_at_the_nominal_level() -> None:
    # Exact coverage: P[UCB(K) < p] over K ~ Binomial(n, p), summed over the outcomes.
    n, p, alpha = 50, 0.3, 0.05
    ks = np.arange(n + 1)
    misses = [k for k in ks if clopper_pearson(int(k), n, alpha)[1] < p]
    assert stats.binom.pmf(misses, n, p).sum() <= alpha
    # Negative control: the plug-in "upper bound" k/n misses about half the time.
    plug_in = [k for k in ks if k / n < p]
    assert stats.binom.pmf(plug_in, n, p).sum() > 0.3


def test_epsilon_and_delta_bounds_from_counts() -> None:
    # Counts of randomized response with p = 3/4: the bound approaches ln 3 from below.
    bound = epsilon_lower_bound(75_000, 100_000, 25_000, 100_000)
    assert math.log(3) - 0.03 < bound < math.log(3)
    lcb, _ = clopper_pearson(75_000, 100_000, 0.025)
    _, ucb = clopper_pearson(25_000, 100_000, 0.025)
    assert bound == pytest.approx(math.log(lcb / ucb), rel=1e-12)
    assert epsilon_lower_bound(75_000, 100_000, 25_000, 100_000, delta=0.1) == pytest.approx(
        math.log((lcb - 0.1) / ucb), rel=1e-12
    )
    assert delta_lower_bound(75_000, 100_000, 25_000, 100_000, epsilon=0.5) == pytest.approx(
        lcb - math.exp(0.5) * ucb, rel=1e-12
    )
    assert delta_lower_bound(75_000, 100_000, 25_000, 100_000, epsilon=2.0) == 0.0
    assert epsilon_lower_bound(10, 100, 50, 100) == 0.0  # nothing shown: never negative
    # A higher confidence gives a lower bound.
    assert epsilon_lower_bound(75_000, 100_000, 25_000, 100_000, confidence=0.999) < bound


@pytest.mark.parametrize(
    ("call", "name"),
    [
        (lambda: clopper_pearson(11, 10, 0.05), "successes"),
        (lambda: clopper_pearson(1, 0, 0.05), "trials"),
        (lambda: clopper_pearson(1, 10, 1.5), "alpha"),
        (lambda: epsilon_lower_bound(1, 10, 1, 10, confidence=1.0), "confidence"),
        (lambda: epsilon_lower_bound(1, 10, 1, 10, delta=-0.1), "delta"),
        (lambda: delta_lower_bound(1, 10, 1, 10, epsilon=-1.0), "epsilon"),
    ],
)
def test_bad_parameters_name_the_argument(call: Any, name: str) -> None:
    with pytest.raises(InvalidParameterError, match=name):
        call()


# -- helpers: the project's mechanisms, vectorised -------------------------------------------------
def _laplace(
    source: RandomSource, *, epsilon: float = 1.0, sensitivity: float = 1.0, scale: float = 1.0
) -> Any:
    def run(x: float, size: int) -> NDArray[np.float64]:
        release = laplace_mechanism(
            np.full(size, scale * x),
            epsilon=epsilon,
            sensitivity=sensitivity,
            changed_coordinates=1,
            source=source,
        )
        return release.value

    return run


# -- tight audits of sound mechanisms (done-means) -----------------------------------------------
@pytest.mark.statistical
def test_laplace_audit_is_tight() -> None:
    release = laplace_mechanism(0.0, epsilon=1.0, sensitivity=1.0)
    claimed = BasicAccountant().compose(release.event).get_epsilon(0.0)
    result = audit_mechanism(
        _laplace(InsecureSeededSource(1)), 0.0, 1.0, samples=100_000, batched=True
    )
    assert result.epsilon_lower_bound <= claimed  # fails w.p. <= 5 % if the claim holds
    assert result.epsilon_lower_bound >= 0.7 * claimed  # tight: within 30 %
    assert result.estimate == pytest.approx(1.0, abs=0.1)


@pytest.mark.statistical
def test_gaussian_audit_is_tight_at_its_delta() -> None:
    # (epsilon, delta) = (1, 1e-3): the analytic calibration is exact, so the best event reaches
    # ln((p - delta)/p') = 1 in the tail; 300k runs per side certify about 0.9 of it.
    epsilon, delta = 1.0, 1e-3
    source = InsecureSeededSource(2)

    def gaussian(calibrated_for: float) -> Any:
        def run(x: float, size: int) -> NDArray[np.float64]:
            release = gaussian_mechanism(
                np.full(size, x),
                epsilon=calibrated_for,
                delta=delta,
                sensitivity=1.0,
                changed_coordinates=1,
                source=source,
            )
            return release.value

        return run

    result = audit_mechanism(
        gaussian(epsilon), 0.0, 1.0, samples=300_000, delta=delta, batched=True
    )
    assert 0.7 * epsilon <= result.epsilon_lower_bound <= epsilon
    # Negative control: noise calibrated for epsilon = 2 but claimed as epsilon = 1.
    broken = audit_mechanism(gaussian(2.0), 0.0, 1.0, samples=300_000, delta=delta, batched=True)
    assert broken.refutes(epsilon)


@pytest.mark.statistical
def test_randomized_response_audit_is_tight() -> None:
    source = InsecureSeededSource(3)

    def run(bit: int, size: int) -> NDArray[np.int64]:
        return randomized_response(np.full(size, bit), epsilon=1.0, source=source).value

    claimed = randomized_response(0, epsilon=1.0).event.epsilon
    result = audit_mechanism(run, 0, 1, samples=50_000, batched=True)
    assert 0.7 * claimed <= result.epsilon_lower_bound <= claimed


@pytest.mark.statistical
def test_exponential_mechanism_audit_is_tight() -> None:
    # Neighbours move every utility by the sensitivity: one up, nineteen down. The best event,
    # {the raised candidate}, has ratio 20 e^0.5 / (e^0.5 + 19 e^-0.5) = e^0.917.
    source = InsecureSeededSource(4)

    def run(utilities: list[float], size: int) -> NDArray[np.int64]:
        return _exponential_indices(
            utilities, epsilon=1.0, sensitivity=1.0, monotonic=False, size=size, source=source
        )

    result = audit_mechanism(run, [0.0] * 20, [1.0] + [-1.0] * 19, samples=100_000, batched=True)
    assert 0.7 <= result.epsilon_lower_bound <= 1.0
    assert result.epsilon_lower_bound <= math.log(
        20 * math.exp(0.5) / (math.exp(0.5) + 19 / math.exp(0.5))
    )


@pytest.mark.statistical
def test_unbatched_audit_of_the_public_exponential_mechanism() -> None:
    # The public function, one run per call (slow, so few runs): still sound, still informative.
    source = InsecureSeededSource(5)
    candidates = ["a", "b", "c", "d"]

    def run(utilities: list[float]) -> str:
        return exponential_mechanism(
            candidates, utilities, epsilon=2.0, sensitivity=1.0, source=source
        ).value

    result = audit_mechanism(run, [0.0] * 4, [1.0, -1.0, -1.0, -1.0], samples=3_000)
    assert 0.5 < result.epsilon_lower_bound <= 2.0
    assert "'a'" in result.event


# -- planted faults (done-means) ----------------------------------------------------------------
def textbook_float_laplace(source: RandomSource, scale: float = 1.0) -> Any:
    """numpy's ``Generator.laplace(x, scale)`` from its 53 random bits: float noise, NOT DP.

    ``U = k 2**-53``; ``x - scale ln(2 - 2U)`` if ``U >= 1/2`` else ``x + scale ln(2U)``
    (research note A.2). Built here as the planted fault; the library has no float noise.
    """

    def run(x: float, size: int) -> NDArray[np.float64]:
        u = (uniform_integers(2**53 - 1, size, source=source) + 1) * 2.0**-53
        low = np.log(np.maximum(u + u, 2.0**-60))
        high = np.log(np.maximum(2.0 - u - u, 2.0**-60))
        return np.where(u >= 0.5, x - scale * high, x + scale * low)

    return run


@pytest.mark.statistical
def test_catches_textbook_float_laplace() -> None:
    # Claimed epsilon = 1 (scale 1, sensitivity 1). The outputs of M(0) below 1/2 in magnitude
    # have bits finer than 2**-53; those of M(1) never do (Haney et al. 2022): the auditor's
    # granularity events find the set, whose probability under M(1) is zero.
    result = audit_mechanism(
        textbook_float_laplace(InsecureSeededSource(6)), 0.0, 1.0, samples=20_000, batched=True
    )
    assert result.epsilon_lower_bound > 5.0  # far above the claim of 1
    assert result.estimate == math.inf  # no run of M(1) in the event: the loss is unbounded
    assert result.hits_other == 0
    assert "lowest_bit_exponent" in result.event


@pytest.mark.statistical
def test_float_attack_finds_nothing_against_the_project_laplace() -> None:
    # Negative control of the previous test: the same events against dpcurator's Laplace.
    result = audit_mechanism(
        _laplace(InsecureSeededSource(7)),
        0.0,
        1.0,
        samples=20_000,
        batched=True,
        events="granularity",
    )
    assert result.epsilon_lower_bound <= 1.0


@pytest.mark.statistical
@pytest.mark.parametrize("factor", [1.0, 2.0])
def test_catches_sensitivity_off_by_two(factor: float) -> None:
    # The query moves by 2 between neighbours (a doubled count) but sensitivity 1 is declared.
    source = InsecureSeededSource(8)
    result = audit_mechanism(
        _laplace(source, scale=factor), 10.0, 11.0, samples=50_000, batched=True
    )
    if factor == 1.0:  # negative control: the honest count passes
        assert result.epsilon_lower_bound <= 1.0
    else:
        assert result.refutes(1.0)
        assert result.epsilon_lower_bound > 1.7  # the true epsilon is 2


@pytest.mark.statistical
@pytest.mark.parametrize("sigma_factor", [1.0, 0.5])
def test_catches_gaussian_with_wrong_sigma(sigma_factor: float) -> None:
    # sigma calibrated for (1, 1e-5), then halved by the planted bug.
    epsilon, delta = 1.0, 1e-5
    sigma = discrete_gaussian_sigma(epsilon, delta, 1) * sigma_factor
    source = InsecureSeededSource(9)

    def run(x: int, size: int) -> NDArray[np.int64]:
        return discrete_gaussian_mechanism(np.full(size, x), sigma=sigma, source=source).value

    result = audit_mechanism(run, 0, 1, samples=200_000, delta=delta, batched=True)
    if sigma_factor == 1.0:
        assert result.epsilon_lower_bound <= epsilon
    else:
        assert result.refutes(epsilon)


class ForgetfulAccountant(BasicAccountant):
    """Planted bug: composes ``event`` once whatever ``count`` says."""

    def compose(self, event: PrivacyEvent, count: int = 1) -> ForgetfulAccountant:
        super().compose(event, min(count, 1))
        return self


@pytest.mark.statistical
def test_catches_an_accountant_that_forgets_a_composition() -> None:
    source = InsecureSeededSource(10)
    step = _laplace(source, epsilon=0.5)
    event = laplace_mechanism(0.0, epsilon=0.5, sensitivity=1.0).event

    def three_releases(x: float, size: int) -> NDArray[np.float64]:
        return np.column_stack([step(x, size) for _ in range(3)])

    claimed = ForgetfulAccountant().compose(event, count=3).get_epsilon(0.0)
    honest = BasicAccountant().compose(event, count=3).get_epsilon(0.0)
    assert claimed == pytest.approx(0.5, rel=1e-4) and honest == pytest.approx(1.5, rel=1e-4)
    result = audit_mechanism(three_releases, 0.0, 1.0, samples=100_000, batched=True)
    assert result.refutes(claimed)  # the classifier's score (about the sum) gives it away
    assert result.epsilon_lower_bound <= honest
    assert result.event.startswith("score(Y)")


# -- validity: the certified bound exceeds the truth at most 1 - confidence of the time ------------
@pytest.mark.statistical
def test_bound_exceeds_the_true_epsilon_at_most_at_the_stated_rate() -> None:
    # Coin-flip randomized response is exactly ln 3-DP (P[truth] = 3/4). 200 audits of 400 runs
    # per side and split at confidence 0.8: each exceeds ln 3 w.p. <= 0.2, so the count is
    # dominated by Binomial(200, 0.2); its 0.999 quantile is 58.
    truth = math.log(3)
    source = InsecureSeededSource(11)
    exceed_bound, exceed_estimate = 0, 0
    for _ in range(200):
        runs = [
            randomized_response(np.full(400, bit), p_truth="3/4", source=source).value
            for bit in (0, 1, 0, 1)
        ]
        result = audit_samples(*runs, confidence=0.8, events="values")
        exceed_bound += result.epsilon_lower_bound > truth
        exceed_estimate += result.estimate > truth
    assert exceed_bound <= stats.binom.ppf(0.999, 200, 0.2), exceed_bound
    # Negative control: the point estimate, no confidence interval, exceeds it far more often.
    assert exceed_estimate > stats.binom.ppf(0.999, 200, 0.2)


# -- interface -------------------------------------------------------------------------------------
def test_categorical_outputs_statistic_and_custom_events() -> None:
    source = InsecureSeededSource(12)

    def answer(bit: int) -> str:
        reported = randomized_response(bit, p_truth="3/4", source=source).value
        return "yes" if reported else "no"

    result = audit_mechanism(answer, 1, 0, samples=4_000)
    assert 0.5 < result.epsilon_lower_bound <= math.log(3)
    assert result.event in ("Y in {'yes'}", "Y in {'no'}")
    # A statistic maps structured outputs; custom events are chosen among on the selection split.
    yes = Event("answer is yes", lambda y: np.asarray(y) == 1)
    useless = Event("anything", lambda y: np.ones(len(y), dtype=bool))
    custom = audit_mechanism(
        answer,
        1,
        0,
        samples=4_000,
        statistic=lambda batch: (np.asarray(batch) == "yes").astype(int),
        events=[useless, yes],
    )
    assert custom.event == "answer is yes"
    assert custom.epsilon_lower_bound > 0.5


def test_result_helpers() -> None:
    result = AuditResult(1.0, 0.0, 0.95, "S", "D over D'", 75_000, 25_000, 100_000, 100_000, 1.1)
    assert result.refutes(0.9) and not result.refutes(1.0)
    assert result.delta_lower_bound(0.5) == pytest.approx(
        delta_lower_bound(75_000, 100_000, 25_000, 100_000, epsilon=0.5)
    )


def test_audit_samples_two_directions() -> None:
    # The favoured side is reported: swapping D and D' flips the direction, not the bound.
    source = InsecureSeededSource(13)
    runs = [
        randomized_response(np.full(5000, b), p_truth="3/4", source=source).value
        for b in (0, 1, 0, 1)
    ]
    forward = audit_samples(*runs)
    backward = audit_samples(runs[1], runs[0], runs[3], runs[2])
    assert forward.epsilon_lower_bound == pytest.approx(backward.epsilon_lower_bound)
    assert {forward.direction, backward.direction} <= {"D over D'", "D' over D"}


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"events": "nonsense"}, "events"),
        ({"events": []}, "events"),
        ({"samples": 0}, "samples"),
        ({"confidence": 0.0}, "confidence"),
        ({"delta": 1.0}, "delta"),
        ({"selection_samples": 0}, "selection_samples"),
    ],
)
def test_audit_mechanism_rejects_bad_parameters(kwargs: dict[str, Any], name: str) -> None:
    with pytest.raises(InvalidParameterError, match=name):
        audit_mechanism(lambda d, n: np.zeros(n), 0, 1, batched=True, **kwargs)


def test_audit_mechanism_rejects_bad_mechanisms() -> None:
    with pytest.raises(InvalidParameterError, match="mechanism"):
        audit_mechanism("laplace", 0, 1)  # type: ignore[arg-type]
    with pytest.raises(InvalidParameterError, match="one output"):
        audit_mechanism(lambda d, n: np.zeros(n + 1), 0, 1, samples=10, batched=True)
    with pytest.raises(InvalidParameterError, match="certification"):
        audit_samples([0.0], [1.0], [0.0, 1.0], [1.0])
