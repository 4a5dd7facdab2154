"""Hierarchical releases end to end (src/dpcurator/hierarchy/_release.py and _report.py).

True counts from DuckDB are checked against pandas; releases against the properties of
hierarchy.md (c): consistency (within every attribute cell), non-negativity, integrality,
invariants, privacy events; then the tables, files and reports.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from dpcurator.accounting import DiscreteGaussianEvent, DiscreteLaplaceEvent
from dpcurator.datasets import load_county_population, load_flights, load_midwest
from dpcurator.errors import InvalidParameterError
from dpcurator.hierarchy._release import (
    HierarchicalRelease,
    count_hierarchy,
    release_hierarchy,
)
from dpcurator.hierarchy._report import (
    error_by_epsilon,
    expected_abs_error,
    measured_errors,
    plot_error_by_epsilon,
    render_report,
)
from dpcurator.hierarchy._spec import TOTAL, HierarchySpec
from dpcurator.noise import InsecureSeededSource

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
RACES = ("popwhite", "popblack", "popamerindian", "popasian", "popother")
COUNTY_LEVELS = ("region", "division", "state", "county")


def _census(**overrides: Any) -> HierarchySpec:
    options: dict[str, Any] = {
        "data": "county_population",
        "levels": COUNTY_LEVELS,
        "count": "population_2019",
        "root": "United States",
        "epsilon": 1.0,
        "invariants": (TOTAL,),
        "name": "census",
    } | overrides
    return HierarchySpec(**options)


def _midwest_race(**overrides: Any) -> HierarchySpec:
    options: dict[str, Any] = {
        "data": "midwest",
        "levels": ("state", "county"),
        "attribute_counts": RACES,
        "epsilon": 1.0,
        "name": "midwest_race",
    } | overrides
    return HierarchySpec(**options)


@pytest.fixture(scope="module")
def census() -> HierarchicalRelease:
    return release_hierarchy(
        _census(methods=("exact", "least_squares")), source=InsecureSeededSource(11)
    )


@pytest.fixture(scope="module")
def midwest_race() -> HierarchicalRelease:
    return release_hierarchy(
        _midwest_race(invariants=(TOTAL,), methods=("exact", "least_squares")),
        source=InsecureSeededSource(12),
    )


# -- true counts ----------------------------------------------------------------------------------


def test_true_counts_match_pandas_at_every_level() -> None:
    counts = count_hierarchy(_census())
    frame = load_county_population()
    tree = counts.tree
    assert tree.n_levels == 5
    assert int(np.count_nonzero(tree.is_leaf)) == 3_142
    assert counts.values[0] == 328_239_523
    for depth in range(1, 5):
        expected = frame.groupby(list(COUNTY_LEVELS[:depth]))["population_2019"].sum()
        part = tree.level_slices[depth]
        got = {tree.labels[v]: int(counts.values[v]) for v in range(part.start, part.stop)}
        assert got == {
            (key if isinstance(key, tuple) else (key,)): int(n) for key, n in expected.items()
        }


def test_microdata_rows_are_counted() -> None:
    counts = count_hierarchy(HierarchySpec(data="flights", levels=("month", "origin"), epsilon=1))
    flights = load_flights()
    assert counts.values[0] == len(flights)
    month = counts.tree.index((7,))
    assert counts.values[month] == int((flights["month"] == 7).sum())
    jfk = counts.tree.index((7, "JFK"))
    assert counts.values[jfk] == int(((flights["month"] == 7) & (flights["origin"] == "JFK")).sum())


def test_attribute_counts_become_one_scalar_tree() -> None:
    counts = count_hierarchy(_midwest_race())
    midwest = load_midwest()
    tree = counts.tree
    assert counts.cells == tuple(sorted(RACES))
    assert tree.n_levels == 4  # grand total > race > state > county
    assert int(np.count_nonzero(tree.is_leaf)) == 5 * 437
    assert counts.values[0] == 42_008_942
    for race in RACES:
        assert counts.values[tree.index((race,))] == int(midwest[race].sum())
    cook = midwest[(midwest["state"] == "IL") & (midwest["county"] == "COOK")]
    assert counts.values[tree.index(("popasian", "IL", "COOK"))] == int(cook["popasian"].iloc[0])


def test_attribute_column_of_microdata() -> None:
    people = pd.DataFrame(
        {
            "state": ["IL", "IL", "IL", "WI"],
            "county": ["Cook", "Cook", "Lake", "Dane"],
            "sex": ["F", "M", "F", "F"],
        }
    )
    counts = count_hierarchy(
        HierarchySpec(data=people, levels=("state", "county"), attribute="sex", epsilon=1)
    )
    tree = counts.tree
    assert counts.cells == ("F", "M")
    # Every cell gets the whole geography, zero counts included: the node set is public.
    assert counts.values[tree.index(("M", "WI", "Dane"))] == 0
    assert counts.values[tree.index(("F", "IL"))] == 2
    assert counts.values[0] == 4


@pytest.mark.parametrize(
    ("frame", "match"),
    [
        (pd.DataFrame({"state": ["IL", None], "n": [1, 2]}), "levels must have no missing"),
        (
            pd.DataFrame({"state": pd.array([1, None], dtype="Int64"), "n": [1, 2]}),
            "levels must have no missing",
        ),
        (pd.DataFrame({"state": ["IL", "WI"], "n": [1, -2]}), "count must be >= 0"),
        (pd.DataFrame({"state": ["IL", "WI"], "n": [1.5, 2.0]}), "count must be an integer"),
        (
            pd.DataFrame({"state": ["IL", "WI"], "n": pd.array([1, None], dtype="Int64")}),
            "count must have no missing",
        ),
    ],
)
def test_bad_data_is_refused(frame: pd.DataFrame, match: str) -> None:
    with pytest.raises(InvalidParameterError, match=match):
        count_hierarchy(HierarchySpec(data=frame, levels=("state",), count="n", epsilon=1))


# -- releases ----------------------------------------------------------------------------------


def _consistent(release: HierarchicalRelease, values: np.ndarray) -> bool:
    return release.tree.consistency_violations(values) == 0


def test_exact_release_is_consistent_nonnegative_integral(census: HierarchicalRelease) -> None:
    exact = census.solutions["exact"]
    assert exact.values.dtype == np.int64
    assert exact.violations.total == 0
    assert _consistent(census, exact.values)
    assert (exact.values >= 0).all()
    assert exact.values[0] == census.truth[0] == 328_239_523  # the public invariant
    assert not _consistent(census, census.noisy)  # the noisy counts were not


def test_least_squares_is_consistent_and_continuous(census: HierarchicalRelease) -> None:
    ls = census.solutions["least_squares"]
    assert ls.values.dtype == np.float64
    assert math.isclose(float(ls.values[0]), 328_239_523, rel_tol=1e-12)
    assert ls.violations.consistency == 0


def test_events_and_weights(census: HierarchicalRelease) -> None:
    assert len(census.events) == 4  # region, division, state, county; the total is public
    assert all(isinstance(e, DiscreteLaplaceEvent) for e in census.events)
    assert census.epsilon is not None
    assert census.epsilon <= 1.0
    assert math.isclose(census.epsilon, 1.0, rel_tol=1e-12)
    assert census.rho is None
    assert census.variance[0] == 0.0  # the invariant is exact
    assert census.level_noise[0] is None
    for part, level in zip(census.tree.level_slices[1:], census.level_noise[1:], strict=True):
        assert level is not None
        assert math.isclose(level.share, 0.25)
        assert (census.variance[part] == level.variance).all()


def test_attribute_release_is_consistent_within_every_cell(
    midwest_race: HierarchicalRelease,
) -> None:
    tree = midwest_race.tree
    exact = midwest_race.solutions["exact"].values
    assert midwest_race.solutions["exact"].violations.total == 0
    assert exact[0] == 42_008_942
    cells = tree.level_slices[1]
    assert exact[cells].sum() == exact[0]  # the cells add up to the public total
    for v in range(cells.start, cells.stop):  # each cell's geography adds up to the cell
        states = slice(int(tree.child_start[v]), int(tree.child_stop[v]))
        assert exact[states].sum() == exact[v]
    assert _consistent(midwest_race, exact)
    assert len(midwest_race.events) == 3  # race totals, state x race, county x race


def test_attribute_release_without_total_leaves_the_root_unmeasured() -> None:
    release = release_hierarchy(_midwest_race(), source=InsecureSeededSource(5))
    assert math.isinf(release.variance[0])
    assert release.level_noise[0] is None
    values = release.solutions["exact"].values
    assert values[0] == values[release.tree.level_slices[1]].sum()


def test_level_invariants_are_exact_and_take_no_budget() -> None:
    release = release_hierarchy(
        _census(invariants=(TOTAL, "region", "division", "state")),
        source=InsecureSeededSource(3),
    )
    assert len(release.events) == 1  # only the counties are measured, with the whole budget
    assert math.isclose(release.noise.levels[0].share, 1.0)
    states = release.tree.level_slices[3]
    exact = release.solutions["exact"].values
    assert (exact[states] == release.truth[states]).all()
    assert exact[release.tree.level_slices[4]].sum() == release.truth[0]


def test_discrete_gaussian_release() -> None:
    spec = HierarchySpec(
        data="midwest", levels=("state",), count="poptotal", mechanism="discrete_gaussian", rho=0.5
    )
    release = release_hierarchy(spec, source=InsecureSeededSource(8))
    assert all(isinstance(e, DiscreteGaussianEvent) for e in release.events)
    assert release.rho is not None
    assert release.rho <= 0.5 + 1e-12
    assert release.epsilon is None


def test_same_seed_same_release() -> None:
    spec = _census(levels=("region", "division"))
    first = release_hierarchy(spec, source=InsecureSeededSource(9))
    again = release_hierarchy(spec, source=InsecureSeededSource(9))
    other = release_hierarchy(spec, source=InsecureSeededSource(10))
    assert np.array_equal(first.noisy, again.noisy)
    assert np.array_equal(first.solutions["exact"].values, again.solutions["exact"].values)
    assert not np.array_equal(first.noisy, other.noisy)


def test_release_from_a_toml_declaration() -> None:
    release = release_hierarchy(EXAMPLES / "flights.toml", source=InsecureSeededSource(4))
    assert release.spec.name == "flights"
    window = release.spec.window
    assert window is not None
    exact = release.solutions["exact"].values
    assert (np.abs(exact - release.noisy) <= window).all()  # the faithfulness window holds
    assert release.solutions["exact"].violations.total == 0


# -- tables, files, reports -----------------------------------------------------------------


def test_table(census: HierarchicalRelease) -> None:
    table = census.table()
    assert table.columns.tolist() == [
        "level",
        *COUNTY_LEVELS,
        "noisy",
        "std",
        "exact",
        "least_squares",
    ]
    assert len(table) == census.tree.n_nodes
    assert "truth" not in table.columns
    assert table["level"].iloc[0] == TOTAL
    cook = table[(table["county"] == "Cook County") & (table["state"] == "Illinois")]
    assert cook["division"].tolist() == ["East North Central"]
    assert "truth" in census.table(confidential=True).columns
    arrow = census.to_arrow()
    assert arrow.num_rows == census.tree.n_nodes


def test_attribute_table(midwest_race: HierarchicalRelease) -> None:
    table = midwest_race.table()
    assert table.columns[:4].tolist() == ["level", "attribute", "state", "county"]
    assert set(table["attribute"].dropna()) == set(RACES)
    assert midwest_race.level_names[1] == "total × attribute"


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_write(census: HierarchicalRelease, tmp_path: Path, fmt: str) -> None:
    table_path, public, steward = census.write(tmp_path / "out", format=fmt)  # type: ignore[arg-type]
    assert table_path.name == f"census.{fmt}"
    read = pd.read_csv(table_path) if fmt == "csv" else pd.read_parquet(table_path)
    assert len(read) == census.tree.n_nodes
    assert read["exact"].tolist() == census.solutions["exact"].values.tolist()
    assert "truth" not in read.columns
    assert "CONFIDENTIAL" not in public.read_text(encoding="utf-8")
    assert "CONFIDENTIAL" in steward.read_text(encoding="utf-8")
    with pytest.raises(InvalidParameterError, match="format must be one of"):
        census.write(tmp_path, format="xlsx")  # type: ignore[arg-type]


def test_report(census: HierarchicalRelease) -> None:
    public = render_report(census)
    assert public.startswith("# Hierarchical release: census")
    assert "NOT protected by DP): total" in public
    assert "| total | 1 | - | exact (invariant) | 0 | 0 |" in public
    county = census.level_noise[4]
    assert county is not None
    assert f"| county | 3,142 | 0.25 | {county.scale:.4g} |" in public
    assert "CONFIDENTIAL" not in public
    steward = census.report(confidential=True)
    assert "## CONFIDENTIAL" in steward
    assert "| county | exact |" in steward


def test_expected_error_is_the_noise_model(census: HierarchicalRelease) -> None:
    level = census.noise.levels[0]
    assert math.isclose(expected_abs_error(level), 1.0 / math.sinh(1.0 / level.scale))


def test_measured_errors(census: HierarchicalRelease) -> None:
    errors = measured_errors(census)
    assert list(errors) == ["noisy", "exact", "least_squares"]
    assert errors["exact"][0].max_abs == 0.0
    assert errors["noisy"][4].nodes == 3_142


@pytest.mark.slow
def test_error_by_epsilon_and_plot(tmp_path: Path) -> None:
    spec = _census(levels=("region", "division", "state"))
    frame = error_by_epsilon(spec, [0.1, 1.0], seed=1)
    assert set(frame["budget"]) == {0.1, 1.0}
    assert set(frame["level"]) == {TOTAL, "region", "division", "state"}
    rmse = frame[(frame["estimate"] == "noisy") & (frame["level"] == "state")]
    # Ten times the budget, a tenth of the noise: the RMSE falls (51 states, theory ~10x).
    assert float(rmse[rmse["budget"] == 0.1]["rmse"].iloc[0]) > 3 * float(
        rmse[rmse["budget"] == 1.0]["rmse"].iloc[0]
    )
    pytest.importorskip("matplotlib")
    image = plot_error_by_epsilon(frame, tmp_path / "error.png")
    assert image.stat().st_size > 1_000
