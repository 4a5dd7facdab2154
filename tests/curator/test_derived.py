"""Derived columns: row-wise expressions declared with their public metadata, on both engines."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dpcurator.curator import Column, Table
from dpcurator.errors import InvalidParameterError
from tests.curator.conftest import EngineKind, exact_aggregates, open_session


def _frame(seed: int = 11, units: int = 120) -> pd.DataFrame:
    """Units of 1-3 rows: a date in 2022-2024, an age, and a code that is sometimes no number."""
    rng = np.random.default_rng(seed)
    pid = np.repeat(np.arange(units), rng.integers(1, 4, units))
    days = rng.integers(0, 3 * 365, pid.size).astype("timedelta64[D]")
    codes = rng.integers(0, 50, pid.size).astype(str).astype(object)
    codes[rng.random(pid.size) < 0.1] = "n/a"  # CAST fails on these rows
    return pd.DataFrame(
        {
            "pid": pid,
            "day": pd.Series(np.datetime64("2022-01-01") + days).astype("datetime64[us]"),
            "age": rng.integers(0, 100, pid.size),
            "code": codes,
        }
    )


def _table(frame: pd.DataFrame, *extra: Column) -> Table:
    return Table(
        "people",
        frame,
        privacy_unit="pid",
        max_rows_per_unit=3,
        max_groups_per_unit=3,
        columns=[
            Column("age", lower=0, upper=100),
            Column("year", expression="YEAR(day)", domain=[2022, 2023, 2024]),
            Column(
                "age_group",
                expression="CASE WHEN age < 18 THEN 'child' WHEN age < 65 THEN 'adult' "
                "ELSE 'senior' END",
                domain=["child", "adult", "senior"],
            ),
            Column("code_number", expression="CAST(code AS INTEGER)", lower=0, upper=49),
            *extra,
        ],
    )


@pytest.mark.parametrize(
    ("expression", "why"),
    [
        ("SUM(age)", "row-wise"),
        ("(SELECT 1 FROM people)", "one SQL expression"),
        ("age +", "one SQL expression"),
        ("42", "must read a column"),
        ("", "SQL expression of at most"),
        ("RANDOM() * age", "row-wise"),
    ],
)
def test_an_expression_that_is_not_row_wise_is_refused(expression: str, why: str) -> None:
    with pytest.raises(InvalidParameterError, match=why):
        Column("x", expression=expression, lower=0, upper=1)


def test_derived_columns_equal_the_same_columns_computed_beforehand(
    engine_kind: EngineKind,
) -> None:
    """Grouping, filtering and summing a derived column equals doing it on a stored column."""
    frame = _frame()
    stored = frame.assign(
        year=frame["day"].dt.year,
        age_group=np.where(
            frame["age"] < 18, "child", np.where(frame["age"] < 65, "adult", "senior")
        ),
        code_number=pd.to_numeric(frame["code"], errors="coerce"),  # NULL where CAST fails
    )
    plain = Table(
        "people",
        stored,
        privacy_unit="pid",
        max_rows_per_unit=3,
        max_groups_per_unit=3,
        columns=[
            Column("age", lower=0, upper=100),
            Column("year", domain=[2022, 2023, 2024]),
            Column("age_group", domain=["child", "adult", "senior"]),
            Column("code_number", lower=0, upper=49),
        ],
    )
    query = (
        "SELECT year, age_group, COUNT(*) AS n, SUM(code_number) AS s, COUNT(code_number) AS c "
        "FROM people WHERE year >= 2023 GROUP BY year, age_group"
    )
    results = []
    for table in (_table(frame), plain):
        with open_session(table, engine=engine_kind) as session:
            plan, exact = exact_aggregates(session, query)
            results.append(
                {
                    tuple(k): tuple(int(exact.columns[m.result][i]) for m in plan.measurements)
                    for i, k in enumerate(exact.keys)
                }
            )
    assert results[0] == results[1]
    counts = stored[stored["year"] >= 2023].groupby(["year", "age_group"]).size()
    assert {k: v[0] for k, v in results[0].items() if v[0]} == {
        (int(y), g): int(n) for (y, g), n in counts.items()
    }


def test_both_engines_agree_on_derived_columns(spark: object) -> None:
    frame = _frame(12)
    query = "SELECT year, COUNT(*), SUM(code_number), SUM(age) FROM people GROUP BY year"
    results = []
    for kind in ("duckdb", "spark"):
        with open_session(_table(frame), engine=kind) as session:  # type: ignore[arg-type]
            plan, exact = exact_aggregates(session, query)
            results.append(
                {
                    tuple(k): tuple(int(exact.columns[m.result][i]) for m in plan.measurements)
                    for i, k in enumerate(exact.keys)
                }
            )
    assert results[0] == results[1] and len(results[0]) == 3


def test_a_derived_column_is_released_like_a_declared_one(engine_kind: EngineKind) -> None:
    with open_session(_table(_frame()), engine=engine_kind) as session:
        release = session.sql(
            "SELECT age_group, COUNT(*) AS n FROM people GROUP BY age_group", epsilon=1.0
        )
    assert release.table["age_group"].tolist() == ["child", "adult", "senior"]


def test_a_derived_column_that_cannot_be_computed_is_refused_at_declaration(
    engine_kind: EngineKind,
) -> None:
    frame = _frame()
    clash = Column("age", expression="age + 1", lower=0, upper=101)
    wrong_type = Column("bad", expression="YEAR(age)", domain=[1, 2])
    for column, why in [(clash, "named like a column"), (wrong_type, "cannot be")]:
        table = Table(
            "people",
            frame,
            privacy_unit="pid",
            max_rows_per_unit=3,
            columns=[column],
        )
        with pytest.raises(InvalidParameterError, match=why):
            open_session(table, engine=engine_kind)


def test_a_derived_column_is_declared_in_toml(tmp_path: Path) -> None:
    _frame().to_parquet(tmp_path / "people.parquet")
    (tmp_path / "people.toml").write_text(
        '[table]\nname = "people"\nsource = "people.parquet"\nprivacy_unit = "pid"\n'
        "max_rows_per_unit = 3\n"
        '[columns.year]\nexpression = "YEAR(day)"\ndomain = [2022, 2023, 2024]\n'
    )
    table = Table.from_toml(tmp_path / "people.toml")
    assert table.column("year").expression == "YEAR(day)"
    with open_session(table) as session:
        release = session.sql("SELECT year, COUNT(*) AS n FROM people GROUP BY year", epsilon=1.0)
    assert release.table["year"].tolist() == [2022, 2023, 2024]
