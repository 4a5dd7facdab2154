"""The ERM core: the sensitivity lemma, the solver, the utility bound, objective perturbation.

Lecture 002 is the specification: the sensitivity lemma ``||w - w'|| <= 2L/(mu n)`` is checked by
retraining on neighbouring datasets (random pairs and a pair that attains it), and the utility
bound ``E[L(w_priv) - L(w*)] <= L E||Z|| <= L sqrt(d) sigma`` by averaging the excess risk of
Gaussian output perturbation over seeds. Each check has a negative control that must fail.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from numpy.typing import NDArray
from scipy import stats
from sklearn.linear_model import LogisticRegression

from dpcurator.accounting import BasicAccountant
from dpcurator.errors import InternalError, InvalidParameterError
from dpcurator.learn import (
    GLMLoss,
    erm_sensitivity,
    excess_risk_bound,
    huber_hinge_loss,
    logistic_loss,
    objective_perturbation,
    output_perturbation,
    solve_erm,
    squared_loss,
)
from dpcurator.learn._erm_noise import vector_laplace, vector_laplace_cost
from dpcurator.learn._objective import plan_objective
from dpcurator.learn._solver import solver_tolerance
from dpcurator.noise import InsecureSeededSource

TIGHT = 1e-12


def _ball_rows(rng: np.random.Generator, n: int, d: int, radius: float) -> NDArray[np.float64]:
    x = rng.normal(size=(n, d))
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    return x / norms * radius * rng.uniform(0.2, 1.0, size=(n, 1))


def _losses(mu: float) -> list[tuple[GLMLoss, str]]:
    return [
        (logistic_loss(), "margin"),
        (huber_hinge_loss(0.5), "margin"),
        (squared_loss(1.0 / math.sqrt(mu) + 1.0), "regression"),
    ]


@pytest.mark.parametrize("mu", [0.05, 1.0])
def test_sensitivity_lemma_on_random_neighbours(mu: float) -> None:
    rng = np.random.default_rng(0)
    n, d = 20, 3
    for loss, kind in _losses(mu):
        lipschitz = loss.slope_bound * 1.0
        bound = erm_sensitivity(lipschitz, mu, n)
        worst = 0.0
        for _ in range(15):
            X = _ball_rows(rng, n, d, 1.0)
            t = rng.choice([-1.0, 1.0], size=n) if kind == "margin" else rng.uniform(-1, 1, n)
            X2, t2 = X.copy(), t.copy()
            X2[0] = _ball_rows(rng, 1, d, 1.0)[0]
            t2[0] = -t[0] if kind == "margin" else rng.uniform(-1, 1)
            w = solve_erm(X, t, loss, mu, tol=TIGHT)
            w2 = solve_erm(X2, t2, loss, mu, tol=TIGHT)
            worst = max(worst, float(np.linalg.norm(w - w2)) / bound)
        assert worst <= 1.0 + 1e-9, (loss.name, worst)
        assert worst > 0.01  # the pairs do move the minimiser


def _attaining_pair(n: int) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
    # One row x = e_1 with label +1, resp. -1; the other rows are 0 (constant loss). With the
    # Huber hinge at small margins the slope is exactly -1, so w = +-e_1 / (mu n).
    X = np.zeros((n, 2))
    X[0, 0] = 1.0
    t = np.ones(n)
    t2 = t.copy()
    t2[0] = -1.0
    return X, t, t2


def test_sensitivity_lemma_is_attained() -> None:
    n, mu = 20, 1.0
    X, t, t2 = _attaining_pair(n)
    loss = huber_hinge_loss(0.5)
    w = solve_erm(X, t, loss, mu, tol=TIGHT)
    w2 = solve_erm(X, t2, loss, mu, tol=TIGHT)
    distance = float(np.linalg.norm(w - w2))
    bound = erm_sensitivity(1.0, mu, n)
    assert distance == pytest.approx(bound, rel=1e-9)  # the lemma is tight
    # Negative control: a bound half as large (L / (mu n)) is violated by this pair.
    assert distance > erm_sensitivity(1.0, mu, n) / 2.0


@pytest.mark.parametrize("mu", [0.05, 1.0])
def test_sensitivity_lemma_under_add_remove(mu: float) -> None:
    """Adding a row to the summed objective (regulariser mu m, m public) moves it <= L/(mu m)."""
    rng = np.random.default_rng(5)
    n, d = 20, 3
    for loss, kind in _losses(mu):
        bound = erm_sensitivity(loss.slope_bound, mu, n, neighbours="add_remove")
        assert bound == pytest.approx(erm_sensitivity(loss.slope_bound, mu, n) / 2)
        worst = 0.0
        for _ in range(15):
            X = _ball_rows(rng, n + 1, d, 1.0)
            t = (
                rng.choice([-1.0, 1.0], size=n + 1)
                if kind == "margin"
                else rng.uniform(-1, 1, n + 1)
            )
            # The same public normaliser m = n on both sides: only the extra term differs.
            w = solve_erm(X[1:], t[1:], loss, mu, normaliser=n, tol=TIGHT)
            w2 = solve_erm(X, t, loss, mu, normaliser=n, tol=TIGHT)
            worst = max(worst, float(np.linalg.norm(w - w2)) / bound)
        assert worst <= 1.0 + 1e-9, (loss.name, worst)
        assert worst > 0.01  # the pairs do move the minimiser


def test_add_remove_sensitivity_is_attained_and_half_the_replace_one_bound() -> None:
    n, mu = 20, 1.0
    X, t, _ = _attaining_pair(n)
    loss = huber_hinge_loss(0.5)
    # Removing the only informative row: w = e_1 / (mu n) against w = 0.
    w = solve_erm(X, t, loss, mu, normaliser=n, tol=TIGHT)
    w2 = solve_erm(X[1:], t[1:], loss, mu, normaliser=n, tol=TIGHT)
    distance = float(np.linalg.norm(w - w2))
    assert distance == pytest.approx(erm_sensitivity(1.0, mu, n, neighbours="add_remove"))
    # Negative control: a quarter of the replace-one bound is violated by this pair.
    assert distance > erm_sensitivity(1.0, mu, n) / 4.0


def test_normaliser_is_a_rescaled_regulariser() -> None:
    """(1/m) sum + mu/2 |w|^2 has the minimiser of the mean loss with mu m / n."""
    rng = np.random.default_rng(6)
    n, mu, m = 50, 0.1, 35.0
    X = _ball_rows(rng, n, 3, 1.0)
    t = rng.choice([-1.0, 1.0], size=n)
    w = solve_erm(X, t, logistic_loss(), mu, normaliser=m, tol=TIGHT)
    np.testing.assert_allclose(w, solve_erm(X, t, logistic_loss(), mu * m / n, tol=TIGHT))
    assert not np.allclose(w, solve_erm(X, t, logistic_loss(), mu, tol=TIGHT))  # control


def test_solver_matches_scikit_learn_and_is_certified() -> None:
    rng = np.random.default_rng(1)
    n, d, mu = 200, 4, 0.01
    X = _ball_rows(rng, n, d, 1.0)
    t = np.where(X @ np.array([1.0, -2.0, 0.5, 0.0]) + 0.3 * rng.normal(size=n) > 0, 1.0, -1.0)
    tol = solver_tolerance(1.0, n)
    w = solve_erm(X, t, logistic_loss(), mu, tol=tol)
    reference = LogisticRegression(
        C=1.0 / (mu * n), fit_intercept=False, tol=1e-12, max_iter=10_000
    )
    reference.fit(X, t)
    np.testing.assert_allclose(w, reference.coef_[0], atol=1e-5)
    _, d1, _ = logistic_loss().evaluate(X @ w, t)
    gradient = X.T @ d1 / n + mu * w
    assert float(np.linalg.norm(gradient)) <= tol / 2


def test_solver_refuses_when_it_cannot_certify() -> None:
    X = np.array([[1.0, 0.0], [0.0, 1.0]])
    with pytest.raises(InternalError, match="certified"):
        solve_erm(X, np.array([1.0, -1.0]), logistic_loss(), 0.1, tol=1e-12, max_iter=1)


def test_loss_derivatives_match_finite_differences() -> None:
    s = np.linspace(-3, 3, 61)
    for loss, t in (
        (logistic_loss(), np.ones_like(s)),
        (huber_hinge_loss(0.5), -np.ones_like(s)),
        (squared_loss(1.5), np.full_like(s, 0.25)),
    ):
        value, d1, _ = loss.evaluate(s, t)
        h = 1e-6
        up, _, _ = loss.evaluate(s + h, t)
        down, _, _ = loss.evaluate(s - h, t)
        np.testing.assert_allclose(d1, (up - down) / (2 * h), atol=1e-5)
        assert float(np.abs(d1).max()) <= loss.slope_bound + 1e-12
        assert np.all(value >= 0)


def _empirical_risk(
    X: NDArray[np.float64], t: NDArray[np.float64], w: NDArray[np.float64]
) -> float:
    value, _, _ = logistic_loss().evaluate(X @ w, t)
    return float(value.mean())


@pytest.mark.statistical
def test_output_perturbation_utility_bound() -> None:
    # Lecture 002: E[L(w_priv) - L(w*)] <= L E||Z|| <= L sqrt(d) sigma (L = 1: rows in the unit
    # ball, logistic slope <= 1). The mean over 300 seeded releases estimates the expectation;
    # its standard error is far below the gap to the bound (asserted), so a violation would be
    # the bound failing, not sampling noise.
    rng = np.random.default_rng(2)
    n, d, mu, eps, delta = 100, 2, 0.5, 0.5, 1e-5
    X = _ball_rows(rng, n, d, 1.0)
    t = np.where(X[:, 0] + 0.2 * rng.normal(size=n) > 0, 1.0, -1.0)
    w_star = solve_erm(X, t, logistic_loss(), mu, tol=TIGHT)
    base = _empirical_risk(X, t, w_star)

    def mean_excess(epsilon: float, seeds: range) -> tuple[float, float, float]:
        excess, std = [], 0.0
        for seed in seeds:
            model = output_perturbation(
                X,
                t[:, None],
                logistic_loss(),
                data_norm=1.0,
                strong_convexity=mu,
                epsilon=epsilon,
                delta=delta,
                noise="gaussian",
                source=InsecureSeededSource(seed),
            )
            std = model.noise_std
            excess.append(_empirical_risk(X, t, model.coef[0]) - base)
        return float(np.mean(excess)), float(np.std(excess)) / math.sqrt(len(excess)), std

    mean, se, std = mean_excess(eps, range(150))
    bound = 1.0 * math.sqrt(d) * std
    assert mean + 4 * se <= bound
    # The lecture's closed form dominates L sqrt(d) sigma_classic, sigma_classic the lecture's
    # Gaussian sigma for sensitivity 2L/(mu n).
    sigma_classic = erm_sensitivity(1.0, mu, n) * math.sqrt(2 * math.log(1.25 / delta)) / eps
    closed = excess_risk_bound(1.0, mu, n, epsilon=eps, delta=delta, dimension=d)
    assert math.sqrt(d) * sigma_classic <= closed
    assert mean <= closed
    # Negative control: a release 100 times noisier than accounted (epsilon / 100 spent while
    # epsilon is claimed) breaks the bound computed for the claimed noise.
    broken, broken_se, _ = mean_excess(eps / 100, range(1000, 1040))
    assert broken - 4 * broken_se > bound


def test_excess_risk_bound_validates() -> None:
    with pytest.raises(InvalidParameterError, match="delta"):
        excess_risk_bound(1.0, 0.1, 10, epsilon=1.0, delta=0.0, dimension=2)
    with pytest.raises(InvalidParameterError, match="strong_convexity"):
        erm_sensitivity(1.0, 0.0, 10)


@pytest.mark.parametrize("noise", ["laplace", "gaussian"])
def test_objective_plan_budget_and_jacobian_cap(noise: str) -> None:
    n, d, zeta, lam = 500, 10, 1.0, 0.25
    for mu in (1e-5, 1.0):
        plan = plan_objective(
            logistic_loss(),
            n=n,
            size=d,
            radius=1.0,
            mu=max(mu, lam / (n * math.expm1(0.5))),
            epsilon=1.0,
            delta=1e-6 if noise == "gaussian" else 0.0,
            noise=noise,  # type: ignore[arg-type]
        )
        jacobian = math.log1p(lam / (n * plan.mu))
        assert jacobian <= 0.5 * (1 + 1e-9)
        assert plan.mu >= mu
    if noise == "gaussian":
        # Leading order of Kifer, Smith and Thakurta's beta = zeta^2 (8 ln(2/delta) + 4 eps)/eps^2
        # for the budget left to the noise (within 10%: ln(4/delta_a) against ln(2/delta)).
        eps_noise = 1.0 - jacobian
        kst = zeta * math.sqrt(8 * math.log(2 / 1e-6) + 4 * eps_noise) / eps_noise
        assert plan.std == pytest.approx(kst, rel=0.1)


@pytest.mark.statistical
def test_gaussian_staircase_follows_its_continuous_law() -> None:
    # b = g (K + V) is within a 2**-30 sigma cell of N(0, sigma^2): a KS test with 20,000 draws
    # cannot tell them apart (p > 1e-3), but tells a 10% wider law apart (p < 1e-3).
    plan = plan_objective(
        logistic_loss(),
        n=100,
        size=5,
        radius=1.0,
        mu=0.1,
        epsilon=1.0,
        delta=1e-6,
        noise="gaussian",
    )
    b = plan.draw(20_000, InsecureSeededSource(4))
    sigma = plan.grid * plan.scale
    assert stats.kstest(b, stats.norm(scale=sigma).cdf).pvalue > 1e-3
    assert stats.kstest(b, stats.norm(scale=1.1 * sigma).cdf).pvalue < 1e-3  # negative control


@pytest.mark.statistical
def test_vector_laplace_has_gamma_norm_and_uniform_direction() -> None:
    # b = R U with R ~ Gamma(d, s) and U uniform on the sphere (density ~ exp(-||b|| / s)).
    # KS tests with 4,000 draws (p > 1e-3): the norm against Gamma(d, s), and the first
    # coordinate of the direction, whose square is Beta(1/2, (d - 1)/2) for a uniform direction.
    # Negative controls (p < 1e-3): Gamma(d, 1.1 s), and the direction of i.i.d. per-coordinate
    # Laplace noise (the L1 mechanism), which is not uniform.
    d, s = 3, 2.0
    source = InsecureSeededSource(10)
    b = np.array([vector_laplace(d, s, source) for _ in range(4000)])
    norms = np.linalg.norm(b, axis=1)
    assert stats.kstest(norms, stats.gamma(d, scale=s).cdf).pvalue > 1e-3
    assert stats.kstest(norms, stats.gamma(d, scale=1.1 * s).cdf).pvalue < 1e-3
    beta = stats.beta(0.5, (d - 1) / 2)
    assert stats.kstest((b[:, 0] / norms) ** 2, beta.cdf).pvalue > 1e-3
    rng = np.random.default_rng(11)  # fixture for the negative control only
    l1 = rng.laplace(size=(4000, d))
    direction = l1[:, 0] / np.linalg.norm(l1, axis=1)
    assert stats.kstest(direction**2, beta.cdf).pvalue < 1e-3
    assert vector_laplace_cost(d) < 1e-7


@pytest.mark.parametrize(("noise", "delta"), [("laplace", 0.0), ("gaussian", 1e-6)])
def test_objective_perturbation_event_is_within_budget(noise: str, delta: float) -> None:
    rng = np.random.default_rng(5)
    X = _ball_rows(rng, 300, 3, 1.0)
    t = np.where(rng.uniform(size=(300, 2)) > 0.5, 1.0, -1.0)
    model = objective_perturbation(
        X,
        t,
        lambda _mu: logistic_loss(),
        data_norm=1.0,
        strong_convexity=1e-4,
        epsilon=0.8,
        delta=delta,
        noise=noise,  # type: ignore[arg-type]
        source=InsecureSeededSource(6),
    )
    epsilon = BasicAccountant().compose(model.event).get_epsilon(delta)
    assert epsilon <= 0.8 * (1 + 1e-12)
    assert epsilon >= 0.8 * (1 - 1e-9)  # the whole budget is used, not more
    assert model.coef.shape == (2, 3)
    assert model.strong_convexity >= 0.25 / (300 * math.expm1(0.8 * (1 - 2**-8) / 4))


def test_output_perturbation_event_is_within_budget() -> None:
    rng = np.random.default_rng(7)
    X = _ball_rows(rng, 100, 3, 1.0)
    t = np.where(rng.uniform(size=(100, 1)) > 0.5, 1.0, -1.0)
    model = output_perturbation(
        X,
        t,
        logistic_loss(),
        data_norm=1.0,
        strong_convexity=0.1,
        epsilon=0.5,
        delta=0.0,
        noise="laplace",
        source=InsecureSeededSource(8),
    )
    assert BasicAccountant().compose(model.event).get_epsilon(0.0) <= 0.5
    # Vector Laplace of scale Delta_2 / eps (plus the solver slack and the sampler's cost):
    # per-coordinate standard deviation sqrt(d + 1) times the scale.
    assert model.noise_std == pytest.approx(
        math.sqrt(3 + 1) * erm_sensitivity(1.0, 0.1, 100) / 0.5, rel=1e-3
    )
