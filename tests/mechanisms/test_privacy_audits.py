"""Empirical privacy audits of every mechanism, each with a negative control that must fail.

For each mechanism: N outputs of M(D) and of M(D') on neighbouring inputs (fixed seeds), a
family of events fixed in advance (each output value for discrete outputs, thresholds for
numeric ones), Clopper-Pearson bounds with the failure probability ALPHA split by a union bound
(``tests/privacy_check.py``), and ``eps_LB`` the best lower bound over events and directions.

- Positive check: ``eps_LB <= claimed epsilon``. If the mechanism is epsilon-DP this fails with
  probability at most ALPHA = 1e-3 (the tolerance is the Clopper-Pearson bound itself). Where
  the chosen neighbours make the mechanism's worst case visible, a second assertion checks that
  the audit has power (``eps_LB`` close to epsilon), so a vacuous audit cannot pass silently.
- Negative control: the same audit against a deliberately broken variant (noise scale halved,
  truth told more often, sensitivity under-declared, monotonicity wrongly claimed) must give
  ``eps_LB > claimed epsilon``.

Mechanisms that release one value per respondent or per coordinate are sampled in one
vectorised call (N respondents / N coordinates with the same parameters, which the tests check);
the selection mechanisms and AboveThreshold are sampled through the private batch samplers that
their public functions call with ``size=1``.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from numpy.typing import NDArray

from dpcurator.accounting import discrete_gaussian_sigma
from dpcurator.mechanisms import (
    coin_randomized_response,
    die_randomized_response,
    discrete_gaussian_mechanism,
    gaussian_mechanism,
    geometric_mechanism,
    laplace_mechanism,
    randomized_response,
)
from dpcurator.mechanisms._exponential import _exponential_indices, _permute_and_flip_indices
from dpcurator.mechanisms._sparse_vector import _above_threshold_runs
from dpcurator.noise import InsecureSeededSource, RandomSource, bernoulli, uniform_integers
from privacy_check import AuditResult, Event, audit, threshold_events, value_events

N = 200_000
ALPHA = 1e-3

pytestmark = pytest.mark.statistical


def _private(result: AuditResult, epsilon: float) -> None:
    assert result.epsilon_lower_bound <= epsilon, result


def _violates(result: AuditResult, epsilon: float) -> None:
    assert result.epsilon_lower_bound > epsilon, result


# -- randomized response ------------------------------------------------------------------------
def test_binary_randomized_response() -> None:
    r0 = randomized_response(np.zeros(N, dtype=int), epsilon=1.0, source=InsecureSeededSource(1))
    r1 = randomized_response(np.ones(N, dtype=int), epsilon=1.0, source=InsecureSeededSource(2))
    result = audit(r0.value, r1.value, value_events([0, 1]), alpha=ALPHA)
    _private(result, r0.event.epsilon)
    assert r0.event.epsilon <= 1.0
    assert result.epsilon_lower_bound > 0.9  # randomized response is tight: the audit has power


def test_binary_randomized_response_negative_control() -> None:
    # Broken: the truth is told w.p. 0.9 (ln 9-DP) while epsilon = 1 is claimed.
    r0 = randomized_response(np.zeros(N, dtype=int), p_truth=0.9, source=InsecureSeededSource(3))
    r1 = randomized_response(np.ones(N, dtype=int), p_truth=0.9, source=InsecureSeededSource(4))
    _violates(audit(r0.value, r1.value, value_events([0, 1]), alpha=ALPHA), 1.0)


@pytest.mark.parametrize(("actual", "claimed"), [(1.0, 1.0), (2.0, 1.0)])
def test_kary_randomized_response(actual: float, claimed: float) -> None:
    def run(value: int, seed: int) -> NDArray[np.int64]:
        release = randomized_response(
            np.full(N, value), epsilon=actual, categories=4, source=InsecureSeededSource(seed)
        )
        return release.value

    result = audit(run(0, 5), run(1, 6), value_events(range(4)), alpha=ALPHA)
    if actual <= claimed:
        _private(result, claimed)
        assert result.epsilon_lower_bound > 0.9 * claimed
    else:  # negative control: calibrated for epsilon = 2, claimed 1
        _violates(result, claimed)


def _broken_coin(values: NDArray[np.int64], source: RandomSource) -> NDArray[np.int64]:
    # The coin protocol with a biased first coin (heads w.p. 3/4): P[truth] = 7/8, ln 7-DP.
    n = values.size
    first = bernoulli("3/4", n, source=source)
    second = uniform_integers(2, n, source=source)
    return np.where(first, values, second)


def _broken_die(values: NDArray[np.int64], source: RandomSource) -> NDArray[np.int64]:
    # The die protocol telling the truth on 1-5: P[truth] = 5/6, ln 5-DP.
    roll = uniform_integers(6, values.size, source=source)
    return np.where(roll < 5, values, 1 - values)


def test_coin_and_die_randomized_response() -> None:
    events = value_events([0, 1])
    for mechanism, claimed in (
        (coin_randomized_response, math.log(3)),
        (die_randomized_response, math.log(2)),
    ):
        r0 = mechanism(np.zeros(N, dtype=int), source=InsecureSeededSource(7))
        r1 = mechanism(np.ones(N, dtype=int), source=InsecureSeededSource(8))
        assert r0.event.epsilon == pytest.approx(claimed, rel=1e-12)
        result = audit(r0.value, r1.value, events, alpha=ALPHA)
        _private(result, r0.event.epsilon)
        assert result.epsilon_lower_bound > 0.9 * claimed


def test_coin_and_die_negative_controls() -> None:
    events = value_events([0, 1])
    for broken, claimed in ((_broken_coin, math.log(3)), (_broken_die, math.log(2))):
        y0 = broken(np.zeros(N, dtype=np.int64), InsecureSeededSource(9))
        y1 = broken(np.ones(N, dtype=np.int64), InsecureSeededSource(10))
        _violates(audit(y0, y1, events, alpha=ALPHA), claimed)


# -- Laplace and geometric ---------------------------------------------------------------------
def _laplace_samples(
    value: float, *, epsilon: float, sensitivity: float, seed: int
) -> NDArray[np.float64]:
    release = laplace_mechanism(
        np.full(N, value),
        epsilon=epsilon,
        sensitivity=sensitivity,
        changed_coordinates=1,
        source=InsecureSeededSource(seed),
    )
    # Each coordinate is one run of the scalar mechanism: same grid, scale and event.
    scalar = laplace_mechanism(value, epsilon=epsilon, sensitivity=sensitivity)
    assert release.event == scalar.event
    assert release.error is not None and scalar.error is not None
    assert release.error.unit == scalar.error.unit
    return release.value


@pytest.mark.parametrize(
    ("x", "x_prime", "sensitivity", "epsilon"),
    [(0.0, 1.0, 1.0, 1.0), (0.3, 2.8, 2.5, 0.5)],  # the second pair is off the grid
)
def test_laplace_mechanism(x: float, x_prime: float, sensitivity: float, epsilon: float) -> None:
    b = sensitivity / epsilon
    events = threshold_events([x + k * b / 2 for k in range(-4, 8)])
    y0 = _laplace_samples(x, epsilon=epsilon, sensitivity=sensitivity, seed=11)
    y1 = _laplace_samples(x_prime, epsilon=epsilon, sensitivity=sensitivity, seed=12)
    result = audit(y0, y1, events, alpha=ALPHA)
    _private(result, epsilon)
    assert result.epsilon_lower_bound > 0.85 * epsilon  # thresholds beyond both means are tight


def test_laplace_mechanism_negative_control() -> None:
    # Broken: noise scale halved (run at epsilon 2) while epsilon = 1 is claimed.
    events = threshold_events([k / 2 for k in range(-4, 8)])
    y0 = _laplace_samples(0.0, epsilon=2.0, sensitivity=1.0, seed=13)
    y1 = _laplace_samples(1.0, epsilon=2.0, sensitivity=1.0, seed=14)
    _violates(audit(y0, y1, events, alpha=ALPHA), 1.0)


def test_laplace_mechanism_vector_charges_every_changed_coordinate() -> None:
    # Two coordinates move by 0.5 each (L1 sensitivity 1): events on their sum.
    def run(shift: float, seed: int, epsilon: float) -> NDArray[np.float64]:
        values = np.full((N, 2), shift)
        release = laplace_mechanism(
            values,
            epsilon=epsilon,
            sensitivity=1.0,
            changed_coordinates=2,
            source=InsecureSeededSource(seed),
        )
        return release.value.sum(axis=1)

    events = threshold_events([k / 2 for k in range(-4, 8)])
    _private(audit(run(0.0, 15, 1.0), run(0.5, 16, 1.0), events, alpha=ALPHA), 1.0)
    # Negative control: the same vectors at epsilon 3 (scale a third) claimed as epsilon 1.
    _violates(audit(run(0.0, 17, 3.0), run(0.5, 18, 3.0), events, alpha=ALPHA), 1.0)


@pytest.mark.parametrize(("actual", "claimed"), [(1.0, 1.0), (2.0, 1.0)])
def test_geometric_mechanism(actual: float, claimed: float) -> None:
    r0 = geometric_mechanism(
        np.zeros(N, dtype=int), epsilon=actual, source=InsecureSeededSource(19)
    )
    r1 = geometric_mechanism(np.ones(N, dtype=int), epsilon=actual, source=InsecureSeededSource(20))
    events = value_events(range(-3, 5)) + threshold_events([k + 0.5 for k in range(-4, 5)])
    result = audit(r0.value, r1.value, events, alpha=ALPHA)
    if actual <= claimed:
        _private(result, r0.event.epsilon)
        assert result.epsilon_lower_bound > 0.9 * claimed
    else:  # negative control: scale halved
        _violates(result, claimed)


# -- Gaussian (approximate DP: hypothesis-testing form with delta) -----------------------------
@pytest.mark.parametrize(("shift", "broken"), [(1.0, False), (2.0, True)])
def test_gaussian_mechanism(shift: float, broken: bool) -> None:
    epsilon, delta = 1.0, 1e-2

    def run(value: float, seed: int) -> tuple[NDArray[np.float64], float]:
        release = gaussian_mechanism(
            np.full(N, value),
            epsilon=epsilon,
            delta=delta,
            sensitivity=1.0,
            changed_coordinates=1,
            source=InsecureSeededSource(seed),
        )
        assert release.error is not None
        return release.value, release.error.scale

    y0, sigma = run(0.0, 21)
    y1, _ = run(shift, 22)
    events = threshold_events([shift / 2 + k * sigma / 2 for k in range(-6, 8)])
    result = audit(y0, y1, events, alpha=ALPHA, delta=delta)
    if not broken:
        _private(result, epsilon)
        assert result.epsilon_lower_bound > 0.6 * epsilon
    else:  # negative control: neighbours differ by 2 while sensitivity 1 is declared
        _violates(result, epsilon)


@pytest.mark.parametrize(("shift", "broken"), [(1, False), (2, True)])
def test_discrete_gaussian_mechanism(shift: int, broken: bool) -> None:
    epsilon, delta = 1.0, 1e-2
    sigma = discrete_gaussian_sigma(epsilon, delta, 1)
    r0 = discrete_gaussian_mechanism(
        np.zeros(N, dtype=int), sigma=sigma, source=InsecureSeededSource(23)
    )
    r1 = discrete_gaussian_mechanism(
        np.full(N, shift), sigma=sigma, source=InsecureSeededSource(24)
    )
    events = threshold_events([k + 0.5 for k in range(-6, 8)])
    result = audit(r0.value, r1.value, events, alpha=ALPHA, delta=delta)
    if not broken:
        _private(result, epsilon)
        assert result.epsilon_lower_bound > 0.6 * epsilon
    else:
        _violates(result, epsilon)


# -- selection -----------------------------------------------------------------------------------
def _indices_events(count: int) -> list[Event]:
    return value_events(range(count))


@pytest.mark.parametrize(
    ("utilities_prime", "sensitivity", "monotonic", "broken"),
    [
        # General EM: one utility up by 1, the others down by 1 (|change| <= 1 = Delta).
        ([1.0] + [-1.0] * 19, 1.0, False, False),
        ([1.0] + [-1.0] * 19, 0.5, False, True),  # sensitivity under-declared
        # Monotone EM: one count up by 1, the others unchanged.
        ([1.0] + [0.0] * 49, 1.0, True, False),
        ([1.0] + [-1.0] * 49, 1.0, True, True),  # "monotonic" claimed for a two-way change
    ],
)
def test_exponential_mechanism(
    utilities_prime: list[float], sensitivity: float, monotonic: bool, broken: bool
) -> None:
    count = len(utilities_prime)

    def run(utilities: list[float], seed: int) -> NDArray[np.int64]:
        return _exponential_indices(
            utilities,
            epsilon=1.0,
            sensitivity=sensitivity,
            monotonic=monotonic,
            size=N,
            source=InsecureSeededSource(seed),
        )

    result = audit(
        run([0.0] * count, 25), run(utilities_prime, 26), _indices_events(count), alpha=ALPHA
    )
    if not broken:
        _private(result, 1.0)
        assert result.epsilon_lower_bound > 0.7
    else:
        _violates(result, 1.0)


@pytest.mark.parametrize(
    ("scores_prime", "sensitivity", "monotonic", "broken"),
    [
        ([1.0, 0.0], 1.0, True, False),  # a count goes up: the worst case is exactly e^eps
        ([1.0, 0.0], 0.5, True, True),  # sensitivity under-declared
        ([1.0, -1.0], 1.0, False, False),  # general scores: also exactly e^eps
        ([1.0, -1.0], 1.0, True, True),  # "monotonic" claimed for a two-way change
    ],
)
def test_report_noisy_max(
    scores_prime: list[float], sensitivity: float, monotonic: bool, broken: bool
) -> None:
    def run(scores: list[float], seed: int) -> NDArray[np.int64]:
        return _permute_and_flip_indices(
            scores,
            epsilon=1.0,
            sensitivity=sensitivity,
            monotonic=monotonic,
            size=N,
            source=InsecureSeededSource(seed),
        )

    result = audit(run([0.0, 0.0], 27), run(scores_prime, 28), _indices_events(2), alpha=ALPHA)
    if not broken:
        _private(result, 1.0)
        assert result.epsilon_lower_bound > 0.9
    else:
        _violates(result, 1.0)


# -- sparse vector -------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("queries_prime", "broken"),
    [
        ([1.0, 1.0, 1.0, 1.0, -1.0], False),
        # Negative control: queries move by 4 while sensitivity 1 is declared.
        ([-4.0, -4.0, -4.0, -4.0, 4.0], True),
    ],
)
def test_above_threshold(queries_prime: list[float], broken: bool) -> None:
    def run(queries: list[float], seed: int) -> NDArray[np.int64]:
        return _above_threshold_runs(
            0.0, queries, epsilon=1.0, sensitivity=1.0, size=N, source=InsecureSeededSource(seed)
        )

    # Output: the index of the first "above" (5 = none); each value is an event.
    result = audit(run([0.0] * 5, 29), run(queries_prime, 30), value_events(range(6)), alpha=ALPHA)
    if not broken:
        _private(result, 1.0)
        assert result.epsilon_lower_bound > 0.5
    else:
        _violates(result, 1.0)
