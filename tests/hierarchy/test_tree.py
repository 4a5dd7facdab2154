"""The tree data model: breadth-first renumbering, builders, sums, and bad input."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from dpcurator.errors import InvalidParameterError
from dpcurator.hierarchy._tree import Tree, segment_argmin, segment_order
from tests.hierarchy.conftest import random_tree


def _check_breadth_first(tree: Tree) -> None:
    n = tree.n_nodes
    assert tree.parent[0] == -1
    assert np.all(tree.parent[1:] < np.arange(1, n))
    assert np.all(np.diff(tree.parent[1:]) >= 0)  # children of a node are contiguous
    assert np.all(np.diff(tree.level) >= 0)  # levels are contiguous
    for v in range(n):
        for c in range(tree.child_start[v], tree.child_stop[v]):
            assert tree.parent[c] == v
    assert np.array_equal(tree.is_leaf, tree.child_start == tree.child_stop)
    covered = np.concatenate([np.arange(s.start, s.stop) for s in tree.level_slices])
    assert covered.tolist() == list(range(n))


def test_from_parents_renumbers_any_tree_breadth_first_and_keeps_the_mapping() -> None:
    rng = np.random.default_rng(0)
    for _ in range(30):
        n = int(rng.integers(1, 60))
        raw = np.array([-1] + [int(rng.integers(0, v)) for v in range(1, n)])
        relabel = rng.permutation(n)
        shuffled = np.empty(n, dtype=np.int64)
        shuffled[relabel] = np.where(raw < 0, -1, relabel[np.maximum(raw, 0)])
        tree = Tree.from_parents(shuffled)
        _check_breadth_first(tree)
        assert sorted(tree.order.tolist()) == list(range(n))
        for v in range(1, n):  # the same edges, mapped through order
            assert shuffled[tree.order[v]] == tree.order[tree.parent[v]]
        assert tree.labels[0] == ()


def test_children_keep_input_order_and_default_labels_are_input_paths() -> None:
    tree = Tree.from_parents([2, -1, 1, 1, 0])
    assert tree.order.tolist() == [1, 2, 3, 0, 4]
    assert tree.labels == ((), (2,), (3,), (2, 0), (2, 0, 4))
    assert tree.n_levels == 4
    assert tree.index((2, 0)) == 3


def test_from_paths_sorts_children_by_label_and_builds_every_prefix() -> None:
    paths = [("WI", "Dane"), ("IL", "Lake"), ("IL", "Cook"), ("IL", "Cook")]
    tree = Tree.from_paths(paths)
    assert tree.labels == ((), ("IL",), ("WI",), ("IL", "Cook"), ("IL", "Lake"), ("WI", "Dane"))
    assert tree.parent.tolist() == [-1, 0, 0, 1, 1, 2]
    assert [tree.labels[v] for v in np.flatnonzero(tree.is_leaf)] == sorted(set(paths))
    _check_breadth_first(tree)


def test_from_frame_uses_the_distinct_paths_of_the_columns() -> None:
    frame = pd.DataFrame(
        {"state": ["IL", "IL", "WI", "IL"], "county": ["Cook", "Lake", "Dane", "Cook"]}
    )
    tree = Tree.from_frame(frame, ["state", "county"])
    assert tree.n_nodes == 6 and tree.index(("WI", "Dane")) == 5
    with pytest.raises(InvalidParameterError, match="columns"):
        Tree.from_frame(frame, ["state", "city"])
    with pytest.raises(InvalidParameterError, match="frame"):
        Tree.from_frame(frame.assign(county=[None, "Lake", "Dane", "Cook"]), ["state", "county"])


def test_aggregate_is_exact_and_keeps_integers_integer() -> None:
    tree = random_tree(np.random.default_rng(1), 80)
    leaves = np.flatnonzero(tree.is_leaf)
    big = np.full(leaves.size, 2**50, dtype=np.int64) + np.arange(leaves.size)
    totals = tree.aggregate(big)
    assert totals.dtype == np.int64
    assert int(totals[0]) == sum(int(v) for v in big)  # no float rounding
    assert tree.consistency_violations(totals) == 0
    assert tree.aggregate(np.ones(leaves.size) / 3).dtype == np.float64
    sums = tree.child_sums(totals)
    assert np.all(sums[leaves] == 0)
    assert np.array_equal(sums[~tree.is_leaf], totals[~tree.is_leaf])


def test_consistency_violations_counts_each_broken_sum() -> None:
    tree = Tree.from_parents([-1, 0, 0, 1, 1, 2, 2])
    values = np.array([10, 6, 4, 6, 0, 3, 1])
    assert tree.consistency_violations(values) == 0
    values[3] += 1  # breaks GA's sum only
    assert tree.consistency_violations(values) == 1
    assert tree.inconsistent(values).tolist() == [False, True, False, False, False, False, False]
    floats = np.array([10.0, 6.0, 4.0, 6.0, 0.0, 3.0, 1.0]) + 1e-12
    assert tree.consistency_violations(floats) == 0  # within the float tolerance


def test_segment_argmin_takes_the_first_minimum_of_each_parent() -> None:
    tree = Tree.from_parents([-1, 0, 0, 1, 1, 1, 2, 2])
    low, arg = segment_argmin(tree.links[1], np.array([3.0, 1.0, 1.0, np.inf, np.inf]))
    assert low.tolist() == [1.0, np.inf] and arg.tolist() == [4, 6]


def test_segment_order_is_a_stable_lexsort_by_parent_then_key() -> None:
    rng = np.random.default_rng(5)
    for _ in range(200):
        m = int(rng.integers(1, 400))
        segment = np.sort(rng.integers(0, int(rng.integers(1, 30)), m))
        key = rng.integers(-3, 4, m).astype(np.float64)  # many ties: broken by position
        key[rng.random(m) < 0.1] = np.inf
        key[rng.random(m) < 0.1] = -np.inf
        if m % 2:
            key += rng.normal(0.0, 1.0, m)  # real keys: ties are rare
        assert np.array_equal(segment_order(segment, key), np.lexsort((key, segment)))
    assert segment_order(np.zeros(0, dtype=np.int64), np.zeros(0)).size == 0
    # Negative control: an unstable sort of the key alone does not group the parents.
    segment, key = np.array([0, 0, 1, 1]), np.array([3.0, 2.0, 1.0, 0.0])
    assert not np.array_equal(np.argsort(key), np.lexsort((key, segment)))
    assert segment_order(segment, key).tolist() == [1, 0, 3, 2]


def test_tree_is_immutable() -> None:
    tree = Tree.from_parents([-1, 0, 0])
    with pytest.raises(ValueError, match="read-only"):
        tree.parent[1] = 2
    with pytest.raises(AttributeError, match="immutable"):
        tree.parent = np.array([-1, 0, 1])  # type: ignore[misc]


@pytest.mark.parametrize(
    ("parent", "message"),
    [
        ([0, -1, 3, 2], "cycle"),  # nodes 2 and 3 point at each other
        ([-1, -1, 0], "exactly one root"),
        ([-1, 5, 0], "exactly one root"),
        ([1, 0, 0], "exactly one root"),
        ([-1.0, 0.0], "integers"),
        ([], "integers"),
    ],
)
def test_bad_parent_arrays_are_refused(parent: list[float], message: str) -> None:
    with pytest.raises(InvalidParameterError, match=message) as info:
        Tree.from_parents(parent)
    assert info.value.name == "parent"


def test_bad_labels_paths_and_lookups_are_refused() -> None:
    with pytest.raises(InvalidParameterError, match="labels"):
        Tree.from_parents([-1, 0, 0], labels=[(), ("a",), ("a",)])
    with pytest.raises(InvalidParameterError, match="paths"):
        Tree.from_paths([("IL", "Cook"), ("WI",)])
    with pytest.raises(InvalidParameterError, match="paths"):
        Tree.from_paths([("IL", 1), ("IL", "Cook")])
    with pytest.raises(InvalidParameterError, match="label"):
        Tree.from_paths([("IL", "Cook")]).index(("OH",))
    with pytest.raises(InvalidParameterError, match="leaf_values"):
        Tree.from_parents([-1, 0, 0]).aggregate([1, 2, 3])
    with pytest.raises(InvalidParameterError, match="breadth-first"):
        Tree(np.array([-1, 2, 0]), np.arange(3), None)
