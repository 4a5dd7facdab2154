"""The dispatcher, its domains and violations, and the baselines: relaxed and TopDown-lite.

``hierarchy.md`` (c) 1-3 (consistency, domains, integrality), 11 (the relaxed baseline breaks
constraints where the exact method does not) and the worked example D2; bad input everywhere.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from dpcurator.errors import InvalidParameterError, UnsupportedError
from dpcurator.hierarchy._domains import (
    UNBOUNDED,
    Domains,
    InfeasibleConstraintsError,
    _plain_intervals,
    _propagated_intervals,
    domains,
    feasible_intervals,
)
from dpcurator.hierarchy._least_squares import least_squares
from dpcurator.hierarchy._postprocess import (
    METHODS,
    Violations,
    certify,
    objective,
    postprocess,
    violations,
)
from dpcurator.hierarchy._rounding import nearest_integers
from dpcurator.hierarchy._tree import Tree
from tests.hierarchy.conftest import D2_NOISY, D2_PARENTS, random_instance

INTEGER_METHODS = ("exact", "dp", "greedy", "relaxed", "topdown")
NO_VIOLATIONS = Violations(consistency=0, domain=0, invariant=0, integrality=0)


@pytest.fixture
def d2() -> Tree:
    return Tree.from_parents(D2_PARENTS)


@pytest.mark.parametrize("method", METHODS)
def test_every_method_returns_its_kind_of_solution_on_d2(d2: Tree, method: str) -> None:
    solution = postprocess(d2, D2_NOISY, total=10, upper=20, method=method)
    assert solution.method == method
    assert solution.values.dtype == (np.float64 if method == "least_squares" else np.int64)
    assert solution.objective == pytest.approx(objective(D2_NOISY, solution.values))
    if method in {"exact", "dp", "greedy"}:
        assert solution.values.tolist() == [10, 6, 4, 6, 0, 3, 1]
        assert solution.objective == 30.0 and solution.certified is True
    else:
        assert solution.certified is None
    if method != "relaxed":  # the others are consistent and keep the total by construction
        assert solution.violations.consistency == solution.violations.invariant == 0
    if method in INTEGER_METHODS:
        assert solution.objective >= 30.0  # nothing integral beats the exact optimum


def test_least_squares_rounded_breaks_three_constraints_on_d2(d2: Tree) -> None:
    # hierarchy.md (d): B6 with the root fixed, rounded: one negative count, two broken sums.
    doms = domains(d2, total=10)
    rounded = nearest_integers(least_squares(d2, D2_NOISY, doms=doms))
    assert rounded.tolist() == [10, 5, 5, 7, -1, 3, 1]
    assert violations(d2, rounded, doms) == Violations(2, 1, 0, 0)
    assert violations(d2, rounded, doms).total == 3


def test_relaxed_baseline_reports_violations_where_exact_has_none(d2: Tree) -> None:
    pytest.importorskip("osqp")
    # Without bounds the relaxation is least squares: rounding breaks two sums (and counting
    # non-negativity, as the lectures' #CV does, a third constraint).
    relaxed = postprocess(d2, D2_NOISY, total=10, lower=None, method="relaxed")
    assert relaxed.values.tolist() == [10, 5, 5, 7, -1, 3, 1]
    assert relaxed.violations == Violations(2, 0, 0, 0)
    assert violations(d2, relaxed.values, domains(d2, total=10)).total == 3
    exact = postprocess(d2, D2_NOISY, total=10, lower=None)
    assert exact.violations == NO_VIOLATIONS
    # With non-negativity as bounds the continuous optimum is (10, 40/7, 30/7, 40/7, 0, 22/7,
    # 8/7): on D2 its rounding happens to be consistent, the exact optimum.
    bounded = postprocess(d2, D2_NOISY, total=10, method="relaxed")
    assert bounded.values.tolist() == [10, 6, 4, 6, 0, 3, 1]


def test_relaxed_baseline_breaks_constraints_on_random_trees() -> None:
    pytest.importorskip("osqp")
    rng = np.random.default_rng(20)
    broken = 0
    for _ in range(5):
        instance = random_instance(rng, 40, max_value=3, noise=4, real_noise=True)
        relaxed = postprocess(instance.tree, instance.noisy, method="relaxed")
        exact = postprocess(instance.tree, instance.noisy)
        assert exact.violations == NO_VIOLATIONS
        broken += relaxed.violations.total
    assert broken > 0


@pytest.mark.parametrize("method", ["exact", "topdown", "greedy"])
def test_integer_methods_are_consistent_integral_and_within_domains(method: str) -> None:
    rng = np.random.default_rng(21)
    for trial in range(12):
        instance = random_instance(rng, 45, max_value=6, noise=5, real_noise=trial % 2 == 0)
        options: dict[str, object] = {"upper": np.where(instance.tree.is_leaf, 8, np.inf)}
        if trial % 3 == 1:
            options["total"] = int(instance.truth[0])
        if trial % 3 == 2:
            options["window"] = 6.0
            leaf = int(np.flatnonzero(instance.tree.is_leaf)[0])
            options["fixed"] = {leaf: int(instance.truth[leaf])}
        solution = postprocess(
            instance.tree, instance.noisy, weights=instance.weights, method=method, **options
        )
        assert solution.violations == NO_VIOLATIONS, options
        doms = domains(instance.tree, instance.noisy, **options)
        assert np.all(solution.values >= doms.lower) and np.all(solution.values <= doms.upper)


def test_topdown_is_never_better_than_exact() -> None:
    rng = np.random.default_rng(22)
    for _ in range(10):
        instance = random_instance(rng, 60, max_value=10, noise=6, real_noise=True)
        top = postprocess(instance.tree, instance.noisy, method="topdown")
        best = postprocess(instance.tree, instance.noisy)
        assert top.objective >= best.objective - 1e-9


def test_violations_counts_domains_invariants_and_integrality(d2: Tree) -> None:
    doms = domains(d2, total=10, upper=[np.inf] + [6] * 6)
    found = violations(d2, np.array([11.0, 7.0, 4.0, 7.5, -0.5, 3.0, 1.0]), doms)
    # consistency: none broken (7 = 7.5 - 0.5, 4 = 3 + 1, 11 = 7 + 4); domain: 7 > 6,
    # 7.5 > 6, -0.5 < 0; invariant: the total; integrality: 7.5 and -0.5.
    assert found == Violations(consistency=0, domain=3, invariant=1, integrality=2)
    assert violations(d2, [10, 6, 4, 6, 0, 3, 1], doms) == NO_VIOLATIONS


def test_certify_and_objective(d2: Tree) -> None:
    doms = domains(d2, total=10)
    assert certify(d2, [10, 6, 4, 6, 0, 3, 1], D2_NOISY, None, doms)
    assert not certify(d2, [10, 5, 5, 5, 0, 4, 1], D2_NOISY, None, doms)  # topdown's: worse
    assert not certify(d2, [10.0, 6.0, 4.0, 6.0, 0.0, 3.0, 1.5], D2_NOISY, None, doms)
    assert objective([1, 2], [3, 2], [0.5, 9]) == 2.0
    with pytest.raises(InvalidParameterError, match="values"):
        objective([1, 2], [3, 2, 1])
    with pytest.raises(InvalidParameterError, match="weights"):
        objective([1, 2], [3, 2], [1, 2, 3])


# -- domains --------------------------------------------------------------------------------


def test_domains_combine_bounds_windows_totals_and_fixed_labels() -> None:
    tree = Tree.from_paths([("IL", "Cook"), ("IL", "Lake"), ("WI", "Dane")])
    noisy = [101.4, 60.2, 38.9, 55.0, 4.1, 41.3]
    doms = domains(tree, noisy, total=101, fixed={("WI", "Dane"): 40}, window=3)
    assert doms.lower.tolist() == [101, 58, 36, 52, 2, 40]
    assert doms.upper.tolist() == [101, 63, 41, 58, 7, 40]
    assert doms.fixed().tolist() == [True, False, False, False, False, True]
    low, high = feasible_intervals(tree, doms)
    assert low.tolist() == [101, 61, 40, 54, 3, 40]  # IL = 101 - 40; Cook >= 61 - 7
    assert high.tolist() == [101, 61, 40, 58, 7, 40]
    unbounded = domains(tree, lower=None)
    assert unbounded.lower.tolist() == [-UNBOUNDED] * 6
    assert unbounded.upper.tolist() == [UNBOUNDED] * 6


def test_plain_non_negativity_takes_the_shortcut_to_the_same_intervals() -> None:
    rng = np.random.default_rng(8)
    for case in range(12):
        instance = random_instance(rng, int(rng.integers(2, 60)), max_value=9, noise=3)
        tree, root = instance.tree, int(instance.truth[0])
        options: list[dict[str, Any]] = [
            {},
            {"total": root},
            {"upper": np.where(np.arange(tree.n_nodes) == 0, root + case, np.inf)},
        ]
        for keywords in options:
            doms = domains(tree, **keywords)
            assert _plain_intervals(doms) is not None
            plain, propagated = feasible_intervals(tree, doms), _propagated_intervals(tree, doms)
            assert all(np.array_equal(a, b) for a, b in zip(plain, propagated, strict=True))
        # Negative controls: a bound or an invariant below the root needs the two passes.
        node = int(rng.integers(1, tree.n_nodes))
        assert _plain_intervals(domains(tree, fixed={node: int(instance.truth[node])})) is None
        assert _plain_intervals(domains(tree, upper=10 * root + 10)) is None


def test_feasible_intervals_are_computed_once_per_tree_and_read_only(d2: Tree) -> None:
    doms = domains(d2, total=10)
    low, high = feasible_intervals(d2, doms)
    assert feasible_intervals(d2, doms)[0] is low  # cached by domains() already
    assert not low.flags.writeable and not high.flags.writeable
    twin = Tree.from_parents(D2_PARENTS)  # another tree: computed afresh, same values
    again = feasible_intervals(twin, doms)
    assert again[0] is not low and np.array_equal(again[0], low)
    with pytest.raises(InvalidParameterError, match="doms"):
        feasible_intervals(Tree.from_parents([-1, 0]), doms)


def test_clashing_windows_and_invariants_are_infeasible(d2: Tree) -> None:
    # Window 1 around 13 forces the nation to >= 12, but its counties reach at most 7 + 0 + 2 +
    # 1 + ... : the subtree sums cannot meet.
    with pytest.raises(InfeasibleConstraintsError, match="cannot all hold"):
        postprocess(d2, D2_NOISY, window=1)
    with pytest.raises(InfeasibleConstraintsError, match="cannot all hold"):
        domains(d2, total=10, fixed={1: 8, 2: 8})
    with pytest.raises(InfeasibleConstraintsError, match="outside the bounds"):
        domains(d2, total=-1)
    assert isinstance(InfeasibleConstraintsError("x"), ValueError)


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"noisy": [1.0] * 6}, "noisy"),
        ({"noisy": [np.nan] * 7}, "noisy"),
        ({"noisy": [np.inf] * 7}, "noisy"),
        ({"noisy": [2.0**41] * 7}, "noisy"),
        ({"weights": [-1.0] * 7}, "weights"),
        ({"weights": [1.0] * 3}, "weights"),
        ({"weights": np.nan}, "weights"),
        ({"lower": 0.5}, "lower"),
        ({"upper": [1, 2]}, "upper"),
        ({"upper": 2**50}, "upper"),
        ({"window": -1.0}, "window"),
        ({"total": 2.5}, "total"),
        ({"fixed": {99: 1}}, "fixed"),
        ({"fixed": {("XX",): 1}}, "label"),
        ({"method": "gurobi"}, "method"),
    ],
)
def test_bad_input_raises_naming_the_argument(
    d2: Tree, kwargs: dict[str, object], name: str
) -> None:
    arguments: dict[str, object] = {"noisy": D2_NOISY, **kwargs}
    noisy = arguments.pop("noisy")
    with pytest.raises(InvalidParameterError) as info:
        postprocess(d2, noisy, **arguments)  # type: ignore[arg-type]
    assert info.value.name == name


def test_window_needs_noisy_and_dp_needs_bounded_domains(d2: Tree) -> None:
    with pytest.raises(InvalidParameterError, match="noisy"):
        domains(d2, window=2)
    with pytest.raises(UnsupportedError, match="finite domains"):
        postprocess(d2, D2_NOISY, method="dp")
    with pytest.raises(InvalidParameterError, match="doms"):
        violations(d2, [0] * 7, Domains(np.zeros(3), np.ones(3)))
