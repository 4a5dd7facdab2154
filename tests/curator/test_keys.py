"""Computed group keys: bands of a bounded column, with a domain derived from the declaration."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from sqlglot import parse_one

from dpcurator.curator import Column, Table
from dpcurator.curator._keys import MAX_BANDS, computed_key
from dpcurator.errors import QueryError
from tests.curator.conftest import EngineKind, exact_aggregates, open_session


def _table(frame: pd.DataFrame | None = None) -> Table:
    if frame is None:
        frame = pd.DataFrame({"pid": [1], "age": [1.0], "income": [1.0], "state": ["CA"]})
    return Table(
        "people",
        frame,
        privacy_unit="pid",
        max_rows_per_unit=3,
        max_groups_per_unit=3,
        columns=[
            Column("age", lower=0, upper=99),
            Column("income", lower=-50, upper=1000, nullable=True),
            Column("state", domain=["CA", "NY"]),
        ],
    )


def _domain(sql: str) -> tuple[object, ...]:
    return computed_key(parse_one(sql), _table(), lambda c: c.name).domain


@pytest.mark.parametrize(
    ("sql", "domain"),
    [
        ("FLOOR(age / 10) * 10", tuple(range(0, 100, 10))),
        ("FLOOR(age / 25)", (0, 1, 2, 3)),
        ("CEIL(age / 50)", (0, 1, 2)),
        ("FLOOR((age - 5) / 10) * 10 + 5", tuple(range(-5, 100, 10))),
        ("10 * FLOOR(age / 10)", tuple(range(0, 100, 10))),
        ("FLOOR(income / 500) * 500", (-500, 0, 500, 1000)),
        ("-FLOOR(age / 50)", (0, -1)),
        ("FLOOR(age / 40) / 2", (0, 0.5, 1)),
        ("FLOOR(-age / 50)", (-2, -1, 0)),
    ],
)
def test_the_domain_follows_from_the_bounds(sql: str, domain: tuple[object, ...]) -> None:
    assert _domain(sql) == domain
    assert all(type(v) is int or v != math.floor(v) for v in _domain(sql))


@pytest.mark.parametrize(
    ("sql", "why"),
    [
        ("age / 10", "continuum"),
        ("age + 1", "continuum"),
        ("ROUND(age, -1)", "not arithmetic"),
        ("FLOOR(age / 10) + FLOOR(income / 10)", "exactly one declared column"),
        ("FLOOR(age / 0.001)", "more than 10,000"),
        ("FLOOR(age / 3) / 10", "binary fraction"),
        ("FLOOR(age * age)", "constants only"),
        ("FLOOR(FLOOR(age / 10) / 2)", "linear function"),
        ("FLOOR(age / 10) * 0", "by zero"),
        ("FLOOR(age / 0)", "constants only"),
    ],
)
def test_keys_without_a_public_domain_are_refused(sql: str, why: str) -> None:
    with pytest.raises(QueryError, match=why):
        _domain(sql)


def test_a_column_without_bounds_has_no_public_bands() -> None:
    with pytest.raises(QueryError, match="no declared bounds"):
        computed_key(parse_one("FLOOR(state / 10)"), _table(), lambda c: c.name)


def test_max_bands_is_the_limit() -> None:
    assert len(_domain(f"FLOOR(age * {MAX_BANDS / 100})")) == MAX_BANDS - MAX_BANDS // 100 + 1


def _people(seed: int = 3) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    sizes = rng.integers(1, 6, size=300)  # up to 5 rows: some units exceed the bound of 3
    pid = np.repeat(np.arange(sizes.size), sizes)
    n = pid.size
    income = rng.uniform(-100, 1100, n)
    income[rng.random(n) < 0.1] = np.nan
    return pd.DataFrame(
        {
            "pid": pid,
            "age": rng.integers(0, 120, n).astype(float),  # some beyond the bound of 99
            "income": income,
            "state": rng.choice(["CA", "NY", "TX"], n),
        }
    )


def test_bands_group_like_the_same_bands_computed_by_hand(engine_kind: EngineKind) -> None:
    frame = _people()
    with open_session(_table(frame), engine=engine_kind) as session:
        plan, exact = exact_aggregates(
            session,
            "SELECT FLOOR(age / 10) * 10 AS decade, COUNT(*) AS n FROM people GROUP BY decade",
        )
    # Units within their bounds (at most 3 rows) keep every row; the others keep 3 rows.
    per_unit = frame.groupby("pid").size()
    light = frame[frame["pid"].isin(per_unit[per_unit <= 3].index)]
    light = light[light["age"] <= 99]
    truth = (np.floor(light["age"] / 10) * 10).astype(int).value_counts()
    got = dict(
        zip([k[0] for k in exact.keys], exact.columns[plan.measurements[0].result], strict=True)
    )
    heavy_rows = frame[frame["pid"].isin(per_unit[per_unit > 3].index)]
    for band in range(0, 100, 10):
        # units beyond their bounds keep 3 of their rows: between the light count and it plus
        # 3 per heavy unit with a row in the band
        heavy_units = heavy_rows[np.floor(heavy_rows["age"] / 10) * 10 == band]["pid"].nunique()
        assert truth.get(band, 0) <= got.get(band, 0) <= truth.get(band, 0) + 3 * heavy_units
    assert set(got) <= set(range(0, 100, 10))  # ages beyond 99 are in no band


def test_both_engines_agree_on_computed_keys(spark: object) -> None:
    frame = _people(5)
    query = (
        "SELECT FLOOR(income / 500) * 500 AS band, state, COUNT(*), SUM(age), "
        "COUNT(DISTINCT pid) AS units FROM people WHERE age > 10 GROUP BY band, state"
    )
    results = []
    for kind in ("duckdb", "spark"):
        with open_session(_table(frame), engine=kind) as session:  # type: ignore[arg-type]
            plan, exact = exact_aggregates(session, query)
            rows = {
                tuple(key): tuple(int(exact.columns[m.result][i]) for m in plan.measurements)
                for i, key in enumerate(exact.keys)
            }
            results.append(rows)
    assert results[0] == results[1]
    assert {k[0] for k in results[0]} <= {-500, 0, 500, 1000}


def test_a_computed_key_is_released_with_its_alias_and_every_band(engine_kind: EngineKind) -> None:
    with open_session(_table(_people()), engine=engine_kind) as session:
        release = session.sql(
            "SELECT FLOOR(age / 25) AS quarter, COUNT(*) AS n FROM people GROUP BY quarter",
            epsilon=1.0,
        )
    assert list(release.table.columns[:2]) == ["quarter", "n"]
    assert release.table["quarter"].tolist() == [0, 1, 2, 3]


def test_selecting_another_expression_than_the_key_is_refused() -> None:
    with open_session(_table(_people())) as session:
        with pytest.raises(QueryError, match="neither a group key nor an aggregate"):
            session.sql(
                "SELECT FLOOR(age / 10) AS d, COUNT(*) FROM people GROUP BY FLOOR(age / 5)",
                epsilon=1.0,
            )
        with pytest.raises(QueryError, match="privacy unit"):
            session.sql("SELECT COUNT(*) FROM people GROUP BY FLOOR(pid / 10)", epsilon=1.0)
        assert session.spent.epsilon == 0.0


AGE_GROUPS = "CASE WHEN age < 18 THEN 'child' WHEN age < 65 THEN 'adult' ELSE 'senior' END"


@pytest.mark.parametrize(
    ("sql", "domain"),
    [
        (AGE_GROUPS, ("child", "adult", "senior")),
        (
            "CASE WHEN state = 'CA' THEN 'west' WHEN state = 'NY' THEN 'east' ELSE 'west' END",
            ("west", "east"),
        ),
        ("CASE WHEN age < 50 THEN 0 ELSE 1 END", (0, 1)),
        ("(CASE WHEN income IS NULL THEN -1 WHEN income < 0 THEN 2.5 END)", (-1, 2.5)),
    ],
)
def test_a_case_of_literals_has_its_literals_as_domain(
    sql: str, domain: tuple[object, ...]
) -> None:
    assert _domain(sql) == domain


def test_a_case_with_a_computed_result_is_refused() -> None:
    with pytest.raises(QueryError, match="is not a literal"):
        _domain("CASE WHEN age < 18 THEN state ELSE 'x' END")


def test_case_buckets_are_type_checked_like_a_filter(engine_kind: EngineKind) -> None:
    with open_session(_table(_people()), engine=engine_kind) as session:
        for query, message in [
            ("CASE WHEN state > 1 THEN 'a' ELSE 'b' END", "cast"),
            ("CASE WHEN age < 1 THEN 'a' ELSE 1 END", "mixes text and a number"),
            ("CASE WHEN SUM(age) > 1 THEN 'a' ELSE 'b' END", "aggregate"),
        ]:
            with pytest.raises(QueryError, match=message):
                session.sql(f"SELECT {query} AS k, COUNT(*) FROM people GROUP BY k", epsilon=1.0)
        assert session.spent.epsilon == 0.0


def test_both_engines_agree_on_case_buckets(spark: object) -> None:
    frame = _people(7)
    query = (
        f"SELECT {AGE_GROUPS} AS age_group, COUNT(*) AS n, SUM(income) AS s FROM people "
        "WHERE state <> 'TX' GROUP BY age_group"
    )
    results = []
    for kind in ("duckdb", "spark"):
        with open_session(_table(frame), engine=kind) as session:  # type: ignore[arg-type]
            plan, exact = exact_aggregates(session, query)
            results.append(
                {
                    key[0]: tuple(int(exact.columns[m.result][i]) for m in plan.measurements)
                    for i, key in enumerate(exact.keys)
                }
            )
            release = session.sql(query, epsilon=1.0)
            assert release.table["age_group"].tolist() == ["child", "adult", "senior"]
    assert results[0] == results[1]
    light = frame.groupby("pid").size()
    assert results[0]["child"][0] >= int(
        (
            (frame["age"] < 18)
            & (frame["state"] != "TX")
            & frame["pid"].isin(light[light <= 3].index)
        ).sum()
    )


def _dated(seed: int = 3, units: int = 150) -> tuple[pd.DataFrame, Table]:
    """Units with 1-4 rows, each with a timestamp in 2023-2024 (some NULL) and an amount."""
    rng = np.random.default_rng(seed)
    pid = np.repeat(np.arange(units), rng.integers(1, 5, units))
    start = np.datetime64("2023-01-01T00:00:00")
    seconds = rng.integers(0, 2 * 365 * 86400, pid.size).astype("timedelta64[s]")
    when = pd.Series(start + seconds).astype("datetime64[us]")
    when[rng.random(pid.size) < 0.05] = pd.NaT
    frame = pd.DataFrame({"pid": pid, "at": when, "amount": rng.uniform(0, 100, pid.size)})
    table = Table(
        "events",
        frame,
        privacy_unit="pid",
        max_rows_per_unit=3,
        max_groups_per_unit=3,
        columns=[Column("at"), Column("amount", lower=0, upper=100)],
    )
    return frame, table


@pytest.mark.parametrize(
    ("sql", "domain"),
    [
        ("MONTH(at)", tuple(range(1, 13))),
        ("EXTRACT(MONTH FROM at)", tuple(range(1, 13))),
        ("QUARTER(at)", (1, 2, 3, 4)),
        ("DAY(at)", tuple(range(1, 32))),
        ("DAYOFYEAR(at)", tuple(range(1, 367))),
        ("EXTRACT(hour FROM at)", tuple(range(24))),
        ("MINUTE(at)", tuple(range(60))),
    ],
)
def test_a_calendar_part_has_the_calendars_domain(sql: str, domain: tuple[object, ...]) -> None:
    _, table = _dated()
    assert computed_key(parse_one(sql), table, lambda c: c.name).domain == domain


@pytest.mark.parametrize(
    ("sql", "why"),
    [
        ("YEAR(at)", "derived column"),
        ("DAYOFWEEK(at)", "numbered differently"),
        ("EXTRACT(EPOCH FROM at)", "no fixed calendar domain"),
        ("MONTH(at + INTERVAL 1 DAY)", "declared column itself"),
    ],
)
def test_calendar_parts_without_a_fixed_domain_are_refused(sql: str, why: str) -> None:
    _, table = _dated()
    with pytest.raises(QueryError, match=why):
        computed_key(parse_one(sql), table, lambda c: c.name)


def test_calendar_keys_group_like_pandas(engine_kind: EngineKind) -> None:
    frame, table = _dated()
    small = frame[frame.groupby("pid")["pid"].transform("size") <= 3]  # units within bounds
    table = Table(
        "events",
        small,
        privacy_unit="pid",
        max_rows_per_unit=3,
        max_groups_per_unit=3,
        columns=list(table.columns),
    )
    with open_session(table, engine=engine_kind) as session:
        for sql, part in [
            ("MONTH(at)", small["at"].dt.month),
            ("EXTRACT(HOUR FROM at)", small["at"].dt.hour),
            ("DAYOFYEAR(at)", small["at"].dt.day_of_year),
        ]:
            plan, exact = exact_aggregates(
                session, f"SELECT {sql} AS k, COUNT(*) AS n FROM events GROUP BY k"
            )
            got = {
                k[0]: int(v)
                for k, v in zip(exact.keys, exact.columns[plan.measurements[0].result], strict=True)
            }
            truth = part.dropna().astype(int).value_counts()
            assert {k: v for k, v in got.items() if v} == {int(k): int(v) for k, v in truth.items()}


def test_a_calendar_part_of_a_column_that_is_no_date_is_refused_before_any_spend(
    engine_kind: EngineKind,
) -> None:
    _, table = _dated()
    with open_session(table, engine=engine_kind) as session:
        with pytest.raises(QueryError):
            session.sql("SELECT MONTH(amount) AS m, COUNT(*) FROM events GROUP BY m", epsilon=1.0)
        assert session.spent.epsilon == 0.0
        release = session.sql(
            "SELECT QUARTER(at) AS q, COUNT(*) AS n FROM events GROUP BY q", epsilon=1.0
        )
    assert release.table["q"].tolist() == [1, 2, 3, 4]
