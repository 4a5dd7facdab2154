"""DuckDB and Spark return the same exact bounded aggregates on the same data.

A session on each engine plans the same query over the same pandas (or Arrow) rows, and the
exact aggregates the engine returns before noise (``fetch`` of the plan) are compared: the same
group keys (as sets), every measured column the same Python integers (counts and fixed-point
sums, never floats), and the same per-bucket counts of every quantile. The rows include units far
beyond every contribution bound (so the truncation, ranked by hashes of the rows, is exercised on
both engines), values outside the declared bounds, NULL, NaN and infinities, keys outside their
declared domain, and rows on which a filter fails.

Every aggregate the curator answers runs grouped under every declaration shape of
``test_bounding.DECLARATIONS``, with several aggregates batched per query (one Spark query costs
a second or more in local mode). Without group keys a declaration acts through its row bound
``k`` only (the groups a unit touches and its rows per group are bounds on grouped keys; a
histogram's bins are not), so the ungrouped queries run under two declarations, ``k = 1`` and
``k = 6``. Group keys are text or integers: floating-point keys are truncated differently by the
two engines (their text, which ranks a unit's groups, differs).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from sqlglot import exp

from dpcurator.curator import Column, Plan, Session, Table
from dpcurator.curator._measure import Exact, fetch
from dpcurator.curator._measures import RowCount, UnitCount
from tests.curator.conftest import (
    STATES,
    open_session,
    people_frame,
    people_table,
)
from tests.curator.test_bounding import DECLARATIONS

pytestmark = pytest.mark.slow

AGGREGATES = (
    "COUNT(*), COUNT(income), COUNT(DISTINCT pid), SUM(income), AVG(age), VARIANCE(income), "
    "VAR_POP(age), STDDEV(income), MEDIAN(income), QUANTILE(age, 0.25)"
)
GROUPED = [
    f"SELECT state, {AGGREGATES} FROM people GROUP BY state",
    "SELECT state, HISTOGRAM(age, 0, 10, 50, 100) FROM people GROUP BY state",
]
UNGROUPED = [f"SELECT {AGGREGATES} FROM people", "SELECT HISTOGRAM(age) FROM people"]
UNGROUPED_DECLARATIONS = (DECLARATIONS[0], DECLARATIONS[3])
"""The declarations the ungrouped queries run under: the least and the most rows per unit."""


def agreement_frame(seed: int = 3, units: int = 120) -> pd.DataFrame:
    """People (1 to 3 rows a unit) and units beyond every bound of ``DECLARATIONS``.

    - unit -1: 1,000 rows over every state, a state outside the domain and NULL, incomes from
      -500 to 5,000 and ages from -10 to 129 (beyond their bounds on both sides);
    - unit -2: 40 rows in one state (beyond every rows-per-group bound), many of them alike;
    - unit -3: one row in each of the four states (beyond two groups per unit);
    - unit -4: 7 rows in two states, tied on income (ties broken by the other columns);
    - units -5 and -6: light, with a NULL state and a state outside the domain.

    ``code`` is text that casts to an integer on most rows, not on some (``'x'``, ``''``).
    """
    base = people_frame(seed=seed, units=units)
    rows = 1000
    heavy = {
        "pid": np.full(rows, -1),
        "state": np.array([[*STATES, "ZZ", None][i % 6] for i in range(rows)], dtype=object),
        "income": np.linspace(-500.0, 5000.0, rows).round(3),
        "age": np.arange(rows) % 140 - 10,
    }
    one_state = {
        "pid": np.full(40, -2),
        "state": np.array(["CA"] * 40, dtype=object),
        "income": np.tile([999.5, 10.25, 10.25, 1000.0], 10),
        "age": np.tile([50, 17, 17, 64], 10),
    }
    spread = {
        "pid": np.full(4, -3),
        "state": np.array(STATES, dtype=object),
        "income": np.array([1.0, 2.0, 3.0, 4.0]),
        "age": np.array([1, 20, 70, 99]),
    }
    tied = {
        "pid": np.full(7, -4),
        "state": np.array(["NY", "TX"] * 3 + ["NY"], dtype=object),
        "income": np.full(7, 500.0),
        "age": np.arange(7) * 13,
    }
    missing = {  # light units: a NULL state and a state outside the domain
        "pid": np.array([-5, -5, -6]),
        "state": np.array([None, None, "ZZ"], dtype=object),
        "income": np.array([10.0, 20.0, 30.0]),
        "age": np.array([30, 40, 50]),
    }
    parts = [{c: base[c].to_numpy(dtype=object) for c in base.columns}, heavy, one_state]
    parts += [spread, tied, missing]
    columns = {c: np.concatenate([p[c] for p in parts]) for c in base.columns}
    frame = pd.DataFrame(
        {
            "pid": columns["pid"].astype(np.int64),
            "state": pd.array(columns["state"], dtype="str"),
            "income": columns["income"].astype(np.float64),
            "age": columns["age"].astype(np.int64),
        }
    )
    codes = frame["age"].astype(str).to_numpy(dtype=object)
    codes[::7] = "x"
    codes[3::11] = ""
    frame["code"] = pd.array(codes, dtype="str")
    frame["city"] = pd.array(
        np.where(frame["pid"] % 5 == 0, "rare", np.array(["north", "south"])[frame["pid"] % 2]),
        dtype="str",
    )
    return frame


def agreement_table(frame: pd.DataFrame, **options: Any) -> Table:
    columns = [
        Column("state", domain=STATES),
        Column("income", lower=0, upper=1000),
        Column("age", lower=0, upper=100, bins=[0, 18, 65, 100]),
        Column("code"),
        Column("city"),
    ]
    return people_table(frame, columns=options.pop("columns", columns), **options)


# -- reading and comparing ----------------------------------------------------------------------
Raw = list[Mapping[str, Sequence[Any]]]


def aggregates_read(session: Session, query: str, *, delta: float = 0.0) -> tuple[Plan, Exact, Raw]:
    """The plan, its exact aggregates and the engine's raw results of each statement."""
    plan = session.plan(query, epsilon=1.0, delta=delta)
    read = session._read(plan)
    raw: Raw = []

    def recorded(statement: exp.Query) -> Mapping[str, Sequence[Any]]:
        out = read(statement)
        raw.append(out)
        return out

    return plan, fetch(plan, recorded), raw


def _measured_are_integers(plan: Plan, raw: Raw, engine: str) -> None:
    """Every measured value came back from the engine as a Python int (never a float)."""
    keys = {k.alias for k in plan.keys} | {"__column"}
    for table in raw:
        for name, values in table.items():
            if name in keys:
                continue
            kinds = {type(v).__name__ for v in values if type(v) is not int}
            assert not kinds, (engine, name, kinds)


def _by_key(exact: Exact) -> dict[str, dict[tuple[Any, ...], int]]:
    assert len(set(exact.keys)) == len(exact.keys), exact.keys
    return {
        name: {k: int(v) for k, v in zip(exact.keys, column, strict=True)}
        for name, column in exact.columns.items()
    }


def assert_agree(
    duck: tuple[Plan, Exact, Raw], spark: tuple[Plan, Exact, Raw], query: str
) -> dict[str, dict[tuple[Any, ...], int]]:
    """The two engines' exact aggregates of ``query`` are identical; return them by key."""
    (plan, on_duckdb, raw_duckdb), (plan_spark, on_spark, raw_spark) = duck, spark
    assert plan.statements.main == plan_spark.statements.main, query  # the same plan
    _measured_are_integers(plan, raw_duckdb, "duckdb")
    _measured_are_integers(plan, raw_spark, "spark")
    assert set(on_duckdb.keys) == set(on_spark.keys), query
    columns = _by_key(on_duckdb)
    assert columns == _by_key(on_spark), query
    buckets = {k: v.tolist() for k, v in on_duckdb.buckets.items()}
    assert buckets == {k: v.tolist() for k, v in on_spark.buckets.items()}, query
    assert {m.result for m in plan.measurements if m.kind != "quantile"} <= set(columns)
    return columns


def both_sessions(
    make: Callable[[], Table | list[Table]],
) -> tuple[Session, Session]:
    """One session per engine on tables made twice from the same data."""
    return open_session(make()), open_session(make(), engine="spark")


def compare(
    sessions: tuple[Session, Session], query: str, *, delta: float = 0.0
) -> tuple[dict[str, dict[tuple[Any, ...], int]], Exact]:
    """Run ``query`` on both sessions and check they agree; return the aggregates by key.

    The first value also holds the COUNT(*) column (if measured) under ``"count(*)"``; the
    second is DuckDB's :class:`Exact`.
    """
    on_duckdb = aggregates_read(sessions[0], query, delta=delta)
    on_spark = aggregates_read(sessions[1], query, delta=delta)
    columns = assert_agree(on_duckdb, on_spark, query)
    plan = on_duckdb[0]
    # COUNT(*) is a row count, or a unit count where a unit has one row per group.
    counts = [m for m in plan.measurements if isinstance(m.measure, RowCount | UnitCount)]
    if counts:
        columns["count(*)"] = columns[counts[0].result]
    return columns, on_duckdb[1]


def truncated(sessions: tuple[Session, Session]) -> None:
    """The sessions found units beyond their bounds: the truncation steps ran.

    A session caches those units per group-key columns and bounds: DuckDB only for a source
    with a version (not a pandas frame: each statement computes them), Spark for every
    in-memory source.
    """
    assert sessions[1]._over, "the Spark session bounded no unit"
    for session in sessions:
        assert all(not over.empty for over in session._over.values())


@pytest.fixture(scope="module")
def frame() -> pd.DataFrame:
    return agreement_frame()


# -- every aggregate, every declaration ---------------------------------------------------------
@pytest.mark.parametrize(
    "declaration", DECLARATIONS, ids=["-".join(f"{v}" for v in d.values()) for d in DECLARATIONS]
)
def test_every_aggregate_under_each_declaration(
    spark: Any, frame: pd.DataFrame, declaration: dict[str, Any]
) -> None:
    sessions = both_sessions(lambda: agreement_table(frame, **declaration))
    queries = GROUPED + (UNGROUPED if declaration in UNGROUPED_DECLARATIONS else [])
    for query in queries:
        columns, exact = compare(sessions, query)
        assert exact.keys and any(any(v for v in c.values()) for c in columns.values())
        if "MEDIAN" in query:
            assert exact.buckets
        if query == GROUPED[0]:  # COUNT(*) by state: the heavy units' rows were cut
            rows = sum(columns["count(*)"].values())
            light = frame[(frame["pid"] >= 0) & frame["state"].isin(STATES)]
            assert rows <= len(light) + 6 * declaration["max_rows_per_unit"]
    truncated(sessions)


def test_a_where_clause_with_try_semantics(spark: Any, frame: pd.DataFrame) -> None:
    # CAST(code AS INTEGER) fails on 'x' and '' (those rows are not selected); the division
    # by (age - 40) is by zero on some rows (NULL: not selected either).
    declaration = {"max_rows_per_unit": 6, "max_groups_per_unit": 3, "max_rows_per_group": 2}
    sessions = both_sessions(lambda: agreement_table(frame, **declaration))
    queries = [
        "SELECT state, COUNT(*), SUM(income), MEDIAN(age) FROM people "
        "WHERE CAST(code AS INTEGER) > 1 AND age >= 18 GROUP BY state",
        "SELECT COUNT(*), COUNT(DISTINCT pid), AVG(income) FROM people "
        "WHERE income / (age - 40) > 3 OR state IN ('NY', 'ZZ') OR state IS NULL",
    ]
    for query in queries:
        columns, _ = compare(sessions, query)
        assert all(v > 0 for c in columns.values() for v in c.values())
    truncated(sessions)


def test_a_table_without_a_privacy_unit(spark: Any, frame: pd.DataFrame) -> None:
    def make() -> Table:
        return agreement_table(
            frame, privacy_unit=None, max_rows_per_unit=1, columns=agreement_table(frame).columns
        )

    sessions = both_sessions(make)
    query = (
        "SELECT state, COUNT(*), COUNT(income), SUM(income), AVG(age), STDDEV(income), "
        "MEDIAN(income) FROM people GROUP BY state"
    )
    columns, _ = compare(sessions, query)
    in_domain = int(frame["state"].isin(STATES).sum())
    assert sum(columns["count(*)"].values()) == in_domain  # each row a unit: nothing cut
    compare(sessions, "SELECT HISTOGRAM(age) FROM people")


def test_text_and_integer_keys_discovered_by_partition_selection(
    spark: Any, frame: pd.DataFrame
) -> None:
    # No declared domain: every key the bounded rows have comes back (before the threshold),
    # NULL included; a unit's groups beyond the bound are chosen by the hash of the key's text.
    def make() -> Table:
        columns = [
            Column("state"),
            Column("income", lower=0, upper=1000),
            Column("age", lower=0, upper=100),
            Column("city"),
        ]
        return agreement_table(
            frame,
            columns=columns,
            max_rows_per_unit=4,
            max_groups_per_unit=2,
            max_rows_per_group=3,
        )

    sessions = both_sessions(make)
    for query, expected in [
        (
            "SELECT state, city, COUNT(*), COUNT(DISTINCT pid), SUM(income), MEDIAN(income) "
            "FROM people GROUP BY state, city",
            {*((s, c) for s in STATES for c in ("north", "south", "rare")), ("ZZ", "north")},
        ),
        ("SELECT age, COUNT(*), AVG(income) FROM people GROUP BY age", None),
    ]:
        _, exact = compare(sessions, query, delta=1e-6)
        if expected is not None:
            assert expected <= set(exact.keys)
            assert any(None in key for key in exact.keys)  # the NULL state is a group
        else:
            assert len(exact.keys) > 50 and all(type(k[0]) is int for k in exact.keys)
    truncated(sessions)


def test_null_nan_infinities_and_out_of_bounds_values(spark: Any) -> None:
    # x is nullable (NULL and NaN rows are skipped), y the same values declared not nullable
    # (NULL and NaN count as the midpoint); a heavy unit holds every kind of value.
    special = [5.0, -3.0, 50.0, np.inf, -np.inf, np.nan, None, 0.0, -0.0, 10.0, 1e300, -1e-300]
    rows = len(special)
    unit = np.concatenate([np.arange(60) // 2, np.full(3 * rows, -1)])
    values = [(5.0 + i % 7) for i in range(60)] + special * 3
    g = np.concatenate([np.arange(60) % 3, np.arange(3 * rows) % 3])
    x = pa.array(values, pa.float64(), from_pandas=False)  # NaN stays NaN, None is NULL
    assert x.null_count == 3 and pc.sum(pc.is_nan(x)).as_py() == 3
    arrow = pa.table({"pid": pa.array(unit), "g": pa.array(g), "x": x, "y": x})

    def make() -> Table:
        columns = [
            Column("g", domain=[0, 1, 2]),
            Column("x", lower=0, upper=10, bins=[0, 2.5, 7.5, 10]),
            Column("y", lower=0, upper=10, bins=[0, 2.5, 7.5, 10], nullable=False),
        ]
        return Table(
            "t",
            arrow,
            columns=columns,
            privacy_unit="pid",
            max_rows_per_unit=8,
            max_groups_per_unit=2,
            max_rows_per_group=5,
        )

    sessions = both_sessions(make)
    queries = [
        "SELECT g, COUNT(*), COUNT(x), COUNT(y), SUM(x), SUM(y), AVG(x), AVG(y), VARIANCE(x), "
        "STDDEV(y), MEDIAN(x), QUANTILE(y, 0.9) FROM t GROUP BY g",
        "SELECT HISTOGRAM(x) FROM t",
        "SELECT g, HISTOGRAM(y) FROM t GROUP BY g",
    ]
    for query in queries:
        compare(sessions, query)
    truncated(sessions)


# The bounds of the extreme-bounds audits: a midpoint (L + U)/2 that is not a float.
EXTREME = [(2.0**53, 2.0**53 + 2.0), (1e15, 1e15 + 0.125), (-(2.0**60), 2.0**60 + 2.0**10)]


def test_fixed_point_sums_at_extreme_bounds(spark: Any) -> None:
    tables = []
    for i, (lower, upper) in enumerate(EXTREME):
        mid = lower / 2 + upper / 2
        values = [lower, upper, mid, np.nextafter(mid, upper), np.nextafter(lower, upper)]
        x = np.array(values * 20 + [upper] * 30)
        unit = np.concatenate([np.arange(100) // 2, np.full(30, -1)])
        frame = pd.DataFrame({"pid": unit, "g": np.arange(130) % 3, "x": x})
        columns = [Column("g", domain=[0, 1, 2]), Column("x", lower=lower, upper=upper)]
        tables.append((f"t{i}", frame, columns))

    def make() -> list[Table]:
        return [
            Table(name, frame, columns=columns, privacy_unit="pid", max_rows_per_unit=2)
            for name, frame, columns in tables
        ]

    sessions = both_sessions(make)
    for name, _, _ in tables:
        compare(
            sessions,
            f"SELECT g, SUM(x), AVG(x), VARIANCE(x), MEDIAN(x) FROM {name} GROUP BY g",
        )
    truncated(sessions)


# -- regressions: engine bugs this file found (fixed) ----------------------------------------------
def test_groups_per_unit_bound_when_no_unit_is_beyond_it(spark: Any) -> None:
    # Every unit has two rows in one state: none is beyond max_groups_per_unit = 1 (< k = 2).
    # Spark's session then runs the statement without its bounding steps (an empty cache of
    # the units beyond their bounds); it failed when __pairs and __chosen were left in it
    # (Spark analyses every step, used or not; DuckDB only those the query reads).
    pid = np.arange(400) // 2
    frame = pd.DataFrame(
        {"pid": pid, "state": np.array(STATES)[pid % 4], "income": np.linspace(0, 900, 400)}
    )
    columns = [Column("state", domain=STATES), Column("income", lower=0, upper=1000)]
    sessions = both_sessions(
        lambda: people_table(frame, columns=columns, max_rows_per_unit=2, max_groups_per_unit=1)
    )
    columns_by_key, _ = compare(
        sessions, "SELECT state, COUNT(*), SUM(income) FROM people GROUP BY state"
    )
    assert columns_by_key["count(*)"] == {(s,): 100 for s in STATES}


def test_a_pandas_frame_made_by_concat_registers_on_spark(spark: Any) -> None:
    # Its text column comes in two Arrow chunks (pandas 3): createDataFrame refused it
    # ("Cannot convert pyarrow.lib.ChunkedArray to pyarrow.lib.Array") before the engine
    # combined the chunks.
    from dpcurator.curator._spark import SparkEngine

    people = people_frame()
    frame = pd.concat([people, people], ignore_index=True)
    assert pa.Table.from_pandas(frame)["state"].num_chunks == 2
    with SparkEngine(people_table(frame), spark=spark) as engine:
        assert engine.run(exp.select("COUNT(*) AS n").from_("__source"), "people") == {
            "n": [len(frame)]
        }
