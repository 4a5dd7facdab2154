"""Error metrics of hierarchical releases (src/dpcurator/hierarchy/_metrics.py)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy import stats

from dpcurator.errors import InvalidParameterError
from dpcurator.hierarchy._metrics import LevelError, earth_movers_distance, level_errors
from dpcurator.hierarchy._tree import Tree

TREE = Tree.from_paths([("GA", "g1"), ("GA", "g2"), ("MI", "m1"), ("MI", "m2")])
# D2's truth and noisy counts in this tree's order: US, GA, MI, g1, g2, m1, m2.
TRUTH = np.array([10, 5, 5, 4, 1, 3, 2])
NOISY = np.array([13, 7, 8, 7, -1, 2, 0])


def test_level_errors_of_d2() -> None:
    errors = level_errors(TREE, NOISY, TRUTH)
    assert [e.level for e in errors] == [0, 1, 2]
    assert [e.nodes for e in errors] == [1, 2, 4]
    assert errors[0] == LevelError(0, 1, 3.0, 3.0, 3.0)
    assert errors[1] == LevelError(1, 2, 2.5, math.sqrt((4 + 9) / 2), 3.0)
    assert errors[2] == LevelError(2, 4, 2.0, math.sqrt((9 + 4 + 1 + 4) / 4), 3.0)
    # The squared errors over all levels add up to ||y - c||^2 = 40 (hierarchy.md D2).
    assert math.isclose(sum(e.rmse**2 * e.nodes for e in errors), 40.0)


def test_level_errors_of_the_truth_are_zero() -> None:
    assert all(e.max_abs == 0.0 for e in level_errors(TREE, TRUTH, TRUTH))


@pytest.mark.parametrize(
    ("estimate", "match"),
    [(np.zeros(6), "estimate must have shape"), (np.full(7, np.nan), "estimate must be finite")],
)
def test_level_errors_reject_bad_vectors(estimate: np.ndarray, match: str) -> None:
    with pytest.raises(InvalidParameterError, match=match):
        level_errors(TREE, estimate, TRUTH)


def test_emd_examples() -> None:
    assert earth_movers_distance([0, 3], [0, 0, 3]) == 3.0  # every group one size too big
    assert earth_movers_distance([1, 2, 3], [1, 2, 3]) == 0.0
    assert earth_movers_distance([0, 2], [0, 1]) == 1.0  # a missing group vs an empty one
    assert earth_movers_distance([0, 1], [0, 2]) == 1.0  # symmetric
    assert earth_movers_distance([0, 0, 0, 1], [0, 1]) == 2.0


@given(
    st.lists(st.integers(0, 20), min_size=1, max_size=8),
    st.lists(st.integers(0, 20), min_size=1, max_size=8),
)
def test_emd_is_the_wasserstein_distance_times_the_groups(h: list[int], g: list[int]) -> None:
    # Independent oracle: with equal totals, Kuo's EMD is n * W1 of the size distributions.
    total = max(sum(h), sum(g))
    if total == 0:
        assert earth_movers_distance(h, g) == 0.0
        return
    h0 = [h[0] + total - sum(h), *h[1:]]
    g0 = [g[0] + total - sum(g), *g[1:]]
    oracle = total * stats.wasserstein_distance(np.arange(len(h0)), np.arange(len(g0)), h0, g0)
    assert math.isclose(earth_movers_distance(h, g), oracle, rel_tol=1e-9, abs_tol=1e-9)
    assert earth_movers_distance(h, g) == earth_movers_distance(g, h)


@pytest.mark.parametrize(
    ("hist", "match"),
    [
        ([], "non-empty 1-D"),
        ([[1, 2]], "non-empty 1-D"),
        ([1, -1], "non-negative"),
        ([1, math.inf], "finite"),
    ],
)
def test_emd_rejects_bad_histograms(hist: object, match: str) -> None:
    with pytest.raises(InvalidParameterError, match=match):
        earth_movers_distance(hist, [1])  # type: ignore[arg-type]
