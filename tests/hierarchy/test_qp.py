"""Constraint-based DP through OSQP: the projection, its accuracy bound, and the tree relaxation.

``hierarchy.md`` (c) 8 (i) (a projection onto a convex set holding the truth never moves away
from it), 10 (agreement with two-pass least squares when only equalities are present), the
worked example D2 and box-constrained problems checked against scipy; bad input everywhere.
"""

from __future__ import annotations

import sys
from fractions import Fraction

import numpy as np
import pytest
from numpy.typing import NDArray
from scipy import optimize, sparse

from dpcurator.errors import InfeasibleConstraintsError, InvalidParameterError, UnsupportedError
from dpcurator.hierarchy._domains import domains
from dpcurator.hierarchy._least_squares import least_squares
from dpcurator.hierarchy._qp import (
    Projection,
    consistency_matrix,
    project,
    relaxed_tree_qp,
)
from dpcurator.hierarchy._tree import Tree
from tests.hierarchy.conftest import D2_NOISY, D2_PARENTS, D2_TRUTH, random_instance


def w_norm(x: NDArray[np.float64], weights: NDArray[np.float64]) -> float:
    return float(np.sqrt(np.sum(weights * x**2)))


def equalities(tree: Tree) -> dict[str, object]:
    matrix = consistency_matrix(tree)
    return {"A_eq": matrix, "b_eq": np.zeros(matrix.shape[0])}


# -- the consistency matrix ----------------------------------------------------------------


def test_consistency_matrix_has_one_row_per_internal_node_and_annihilates_sums() -> None:
    rng = np.random.default_rng(0)
    for _ in range(20):
        tree = random_instance(rng, 25, max_value=9, noise=0).tree
        matrix = consistency_matrix(tree)
        assert matrix.shape == (int(np.count_nonzero(~tree.is_leaf)), tree.n_nodes)
        leaves = rng.integers(0, 50, int(np.count_nonzero(tree.is_leaf)))
        consistent = tree.aggregate(leaves)
        assert not np.any(matrix @ consistent)
        broken = consistent.copy()
        broken[0] += 1
        assert np.count_nonzero(matrix @ broken) == 1  # only the root's row sees it
        assert matrix.nnz == matrix.shape[0] + tree.n_nodes - 1  # each node once as a child


# -- the accuracy bound ----------------------------------------------------------------------


def test_projection_never_moves_away_from_a_feasible_truth() -> None:
    """||x - c||_W <= ||y - c||_W on 200 seeded random trees with bounds, total and weights."""
    rng = np.random.default_rng(1)
    for trial in range(200):
        instance = random_instance(
            rng,
            int(rng.integers(3, 40)),
            max_value=6,
            noise=8,
            real_noise=True,
            random_weights=True,
        )
        truth = instance.truth
        options = {"total": int(truth[0])} if trial % 2 else {"upper": int(truth.max()) + 2}
        doms = domains(instance.tree, instance.noisy, **options)
        x = relaxed_tree_qp(instance.tree, instance.noisy, instance.weights, doms)
        moved = w_norm(x - truth, instance.weights)
        noisy = w_norm(instance.noisy - truth, instance.weights)
        assert moved <= noisy * (1 + 1e-7) + 1e-6, trial


def test_accuracy_bound_needs_the_truth_inside_the_constraints() -> None:
    """Negative control: a total that is off by 40 makes the bound fail on most instances."""
    rng = np.random.default_rng(2)
    failures = 0
    for _ in range(30):
        instance = random_instance(rng, 15, max_value=6, noise=2, real_noise=True)
        wrong = domains(instance.tree, instance.noisy, total=int(instance.truth[0]) + 40)
        x = relaxed_tree_qp(instance.tree, instance.noisy, instance.weights, wrong)
        failures += w_norm(x - instance.truth, instance.weights) > w_norm(
            instance.noisy - instance.truth, instance.weights
        )
    assert failures >= 25


def test_general_polyhedron_keeps_the_accuracy_bound() -> None:
    """Random inequalities and equalities that the truth satisfies (the lectures' general form)."""
    rng = np.random.default_rng(3)
    for _ in range(50):
        n, m, k = 12, 8, 3
        truth = rng.uniform(-5, 5, n)
        A_ub = rng.normal(size=(m, n))
        A_eq = rng.normal(size=(k, n))
        weights = rng.uniform(0.5, 2.0, n)
        noisy = truth + rng.normal(scale=3.0, size=n)
        result = project(
            noisy,
            weights=weights,
            A_eq=A_eq,
            b_eq=A_eq @ truth,
            A_ub=A_ub,
            b_ub=A_ub @ truth + rng.uniform(0, 1, m),
            lower=truth - 4,
        )
        assert result.status == "solved" and result.max_residual < 1e-6
        assert w_norm(result.values - truth, weights) <= w_norm(noisy - truth, weights) + 1e-6


# -- agreement with least squares (KKT) and with scipy ---------------------------------------


@pytest.mark.parametrize("fixed_root", [False, True])
def test_equalities_only_agree_with_two_pass_least_squares(fixed_root: bool) -> None:
    rng = np.random.default_rng(4)
    for _ in range(40):
        instance = random_instance(
            rng,
            int(rng.integers(2, 60)),
            max_value=9,
            noise=5,
            real_noise=True,
            random_weights=True,
        )
        tree, y, w = instance.tree, instance.noisy, instance.weights
        doms = domains(tree, y, lower=None, total=int(instance.truth[0]) if fixed_root else None)
        reference = least_squares(tree, y, w, doms)
        assert np.allclose(relaxed_tree_qp(tree, y, w, doms), reference, atol=1e-6, rtol=0)


def test_equalities_only_agree_with_a_dense_kkt_solve() -> None:
    """Independent oracle: [[2W, C^T], [C, 0]] [x, mu] = [2W y, 0], solved by numpy."""
    rng = np.random.default_rng(5)
    for _ in range(20):
        instance = random_instance(rng, 30, max_value=9, noise=5, random_weights=True)
        tree, y, w = instance.tree, instance.noisy, instance.weights
        matrix = consistency_matrix(tree).toarray()
        m = matrix.shape[0]
        kkt = np.block([[np.diag(2 * w), matrix.T], [matrix, np.zeros((m, m))]])
        expected = np.linalg.solve(kkt, np.concatenate([2 * w * y, np.zeros(m)]))[: y.size]
        got = project(y, weights=w, **equalities(tree))
        assert np.allclose(got.values, expected, atol=1e-6, rtol=0)
        assert got.objective == pytest.approx(float(np.sum(w * (expected - y) ** 2)), rel=1e-8)


def test_non_negative_tree_projection_agrees_with_scipy_lsq_linear() -> None:
    """Without a total, non-negative leaves are the only binding bounds: a bounded LS in leaves."""
    rng = np.random.default_rng(6)
    for _ in range(25):
        instance = random_instance(
            rng, 25, max_value=3, noise=6, real_noise=True, random_weights=True
        )
        tree, y, w = instance.tree, instance.noisy, instance.weights
        leaves = np.flatnonzero(tree.is_leaf)
        membership = np.column_stack(
            [tree.aggregate(np.eye(leaves.size, dtype=np.int64)[j]) for j in range(leaves.size)]
        )
        root_w = np.sqrt(w)[:, None]
        fit = optimize.lsq_linear(
            root_w * membership, np.sqrt(w) * y, bounds=(0, np.inf), tol=1e-13, method="bvls"
        )
        x = relaxed_tree_qp(tree, y, w, domains(tree, y))
        assert np.allclose(x, membership @ fit.x, atol=1e-5, rtol=0)


def scipy_projection(
    noisy: NDArray[np.float64],
    weights: NDArray[np.float64],
    matrix: NDArray[np.float64],
    lower: NDArray[np.int64],
    upper: NDArray[np.int64],
) -> optimize.OptimizeResult:
    """The same QP by scipy's trust-region interior-point method (an independent solver)."""
    return optimize.minimize(
        lambda x: float(np.sum(weights * (x - noisy) ** 2)),
        np.clip(noisy, lower, upper).astype(np.float64),
        jac=lambda x: 2 * weights * (x - noisy),
        hess=lambda _: np.diag(2 * weights),
        bounds=optimize.Bounds(lower, upper),
        constraints=[optimize.LinearConstraint(matrix, 0.0, 0.0)],
        method="trust-constr",
        options={"gtol": 1e-11, "xtol": 1e-12, "maxiter": 5000},
    )


def test_box_and_total_agree_with_scipy_trust_constr() -> None:
    rng = np.random.default_rng(7)
    binding = 0
    for _ in range(6):
        instance = random_instance(
            rng, 12, max_value=4, noise=6, real_noise=True, random_weights=True
        )
        tree, y, w = instance.tree, instance.noisy, instance.weights
        doms = domains(tree, y, total=int(instance.truth[0]), upper=int(instance.truth.max()))
        matrix = consistency_matrix(tree).toarray()
        fit = scipy_projection(y, w, matrix, doms.lower, doms.upper)
        x = relaxed_tree_qp(tree, y, w, doms)
        assert np.allclose(matrix @ x, 0.0, atol=1e-9)  # feasible: consistent, within the box
        assert np.all(x >= doms.lower - 1e-9) and np.all(x <= doms.upper + 1e-9)
        gap = fit.fun - np.sum(w * (x - y) ** 2)
        assert gap >= -1e-6  # at least as good as scipy's
        # The objective is strongly convex (modulus 2 min w), so a feasible z with f(z) - f(x*)
        # = gap lies within sqrt(gap / min w) of the unique optimum x*: scipy's interior point
        # stops at its xtol a little short of it (up to about 3e-4 here), and no closer
        # agreement can be asked of it.
        assert np.max(np.abs(x - fit.x)) <= np.sqrt(max(gap, 0.0) / w.min()) + 1e-6
        at_bound = np.isclose(x, doms.lower, atol=1e-6) | np.isclose(x, doms.upper, atol=1e-6)
        binding += int(np.any(at_bound & ~doms.fixed()))
    assert binding >= 3  # the bounds matter in these instances, not only the equalities


def test_worked_example_d2_with_total_and_non_negativity() -> None:
    """D2, root fixed to 10, counts >= 0: g2 sits at its bound, the rest is exact rationals."""
    tree = Tree.from_parents(D2_PARENTS)
    x = relaxed_tree_qp(tree, D2_NOISY, 1.0, domains(tree, D2_NOISY, total=10))
    expected = [Fraction(v, 7) for v in (70, 40, 30, 40, 0, 22, 8)]
    assert np.allclose(x, [float(v) for v in expected], atol=1e-7, rtol=0)
    # The truth is feasible: the projection is closer to it than the noisy counts.
    assert np.linalg.norm(x - D2_TRUTH) <= np.linalg.norm(D2_NOISY - D2_TRUTH)


def test_fixed_nodes_and_windows_are_bounds() -> None:
    tree = Tree.from_parents(D2_PARENTS)
    doms = domains(tree, D2_NOISY, total=10, fixed={1: 5}, window=3)
    x = relaxed_tree_qp(tree, D2_NOISY, 1.0, doms)
    assert x[0] == pytest.approx(10, abs=1e-7) and x[1] == pytest.approx(5, abs=1e-7)
    assert np.all(x >= doms.lower - 1e-7) and np.all(x <= doms.upper + 1e-7)
    assert tree.consistency_violations(x) == 0


# -- the Projection record -------------------------------------------------------------------


def test_projection_reports_status_iterations_and_residual() -> None:
    result = project([10.0, 7.0, -2.0], A_eq=[[1.0, -1.0, -1.0]], b_eq=[0.0], lower=0.0)
    assert isinstance(result, Projection)
    assert result.status == "solved" and result.iterations > 0 and result.polished
    assert np.allclose(result.values, [8.5, 8.5, 0.0], atol=1e-9)
    assert 0.0 <= result.max_residual < 1e-9
    assert result.objective == pytest.approx(1.5**2 * 2 + 2.0**2)


def test_unconstrained_projection_returns_the_noisy_answers() -> None:
    result = project([1.5, -2.0, 3.25])
    assert result.values.tolist() == [1.5, -2.0, 3.25]
    assert result.objective == 0.0 and result.max_residual == 0.0


def test_large_counts_keep_unit_accuracy() -> None:
    """The solver works on x - y: a national total of 3e8 is met to far below one person."""
    y = np.array([3.3e8 + 17.0, 1.1e8, 2.2e8])
    result = project(y, A_eq=[[1.0, -1.0, -1.0]], b_eq=[0.0], lower=0.0, upper=[3.3e8, 1e9, 1e9])
    assert result.values[0] == pytest.approx(3.3e8, abs=1e-3)
    assert abs(result.values[0] - result.values[1:].sum()) < 1e-3


# -- bad input -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"noisy": [1.0, np.nan]}, "noisy"),
        ({"noisy": [[1.0, 2.0]]}, "noisy"),
        ({"noisy": []}, "noisy"),
        ({"weights": [1.0, -1.0]}, "weights"),
        ({"weights": [1.0, 2.0, 3.0]}, "weights"),
        ({"lower": [np.nan, 0.0]}, "lower"),
        ({"A_eq": [[1.0, 1.0]]}, "b_eq"),
        ({"b_ub": [1.0]}, "A_ub"),
        ({"A_eq": [[1.0, 1.0, 1.0]], "b_eq": [1.0]}, "A_eq"),
        ({"A_eq": [[1.0, 1.0]], "b_eq": [1.0, 2.0]}, "b_eq"),
        ({"A_ub": [[np.inf, 1.0]], "b_ub": [1.0]}, "A_ub"),
        ({"initial": [1.0]}, "initial"),
        ({"tolerance": 0.0}, "tolerance"),
        ({"max_iter": 0}, "max_iter"),
    ],
)
def test_bad_input_names_the_argument(kwargs: dict[str, object], name: str) -> None:
    arguments: dict[str, object] = {"noisy": [1.0, 2.0], **kwargs}
    noisy = arguments.pop("noisy")
    with pytest.raises(InvalidParameterError) as caught:
        project(noisy, **arguments)  # type: ignore[arg-type]
    assert caught.value.name == name


def test_crossed_bounds_are_infeasible() -> None:
    with pytest.raises(InfeasibleConstraintsError, match="lower\\[1\\]"):
        project([1.0, 2.0], lower=[0.0, 3.0], upper=[1.0, 2.0])


def test_solver_certificate_of_infeasibility_is_an_error() -> None:
    with pytest.raises(InfeasibleConstraintsError, match="infeasib"):
        project([1.0, 2.0], A_eq=[[1.0, 1.0]], b_eq=[5.0], upper=[1.0, 1.0])


def test_too_few_iterations_names_max_iter() -> None:
    tree = Tree.from_parents(D2_PARENTS)
    with pytest.raises(InvalidParameterError, match="max_iter") as caught:
        project(D2_NOISY, **equalities(tree), lower=0.0, upper=9.0, max_iter=1)  # type: ignore[arg-type]
    assert caught.value.value == 1


def test_missing_osqp_is_reported_with_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "osqp", None)  # makes `import osqp` raise ImportError
    with pytest.raises(UnsupportedError, match=r"dpcurator\[optimize\]"):
        project([1.0, 2.0], A_eq=sparse.csr_array(np.ones((1, 2))), b_eq=[1.0])


def test_tree_relaxation_checks_its_inputs() -> None:
    tree = Tree.from_parents(D2_PARENTS)
    doms = domains(tree, D2_NOISY)
    with pytest.raises(InvalidParameterError) as caught:
        relaxed_tree_qp(tree, D2_NOISY[:3], 1.0, doms)
    assert caught.value.name == "noisy"
    with pytest.raises(InvalidParameterError) as caught:
        relaxed_tree_qp(tree, D2_NOISY, -1.0, doms)
    assert caught.value.name == "weights"
    with pytest.raises(InvalidParameterError) as caught:
        relaxed_tree_qp(tree, D2_NOISY, 1.0, domains(Tree.from_parents([-1, 0]), [1.0, 1.0]))
    assert caught.value.name == "doms"
