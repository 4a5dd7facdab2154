"""The units beyond their bounds, cached across a session's queries: same results, never stale.

A session computes the units beyond a contribution bound once per table, group-key columns and
bounds (before any filter), and reuses them while the engine's version token of the table is
unchanged. These tests check that the cached path gives exactly the aggregates of the uncached
one for every query shape and declaration, and that rewriting the table invalidates the cache:
the attack is a heavy unit added after the first query, which a stale cache would let through
unbounded (the negative control shows the check catches exactly that).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pytest

from dpcurator.curator import Session
from dpcurator.curator._measures import RowCount
from tests.curator.conftest import exact_aggregates, open_session, people_table
from tests.curator.test_bounding import DECLARATIONS, QUERIES, _heavy_unit_frame

FILTERED = [
    *QUERIES,
    "SELECT state, COUNT(*), SUM(income) FROM people WHERE age > 40 GROUP BY state",
]


def _same(a: Any, b: Any) -> None:
    assert sorted(a.keys, key=repr) == sorted(b.keys, key=repr)
    order_a = sorted(range(len(a.keys)), key=lambda i: repr(a.keys[i]))
    order_b = sorted(range(len(b.keys)), key=lambda i: repr(b.keys[i]))
    assert a.columns.keys() == b.columns.keys()
    for name in a.columns:
        assert a.columns[name][order_a].tolist() == b.columns[name][order_b].tolist(), name
    assert {k: v.tolist() for k, v in a.buckets.items()} == {
        k: v.tolist() for k, v in b.buckets.items()
    }


@pytest.mark.parametrize("declaration", DECLARATIONS)
def test_cached_units_give_the_aggregates_of_the_uncached_plan(
    people: pd.DataFrame, tmp_path: Path, declaration: dict[str, Any]
) -> None:
    frame = _heavy_unit_frame(people, 50)
    path = tmp_path / "people.parquet"
    frame.to_parquet(path)
    cached = open_session(people_table(frame, source=str(path), **declaration))
    inline = open_session(people_table(frame, **declaration))  # a DataFrame: never cached
    assert cached._engine.version("people") is not None
    assert inline._engine.version("people") is None
    for query in FILTERED * 2:  # the second round reads the cache
        _, from_cache = exact_aggregates(cached, query)
        _, recomputed = exact_aggregates(inline, query)
        _same(from_cache, recomputed)
    assert cached._over  # the cache was used


def test_no_unit_beyond_its_bounds_skips_the_bounding_steps(
    people: pd.DataFrame, tmp_path: Path
) -> None:
    arrow = open_session(people_table(people, source=pa.Table.from_pandas(people)))
    inline = open_session(people_table(people))
    query = "SELECT COUNT(*), SUM(income), AVG(income), MEDIAN(age) FROM people WHERE age > 9"
    _, fast = exact_aggregates(arrow, query)
    (over,) = arrow._over.values()
    assert over.empty  # 1 to 3 rows per unit, bound 3
    _, full = exact_aggregates(inline, query)
    _same(fast, full)


def _count(session: Session) -> int:
    plan, exact = exact_aggregates(session, "SELECT COUNT(*) FROM people")
    return int(exact.columns[plan.measurement_for(RowCount()).result][0])


def test_a_rewritten_table_is_bounded_again(people: pd.DataFrame, tmp_path: Path) -> None:
    """The attack: add a heavy unit after the units beyond their bounds were cached."""
    path = tmp_path / "people.parquet"
    people.to_parquet(path)
    session = open_session(people_table(people, source=str(path)))
    before = _count(session)
    _heavy_unit_frame(people, 1000).to_parquet(path)
    assert _count(session) - before == 3  # the new unit is truncated to its 3 rows


def test_a_stale_cache_would_let_the_heavy_unit_through(
    people: pd.DataFrame, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Negative control: with a version token that never changes, the cache goes stale."""
    path = tmp_path / "people.parquet"
    people.to_parquet(path)
    session = open_session(people_table(people, source=str(path)))
    monkeypatch.setattr(session._engine, "version", lambda table: ("frozen",))
    before = _count(session)
    _heavy_unit_frame(people, 1000).to_parquet(path)
    assert _count(session) == before  # the exact aggregates were reused: stale
    session._results.clear()  # the units beyond their bounds alone, stale:
    assert _count(session) - before > 3  # unbounded: what the version token prevents


def test_a_repeated_statement_reuses_its_exact_aggregates_only(
    people: pd.DataFrame, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "people.parquet"
    _heavy_unit_frame(people, 20).to_parquet(path)
    session = open_session(people_table(people, source=str(path)), budget=10.0)
    runs: list[str] = []
    run = session._engine.run

    def counted(statement: Any, table: str) -> Any:
        runs.append(table)
        return run(statement, table)

    monkeypatch.setattr(session._engine, "run", counted)
    query = "SELECT state, COUNT(*) AS n FROM people GROUP BY state"
    answers = [session.sql(query, epsilon=0.5).table["n"].tolist() for _ in range(4)]
    assert len(runs) == 2  # the units beyond their bounds' count, then the statement, once
    assert len({tuple(a) for a in answers}) > 1  # fresh noise for every answer
    assert session.spent.epsilon == pytest.approx(2.0)  # and every answer charged
    _heavy_unit_frame(people, 40).to_parquet(path)  # a new version of the rows
    session.sql(query, epsilon=0.5)
    assert len(runs) == 4  # read again


def test_the_cache_is_per_key_columns_and_bounds(people: pd.DataFrame, tmp_path: Path) -> None:
    path = tmp_path / "people.parquet"
    _heavy_unit_frame(people, 20).to_parquet(path)
    session = open_session(people_table(people, source=str(path), max_groups_per_unit=1))
    exact_aggregates(session, "SELECT COUNT(*) FROM people")
    exact_aggregates(session, "SELECT state, COUNT(*) FROM people GROUP BY state")
    exact_aggregates(session, "SELECT state, COUNT(*) FROM people WHERE age > 3 GROUP BY state")
    assert len(session._over) == 2  # no group key, and `state`


def test_two_sessions_on_one_connection_keep_their_caches_apart(
    people: pd.DataFrame, tmp_path: Path
) -> None:
    import duckdb

    from dpcurator.accounting import Budget
    from dpcurator.curator import Column, Table

    path = tmp_path / "people.parquet"
    _heavy_unit_frame(people, 30).to_parquet(path)
    connection = duckdb.connect()
    connection.execute(f"CREATE TABLE people AS SELECT * FROM '{path}'")
    columns = [Column("state", domain=["CA", "NY", "TX", "WA"]), Column("income", lower=0, upper=1)]
    table = Table("people", str(path), privacy_unit="pid", max_rows_per_unit=3, columns=columns)
    sessions = [
        Session(table, Budget(10.0), ledger=":memory:", connection=connection) for _ in range(2)
    ]
    for session in sessions:
        session.sql("SELECT state, COUNT(*) FROM people GROUP BY state", epsilon=1.0)
    sessions[0].close()
    sessions[1].sql("SELECT state, COUNT(*) FROM people GROUP BY state", epsilon=1.0)
    sessions[1].close()
    tables = connection.execute("SELECT COUNT(*) FROM duckdb_tables() WHERE temporary").fetchall()
    views = connection.execute(
        "SELECT COUNT(*) FROM duckdb_views() WHERE temporary AND NOT internal"
    ).fetchall()
    assert tables == [(0,)] and views == [(0,)]  # each session dropped its own


@pytest.mark.parametrize("declaration", DECLARATIONS)
@pytest.mark.parametrize("query", FILTERED)
def test_every_step_a_statement_reads_exists(query: str, declaration: dict[str, Any]) -> None:
    """Every table a statement reads is one of its steps or the source, with or without the
    bounding steps (Spark refuses a statement whose unused step reads a missing one)."""
    from sqlglot import exp

    from dpcurator.curator._statements import with_over, without_heavy

    session = open_session(people_table(_heavy_unit_frame(pd.DataFrame(), 0), **declaration))
    plan = session.plan(query, epsilon=1.0)
    cache = exp.to_table("cache")
    for main in plan.statements.all:
        for statement in (main, without_heavy(main), with_over(main, cache)):
            steps = {cte.alias for cte in statement.find_all(exp.CTE)}
            read = {t.name for t in statement.find_all(exp.Table)}
            assert read <= steps | {"__source", "cache"}, read - steps
