"""Tests of the shipped real tables (src/dpcurator/datasets/_load.py) against DATASETS.md."""

from __future__ import annotations

import ast
import hashlib
import re
import socket
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

import dpcurator.datasets
from dpcurator.datasets import (
    DATASETS,
    dataset_path,
    load_adult,
    load_county_population,
    load_cps,
    load_flights,
    load_midwest,
    load_pet_names,
    load_surnames,
)
from dpcurator.errors import InvalidParameterError

DATASETS_MD = Path(__file__).resolve().parents[2] / "DATASETS.md"
PACKAGE_DIR = Path(dpcurator.datasets.__file__).resolve().parent

LOADERS = {
    "adult": load_adult,
    "cps": load_cps,
    "flights": load_flights,
    "surnames": load_surnames,
    "pets": load_pet_names,
    "county_population": load_county_population,
    "midwest": load_midwest,
}

STRING = "string"  # any pandas string dtype (object of str, StringDtype, pandas 3 "str")
EXPECTED_DTYPES: dict[str, dict[str, str]] = {
    "adult": {
        "person_id": "int64",
        "age": "int64",
        "workclass": STRING,
        "fnlwgt": "int64",
        "education": STRING,
        "education_num": "int64",
        "marital_status": STRING,
        "occupation": STRING,
        "relationship": STRING,
        "race": STRING,
        "sex": STRING,
        "capital_gain": "int64",
        "capital_loss": "int64",
        "hours_per_week": "int64",
        "native_country": STRING,
        "income": STRING,
    },
    "cps": {
        "tax_unit_id": "int64",
        "household_id": "int64",
        "year": "int64",
        "h_seq": "int64",
        "family_pos": "int64",
        "state": STRING,
        "fips": "int64",
        "age_head": "int64",
        "age_spouse": "int64",
        "filing_status": STRING,
        "n_persons": "int64",
        "n_under_18": "int64",
        "n_21_plus": "int64",
        "wages": "int64",
        "interest": "int64",
        "dividends": "int64",
        "business_income": "int64",
        "pensions": "int64",
        "unemployment": "int64",
        "social_security": "int64",
        "snap_benefits": "int64",
        "weight": "int64",
    },
    "flights": {
        "year": "int64",
        "month": "int64",
        "day": "int64",
        "dep_time": "Int64",
        "dep_delay": "Int64",
        "arr_delay": "Int64",
        "carrier": STRING,
        "flight": "int64",
        "tailnum": STRING,
        "origin": STRING,
        "dest": STRING,
        "air_time": "Int64",
        "distance": "int64",
        "hour": "int64",
    },
    "surnames": {
        "name": STRING,
        "percent": "float64",
        "cumulative_percent": "float64",
        "rank": "int64",
    },
    "pets": {
        "license_issue_date": "datetime64[ms]",
        "animal_name": STRING,
        "species": STRING,
        "primary_breed": STRING,
        "secondary_breed": STRING,
        "zip_code": STRING,
    },
    "county_population": {
        "region": STRING,
        "division": STRING,
        "state": STRING,
        "county": STRING,
        "state_fips": "int64",
        "county_fips": "int64",
        "population_2010": "int64",
        "population_2019": "int64",
    },
    "midwest": {
        "state": STRING,
        "county": STRING,
        "poptotal": "int64",
        "popwhite": "int64",
        "popblack": "int64",
        "popamerindian": "int64",
        "popasian": "int64",
        "popother": "int64",
    },
}
EXPECTED_ROWS = {
    "adult": 32_561,
    "cps": 280_005,
    "flights": 336_776,
    "surnames": 88_799,
    "pets": 52_519,
    "county_population": 3_142,
    "midwest": 437,
}


@pytest.fixture(scope="module")
def frames() -> dict[str, pd.DataFrame]:
    return {name: load() for name, load in LOADERS.items()}


def _documented() -> dict[str, tuple[int, int, int, str]]:
    """(rows, columns, bytes, sha256) per file, from the summary table of DATASETS.md."""
    row = re.compile(
        r"^\| `(\w+)\.parquet` \| ([\d,]+) \| (\d+) \| ([\d,]+) \| `([0-9a-f]{64})` \|$",
        re.MULTILINE,
    )
    found = {
        m[1]: (int(m[2].replace(",", "")), int(m[3]), int(m[4].replace(",", "")), m[5])
        for m in row.finditer(DATASETS_MD.read_text(encoding="utf-8"))
    }
    assert set(found) == set(DATASETS), f"DATASETS.md documents {sorted(found)}"
    return found


# ---- files and paths -------------------------------------------------------------------------


def test_names_and_paths() -> None:
    assert DATASETS == (
        "adult",
        "cps",
        "flights",
        "surnames",
        "pets",
        "county_population",
        "midwest",
    )
    for name in DATASETS:
        path = dataset_path(name)
        assert path.is_absolute()
        assert path == PACKAGE_DIR / "data" / f"{name}.parquet"
        assert path.is_file()
        assert path.stat().st_size < 5_000_000


@pytest.mark.parametrize("bad", ["Adult", "adult.parquet", "", "../cps", None, 3, "surname"])
def test_unknown_name_is_rejected(bad: Any) -> None:
    with pytest.raises(
        InvalidParameterError, match="name must be one of adult, cps, flights, surnames, pets"
    ):
        dataset_path(bad)


@pytest.mark.parametrize("name", DATASETS)
def test_sha256_and_size_match_datasets_md(name: str) -> None:
    rows, columns, size, digest = _documented()[name]
    data = dataset_path(name).read_bytes()
    assert len(data) == size
    assert hashlib.sha256(data).hexdigest() == digest
    assert rows == EXPECTED_ROWS[name]
    assert columns == len(EXPECTED_DTYPES[name])


def test_every_column_is_documented() -> None:
    text = DATASETS_MD.read_text(encoding="utf-8")
    for name, columns in EXPECTED_DTYPES.items():
        section = text.split(f"## `{name}.parquet`", 1)[1].split("\n## ", 1)[0]
        for column in columns:
            assert f"| `{column}` |" in section, f"{name}.{column} is not in DATASETS.md"


def test_loaders_do_not_touch_the_network(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("a dataset loader tried to use the network")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    for name, load in LOADERS.items():
        assert len(load()) == EXPECTED_ROWS[name]
    # ... and the loader module imports nothing that could fetch a file.
    tree = ast.parse((PACKAGE_DIR / "_load.py").read_text(encoding="utf-8"))
    imported = {
        alias.name for n in ast.walk(tree) if isinstance(n, ast.Import) for alias in n.names
    }
    imported |= {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    assert imported == {"__future__", "pathlib", "typing", "dpcurator.errors", "pandas"}


# ---- shapes and dtypes -----------------------------------------------------------------------


@pytest.mark.parametrize("name", DATASETS)
def test_shape_and_dtypes(frames: dict[str, pd.DataFrame], name: str) -> None:
    df = frames[name]
    expected = EXPECTED_DTYPES[name]
    assert df.shape == (EXPECTED_ROWS[name], len(expected))
    assert list(df.columns) == list(expected)
    assert isinstance(df.index, pd.RangeIndex)
    for column, dtype in expected.items():
        if dtype == STRING:
            assert pd.api.types.is_string_dtype(df[column]), column
            assert all(isinstance(v, str) for v in df[column].dropna().head(100)), column
        else:
            assert str(df[column].dtype) == dtype, column


def test_loads_are_independent_copies() -> None:
    first = load_adult()
    first.loc[0, "age"] = -1
    assert load_adult().loc[0, "age"] == 39


# ---- privacy units ---------------------------------------------------------------------------


def test_adult_person_id_is_one_row_per_person(frames: dict[str, pd.DataFrame]) -> None:
    ids = frames["adult"]["person_id"]
    assert ids.is_unique
    assert ids.tolist() == list(range(1, EXPECTED_ROWS["adult"] + 1))


def test_cps_households_group_tax_units(frames: dict[str, pd.DataFrame]) -> None:
    cps = frames["cps"]
    assert cps["tax_unit_id"].is_unique
    assert (cps["household_id"] == cps["year"] * 100_000 + cps["h_seq"]).all()
    households = cps.groupby(["year", "h_seq"])
    assert households.ngroups == cps["household_id"].nunique() == 200_576
    sizes = households.size()
    assert sizes.min() == 1
    assert sizes.max() == 12
    assert (sizes > 1).sum() > 50_000  # many households hold several tax units
    assert households["state"].nunique().max() == 1  # a household lies in one state
    # h_seq alone is not a household key: the same number recurs in other years.
    assert cps["h_seq"].nunique() < cps["household_id"].nunique()


def test_flights_tailnum_has_many_rows_per_aircraft(frames: dict[str, pd.DataFrame]) -> None:
    tail = frames["flights"]["tailnum"]
    per_aircraft = tail.value_counts()
    assert len(per_aircraft) == 4_043
    assert per_aircraft.max() == 575
    assert per_aircraft.median() > 10
    assert int(tail.isna().sum()) == 2_512


# ---- values ----------------------------------------------------------------------------------


def test_adult_values(frames: dict[str, pd.DataFrame]) -> None:
    adult = frames["adult"]
    assert adult["age"].between(17, 90).all()
    assert adult["hours_per_week"].between(1, 99).all()
    assert adult["income"].value_counts().to_dict() == {"<=50K": 24_720, ">50K": 7_841}
    assert set(adult["sex"]) == {"Male", "Female"}
    missing = adult.isna().sum()
    assert missing[missing > 0].to_dict() == {
        "workclass": 1_836,
        "occupation": 1_843,
        "native_country": 583,
    }
    assert not adult.isin(["?"]).any().any()
    text = [c for c, t in EXPECTED_DTYPES["adult"].items() if t == STRING]
    assert len(text) == 9
    for column in text:
        values = adult[column].dropna()
        assert (values == values.str.strip()).all(), column


def test_cps_values(frames: dict[str, pd.DataFrame]) -> None:
    cps = frames["cps"]
    assert not cps.isna().any().any()
    states = set(cps["state"])
    assert len(states) == 51
    assert "DC" in states
    assert {"CA", "NY", "TX", "WY", "AK", "HI"} <= states
    pairs = set(zip(cps["fips"], cps["state"], strict=True))
    assert len(pairs) == 51  # state is a function of fips (and back)
    assert {(6, "CA"), (11, "DC"), (36, "NY"), (48, "TX"), (56, "WY")} <= pairs
    assert cps["age_head"].between(0, 85).all()
    assert cps["age_head"].median() > 30
    assert cps["age_spouse"].between(0, 85).all()
    assert set(cps["year"]) == {2012, 2013, 2014}
    assert set(cps["filing_status"]) == {
        "single",
        "married_joint",
        "married_separate",
        "head_of_household",
    }
    joint = cps["filing_status"] == "married_joint"
    assert (cps.loc[~joint, "age_spouse"] == 0).all()
    assert (cps["n_persons"] >= 1).all()
    assert (cps["weight"] > 0).all()
    assert 160e6 < cps["weight"].sum() < 180e6  # about 170.6 million US tax units
    for column in ("wages", "interest", "dividends", "pensions", "social_security"):
        assert (cps[column] >= 0).all(), column
    assert (cps["business_income"] < 0).any()  # losses are kept


def test_flights_values(frames: dict[str, pd.DataFrame]) -> None:
    flights = frames["flights"]
    assert (flights["year"] == 2013).all()
    assert flights["month"].between(1, 12).all()
    assert flights["day"].between(1, 31).all()
    assert flights["hour"].between(0, 23).all()
    assert set(flights["origin"]) == {"EWR", "JFK", "LGA"}
    assert flights["carrier"].nunique() == 16
    assert flights["dest"].nunique() == 105
    assert flights["distance"].between(17, 4_983).all()
    assert int(flights["dep_time"].isna().sum()) == 8_255
    assert int(flights["arr_delay"].isna().sum()) == 9_430
    assert flights["air_time"].dropna().between(20, 695).all()


def test_surnames_values(frames: dict[str, pd.DataFrame]) -> None:
    surnames = frames["surnames"]
    assert surnames["name"].is_unique
    assert surnames["rank"].tolist() == list(range(1, EXPECTED_ROWS["surnames"] + 1))
    assert surnames.head(5)["name"].tolist() == ["SMITH", "JOHNSON", "WILLIAMS", "JONES", "BROWN"]
    assert surnames.loc[0, "percent"] == 1.006
    assert (surnames["percent"].diff().dropna() <= 0).all()  # most frequent first
    assert (surnames["cumulative_percent"].diff().dropna() >= 0).all()
    assert surnames["cumulative_percent"].iloc[-1] == 90.483
    assert int((surnames["percent"] > 0).sum()) == 18_839
    assert surnames["percent"].sum() == pytest.approx(79.59)
    assert surnames["percent"].head(1000).sum() == pytest.approx(43.384)
    # Real surnames that a careless CSV reader turns into missing values or booleans.
    assert {"NA", "NAN", "NULL", "TRUE"} <= set(surnames["name"])
    assert not surnames.isna().any().any()
    assert surnames["name"].str.fullmatch(r"[A-Z]+").all()


def test_pets_values(frames: dict[str, pd.DataFrame]) -> None:
    pets = frames["pets"]
    assert "license_number" not in pets.columns  # an identifier: dropped
    assert pets["species"].value_counts().to_dict() == {
        "Dog": 35_181,
        "Cat": 17_294,
        "Goat": 38,
        "Pig": 6,
    }
    names = pets["animal_name"].value_counts()
    assert len(names) == 13_929
    assert names.head(3).to_dict() == {"Lucy": 439, "Charlie": 387, "Luna": 355}
    assert int((names == 1).sum()) == 9_636
    assert pets.isna().sum()[lambda m: m > 0].to_dict() == {
        "animal_name": 483,
        "secondary_breed": 29_517,
        "zip_code": 397,
    }
    assert pets["license_issue_date"].min() == pd.Timestamp("2003-04-19")
    assert pets["license_issue_date"].max() == pd.Timestamp("2018-12-31")
    assert pets["primary_breed"].nunique() == 336
    assert pets["zip_code"].nunique() == 167
