"""Declarations of hierarchical releases (src/dpcurator/hierarchy/_spec.py), Python and TOML."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from dpcurator.curator import Column, Table
from dpcurator.datasets import dataset_path
from dpcurator.errors import InvalidParameterError, UnsupportedError
from dpcurator.hierarchy._spec import TOTAL, HierarchySpec, read_spec

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
RACES = ("popwhite", "popblack", "popamerindian", "popasian", "popother")


def _spec(**overrides: Any) -> HierarchySpec:
    options: dict[str, Any] = {
        "data": "county_population",
        "levels": ("region", "state"),
        "count": "population_2019",
        "epsilon": 1.0,
    } | overrides
    return HierarchySpec(**options)


def test_census_example() -> None:
    spec = read_spec(EXAMPLES / "census.toml")
    assert spec.name == "census"
    assert spec.root == "United States"
    assert spec.levels == ("region", "division", "state", "county")
    assert spec.level_names == (TOTAL, "region", "division", "state", "county")
    assert spec.invariants == (TOTAL,)
    assert spec.measured_levels == ("region", "division", "state", "county")
    assert spec.weights == (1.0, 1.0, 1.0, 2.0)
    assert spec.budget == 1.0
    assert spec.data.source == str(dataset_path("county_population"))
    assert spec.methods == ("exact", "least_squares", "relaxed", "topdown")


def test_midwest_race_example() -> None:
    spec = read_spec(EXAMPLES / "midwest_race.toml")
    assert spec.attribute_counts == RACES
    assert spec.has_attribute
    assert spec.mechanism == "discrete_gaussian"
    assert spec.rho == 0.5
    assert spec.epsilon is None
    # With an attribute every level's histogram by cell is measured; "total" is the grand total.
    assert spec.measured_levels == (TOTAL, "state", "county")


def test_flights_example() -> None:
    spec = read_spec(EXAMPLES / "flights.toml")
    assert spec.count is None
    assert spec.levels == ("month", "origin", "dest")
    assert spec.window == 50.0


def test_defaults() -> None:
    spec = _spec()
    assert spec.methods == ("exact",)
    assert spec.mechanism == "geometric"
    assert spec.nonnegative
    assert spec.window is None
    assert spec.measured_levels == (TOTAL, "region", "state")
    assert spec.weights == (1.0, 1.0, 1.0)
    assert spec.columns == ("region", "state", "population_2019")


def test_invariant_levels_are_not_measured() -> None:
    spec = _spec(invariants=(TOTAL, "region"), level_weights=(2.0,))
    assert spec.measured_levels == ("state",)
    assert spec.weights == (2.0,)


def test_with_budget() -> None:
    assert _spec().with_budget(0.25).epsilon == 0.25
    zcdp = _spec(mechanism="discrete_gaussian", epsilon=None, rho=1.0)
    assert zcdp.with_budget(0.1).rho == 0.1


def test_data_forms_become_curator_tables(tmp_path: Path) -> None:
    frame = pd.DataFrame({"state": ["IL", "WI"], "county": ["Cook", "Dane"]})
    in_memory = _spec(data=frame, levels=("state", "county"), count=None)
    assert in_memory.data.source is frame
    csv = tmp_path / "people.csv"
    frame.to_csv(csv, index=False)
    from_file = _spec(data=csv, levels=("state", "county"), count=None)
    assert from_file.data.source == str(csv)
    assert from_file.data.column_names == ("state", "county")


def test_a_curator_table_declaration_is_reused() -> None:
    table = Table(
        "counties",
        str(dataset_path("county_population")),
        columns=[Column("region"), Column("state"), Column("population_2019", lower=0, upper=1e8)],
    )
    assert _spec(data=table).data is table
    with pytest.raises(InvalidParameterError, match="not declared columns"):
        _spec(data=table, levels=("region", "county"))
    bounded = Table(
        "people",
        pd.DataFrame({"pid": [1], "state": ["IL"]}),
        columns=["state"],
        privacy_unit="pid",
        max_rows_per_unit=3,
    )
    with pytest.raises(UnsupportedError, match="declare no privacy_unit"):
        _spec(data=bounded, levels=("state",), count=None)


def test_toml_reads_a_curator_declaration(tmp_path: Path) -> None:
    pd.DataFrame({"state": ["IL", "WI"], "county": ["Cook", "Dane"]}).to_csv(
        tmp_path / "people.csv", index=False
    )
    (tmp_path / "people.toml").write_text(
        '[table]\nname = "people"\nsource = "people.csv"\n[columns.state]\n[columns.county]\n'
    )
    (tmp_path / "release.toml").write_text(
        '[data]\ntable = "people.toml"\n[hierarchy]\nlevels = ["state", "county"]\n'
        "[privacy]\nepsilon = 0.5\n"
    )
    spec = read_spec(tmp_path / "release.toml")
    assert spec.data.name == "people"
    assert spec.data.source == str(tmp_path / "people.csv")
    assert spec.name == "release"


@pytest.mark.parametrize(
    ("overrides", "error", "match"),
    [
        ({"levels": ()}, InvalidParameterError, "levels must name at least one column"),
        ({"levels": "state"}, InvalidParameterError, "levels must be a list"),
        ({"levels": ("state", "state")}, InvalidParameterError, "must not repeat"),
        ({"levels": ("total",)}, InvalidParameterError, "root level's name"),
        ({"epsilon": -1.0}, InvalidParameterError, "epsilon must be > 0"),
        ({"epsilon": None}, InvalidParameterError, "epsilon must be given|epsilon is required"),
        ({"rho": 1.0}, InvalidParameterError, "rho does not apply to geometric"),
        ({"mechanism": "laplace"}, InvalidParameterError, "mechanism must be one of"),
        ({"mechanism": "discrete_gaussian"}, InvalidParameterError, "epsilon does not apply"),
        ({"invariants": ("county",)}, InvalidParameterError, "invariants must be among"),
        ({"invariants": ("region",)}, InvalidParameterError, "must be the top levels"),
        (
            {"invariants": (TOTAL, "region", "state")},
            InvalidParameterError,
            "at least one level to measure",
        ),
        ({"level_weights": (1.0, 2.0)}, InvalidParameterError, "one weight per measured level"),
        ({"level_weights": (1.0, 0.0, 1.0)}, InvalidParameterError, "level_weights must be > 0"),
        ({"methods": ("magic",)}, InvalidParameterError, "methods must be among"),
        ({"methods": ()}, InvalidParameterError, "methods must name at least one"),
        ({"window": -1.0}, InvalidParameterError, "window must be >= 0"),
        ({"nonnegative": 1}, InvalidParameterError, "nonnegative must be True or False"),
        ({"root": ""}, InvalidParameterError, "root must be a non-empty name"),
        ({"attribute_counts": RACES}, InvalidParameterError, "attribute_counts"),
        (
            {"attribute": "division", "invariants": (TOTAL, "region")},
            UnsupportedError,
            "only the total",
        ),
    ],
)
def test_bad_declarations_name_the_argument(
    overrides: dict[str, Any], error: type[Exception], match: str
) -> None:
    with pytest.raises(error, match=match):
        _spec(**overrides)


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("[data]\ndataset = 'nope'\n", "data.dataset must be one of"),
        ("[data]\ndataset = 'midwest'\nsource = 'x.csv'\n", "exactly one of"),
        ("[data]\ndataset = 'midwest'\n[extra]\n", "unknown"),
        ("[data]\ndataset = 'midwest'\n[privacy]\nepsilon = 1\ncolour = 2\n", "unknown keys"),
        ("[data\n", "is not valid TOML"),
        ("[data]\ndataset = 'midwest'\n[privacy]\nepsilon = 1\nlevel_weights = 'x'\n", "list"),
    ],
)
def test_bad_toml_is_refused(tmp_path: Path, text: str, match: str) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(
        text + "[hierarchy]\nlevels = ['state']\n" if "[hierarchy]" not in text else text
    )
    with pytest.raises(InvalidParameterError, match=match):
        read_spec(path)


def test_missing_file() -> None:
    with pytest.raises(InvalidParameterError, match="does not exist"):
        read_spec("no/such/release.toml")
