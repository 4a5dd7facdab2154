"""Count-of-counts: data, encodings and their sensitivities, PAV, the reduction, the release.

``hierarchy.md`` (a) (the neighbour relation: one individual moves one group one size; Delta 2
for ``H`` and 1 for ``Hc`` per level), (e) (the cumulative route and the EMD), (c) 1-3 and 12
(consistency in every size, domains, integrality, the noise scale ``2L/eps`` and ``L/eps``).
Tables of individuals are test fixtures built with numpy's seeded generator.
"""

from __future__ import annotations

import importlib.util
import itertools
import math
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from numpy.typing import NDArray
from scipy import optimize

from dpcurator.accounting import DiscreteLaplaceEvent
from dpcurator.errors import InvalidParameterError
from dpcurator.hierarchy._count_of_counts import (
    ENCODINGS,
    CellTree,
    CountOfCounts,
    add_count_of_counts_noise,
    encode,
    encoding_sensitivity,
    histograms_from_cumulative,
    isotonic_regression,
    level_distances,
    postprocess_count_of_counts,
)
from dpcurator.hierarchy._metrics import earth_movers_distance
from dpcurator.hierarchy._noise import geometric_variance
from dpcurator.hierarchy._tree import Tree
from dpcurator.noise import InsecureSeededSource
from tests.hierarchy.conftest import random_tree

REGIONS = ["state", "county", "block"]


def people_table(rng: np.random.Generator, households: int = 60) -> pd.DataFrame:
    """Individuals in households of 1..6 people spread over a 3-level geography."""
    rows = []
    for household in range(households):
        state = f"S{rng.integers(2)}"
        county = f"{state}C{rng.integers(3)}"
        block = f"{county}B{rng.integers(2)}"
        rows += [(state, county, block, household)] * int(rng.integers(1, 7))
    return pd.DataFrame(rows, columns=[*REGIONS, "household"])


def level_vectors(counts: CountOfCounts, encoding: str) -> list[NDArray[np.int64]]:
    encoded = encode(counts.histograms, encoding)
    return [encoded[part].reshape(-1) for part in counts.tree.level_slices]


def neighbours(frame: pd.DataFrame) -> list[pd.DataFrame]:
    """Every table one individual away: one added to, or removed from, an existing group.

    Removal only from groups of two or more: the set of groups is public (``G`` invariant).
    """
    out = []
    sizes = frame["household"].value_counts()
    for household, size in sizes.items():
        member = frame.index[frame["household"] == household][0]
        out.append(pd.concat([frame, frame.loc[[member]]], ignore_index=True))
        if size >= 2:
            out.append(frame.drop(index=member).reset_index(drop=True))
    return out


def same_tree(a: CountOfCounts, b: CountOfCounts) -> bool:
    return a.tree.labels == b.tree.labels


# -- the data --------------------------------------------------------------------------------


def test_histograms_from_a_table_of_individuals() -> None:
    frame = pd.DataFrame(
        {
            "state": ["IL"] * 6 + ["WI"] * 3,
            "county": ["Cook"] * 4 + ["Lake"] * 2 + ["Dane"] * 3,
            "household": [1, 1, 1, 2, 3, 3, 4, 4, 4],
        }
    )
    counts = CountOfCounts.from_groups(frame, ["state", "county"], "household", max_size=3)
    assert counts.tree.labels == (
        (),
        ("IL",),
        ("WI",),
        ("IL", "Cook"),
        ("IL", "Lake"),
        ("WI", "Dane"),
    )
    assert counts.histograms.tolist() == [
        [1, 1, 2],  # the nation: groups of sizes 1, 3, 2, 3
        [1, 1, 1],
        [0, 0, 1],
        [1, 0, 1],
        [0, 1, 0],
        [0, 0, 1],
    ]
    assert counts.groups == 4 and counts.max_size == 3
    assert counts.cumulative[0].tolist() == [1, 2, 4]


def test_large_groups_are_capped_at_the_public_maximum() -> None:
    tree = Tree.from_paths([("a",), ("b",)])
    counts = CountOfCounts.from_leaf_sizes(tree, [[1, 7, 2], [3, 30]], max_size=3)
    assert counts.histograms.tolist() == [[1, 1, 3], [1, 1, 1], [0, 0, 2]]


def test_groups_and_leaf_sizes_agree_and_the_histograms_are_consistent() -> None:
    rng = np.random.default_rng(0)
    frame = people_table(rng)
    by_rows = CountOfCounts.from_groups(frame, REGIONS, "household", max_size=4)
    tree = by_rows.tree
    leaves = np.flatnonzero(tree.is_leaf)
    sizes = frame.groupby([*REGIONS, "household"]).size()
    per_leaf = [sizes.loc[tree.labels[v]].to_numpy() for v in leaves]
    by_sizes = CountOfCounts.from_leaf_sizes(tree, per_leaf, max_size=4)
    assert np.array_equal(by_rows.histograms, by_sizes.histograms)
    for s in range(4):
        assert tree.consistency_violations(by_rows.histograms[:, s]) == 0
    assert by_rows.groups == frame["household"].nunique()


# -- encodings and sensitivities on neighbouring tables ---------------------------------------


def test_encodings() -> None:
    histograms = np.array([[2, 0, 3], [1, 4, 0]])
    assert encode(histograms, "histogram").tolist() == histograms.tolist()
    assert encode(histograms, "cumulative").tolist() == [[2, 2, 5], [1, 5, 5]]
    assert [encoding_sensitivity(e) for e in ENCODINGS] == [2, 1]


@pytest.mark.parametrize("max_size", [3, 6])
def test_sensitivity_per_level_is_attained_and_never_exceeded(max_size: int) -> None:
    """Exact: over every neighbour, each level's L1 change is at most Delta, and Delta occurs."""
    rng = np.random.default_rng(1)
    frame = people_table(rng, households=25)
    counts = CountOfCounts.from_groups(frame, REGIONS, "household", max_size=max_size)
    largest = dict.fromkeys(ENCODINGS, 0)
    for other_frame in neighbours(frame):
        other = CountOfCounts.from_groups(other_frame, REGIONS, "household", max_size=max_size)
        assert same_tree(counts, other) and other.groups == counts.groups
        for encoding in ENCODINGS:
            for a, b in zip(
                level_vectors(counts, encoding), level_vectors(other, encoding), strict=True
            ):
                change = int(np.abs(a - b).sum())
                assert change <= encoding_sensitivity(encoding)
                largest[encoding] = max(largest[encoding], change)
    assert largest == {"histogram": 2, "cumulative": 1}


def test_a_group_appearing_is_outside_the_relation() -> None:
    """Negative control: a new group of size 1 changes every cumulative cell (Delta would be S)."""
    tree = Tree.from_paths([("a",), ("b",)])
    before = CountOfCounts.from_leaf_sizes(tree, [[2, 3], [1]], max_size=5)
    after = CountOfCounts.from_leaf_sizes(tree, [[2, 3, 1], [1]], max_size=5)
    change = np.abs(before.cumulative[0] - after.cumulative[0]).sum()
    assert change == 5 > encoding_sensitivity("cumulative")
    assert after.groups != before.groups


# -- noise and privacy -----------------------------------------------------------------------


@pytest.mark.parametrize(("encoding", "scale"), [("histogram", 6.0), ("cumulative", 3.0)])
def test_noise_scale_is_delta_levels_over_epsilon(encoding: str, scale: float) -> None:
    """D4: L = 3 levels, epsilon 1: lambda = 2L/eps = 6 for H, L/eps = 3 for Hc."""
    tree = Tree.from_paths([("a", "x"), ("a", "y"), ("b", "z")])
    counts = CountOfCounts.from_leaf_sizes(tree, [[1, 2], [2], [3, 3]], max_size=3)
    noisy = add_count_of_counts_noise(
        counts, epsilon=1.0, encoding=encoding, source=InsecureSeededSource(0)
    )
    delta = encoding_sensitivity(encoding)
    for event in noisy.noise.events:  # the scale is rounded up, never down
        assert isinstance(event, DiscreteLaplaceEvent) and event.sensitivity == delta
        assert scale <= event.scale <= scale * (1 + 1e-12)
    assert [level.scale for level in noisy.noise.levels] == pytest.approx([scale] * 3)
    assert 1.0 - 1e-12 <= noisy.noise.epsilon <= 1.0
    assert noisy.values.shape == counts.histograms.shape and noisy.values.dtype == np.int64
    assert noisy.groups == counts.groups


def privacy_loss(
    counts: CountOfCounts, other: CountOfCounts, encoding: str, scales: list[float]
) -> float:
    """Worst-case log-ratio of the output densities: sum_l ||v_l - v'_l||_1 / lambda_l (exact)."""
    return sum(
        float(np.abs(a - b).sum()) / scale
        for a, b, scale in zip(
            level_vectors(counts, encoding), level_vectors(other, encoding), scales, strict=True
        )
    )


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_worst_case_privacy_loss_on_neighbours_is_at_most_epsilon(encoding: str) -> None:
    """Geometric noise of scale lambda: P[z|D]/P[z|D'] <= exp(||v - v'||_1 / lambda), exactly."""
    rng = np.random.default_rng(2)
    frame = people_table(rng, households=20)
    counts = CountOfCounts.from_groups(frame, REGIONS, "household", max_size=4)
    epsilon = 0.7
    noisy = add_count_of_counts_noise(
        counts,
        epsilon=epsilon,
        encoding=encoding,
        level_weights=[1, 2, 3, 4],
        source=InsecureSeededSource(1),
    )
    scales = [level.scale for level in noisy.noise.levels]
    wrong = [scale / encoding_sensitivity(encoding) for scale in scales]  # calibrated to Delta 1
    worst = worst_wrong = 0.0
    for other_frame in neighbours(frame):
        other = CountOfCounts.from_groups(other_frame, REGIONS, "household", max_size=4)
        worst = max(worst, privacy_loss(counts, other, encoding, scales))
        worst_wrong = max(worst_wrong, privacy_loss(counts, other, encoding, wrong))
    assert worst <= epsilon * (1 + 1e-12)
    assert worst == pytest.approx(epsilon, rel=1e-9)  # tight: a group moves in every level
    if encoding == "histogram":  # negative control: Delta 1 noise on H leaks twice as much
        assert worst_wrong > epsilon


@pytest.mark.statistical
def test_noise_of_the_histogram_encoding_has_the_theoretical_variance() -> None:
    """Zero signal, measure the noise: variance 2 alpha / (1 - alpha)^2 at lambda = 2L/eps.

    Tolerance: the sample variance of n = 24,000 discrete-Laplace draws has a relative standard
    error sqrt((kurtosis - 1) / n) <= sqrt(5 / n) = 1.4 %; we allow 6 % (over 4 standard errors).
    Negative control: the variance at lambda = L/eps (Delta 1) is four times smaller, rejected.
    """
    tree = Tree.from_paths([(f"r{i}",) for i in range(999)])
    counts = CountOfCounts(tree, np.zeros((tree.n_nodes, 24), dtype=np.int64))
    noisy = add_count_of_counts_noise(
        counts, epsilon=1.0, encoding="histogram", source=InsecureSeededSource(3)
    )
    sample = noisy.values.astype(np.float64).reshape(-1)
    assert abs(sample.mean()) < 5 * math.sqrt(geometric_variance(4.0) / sample.size)
    variance = float(np.mean(sample**2))
    assert variance == pytest.approx(geometric_variance(4.0), rel=0.06)  # 2L/eps, L = 2
    assert variance != pytest.approx(geometric_variance(2.0), rel=0.06)


# -- pool-adjacent-violators -----------------------------------------------------------------


def min_max_isotonic(y: NDArray[np.float64], w: NDArray[np.float64]) -> NDArray[np.float64]:
    """Independent oracle: z_i = max_{j <= i} min_{k >= i} (weighted mean of y_j..y_k)."""
    n = y.size
    means = np.full((n, n), np.nan)
    for j in range(n):
        for k in range(j, n):
            means[j, k] = np.sum(w[j : k + 1] * y[j : k + 1]) / np.sum(w[j : k + 1])
    return np.array([max(np.nanmin(means[j, i:]) for j in range(i + 1)) for i in range(n)])


def test_pav_matches_scipy_and_the_min_max_formula() -> None:
    rng = np.random.default_rng(4)
    rows = rng.normal(size=(60, 9)).cumsum(axis=1) + rng.normal(scale=3.0, size=(60, 9))
    weights = rng.uniform(0.2, 3.0, size=(60, 9))
    fitted = isotonic_regression(rows, weights)
    unweighted = isotonic_regression(rows)
    for row, w, got, plain in zip(rows, weights, fitted, unweighted, strict=True):
        expected = optimize.isotonic_regression(row, weights=w).x
        assert np.allclose(got, expected, atol=1e-12)
        assert np.allclose(got, min_max_isotonic(row, w), atol=1e-12)
        assert np.allclose(plain, optimize.isotonic_regression(row).x, atol=1e-12)
        assert np.all(np.diff(got) >= 0)
        assert np.sum(w * got) == pytest.approx(np.sum(w * row))  # PAV keeps the weighted sum


def test_pav_is_the_brute_force_optimum_on_a_small_grid() -> None:
    """Over all non-decreasing sequences on a 0.5-grid, none beats PAV (whose answer lies on it)."""
    y = np.array([3.0, 1.0, 2.0, 0.0])
    fitted = isotonic_regression(y)
    grid = np.arange(0.0, 3.25, 0.25)
    best = min(
        float(np.sum((np.array(z) - y) ** 2))
        for z in itertools.combinations_with_replacement(grid, 4)
    )
    assert float(np.sum((fitted - y) ** 2)) == pytest.approx(best)
    assert fitted.tolist() == [1.5, 1.5, 1.5, 1.5]


def test_pav_leaves_sorted_rows_alone() -> None:
    rows = np.array([[0.0, 1.0, 1.0, 4.0], [-2.0, -1.0, 5.0, 6.0]])
    assert np.array_equal(isotonic_regression(rows), rows)
    assert isotonic_regression([7.0]).tolist() == [7.0]


def test_cumulative_route_recovers_exact_histograms_and_stays_in_range() -> None:
    histograms = np.array([[3, 0, 2], [1, 0, 2], [2, 0, 0]])
    cumulative = encode(histograms, "cumulative").astype(np.float64)
    assert np.array_equal(histograms_from_cumulative(cumulative, groups=5), histograms)
    noisy = cumulative + np.array([[4.0, -3.0, 9.0], [-6.0, 2.0, -1.0], [0.5, 8.0, -9.0]])
    estimate = histograms_from_cumulative(noisy, groups=5)
    assert np.all(estimate >= 0) and np.all(estimate.sum(axis=1) <= 5)


# -- the reduction to a scalar tree ------------------------------------------------------------


def test_cell_tree_links_each_cell_to_the_same_size_of_its_parent_region() -> None:
    rng = np.random.default_rng(5)
    regions = random_tree(rng, 12)
    cells = CellTree.build(regions, max_size=4)
    assert cells.tree.n_nodes == 1 + 12 * 4
    region, size = np.divmod(cells.cell[1:], 4)
    parent_cell = cells.cell[cells.tree.parent[1:]]
    is_top = regions.parent[region] < 0
    assert np.all(parent_cell[is_top] == -1)  # (root, s) hangs from the virtual root
    expected = regions.parent[region[~is_top]] * 4 + size[~is_top]
    assert np.array_equal(parent_cell[~is_top], expected)


def test_reduction_round_trips_and_preserves_consistency() -> None:
    rng = np.random.default_rng(6)
    regions = random_tree(rng, 15)
    leaves = int(np.count_nonzero(regions.is_leaf))
    counts = CountOfCounts.from_leaf_sizes(
        regions, [rng.integers(1, 6, rng.integers(0, 5)) for _ in range(leaves)], max_size=5
    )
    cells = CellTree.build(regions, max_size=5)
    flat = cells.flatten(counts.histograms, total=counts.groups)
    assert np.array_equal(cells.unflatten(flat), counts.histograms)
    assert cells.tree.consistency_violations(flat) == 0 and flat[0] == counts.groups
    broken = counts.histograms.copy()
    broken[0, 2] += 1
    assert cells.tree.consistency_violations(cells.flatten(broken, total=counts.groups)) == 2
    random = rng.normal(size=(15, 5))
    assert np.array_equal(cells.unflatten(cells.flatten(random, total=0.0)), random)


# -- the release -----------------------------------------------------------------------------


@pytest.mark.parametrize("encoding", ENCODINGS)
@pytest.mark.parametrize("method", ["exact", "topdown"])
def test_release_is_consistent_in_every_size_integral_and_keeps_the_total(
    encoding: str, method: str
) -> None:
    rng = np.random.default_rng(7)
    counts = CountOfCounts.from_groups(people_table(rng), REGIONS, "household", max_size=6)
    for seed in range(5):
        noisy = add_count_of_counts_noise(
            counts, epsilon=0.5, encoding=encoding, source=InsecureSeededSource(seed)
        )
        estimate = postprocess_count_of_counts(noisy, method=method)
        released = estimate.histograms
        assert released.dtype == np.int64 and np.all(released >= 0)
        for s in range(counts.max_size):
            assert counts.tree.consistency_violations(released[:, s]) == 0
        assert released[0].sum() == counts.groups
        assert estimate.solution.violations.total == 0


def test_exact_release_is_no_farther_from_the_noise_than_the_truth() -> None:
    """hierarchy.md (c) 8 (ii): the truth is feasible, so f(x*) <= f(truth)."""
    rng = np.random.default_rng(8)
    counts = CountOfCounts.from_groups(people_table(rng), REGIONS, "household", max_size=6)
    for seed in range(5):
        noisy = add_count_of_counts_noise(
            counts, epsilon=1.0, encoding="histogram", source=InsecureSeededSource(seed)
        )
        estimate = postprocess_count_of_counts(noisy)
        weights = noisy.cell_weights()
        truth_cost = float(np.sum(weights * (counts.histograms - noisy.histograms()) ** 2))
        assert estimate.solution.objective <= truth_cost + 1e-9
        assert estimate.solution.certified is True


def test_relaxed_release_reports_the_constraints_it_breaks() -> None:
    rng = np.random.default_rng(9)
    counts = CountOfCounts.from_groups(
        people_table(rng, households=200), REGIONS, "household", max_size=6
    )
    broken = 0
    for seed in range(4):
        noisy = add_count_of_counts_noise(
            counts, epsilon=0.5, encoding="histogram", source=InsecureSeededSource(seed)
        )
        relaxed = postprocess_count_of_counts(noisy, method="relaxed")
        inconsistent = sum(
            counts.tree.consistency_violations(relaxed.histograms[:, s]) for s in range(6)
        )
        total_off = int(relaxed.histograms[0].sum() != counts.groups)
        assert relaxed.solution.violations.consistency == inconsistent + total_off
        broken += relaxed.solution.violations.total
        if relaxed.solution.violations.total == 0:  # feasible: the integer optimum is no worse
            exact = postprocess_count_of_counts(noisy)
            assert exact.solution.objective <= relaxed.solution.objective + 1e-9
    assert broken > 0


# -- errors per level ------------------------------------------------------------------------


def test_level_distances_average_kuo_emd_and_l1_per_level() -> None:
    rng = np.random.default_rng(10)
    counts = CountOfCounts.from_groups(people_table(rng), REGIONS, "household", max_size=6)
    noisy = add_count_of_counts_noise(
        counts, epsilon=1.0, encoding="cumulative", source=InsecureSeededSource(0)
    )
    released = postprocess_count_of_counts(noisy).histograms
    distances = level_distances(counts.tree, counts.histograms, released)
    assert [d.level for d in distances] == [0, 1, 2, 3]
    for d, part in zip(distances, counts.tree.level_slices, strict=True):
        emd = [
            earth_movers_distance(np.append(0, t), np.append(0, e))
            for t, e in zip(counts.histograms[part], released[part], strict=True)
        ]
        assert d.regions == part.stop - part.start
        assert d.emd == pytest.approx(np.mean(emd))
        assert d.l1 == pytest.approx(np.abs(released[part] - counts.histograms[part]).sum(1).mean())
    exact = level_distances(counts.tree, counts.histograms, counts.histograms)
    assert all(d.emd == d.l1 == 0.0 for d in exact)


# -- bad input -------------------------------------------------------------------------------


def test_bad_input_names_the_argument() -> None:
    tree = Tree.from_paths([("a",), ("b",)])
    frame = pd.DataFrame({"state": ["a", "b"], "household": [1.0, np.nan]})
    cases = [
        (lambda: encode([[1, 2]], "sorted"), "encoding"),
        (lambda: encoding_sensitivity("sorted"), "encoding"),
        (lambda: CountOfCounts.from_leaf_sizes(tree, [[1]], max_size=2), "sizes"),
        (lambda: CountOfCounts.from_leaf_sizes(tree, [[1], [0]], max_size=2), "sizes"),
        (lambda: CountOfCounts.from_leaf_sizes(tree, [[1], [2]], max_size=0), "max_size"),
        (lambda: CountOfCounts.from_groups(frame, ["state"], "household", max_size=2), "group"),
        (lambda: CountOfCounts.from_groups(frame, ["state"], "tailnum", max_size=2), "group"),
        (lambda: isotonic_regression([1.0, np.nan]), "values"),
        (lambda: isotonic_regression([1.0, 2.0], [1.0, 0.0]), "weights"),
        (lambda: histograms_from_cumulative([[1.0]], groups=-1), "groups"),
        (lambda: CellTree.build(tree, max_size=2).flatten([[1, 2]], total=3), "histograms"),
        (lambda: level_distances(tree, [[1, 2]] * 3, [[1, 2]] * 2), "estimate"),
    ]
    for call, name in cases:
        with pytest.raises(InvalidParameterError) as caught:
            call()
        assert caught.value.name == name
    for histograms in ([[1, 0], [1, 0]], [[1, 0], [1, 0], [1, 0]], [[0, 0], [1, 0], [-1, 0]]):
        with pytest.raises(InvalidParameterError) as caught:
            CountOfCounts(tree, np.array(histograms))
        assert caught.value.name == "histograms"
    counts = CountOfCounts.from_leaf_sizes(tree, [[1], [2]], max_size=2)
    with pytest.raises(InvalidParameterError) as caught:
        add_count_of_counts_noise(counts, epsilon=1.0, encoding="histogram", level_weights=[1])
    assert caught.value.name == "level_weights"
    with pytest.raises(InvalidParameterError) as caught:
        add_count_of_counts_noise(counts, epsilon=-1.0, encoding="histogram")
    assert caught.value.name == "epsilon"


# -- the reproduction script (smoke) ---------------------------------------------------------


def test_reproduction_script_quick_run_fills_every_cell(monkeypatch: pytest.MonkeyPatch) -> None:
    path = Path(__file__).resolve().parents[2] / "scripts" / "reproduce_census_table.py"
    spec = importlib.util.spec_from_file_location("reproduce_census_table", path)
    assert spec is not None and spec.loader is not None
    script = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, script)  # dataclasses look their module up
    monkeypatch.setattr(sys, "path", list(sys.path))  # the script prepends src/ to it
    spec.loader.exec_module(script)
    result = script.run(seeds=1, quick=True)
    rows = {(row["dataset"], row["variant"]): row for row in result["rows"]}
    assert set(rows) == {("flights", v) for v in ("M_H^r", "M_H^dp", "M_c^r", "M_c^dp")} | {
        ("counties", v) for v in ("r", "dp", "LS", "TopDown")
    }
    for dataset, variant in (("flights", "M_H^dp"), ("flights", "M_c^dp"), ("counties", "dp")):
        assert rows[(dataset, variant)]["violations"] == 0
    assert rows[("counties", "LS")]["violations"] > 0  # continuous: not integral
    assert "| #CV |" in result["markdown"]
