"""Gradient perturbation: accounting, the grid sensitivity, the noise it adds, bad input.

"Zero the signal, measure the noise" (as Opacus tests DP-SGD): on all-zero rows the gradients
vanish and the released parameters are the accumulated noise alone, whose spread must match the
``sigma`` that the PLD calibration chose (and not a smaller one: negative control).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from numpy.typing import NDArray

from dpcurator.accounting import (
    ComposedEvent,
    GaussianEvent,
    PLDAccountant,
    SelfComposedEvent,
    ZCDPAccountant,
    epsilon_for,
    gaussian_sigma_analytic,
)
from dpcurator.errors import InvalidParameterError
from dpcurator.learn._gradient import (
    GRADIENT_COUNT_SHARE,
    gradient_grid_sensitivity,
    gradient_perturbation,
)
from dpcurator.learn._losses import logistic_loss, multinomial_loss
from dpcurator.noise import InsecureSeededSource


def _data(n: int = 200, d: int = 3) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(n, d))
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    t = np.where(X[:, 0] > 0, 1.0, -1.0)[:, None]
    return X, t


@pytest.mark.parametrize(("epsilon", "steps"), [(0.5, 10), (2.0, 40)])
def test_add_remove_event_meets_the_target_under_pld(epsilon: float, steps: int) -> None:
    """The count and the steps compose to the target; each step has half the noise."""
    X, t = _data()
    common = {
        "data_norm": 1.0,
        "strong_convexity": 0.01,
        "epsilon": epsilon,
        "delta": 1e-5,
        "steps": steps,
        "source": InsecureSeededSource(1),
    }
    model = gradient_perturbation(X, t, logistic_loss(), neighbours="add_remove", **common)
    assert isinstance(model.event, ComposedEvent)
    count, run = model.event.events
    assert isinstance(count, GaussianEvent) and isinstance(run, SelfComposedEvent)
    assert run.count == steps
    spent = PLDAccountant().compose(model.event).get_epsilon(1e-5)
    assert epsilon * 0.99 <= spent <= epsilon * (1 + 1e-9)
    # mu^2 = T / z^2 + 1 / z_c^2 with the count taking 1/32 of it.
    mu = 1.0 / gaussian_sigma_analytic(epsilon, 1e-5, 1.0)
    assert 1.0 / count.noise_multiplier**2 == pytest.approx(GRADIENT_COUNT_SHARE * mu**2, rel=1e-4)
    # Half the sensitivity: the noise per sum is half the replace-one noise, up to the share.
    replace = gradient_perturbation(X, t, logistic_loss(), **common)
    ratio = model.noise_std / replace.noise_std
    assert ratio == pytest.approx(0.5 / math.sqrt(1.0 - GRADIENT_COUNT_SHARE), rel=1e-4)


@pytest.mark.parametrize(("epsilon", "steps"), [(0.5, 10), (2.0, 40)])
def test_event_meets_the_target_under_pld(epsilon: float, steps: int) -> None:
    X, t = _data()
    model = gradient_perturbation(
        X,
        np.hstack([t, -t]),  # two one-vs-rest problems: 2 * steps compositions
        logistic_loss(),
        data_norm=1.0,
        strong_convexity=0.01,
        epsilon=epsilon,
        delta=1e-5,
        steps=steps,
        source=InsecureSeededSource(1),
    )
    assert isinstance(model.event, SelfComposedEvent)
    assert model.event.count == 2 * steps
    assert isinstance(model.event.event, GaussianEvent)
    spent = PLDAccountant().compose(model.event).get_epsilon(1e-5)
    assert spent <= epsilon * (1 + 1e-9)
    assert spent >= epsilon * 0.99  # calibrated, not over-noised
    # The composition of Gaussians is one Gaussian with multiplier z / sqrt(T): the analytic
    # calibration (Balle and Wang 2018) gives the same noise to within the search tolerance.
    z = model.event.event.noise_multiplier
    assert z / math.sqrt(2 * steps) == pytest.approx(
        gaussian_sigma_analytic(epsilon, 1e-5, 1.0), rel=1e-4
    )
    # zCDP (proven for the discrete noise actually drawn) gives a larger, valid epsilon.
    assert epsilon_for(model.event, 1e-5, ZCDPAccountant()) > spent


def test_grid_sum_sensitivity_holds_for_replaced_rows() -> None:
    # Replacing one row moves the integer sum of rounded, clipped gradients by at most Delta.
    rng = np.random.default_rng(2)
    loss = multinomial_loss(4)
    size, zeta, bits = 12, math.sqrt(2.0), 18
    delta_units = gradient_grid_sensitivity(zeta, size, bits)
    worst = 0.0
    for _ in range(300):
        x = rng.normal(size=(2, 3))
        x /= np.linalg.norm(x, axis=1, keepdims=True)
        labels = np.eye(4)[rng.integers(0, 4, size=2)]
        g = loss.example_gradients(x, labels, rng.normal(scale=5, size=size))
        rows = np.rint(np.ldexp(g, bits))
        worst = max(worst, float(np.linalg.norm(rows[0] - rows[1])))
    assert worst <= delta_units
    assert worst > 0.8 * delta_units  # wrong confident predictions come close
    assert worst > delta_units / 2  # negative control: the add/remove bound is too small


def test_grid_sum_sensitivity_holds_for_added_or_removed_rows() -> None:
    # Adding or removing one row moves the integer sum by that row: at most Delta_add_remove.
    rng = np.random.default_rng(3)
    loss = multinomial_loss(4)
    size, zeta, bits = 12, math.sqrt(2.0), 18
    bound = gradient_grid_sensitivity(zeta, size, bits, neighbours="add_remove")
    assert bound == pytest.approx(gradient_grid_sensitivity(zeta, size, bits) / 2)
    x = rng.normal(size=(300, 3))
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    labels = np.eye(4)[rng.integers(0, 4, size=300)]
    g = loss.example_gradients(x, labels, rng.normal(scale=5, size=size))
    rows = np.rint(np.ldexp(g, bits))
    moves = np.linalg.norm(rows, axis=1)  # sum(D + {x}) - sum(D) is x's own row
    assert float(moves.max()) <= bound
    assert float(moves.max()) > 0.8 * bound  # not vacuous
    # Negative control: a replaced row moves the sum by up to twice as much.
    assert float(np.linalg.norm(rows[:, None] - rows[None], axis=2).max()) > bound


@pytest.mark.statistical
def test_zero_signal_measures_the_calibrated_noise() -> None:
    # All-zero rows and no intercept: every gradient is 0, so theta_T = -eta/n sum_t Z_t and
    # each coordinate is centred with standard deviation eta sqrt(T) sigma_real / n (mu = 0).
    # 300 coordinates (100 fits x 3): the sample std is within 15% of the truth with
    # probability > 1 - 1e-6 (chi-square with 300 degrees of freedom).
    n, d, steps = 50, 3, 8
    X = np.zeros((n, d))
    t = np.ones((n, 1))
    samples, stds = [], []
    for seed in range(100):
        model = gradient_perturbation(
            X,
            t,
            logistic_loss(),
            data_norm=1.0,
            strong_convexity=0.0,
            epsilon=1.0,
            delta=1e-5,
            steps=steps,
            source=InsecureSeededSource(seed),
        )
        samples.append(model.coef[0])
        stds.append(model.noise_std)
    eta = 1.0 / logistic_loss().smoothness(1.0)
    expected = eta * math.sqrt(steps) * stds[0] / n
    measured = float(np.std(np.concatenate(samples)))
    assert measured == pytest.approx(expected, rel=0.15)
    # Negative control: the noise of a 4-times larger epsilon (about 1/3 of sigma) is excluded.
    assert measured > 2.0 * expected / 3.0


def test_gradient_perturbation_learns_and_clips() -> None:
    X, t = _data(2000)
    model = gradient_perturbation(
        X,
        t,
        logistic_loss(),
        data_norm=1.0,
        strong_convexity=0.0,
        epsilon=4.0,
        delta=1e-5,
        steps=30,
        max_grad_norm=0.5,
        source=InsecureSeededSource(3),
    )
    accuracy = float(np.mean(np.sign(X @ model.coef[0]) == t[:, 0]))
    assert accuracy > 0.9


def test_gradient_perturbation_bad_input() -> None:
    X, t = _data(20)
    common = {"data_norm": 1.0, "strong_convexity": 0.1, "source": InsecureSeededSource(0)}
    with pytest.raises(InvalidParameterError) as info:
        gradient_perturbation(X, t, logistic_loss(), epsilon=1.0, delta=0.0, steps=5, **common)
    assert info.value.name == "delta"
    with pytest.raises(InvalidParameterError) as info:
        gradient_perturbation(X, t, logistic_loss(), epsilon=1.0, delta=1e-5, steps=0, **common)
    assert info.value.name == "steps"
    with pytest.raises(InvalidParameterError) as info:
        gradient_perturbation(
            X, t, logistic_loss(), epsilon=1.0, delta=1e-5, steps=3, max_grad_norm=-1.0, **common
        )
    assert info.value.name == "max_grad_norm"
    with pytest.raises(InvalidParameterError) as info:
        gradient_perturbation(X, t, logistic_loss(), epsilon=1e-6, delta=1e-12, steps=5, **common)
    assert info.value.name == "epsilon"
