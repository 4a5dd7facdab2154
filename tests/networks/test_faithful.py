"""The general tool: projection with faithfulness constraints, and its accuracy bound."""

from __future__ import annotations

import numpy as np
import pytest
from numpy.typing import NDArray

from dpcurator.errors import InfeasibleConstraintsError, InvalidParameterError
from dpcurator.networks import SOLVERS, LinearProblem, bilevel_project, faithful_project
from dpcurator.noise import InsecureSeededSource, discrete_laplace, uniform_integers


def _transport(costs: NDArray[np.float64]) -> LinearProblem:
    """Supplies s (2) and demands d (3) as data; flows y (2 x 3) with sum_j y_ij = s_i etc."""
    n_s, n_d = costs.shape
    n = n_s + n_d
    rows = []
    for i in range(n_s):
        row = np.zeros(n + n_s * n_d)
        row[i] = -1.0
        row[n + i * n_d : n + (i + 1) * n_d] = 1.0
        rows.append(row)
    for j in range(n_d):
        row = np.zeros(n + n_s * n_d)
        row[n_s + j] = -1.0
        row[n + j : n + n_s * n_d : n_d] = 1.0
        rows.append(row)
    return LinearProblem(
        n,
        cost=np.concatenate([np.zeros(n), costs.ravel()]),
        A_eq=np.array(rows),
        b_eq=np.zeros(len(rows)),
        lower=np.zeros(n_s * n_d),
    )


def _case(seed: int) -> tuple[LinearProblem, NDArray[np.float64], NDArray[np.float64]]:
    source = InsecureSeededSource(seed)
    costs = 1.0 + uniform_integers(9, size=6, source=source).astype(float).reshape(2, 3)
    demand = uniform_integers(20, size=3, source=source).astype(float)
    share = float(uniform_integers(int(demand.sum()) + 1, source=source))
    truth: NDArray[np.float64] = np.concatenate(
        [[share, demand.sum() - share], demand]
    )  # balanced: feasible
    noisy = truth + discrete_laplace(4.0, size=5, source=source).astype(np.float64)
    return _transport(costs), truth, noisy


@pytest.mark.parametrize("solver", SOLVERS)
def test_accuracy_bound_when_the_truth_is_feasible(solver: str) -> None:
    """||x* - c|| <= ||c~ - c|| (lecture 003), over seeds, windows and both solvers."""
    for seed in range(25):
        problem, truth, noisy = _case(seed)
        optimum = problem.solve(truth).value
        released = optimum + float(
            discrete_laplace(5.0, size=1, source=InsecureSeededSource(seed))[0]
        )
        beta = abs(released - optimum) + 0.5  # the truth is inside the faithfulness window
        out = faithful_project(
            noisy, problem, optimum=released, beta=beta, data_lower=0.0, solver=solver
        )
        assert out.max_residual < 1e-5
        assert abs(out.objective - released) <= beta + 1e-5
        assert np.linalg.norm(out.values - truth) <= np.linalg.norm(noisy - truth) + 1e-6


def test_negative_control_bound_fails_when_the_truth_is_infeasible() -> None:
    """The bound needs a feasible truth: a negative 'true' value breaks it."""
    problem = LinearProblem(1, cost=[0.0, 1.0], A_eq=[[-1.0, 1.0]], b_eq=[0.0], lower=[0.0])
    truth, noisy = np.array([-5.0]), np.array([-4.0])
    out = faithful_project(noisy, problem, optimum=None, data_lower=0.0)
    assert out.values[0] == pytest.approx(0.0, abs=1e-7)
    assert np.linalg.norm(out.values - truth) > np.linalg.norm(noisy - truth)


def test_faithfulness_binds_and_infeasibility_is_reported() -> None:
    problem = LinearProblem(2, cost=[0, 0, 1], A_eq=[[-1, -1, 1]], b_eq=[0], lower=[0], upper=[10])
    out = faithful_project([7.0, 6.0], problem, optimum=9.0, beta=0.5, data_lower=0.0)
    assert out.values.sum() == pytest.approx(9.5, abs=1e-6)
    with pytest.raises(InfeasibleConstraintsError, match="beta"):
        faithful_project([7.0, 6.0], problem, optimum=30.0, beta=1.0, data_lower=0.0)
    with pytest.raises(InvalidParameterError, match="solver"):
        faithful_project([7.0, 6.0], problem, optimum=9.0, beta=0.5, solver="gurobi")
    with pytest.raises(InvalidParameterError, match="n_data"):
        LinearProblem(3, cost=[0, 0, 1])
    infeasible = problem.solve([20.0, 0.0])
    assert not infeasible.feasible and np.isnan(infeasible.value)


def _kinked() -> LinearProblem:
    """One demand: unit cost 1 up to 5, then 3 (f*(D) = D + 2 max(D - 5, 0), D <= 105)."""
    return LinearProblem(
        1, cost=[0, 1, 3], A_eq=[[-1, 1, 1]], b_eq=[0], lower=[0, 0], upper=[5, 100]
    )


def test_dual_bound_is_a_global_minorant_tight_where_taken() -> None:
    """f*(D) >= L(D) for every D (weak duality), with equality at the point it was taken."""
    for seed in range(10):
        problem, truth, _ = _case(seed)
        cut = problem.lower_bound(truth)
        assert cut(truth) == pytest.approx(problem.solve(truth).value, abs=1e-7)
        source = InsecureSeededSource(500 + seed)
        for _ in range(10):
            other = truth + discrete_laplace(3.0, size=5, source=source).astype(np.float64)
            other[:2] += (other[2:].sum() - other[:2].sum()) / 2  # balanced, so feasible
            solution = problem.solve(np.maximum(other, 0))
            if solution.feasible:
                assert solution.value >= cut(np.maximum(other, 0)) - 1e-7
    with pytest.raises(InfeasibleConstraintsError, match="feasible point"):
        _kinked().lower_bound([500.0])


def test_bilevel_holds_the_optimum_on_both_sides_where_program_2_does_not() -> None:
    problem = _kinked()
    one = faithful_project([4.0], problem, optimum=11.0, beta=1.0, data_lower=0.0)
    assert problem.solve(one.values).value == pytest.approx(4.0)  # below 11 - 1: one-sided
    two = bilevel_project([4.0], problem, optimum=11.0, beta=1.0, data_lower=0.0)
    assert 10.0 - 1e-6 <= problem.solve(two.values).value <= 12.0 + 1e-6
    assert two.optimal_value == pytest.approx(problem.solve(two.values).value)
    assert two.values[0] == pytest.approx(20 / 3, abs=1e-5)  # the nearest such demand
    with pytest.raises(InvalidParameterError, match="beta"):
        bilevel_project([4.0], problem, optimum=11.0, beta=np.inf)
    with pytest.raises(InvalidParameterError, match="cuts"):
        faithful_project([4.0], problem, optimum=None, cuts=[problem.lower_bound([4.0])])
    with pytest.raises(InfeasibleConstraintsError, match="beta"):
        bilevel_project([4.0], problem, optimum=400.0, beta=1.0, data_lower=0.0)
    # A plan of cost 11 exists for D <= 4 (the dear source), but the optimum stays <= 4:
    # program #2 is feasible, the bilevel program is not, and says so.
    assert faithful_project([4.0], problem, optimum=11.0, beta=1.0, data_upper=4.0).values[0] <= 4
    with pytest.raises(InfeasibleConstraintsError, match="widen beta"):
        bilevel_project([4.0], problem, optimum=11.0, beta=1.0, data_lower=0.0, data_upper=4.0)


@pytest.mark.parametrize("solver", SOLVERS)
def test_bilevel_window_and_the_factor_two_bound(solver: str) -> None:
    """Both sides of the window always; ||D^ - D|| <= 2 ||D~ - D|| when its hypotheses hold.

    The hypotheses (bilevel_project's docstring): the truth is in the bilevel set
    (|f*(D) - f~*| <= beta) and D^ is the exact projection onto it (``iterations == 0``); the
    windows here are narrow (beta = 1), so the lower side binds in some seeds.
    """
    checked = bound = 0
    for seed in range(25):
        problem, truth, noisy = _case(seed)
        optimum = problem.solve(truth).value
        released = optimum + float(
            discrete_laplace(3.0, size=1, source=InsecureSeededSource(seed))[0]
        )
        out = bilevel_project(
            noisy, problem, optimum=released, beta=1.0, data_lower=0.0, solver=solver
        )
        value = problem.solve(out.values).value
        slack = 1e-5 * (1 + abs(released))
        assert released - 1.0 - slack <= value <= released + 1.0 + slack
        checked += out.iterations > 0
        if abs(optimum - released) <= 1.0 and out.iterations == 0:
            bound += 1
            error = np.linalg.norm(noisy - truth)
            assert np.linalg.norm(out.values - truth) <= 2 * error + 1e-6
    assert checked > 0 and bound > 0  # both branches were exercised


def test_negative_control_factor_two_fails_when_the_truth_is_outside_the_window() -> None:
    """Released optimum far from the truth's: D^ is pulled away, beyond 2 ||D~ - D||."""
    problem = _kinked()
    truth, noisy = np.array([3.0]), np.array([3.5])
    out = bilevel_project(noisy, problem, optimum=30.0, beta=1.0, data_lower=0.0)
    assert abs(problem.solve(truth).value - 30.0) > 1.0  # hypothesis violated
    assert np.linalg.norm(out.values - truth) > 2 * np.linalg.norm(noisy - truth)
