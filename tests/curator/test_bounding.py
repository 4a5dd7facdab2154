"""Contribution bounding and sensitivity: what one privacy unit can change, measured exactly.

For each aggregate and each declaration (rows per unit, groups per unit, rows per group, or each
row a unit) a unit is removed from a table and the exact bounded aggregates the plan measures are
compared: the L1 change of every measured vector stays within the measurement's declared
sensitivity (in its integer units), however many rows the unit had.

The tests that read exact aggregates run on both engines (``engine_kind``: DuckDB, then a local
Spark). A Spark query costs a second or more, so the heavy-unit check runs every query on Spark
under one declaration, where every bound is below the unit's rows (``SPARK_DECLARATION``;
``test_engines_agree.py`` compares every declaration's aggregates on both engines), and the
property test runs on DuckDB, with a fixed case on both.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpcurator import InvalidParameterError
from dpcurator.curator import Column, Plan
from dpcurator.curator._measure import Exact
from dpcurator.curator._measures import ColumnCount, RowCount, UnitCount
from tests.curator.conftest import (
    ENGINES,
    STATES,
    EngineKind,
    exact_aggregates,
    open_session,
    people_table,
)

QUERIES = [
    "SELECT COUNT(*) FROM people",
    "SELECT state, COUNT(*), SUM(income), AVG(income), VARIANCE(income) FROM people GROUP BY state",
    "SELECT state, COUNT(DISTINCT pid), COUNT(income) FROM people GROUP BY state",
    "SELECT SUM(income) FROM people WHERE age >= 18",
    "SELECT HISTOGRAM(age) FROM people",
    "SELECT state, HISTOGRAM(age) FROM people GROUP BY state",
]
DECLARATIONS: list[dict[str, Any]] = [
    {"max_rows_per_unit": 1},
    {"max_rows_per_unit": 5},
    {"max_rows_per_unit": 5, "max_groups_per_unit": 2},
    {"max_rows_per_unit": 6, "max_groups_per_unit": 3, "max_rows_per_group": 2},
    {"max_rows_per_unit": 4, "max_groups_per_unit": 4, "max_rows_per_group": 1},
]
SPARK_DECLARATION = DECLARATIONS[3]
"""The declaration the heavy-unit check also runs on Spark: rows, groups and rows per group."""
HEAVY_CASES = [
    pytest.param(query, declaration, kind, id=f"{kind}-{d}-{q}")
    for kind in ENGINES
    for d, declaration in enumerate(DECLARATIONS)
    for q, query in enumerate(QUERIES)
    if kind == "duckdb" or declaration == SPARK_DECLARATION
]


def _vector(exact: Exact, name: str, keys: list[tuple[Any, ...]]) -> np.ndarray:
    index = {k: i for i, k in enumerate(exact.keys)}
    column = exact.columns[name]
    return np.array(
        [
            int(column[index[k]]) if k in index and not pd.isna(column[index[k]]) else 0
            for k in keys
        ],
        dtype=np.int64,
    )


def _check(plan: Plan, exact: Exact, exact_other: Exact) -> dict[str, int]:
    keys = sorted(set(exact.keys) | set(exact_other.keys), key=repr)
    changes = {}
    for m in plan.measurements:
        if m.kind == "quantile":
            continue
        change = int(
            np.abs(_vector(exact, m.result, keys) - _vector(exact_other, m.result, keys)).sum()
        )
        assert change <= m.units, (m.name, change, m.units)
        changes[m.name] = change
    return changes


def _heavy_unit_frame(base: pd.DataFrame, rows: int) -> pd.DataFrame:
    """``base`` plus one unit (pid -1) with ``rows`` rows spread over every state and value."""
    heavy = pd.DataFrame(
        {
            "pid": -1,
            "state": [STATES[i % len(STATES)] for i in range(rows)],
            "income": np.linspace(0, 5000, rows),  # beyond the bound: clamped
            "age": np.arange(rows) % 120,
        }
    )
    return pd.concat([base, heavy], ignore_index=True)


@pytest.mark.parametrize(
    ("query", "declaration", "engine_kind"), HEAVY_CASES, indirect=["engine_kind"]
)
def test_removing_a_heavy_unit_stays_within_the_sensitivity(
    people: pd.DataFrame, query: str, declaration: dict[str, Any], engine_kind: EngineKind
) -> None:
    with_unit = _heavy_unit_frame(people, 1000)
    s1 = open_session(people_table(with_unit, **declaration), engine=engine_kind)
    s0 = open_session(people_table(people, **declaration), engine=engine_kind)
    plan, exact = exact_aggregates(s1, query)
    _, exact_other = exact_aggregates(s0, query)
    changes = _check(plan, exact, exact_other)
    # The heavy unit is truncated to its bound: it moves the count by exactly that much.
    count = next((m for m in plan.measurements if m.kind == "count"), None)
    if count is not None and "WHERE" not in query:
        assert changes[count.name] == count.units


def test_a_unit_with_1000_rows_moves_a_count_by_its_bound(
    people: pd.DataFrame, engine_kind: EngineKind
) -> None:
    for bound in (1, 3, 7):
        big = _heavy_unit_frame(people, 1000)
        s1 = open_session(people_table(big, max_rows_per_unit=bound), engine=engine_kind)
        s0 = open_session(people_table(people, max_rows_per_unit=bound), engine=engine_kind)
        plan, e1 = exact_aggregates(s1, "SELECT COUNT(*) FROM people")
        _, e0 = exact_aggregates(s0, "SELECT COUNT(*) FROM people")
        n = plan.measurement_for(RowCount()).result
        assert int(e1.columns[n][0]) - int(e0.columns[n][0]) == bound


def test_unbounded_truncation_is_caught_by_the_check(
    people: pd.DataFrame, engine_kind: EngineKind
) -> None:
    """Negative control: a declaration that does not bound the unit breaks the sensitivity."""
    big = _heavy_unit_frame(people, 1000)
    loose = open_session(people_table(big, max_rows_per_unit=1000), engine=engine_kind)
    tight = open_session(people_table(people, max_rows_per_unit=3), engine=engine_kind)
    plan, _ = exact_aggregates(tight, "SELECT COUNT(*) FROM people")
    _, e1 = exact_aggregates(loose, "SELECT COUNT(*) FROM people")
    _, e0 = exact_aggregates(tight, "SELECT COUNT(*) FROM people")
    with pytest.raises(AssertionError):
        _check(plan, e1, e0)


def test_each_row_a_unit_has_sensitivity_one() -> None:
    # DuckDB only: the plan's sensitivities, which do not depend on the engine.
    frame = pd.DataFrame({"x": [1.0, 2.0, 3.0], "g": ["a", "b", "a"]})
    table_columns = [Column("x", lower=0, upper=10), Column("g", domain=["a", "b"])]
    from dpcurator.curator import Table

    session = open_session(Table("people", frame, columns=table_columns))
    plan, _ = exact_aggregates(session, "SELECT g, COUNT(*), SUM(x) FROM people GROUP BY g")
    units = {m.kind: m.units for m in plan.measurements}
    assert units["count"] == 1
    assert plan.measurements[1].sensitivity == pytest.approx(10.0)


def test_groups_per_unit_bound_keeps_at_most_g_groups(
    people: pd.DataFrame, engine_kind: EngineKind
) -> None:
    big = _heavy_unit_frame(people, 1000)
    declaration = {"max_rows_per_unit": 1000, "max_groups_per_unit": 2}
    s1 = open_session(people_table(big, **declaration), engine=engine_kind)
    query = "SELECT state, COUNT(DISTINCT pid) FROM people GROUP BY state"
    plan, exact = exact_aggregates(s1, query)
    s0 = open_session(people_table(people, **declaration), engine=engine_kind)
    _, other = exact_aggregates(s0, query)
    units = plan.measurement_for(UnitCount()).result
    groups = [(s,) for s in STATES]
    changed = _vector(exact, units, groups) - _vector(other, units, groups)
    assert int(np.count_nonzero(changed)) == 2


def test_quantile_buckets_move_by_at_most_rows_per_group(
    people: pd.DataFrame, engine_kind: EngineKind
) -> None:
    big = _heavy_unit_frame(people, 1000)
    declaration = {"max_rows_per_unit": 6, "max_groups_per_unit": 2, "max_rows_per_group": 2}
    query = "SELECT state, MEDIAN(income) FROM people GROUP BY state"
    s1 = open_session(people_table(big, **declaration), engine=engine_kind)
    s0 = open_session(people_table(people, **declaration), engine=engine_kind)
    plan, exact = exact_aggregates(s1, query)
    _, other = exact_aggregates(s0, query)
    empty = np.zeros((4, 0), dtype=np.int64)  # rows [indices, counts, below, total]
    moved = []
    for state in STATES:
        key = ((state,), "income")
        a = dict(zip(*exact.buckets.get(key, empty)[:2].tolist(), strict=True))
        b = dict(zip(*other.buckets.get(key, empty)[:2].tolist(), strict=True))
        diff = sum(abs(a.get(i, 0) - b.get(i, 0)) for i in a.keys() | b.keys())
        assert diff <= plan.rows_per_group
        moved.append(diff)
    assert sum(1 for d in moved if d) <= plan.groups_touched


def test_values_outside_bounds_are_clamped_and_nan_null_handled(engine_kind: EngineKind) -> None:
    frame = pd.DataFrame(
        {"x": [5.0, -3.0, 50.0, float("inf"), float("-inf"), float("nan"), None]},
    )
    from dpcurator.curator import Table

    nullable = open_session(
        Table("people", frame, columns=[Column("x", lower=0, upper=10)]), engine=engine_kind
    )
    plan, exact = exact_aggregates(nullable, "SELECT SUM(x), COUNT(x), COUNT(*) FROM people")
    sums = {m.kind: (m, exact.columns[m.result][0]) for m in plan.measurements}
    m, value = sums["sum"]
    # clamped: 5 + 0 + 10 + 10 + 0 = 25; NaN and NULL skipped
    assert float(value) * m.unit_value == pytest.approx(25.0, abs=1e-6)
    assert int(exact.columns[plan.measurement_for(ColumnCount("x")).result][0]) == 5
    assert int(exact.columns[plan.measurement_for(RowCount()).result][0]) == 7
    filled = open_session(
        Table("people", frame, columns=[Column("x", lower=0, upper=10, nullable=False)]),
        engine=engine_kind,
    )
    plan, exact = exact_aggregates(filled, "SELECT SUM(x) FROM people")
    m = plan.measurements[0]
    # NaN and NULL become the midpoint 5: 25 + 10
    assert float(exact.columns[m.result][0]) * m.unit_value == pytest.approx(35.0, abs=1e-6)


@settings(max_examples=25)
@given(
    sizes=st.lists(st.integers(1, 12), min_size=2, max_size=12),
    states=st.lists(st.sampled_from(STATES), min_size=12 * 12, max_size=12 * 12),
    k=st.integers(1, 6),
    g=st.integers(1, 4),
    c=st.integers(1, 6),
    victim=st.integers(0, 11),
)
def test_any_unit_removal_respects_the_sensitivity(  # noqa: PLR0917 - hypothesis arguments
    sizes: list[int], states: list[str], k: int, g: int, c: int, victim: int
) -> None:
    # DuckDB only (25 examples); a fixed case on both engines below.
    _unit_removal(sizes, states, (k, g, c), victim, "duckdb")


def test_a_fixed_unit_removal_respects_the_sensitivity(engine_kind: EngineKind) -> None:
    # A unit of 12 rows beyond every bound (k = 6, g = 2, c = 3) removed, among units of 1-12.
    sizes = [12, 1, 7, 3, 12, 2, 9, 4]
    states = [STATES[(i * 7 + i // 5) % len(STATES)] for i in range(sum(sizes))]
    _unit_removal(sizes, states, (6, 2, 3), 0, engine_kind)


def _unit_removal(
    sizes: list[int],
    states: list[str],
    bounds: tuple[int, int, int],
    victim: int,
    engine: EngineKind,
) -> None:
    k, g, c = bounds
    pid = np.repeat(np.arange(len(sizes)), sizes)
    frame = pd.DataFrame(
        {
            "pid": pid,
            "state": states[: pid.size],
            "income": np.linspace(-100, 1200, pid.size),
            "age": np.arange(pid.size) % 100,
        }
    )
    declaration = {
        "max_rows_per_unit": k,
        "max_groups_per_unit": g,
        "max_rows_per_group": min(c, k),
    }
    other = frame[frame["pid"] != victim % len(sizes)]
    query = (
        "SELECT state, COUNT(*), COUNT(DISTINCT pid), AVG(income), STDDEV(income) "
        "FROM people GROUP BY state"
    )
    plan, e1 = exact_aggregates(
        open_session(people_table(frame, **declaration), engine=engine), query
    )
    _, e0 = exact_aggregates(open_session(people_table(other, **declaration), engine=engine), query)
    _check(plan, e1, e0)


@pytest.mark.parametrize("query", QUERIES[:3])
def test_the_plan_renders_for_spark(people: pd.DataFrame, query: str) -> None:
    # Rendering only: the plan is opened on DuckDB; the SQL text is checked, never run.
    import sqlglot

    declaration = {"max_rows_per_unit": 6, "max_groups_per_unit": 3, "max_rows_per_group": 2}
    plan = open_session(people_table(people, **declaration)).plan(query, epsilon=1.0)
    spark, _ = plan.sql_for("spark")
    assert "QUALIFY" not in spark and "MATERIALIZED" not in spark and "TRY(" not in spark
    sqlglot.parse_one(spark, dialect="spark")
    with pytest.raises(InvalidParameterError, match="dialect"):
        plan.sql_for("no-such-dialect")


def test_count_of_a_column_with_an_odd_name(people: pd.DataFrame, engine_kind: EngineKind) -> None:
    odd = 'c"; DROP TABLE people; --'
    frame = people.assign(**{odd: people["state"].where(people["age"] > 50)})
    table = people_table(frame, columns=[Column("state", domain=STATES), Column(odd)])
    session = open_session(table, engine=engine_kind)
    plan, exact = exact_aggregates(
        session, f'SELECT COUNT("{odd.replace(chr(34), 2 * chr(34))}") FROM people'
    )
    assert int(exact.columns[plan.measurements[0].result][0]) == int((people["age"] > 50).sum())


def test_a_unit_with_null_and_non_null_keys_spans_two_groups(engine_kind: EngineKind) -> None:
    from dpcurator.curator import Table

    frame = pd.DataFrame({"pid": [1, 1, 1], "city": [None, "a", "a"]})
    table = Table("people", frame, privacy_unit="pid", max_rows_per_unit=5, columns=["city"])
    query = "SELECT city, COUNT(*) FROM people GROUP BY city"
    _, exact = exact_aggregates(open_session(table, engine=engine_kind), query, delta=1e-6)
    assert len(exact.keys) == 1  # one group kept: NULL and "a" are two groups
