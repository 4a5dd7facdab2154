"""The wire format (src/dpcurator/client/_wire.py): every kind of release a local session makes
comes back from JSON as an equal QueryRelease, non-finite numbers and missing values included."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest

from dpcurator.accounting import Budget
from dpcurator.client import frame_from_json, frame_to_json, release_from_json, release_to_json
from dpcurator.curator import Column, Session, Table
from dpcurator.noise import InsecureSeededSource

FRAME = pd.DataFrame(
    {
        "hh": [1, 1, 2, 3, 4, 5, 6, 7],
        "region": ["n", "s", "n", "s", "e", "n", "w", "e"],
        "city": ["a", "b", "a", "c", "a", "b", "a", "c"],
        "income": [10.0, 20.0, 30.0, 40.0, 50.0, 60.0, 70.0, 80.0],
    }
)
QUERIES = [
    "SELECT region, COUNT(*) AS n, AVG(income) FROM people GROUP BY region",
    "SELECT MEDIAN(income) AS m, VARIANCE(income) AS v FROM people",
    "SELECT HISTOGRAM(income, 0, 50, 100) FROM people",
    "SELECT city, COUNT(DISTINCT hh) AS units FROM people GROUP BY city",
    "SELECT COUNT(*) AS n FROM people WHERE income > 1e9",
]


@pytest.mark.parametrize("query", QUERIES)
def test_a_local_release_round_trips_exactly(query: str) -> None:
    table = Table(
        "people",
        FRAME,
        privacy_unit="hh",
        max_rows_per_unit=2,
        max_groups_per_unit=2,
        columns=[
            Column("region", domain=["e", "n", "s", "w"]),
            Column("city"),
            Column("income", lower=0, upper=100),
        ],
    )
    with Session(table, Budget(100.0, 0.5), ledger=":memory:", source=InsecureSeededSource(4)) as s:
        release = s.sql(query, epsilon=1.0, delta=0.1 if "city" in query else 0.0)
    text = release_to_json(release)
    json.loads(text)  # strict JSON: no NaN or Infinity literals
    back = release_from_json(text)
    pd.testing.assert_frame_equal(back.table, release.table)
    for name in (
        "query",
        "value_columns",
        "intervals",
        "split",
        "events",
        "charged",
        "spent",
        "remaining",
        "entry_id",
        "confidence",
        "bounded_sql",
        "threshold",
    ):
        assert getattr(back, name) == getattr(release, name), name
    assert [m.measure for m in back.split] == [m.measure for m in release.split]


def test_non_finite_and_missing_values_survive() -> None:
    frame = pd.DataFrame(
        {
            "x": [1.5, math.nan, math.inf, -math.inf],
            "k": ["a", "b", "c", "d"],
            "n": np.array([1, 2, 3, 2**62], dtype="int64"),
            "b": [True, False, True, True],
        }
    )
    text = json.dumps(frame_to_json(frame), allow_nan=False)
    pd.testing.assert_frame_equal(frame_from_json(json.loads(text)), frame)


def test_missing_keys_and_timestamps_survive() -> None:
    frame = pd.DataFrame(
        {
            "k": ["a", None],
            "i": pd.array([7, None], dtype="Int64"),
            "t": pd.to_datetime(["2024-02-29 13:45", None]),
            "n": [1.0, 2.0],
        }
    )
    text = json.dumps(frame_to_json(frame), allow_nan=False)
    pd.testing.assert_frame_equal(frame_from_json(json.loads(text)), frame)


def test_a_gaussian_release_round_trips_with_its_noise_and_why() -> None:
    table = Table(
        "people",
        FRAME,
        privacy_unit="hh",
        max_rows_per_unit=2,
        max_groups_per_unit=2,
        columns=[Column("region", domain=["e", "n", "s", "w"])],
    )
    with Session(
        table,
        Budget(100.0, 0.5),
        ledger=":memory:",
        noise="gaussian",
        source=InsecureSeededSource(4),
    ) as s:
        release = s.sql(
            "SELECT region, COUNT(*) AS n FROM people GROUP BY region", epsilon=1.0, delta=1e-6
        )
    back = release_from_json(release_to_json(release))
    (m,) = back.split
    assert m.gaussian is not None and m.gaussian == release.split[0].gaussian
    assert m.why == release.split[0].why != ""
    assert back.split == release.split and back.events == release.events
