"""The losses' derivatives and the constants their privacy proofs use, checked numerically.

The multinomial loss is new to the ERM mechanisms, so each constant of its docstring is tested
against brute force: the gradient bound ``sqrt(2) R`` (approached by a confident wrong
prediction), the Jacobian bound of objective perturbation (log-determinant ratio of neighbours,
computed exactly), the smoothness ``R^2 / 2`` and the cross term of the Gaussian bound.
Negative controls: the bounds of a smaller constant are violated.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from numpy.typing import NDArray

from dpcurator.errors import InvalidParameterError
from dpcurator.learn._losses import (
    ERMLoss,
    huber_hinge_loss,
    logistic_loss,
    multinomial_loss,
    squared_loss,
)


def _rows(rng: np.random.Generator, n: int, d: int, radius: float) -> NDArray[np.float64]:
    x = rng.normal(size=(n, d))
    return x / np.linalg.norm(x, axis=1, keepdims=True) * radius


def _one_hot(labels: NDArray[np.int64], k: int) -> NDArray[np.float64]:
    return np.eye(k)[labels]


def _case(loss: ERMLoss, rng: np.random.Generator) -> tuple[NDArray[np.float64], ...]:
    X = _rows(rng, 7, 3, 1.5)
    joint = _one_hot(rng.integers(0, 4, size=7), 4)
    t = joint if loss.joint else rng.choice([-1.0, 1.0], size=7)
    theta = rng.normal(size=loss.parameter_count(3))
    return X, t, theta


@pytest.mark.parametrize(
    "loss",
    [logistic_loss(), huber_hinge_loss(0.5), squared_loss(1.5), multinomial_loss(4)],
    ids=lambda loss: type(loss).__name__ + getattr(loss, "name", ""),
)
def test_risk_derivatives_match_finite_differences(loss: ERMLoss) -> None:
    X, t, theta = _case(loss, np.random.default_rng(0))
    value, grad, hess = loss.risk(X, t, theta)
    h = 1e-6
    for j in range(theta.size):
        step = np.zeros_like(theta)
        step[j] = h
        up, grad_up, _ = loss.risk(X, t, theta + step)
        down, grad_down, _ = loss.risk(X, t, theta - step)
        assert (up - down) / (2 * h) == pytest.approx(grad[j], abs=1e-6)
        np.testing.assert_allclose((grad_up - grad_down) / (2 * h), hess[:, j], atol=1e-5)
    # The per-example gradients average to the gradient of the mean.
    np.testing.assert_allclose(loss.example_gradients(X, t, theta).mean(axis=0), grad, atol=1e-12)
    assert math.isfinite(value)


def test_multinomial_gradient_bound_is_sqrt2_r_and_nearly_attained() -> None:
    rng = np.random.default_rng(1)
    k, d, radius = 5, 4, 2.0
    loss = multinomial_loss(k)
    X = _rows(rng, 2000, d, radius)
    t = _one_hot(rng.integers(0, k, size=2000), k)
    norms = np.linalg.norm(loss.example_gradients(X, t, rng.normal(scale=3, size=k * d)), axis=1)
    assert float(norms.max()) <= loss.slope_bound * radius * (1 + 1e-12)
    # A confident wrong prediction (p = e_j, j != y) attains ||p - e_y|| ||x|| = sqrt(2) R.
    x = np.zeros((1, d))
    x[0, 0] = radius
    theta = np.zeros((k, d))
    theta[1, 0] = 50.0
    worst = np.linalg.norm(loss.example_gradients(x, _one_hot(np.array([0]), k), theta.ravel()))
    assert worst == pytest.approx(math.sqrt(2) * radius, rel=1e-9)
    assert worst > 1.0 * radius  # negative control: G = 1 (the binary slope) is too small


def _log_det_ratio(
    hessians: list[NDArray[np.float64]], h1: NDArray[np.float64], n_mu: float
) -> float:
    a = sum(hessians) + n_mu * np.eye(h1.shape[0])
    _, big = np.linalg.slogdet(a + h1)
    _, small = np.linalg.slogdet(a)
    return float(big - small)


def test_multinomial_jacobian_cost_bounds_the_log_determinant_ratio() -> None:
    # CMS11's change of variables: ln det(A + H_1) - ln det(A) <= (K - 1) ln(1 + R^2/(K n mu))
    # for every example (x, y) and parameter; the bound is nearly attained at p uniform.
    rng = np.random.default_rng(2)
    k, d, radius, n, mu = 3, 2, 1.0, 4, 0.05
    loss = multinomial_loss(k)
    bound = loss.jacobian_cost(radius, n, mu)
    worst = 0.0
    for _ in range(200):
        X = _rows(rng, n, d, radius)
        t = _one_hot(rng.integers(0, k, size=n), k)
        theta = rng.normal(scale=rng.choice([0.0, 1.0]), size=k * d)
        hessians = [loss.risk(X[i : i + 1], t[i : i + 1], theta)[2] for i in range(n)]
        worst = max(worst, _log_det_ratio(hessians[1:], hessians[0], n * mu))
    assert worst <= bound * (1 + 1e-9)
    assert worst >= 0.9 * bound  # the bound is tight at theta = 0 (uniform p)
    # Negative control: the rank-one bound of a binary GLM with c = 1/2 is exceeded.
    assert worst > math.log1p(0.5 * radius**2 / (n * mu))


def test_regulariser_for_inverts_the_jacobian_cost() -> None:
    for loss in (logistic_loss(), huber_hinge_loss(0.3), multinomial_loss(10)):
        mu = loss.regulariser_for(1.5, 300, 0.05)
        assert loss.jacobian_cost(1.5, 300, mu) == pytest.approx(0.05, rel=1e-12)
        assert loss.jacobian_cost(1.5, 300, mu * 0.9) > 0.05


def test_multinomial_smoothness_bounds_the_hessian() -> None:
    rng = np.random.default_rng(3)
    loss = multinomial_loss(4)
    largest = 0.0
    for scale in (0.0, 0.5, 2.0):
        X = _rows(rng, 1, 3, 2.0)
        theta = rng.normal(scale=scale, size=12)
        hess = loss.risk(X, _one_hot(np.array([1]), 4), theta)[2]
        largest = max(largest, float(np.linalg.eigvalsh(hess).max()))
    assert largest <= loss.smoothness(2.0) * (1 + 1e-12)
    assert largest > loss.smoothness(2.0) / 4  # not vacuous


def test_multinomial_cross_term_bound() -> None:
    # |<B, (p - e_y) x^T>| <= cross_weight * max_k |<b_k, x>| for every noise matrix B.
    rng = np.random.default_rng(4)
    k, d = 6, 5
    loss = multinomial_loss(k)
    for _ in range(500):
        x = _rows(rng, 1, d, 1.0)
        theta = rng.normal(scale=2, size=k * d)
        g = loss.example_gradients(x, _one_hot(rng.integers(0, k, size=1), k), theta)[0]
        b = rng.normal(size=(k, d))
        assert abs(float(g @ b.ravel())) <= loss.cross_weight * float(np.abs(b @ x[0]).max())
    assert loss.example_inner_products == k  # one per class row of B
    assert logistic_loss().example_inner_products == 1


def test_multinomial_needs_two_classes() -> None:
    with pytest.raises(InvalidParameterError) as info:
        multinomial_loss(1)
    assert info.value.name == "classes"
