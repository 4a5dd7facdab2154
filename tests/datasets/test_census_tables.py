"""The census tables behind hierarchical releases (county_population, midwest; src/dpcurator/
datasets/_load.py), checked against DATASETS.md and the published totals."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import pandas as pd
import pytest

from dpcurator.datasets import (
    DATASETS,
    dataset_path,
    load_county_population,
    load_midwest,
)

DATASETS_MD = Path(__file__).resolve().parents[2] / "DATASETS.md"
RACES = ["popwhite", "popblack", "popamerindian", "popasian", "popother"]
EXPECTED = {
    "county_population": (
        3_142,
        {
            "region": "string",
            "division": "string",
            "state": "string",
            "county": "string",
            "state_fips": "int64",
            "county_fips": "int64",
            "population_2010": "int64",
            "population_2019": "int64",
        },
    ),
    "midwest": (
        437,
        {"state": "string", "county": "string", "poptotal": "int64"}
        | dict.fromkeys(RACES, "int64"),
    ),
}


@pytest.fixture(scope="module")
def counties() -> pd.DataFrame:
    return load_county_population()


@pytest.fixture(scope="module")
def midwest() -> pd.DataFrame:
    return load_midwest()


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_file_matches_datasets_md(name: str) -> None:
    assert name in DATASETS
    text = DATASETS_MD.read_text(encoding="utf-8")
    row = re.search(
        rf"^\| `{name}\.parquet` \| ([\d,]+) \| (\d+) \| ([\d,]+) \| `([0-9a-f]{{64}})` \|$",
        text,
        re.MULTILINE,
    )
    assert row is not None, f"{name} is not in the summary table of DATASETS.md"
    data = dataset_path(name).read_bytes()
    rows, columns = EXPECTED[name][0], len(EXPECTED[name][1])
    assert (int(row[1].replace(",", "")), int(row[2])) == (rows, columns)
    assert len(data) == int(row[3].replace(",", ""))
    assert hashlib.sha256(data).hexdigest() == row[4]
    section = text.split(f"## `{name}.parquet`", 1)[1].split("\n## ", 1)[0]
    for column in EXPECTED[name][1]:
        assert f"| `{column}` |" in section, f"{name}.{column} is not documented"


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_shape_and_dtypes(counties: pd.DataFrame, midwest: pd.DataFrame, name: str) -> None:
    frame = {"county_population": counties, "midwest": midwest}[name]
    rows, dtypes = EXPECTED[name]
    assert frame.shape == (rows, len(dtypes))
    assert list(frame.columns) == list(dtypes)
    for column, dtype in dtypes.items():
        if dtype == "string":
            assert pd.api.types.is_string_dtype(frame[column]), column
        else:
            assert str(frame[column].dtype) == dtype, column
    assert not frame.isna().any().any()


def test_counties_add_up_to_the_2019_nation(counties: pd.DataFrame) -> None:
    assert int(counties["population_2019"].sum()) == 328_239_523
    by_region = counties.groupby("region")["population_2019"].sum().to_dict()
    assert by_region == {
        "Midwest": 68_329_004,
        "Northeast": 55_982_803,
        "South": 125_580_448,
        "West": 78_347_268,
    }
    assert counties["division"].nunique() == 9
    assert counties["state"].nunique() == 51
    assert not counties.duplicated(["state_fips", "county_fips"]).any()
    # Divisions nest in regions and states in divisions: a census hierarchy.
    assert (counties.groupby("division")["region"].nunique() == 1).all()
    assert (counties.groupby("state")["division"].nunique() == 1).all()
    cook = counties[(counties["state"] == "Illinois") & (counties["county"] == "Cook County")]
    assert cook[["state_fips", "county_fips"]].values.tolist() == [[17, 31]]


def test_midwest_races_sum_to_the_total(midwest: pd.DataFrame) -> None:
    assert (midwest[RACES].sum(axis=1) == midwest["poptotal"]).all()
    assert int(midwest["poptotal"].sum()) == 42_008_942
    assert midwest["state"].value_counts().to_dict() == {
        "IL": 102,
        "IN": 92,
        "OH": 88,
        "MI": 83,
        "WI": 72,
    }
    assert not midwest.duplicated(["state", "county"]).any()
    assert int(midwest[RACES].min().min()) == 0
