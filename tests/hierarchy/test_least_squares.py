"""Two-pass least squares (B6) against Hay et al.'s examples and a generic KKT solve.

``hierarchy.md`` (c) 10: B6 equals weighted least squares under the consistency equalities (and
fixed nodes) to 1e-8, with and without a fixed root; D2 and Hay's examples D3 exactly. The
bounded variant (active set over B6) against a generic constrained solver (SciPy's SLSQP).
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from numpy.typing import NDArray
from scipy import optimize

from dpcurator.errors import InfeasibleConstraintsError, InvalidParameterError
from dpcurator.hierarchy._domains import Domains, domains
from dpcurator.hierarchy._least_squares import (
    bounded_least_squares,
    least_squares,
    subtree_estimates,
)
from dpcurator.hierarchy._tree import Tree
from tests.hierarchy.conftest import D2_NOISY, D2_PARENTS, random_tree


def _membership(tree: Tree) -> NDArray[np.float64]:
    """``M`` with ``x = M @ leaves``: node ``v`` sums the leaves below it."""
    leaves = np.flatnonzero(tree.is_leaf)
    out = np.zeros((tree.n_nodes, leaves.size))
    out[leaves, np.arange(leaves.size)] = 1.0
    for v in range(tree.n_nodes - 1, 0, -1):
        out[tree.parent[v]] += out[v]
    return out


def _kkt(
    tree: Tree, y: NDArray[np.float64], w: NDArray[np.float64], doms: Domains
) -> NDArray[np.float64]:
    """min sum w (M l - y)^2 s.t. (M l)_F = f, by one dense KKT solve over the leaves."""
    m = _membership(tree)
    fixed = np.flatnonzero(doms.fixed())
    a = m[fixed]
    k = m.shape[1]
    system = np.block([[2 * m.T @ (w[:, None] * m), a.T], [a, np.zeros((fixed.size, fixed.size))]])
    rhs = np.concatenate([2 * m.T @ (w * y), doms.lower[fixed].astype(np.float64)])
    solution = np.linalg.lstsq(system, rhs, rcond=None)[0]
    return m @ solution[:k]


def test_hay_examples_d3() -> None:
    tree = Tree.from_parents([-1, 0, 0])
    assert least_squares(tree, [0, 1, 0]) == pytest.approx([1 / 3, 2 / 3, -1 / 3], abs=1e-12)
    assert least_squares(tree, [0, 0.5, 0.5]) == pytest.approx([1 / 3, 1 / 6, 1 / 6], abs=1e-12)


def test_d2_fixed_and_free_root() -> None:
    tree = Tree.from_parents(D2_PARENTS)
    fixed = least_squares(tree, D2_NOISY, doms=domains(tree, total=10))
    expected = [Fraction(v, 3) for v in (30, 16, 14, 20, -4, 10, 4)]
    assert fixed == pytest.approx([float(v) for v in expected], abs=1e-12)
    free = least_squares(tree, D2_NOISY)
    expected = [Fraction(90, 7)] + [Fraction(v, 21) for v in (142, 128, 155, -13, 85, 43)]
    assert free == pytest.approx([float(v) for v in expected], abs=1e-12)


def test_matches_hay_closed_form_on_a_complete_tree() -> None:
    # Hay 2010: at height l (leaves 1) z = (k^l - k^(l-1))/(k^l - 1) y + (k^(l-1) - 1)/(k^l - 1) S.
    k = 3
    tree = Tree.from_parents([-1, 0, 0, 0, *np.repeat([1, 2, 3], k)])
    y = np.random.default_rng(0).normal(0, 5, tree.n_nodes)
    up = subtree_estimates(tree, y, np.ones(tree.n_nodes))
    height = 3 - tree.level
    for v in np.flatnonzero(~tree.is_leaf):
        h = int(height[v])
        children = slice(tree.child_start[v], tree.child_stop[v])
        hay = (k**h - k ** (h - 1)) / (k**h - 1) * y[v] + (k ** (h - 1) - 1) / (
            k**h - 1
        ) * up.estimate[children].sum()
        assert up.estimate[v] == pytest.approx(hay, abs=1e-12)
    x = least_squares(tree, y)
    for v in np.flatnonzero(~tree.is_leaf):
        children = slice(tree.child_start[v], tree.child_stop[v])
        gap = x[v] - up.estimate[children].sum()
        assert x[children] == pytest.approx(up.estimate[children] + gap / k, abs=1e-12)


@pytest.mark.parametrize("case", ["free", "total", "fixed_nodes", "weighted"])
def test_equals_the_kkt_solution_of_weighted_least_squares(case: str) -> None:
    rng = np.random.default_rng(hash(case) % 2**32)
    for _ in range(15):
        tree = random_tree(rng, int(rng.integers(2, 40)))
        truth = tree.aggregate(rng.integers(0, 20, int(np.count_nonzero(tree.is_leaf))))
        y = truth + rng.normal(0, 4, tree.n_nodes)
        w = rng.uniform(0.2, 5.0, tree.n_nodes) if case == "weighted" else np.ones(tree.n_nodes)
        options: dict[str, object] = {"lower": None}
        if case in {"total", "weighted"}:
            options["total"] = int(truth[0])
        if case == "fixed_nodes":
            chosen = rng.choice(tree.n_nodes, size=min(3, tree.n_nodes), replace=False)
            options["fixed"] = {int(v): int(truth[v]) for v in chosen}
        doms = domains(tree, **options)
        x = least_squares(tree, y, w, doms)
        assert x == pytest.approx(_kkt(tree, y, w, doms), abs=1e-8)
        assert tree.consistency_violations(x) == 0


def test_unmeasured_nodes_still_give_a_least_squares_minimum() -> None:
    rng = np.random.default_rng(3)
    for _ in range(15):
        tree = random_tree(rng, 30)
        y = rng.normal(10, 4, tree.n_nodes)
        w = np.where(rng.random(tree.n_nodes) < 0.3, 0.0, 1.0)
        doms = domains(tree, lower=None)
        x = least_squares(tree, y, w, doms)
        best = _kkt(tree, y, w, doms)  # the minimum need not be unique: compare objectives
        assert np.sum(w * (x - y) ** 2) == pytest.approx(np.sum(w * (best - y) ** 2), abs=1e-8)
        assert tree.consistency_violations(x) == 0


def test_projection_is_non_expansive_towards_a_consistent_truth() -> None:
    rng = np.random.default_rng(4)
    for trial in range(30):
        tree = random_tree(rng, 50)
        truth = tree.aggregate(rng.integers(0, 30, int(np.count_nonzero(tree.is_leaf))))
        y = truth + rng.normal(0, 6, tree.n_nodes)
        w = rng.uniform(0.5, 2.0, tree.n_nodes)
        doms = domains(tree, total=int(truth[0])) if trial % 2 else None
        x = least_squares(tree, y, w, doms)
        assert np.sum(w * (x - truth) ** 2) <= np.sum(w * (y - truth) ** 2) + 1e-9
    # Negative control: a vector that is not the projection can be farther than the noise.
    assert np.sum((y + 10 - truth) ** 2) > np.sum((y - truth) ** 2)


def test_consistent_input_is_returned_unchanged() -> None:
    tree = random_tree(np.random.default_rng(5), 40)
    truth = tree.aggregate(np.arange(int(np.count_nonzero(tree.is_leaf)), dtype=np.float64))
    assert least_squares(tree, truth) == pytest.approx(truth, abs=1e-9)


def test_bad_input_names_the_argument() -> None:
    tree = Tree.from_parents(D2_PARENTS)
    with pytest.raises(InvalidParameterError, match="noisy"):
        least_squares(tree, [1.0, 2.0])
    with pytest.raises(InvalidParameterError, match="noisy"):
        least_squares(tree, [np.nan] * 7)
    with pytest.raises(InvalidParameterError, match="weights"):
        least_squares(tree, D2_NOISY, weights=-np.ones(7))
    with pytest.raises(InvalidParameterError, match="doms"):
        least_squares(tree, D2_NOISY, doms=domains(Tree.from_parents([-1, 0])))


# -- within the bounds ----------------------------------------------------------------------------


def _generic_bounded(
    tree: Tree, y: NDArray[np.float64], w: NDArray[np.float64], doms: Domains
) -> NDArray[np.float64]:
    """min sum w (M l - y)^2 s.t. lower <= M l <= upper, by SLSQP over the leaves."""
    m = _membership(tree)
    lower = np.where(doms.lower <= -(2**62), -np.inf, doms.lower).astype(np.float64)
    upper = np.where(doms.upper >= 2**62, np.inf, doms.upper).astype(np.float64)
    fixed = doms.fixed()
    result = optimize.minimize(
        lambda leaves: float(np.sum(w * (m @ leaves - y) ** 2)),
        np.linalg.lstsq(m, y, rcond=None)[0],
        jac=lambda leaves: 2 * m.T @ (w * (m @ leaves - y)),
        constraints=[  # equalities apart: SLSQP warns otherwise
            optimize.LinearConstraint(m[rows], lower[rows], upper[rows])
            for rows in (fixed, ~fixed)
            if np.any(rows)
        ],
        method="SLSQP",
        options={"ftol": 1e-14, "maxiter": 1000},
    )
    return np.asarray(m @ result.x, dtype=np.float64)


@pytest.mark.parametrize("case", ["non_negative", "total", "upper", "window", "weighted"])
def test_bounded_equals_a_generic_constrained_solver(case: str) -> None:
    rng = np.random.default_rng(sum(map(ord, case)))
    passes = []
    for _ in range(12):
        tree = random_tree(rng, int(rng.integers(3, 25)))
        truth = tree.aggregate(rng.integers(0, 6, int(np.count_nonzero(tree.is_leaf))))
        y = truth + rng.normal(0, 4, tree.n_nodes)  # many negative noisy counts
        w = rng.uniform(0.2, 5.0, tree.n_nodes) if case == "weighted" else np.ones(tree.n_nodes)
        options: dict[str, object] = {
            "total": {"total": int(truth[0]), "weighted": int(truth[0])}.get(case),
            "upper": int(truth[0]) // 2 + 1 if case == "upper" else None,
            "window": 6.0 if case == "window" else None,
        }
        try:
            doms = domains(tree, y, **options)  # type: ignore[arg-type]
        except InfeasibleConstraintsError:  # a window may exclude every consistent point
            continue
        found = bounded_least_squares(tree, y, w, doms)
        assert tree.consistency_violations(found.values) == 0
        if not found.converged:  # possible where bounds are redundant (docstring): no claim
            continue
        assert found.values == pytest.approx(_generic_bounded(tree, y, w, doms), abs=1e-5)
        assert np.all(found.values >= doms.lower - 1e-9)
        assert np.all(found.values <= doms.upper + 1e-9)
        passes.append(found.passes)
    assert len(passes) >= 4 and max(passes) > 1  # solved most, and bounds did bind


def test_bounded_is_plain_least_squares_where_no_bound_binds() -> None:
    rng = np.random.default_rng(6)
    tree = random_tree(rng, 40)
    y = rng.normal(50, 3, tree.n_nodes)
    y[~tree.is_leaf] = tree.aggregate(y[tree.is_leaf])[~tree.is_leaf] + rng.normal(0, 3, 1)[0]
    doms = domains(tree)
    found = bounded_least_squares(tree, y, np.ones(tree.n_nodes), doms)
    assert found.converged and found.passes == 1
    assert found.values == pytest.approx(least_squares(tree, y), abs=1e-9)


def test_bounded_d2_and_an_unconverged_negative_control() -> None:
    tree = Tree.from_parents(D2_PARENTS)
    doms = domains(tree, total=10)
    found = bounded_least_squares(tree, D2_NOISY, np.ones(7), doms)
    expected = [Fraction(v, 7) for v in (70, 40, 30, 40, 0, 22, 8)]  # g2 held at 0
    assert found.values == pytest.approx([float(v) for v in expected], abs=1e-12)
    assert found.converged and found.passes == 2
    stopped = bounded_least_squares(tree, D2_NOISY, np.ones(7), doms, max_passes=1)
    assert not stopped.converged  # one pass is plain least squares: g2 = -4/3
    assert stopped.values[4] == pytest.approx(-4 / 3, abs=1e-12)
