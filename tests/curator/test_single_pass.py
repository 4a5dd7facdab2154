"""One aggregation per unit bounds the rows exactly as the units-beyond-bounds plan does.

A scaled statement with one group per unit (or none) has a single-pass variant
(``Statements.single``): one ``GROUP BY unit`` of the analyst's rows, each unit's key read from
the ``BIT_OR`` of its packed codes, the units of several keys aggregated per pair. Its
aggregates must equal the main statement's (which finds the units beyond their bounds first),
on both engines, for every measure, filter and key shape; a session picks one of the two per
table from the table's first rows, which changes no aggregate.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from sqlglot import exp

from dpcurator.curator import Column, Table
from dpcurator.curator import _statements as statements
from dpcurator.curator._sampling import one_pass_pays
from dpcurator.curator._session import Session
from tests.curator.conftest import EngineKind, open_session
from tests.curator.test_over_key_codes import _frame as key_codes_frame

QUERIES = [
    "SELECT g, COUNT(*), SUM(x), AVG(x) FROM t GROUP BY g",
    "SELECT g, COUNT(*), SUM(x) FROM t WHERE x > 30 GROUP BY g",
    "SELECT w, COUNT(*), SUM(x), COUNT(y) FROM t GROUP BY w",
    "SELECT g, v, COUNT(*), SUM(y) FROM t GROUP BY g, v",
    "SELECT g, COUNT(DISTINCT u) AS people FROM t GROUP BY g",
    "SELECT COUNT(*), SUM(x), AVG(y) FROM t",
    "SELECT COUNT(*) FROM t WHERE x < 50",
    "SELECT v, COUNT(*), SUM(x) FROM t WHERE g IS NULL OR g > 5 GROUP BY v",
]


def _frame(seed: int = 5) -> pd.DataFrame:
    """Units of 1 to 4 rows, with a nullable column ``y`` and a key ``v`` of 16 values.

    Most units have one key, some several, NULL or out-of-domain keys
    (``tests.curator.test_over_key_codes._frame``).
    """
    frame = key_codes_frame(seed)
    rng = np.random.default_rng(seed)
    y = rng.uniform(-5, 5, len(frame))
    frame["y"] = np.where(rng.random(len(frame)) < 0.2, np.nan, y)
    frame["v"] = rng.integers(0, 16, len(frame))
    return frame


def _table(source: Any, *, per_group: int | None = None) -> Table:
    return Table(
        "t",
        source,
        privacy_unit="u",
        max_rows_per_unit=3,
        max_groups_per_unit=1,
        max_rows_per_group=per_group,
        columns=[
            Column("g", domain=list(range(20))),
            Column("v", domain=list(range(16))),
            Column("w", domain=list(range(40_000))),
            Column("x", lower=0, upper=100, nullable=False),
            Column("y", lower=-5, upper=5),
        ],
    )


def _rows(session: Session, statement: exp.Query) -> list[tuple[Any, ...]]:
    out = session._engine.run(statement, "t")
    return sorted(zip(*out.values(), strict=True), key=repr)


def _both(session: Session, query: str) -> tuple[list[Any], list[Any]]:
    plan = session.plan(query, epsilon=1.0)
    assert plan.statements.single is not None, query
    return _rows(session, plan.statements.single), _rows(session, plan.statements.main)


@pytest.mark.parametrize("per_group", [None, 2])
def test_one_pass_gives_the_aggregates_of_the_units_beyond_bounds_plan(
    engine_kind: EngineKind, per_group: int | None
) -> None:
    session = open_session(_table(_frame(), per_group=per_group), engine=engine_kind)
    for query in QUERIES:
        single, main = _both(session, query)
        assert single == main, query


def test_units_of_many_rows_are_summed_exactly_per_pair(
    engine_kind: EngineKind, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Units whose double sums might round (over 2**53 / 2**b rows) go the exact way."""
    session = open_session(_table(_frame()), engine=engine_kind)
    plan = session.plan(QUERIES[0], epsilon=1.0)
    rows = 2 ** plan.measurements[1].bits
    monkeypatch.setattr(statements, "_EXACT_DOUBLE", 3 * rows)  # units of 4 rows and more
    session = open_session(_table(_frame()), engine=engine_kind)
    single, main = _both(session, QUERIES[0])
    assert "__n > 3" in session._engine.render(
        session.plan(QUERIES[0], epsilon=1.0).statements.single, "t"
    )
    assert single == main


def test_the_comparison_sees_bounding_and_units_of_several_keys(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Negative controls: the table has units beyond their bounds and units of several keys."""
    session = open_session(_table(_frame()))
    query = QUERIES[0]
    plan = session.plan(query, epsilon=1.0)
    main = _rows(session, plan.statements.main)
    assert _rows(session, statements.without_heavy(plan.statements.main)) != main
    monkeypatch.setattr(statements, "_mixed", lambda ored, bits: exp.false())
    plan = open_session(_table(_frame())).plan(query, epsilon=1.0)
    assert plan.statements.single is not None
    assert _rows(session, plan.statements.single) != main


def test_no_single_pass_where_it_does_not_apply() -> None:
    """Several groups per unit, a key that is not a run of integers, quantiles: None."""
    frame = _frame()
    frame["s"] = frame["v"].astype(str)
    several = Table(
        "t",
        frame,
        privacy_unit="u",
        max_rows_per_unit=4,
        max_groups_per_unit=2,
        columns=[Column("g", domain=list(range(20))), Column("x", lower=0, upper=100)],
    )
    text = Table(
        "t",
        frame,
        privacy_unit="u",
        max_rows_per_unit=4,
        max_groups_per_unit=1,
        columns=[Column("s", domain=[str(i) for i in range(16)]), Column("x", lower=0, upper=100)],
    )
    cases = [
        (several, "SELECT g, COUNT(*) FROM t GROUP BY g"),
        (text, "SELECT s, COUNT(*) FROM t GROUP BY s"),
        (_table(frame), "SELECT MEDIAN(x) FROM t"),
    ]
    for table, query in cases:
        plan = open_session(table).plan(query, epsilon=1.0)
        assert plan.statements.single is None, query


def _units(sizes: np.ndarray, *, shuffled: bool, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    unit = np.repeat(np.arange(sizes.size), sizes)
    frame = pd.DataFrame(
        {"u": unit, "g": unit % 20, "x": rng.uniform(0, 100, unit.size)},
    )
    return frame.sample(frac=1.0, random_state=seed) if shuffled else frame


def _units_table(source: Any, **options: Any) -> Table:
    return Table(
        "t",
        source,
        **options,
        privacy_unit="u",
        max_rows_per_unit=5,
        max_groups_per_unit=1,
        columns=[Column("g", domain=list(range(20))), Column("x", lower=0, upper=100)],
    )


def _session_on(frame: pd.DataFrame, path: Path, engine: EngineKind = "duckdb") -> Session:
    frame.to_parquet(path)
    return open_session(_units_table(str(path)), engine=engine)


SHAPES = {
    # name: (unit sizes, rows shuffled, one pass expected)
    "1-5 rows, shuffled": (np.tile(np.arange(1, 6), 20_000), True, False),
    "1-5 rows, sorted by unit": (np.tile(np.arange(1, 6), 20_000), False, False),
    "10 rows, shuffled": (np.full(30_000, 10), True, True),
    "10 rows, sorted by unit": (np.full(30_000, 10), False, True),
    "30 rows, shuffled": (np.full(10_000, 30), True, True),
}


@pytest.mark.parametrize("shape", list(SHAPES))
def test_a_session_bounds_in_one_pass_where_most_units_exceed_the_bound(
    shape: str, tmp_path: Path
) -> None:
    sizes, shuffled, expected = SHAPES[shape]
    session = _session_on(_units(sizes, shuffled=shuffled), tmp_path / "t.parquet")
    query = "SELECT g, COUNT(*), SUM(x) FROM t GROUP BY g"
    first = session.sql(query, epsilon=1.0)
    assert [chosen for _, chosen in session._passes.values()] == [expected]
    assert bool(session._over) is not expected  # the units beyond bounds: only if not one pass
    again = session.sql(query, epsilon=1.0)
    assert list(first.table["g"]) == list(again.table["g"])


def test_the_quarter_of_the_prefix_tells_sorted_rows_from_shuffled_ones(tmp_path: Path) -> None:
    """Negative control: read as shuffled, a file sorted by unit would seem all beyond bounds."""
    sizes = np.tile(np.arange(1, 6), 20_000)
    session = _session_on(_units(sizes, shuffled=False), tmp_path / "t.parquet")
    plan = session.plan("SELECT g, COUNT(*) FROM t GROUP BY g", epsilon=1.0)
    assert not session._prefix_says(plan)
    from dpcurator.curator import _sampling

    found = session._engine.run(
        _sampling.prefix_statement("u", _sampling.prefix_rows(300_000)), "t"
    )
    pairs = int(found["__pairs"][0])
    assert one_pass_pays(
        total=300_000, rows=_sampling.prefix_rows(300_000), pairs=pairs, quarter_pairs=0, bound=5
    )


@pytest.mark.parametrize("kind", ["arrow", "csv", "duckdb"])
def test_the_prefix_is_read_only_where_the_table_size_is_known(kind: str, tmp_path: Path) -> None:
    """An Arrow table knows its length; a CSV file would be read whole to count its rows, and
    a DuckDB database's source table may be a view computed in full."""
    frame = _units(np.full(30_000, 10), shuffled=True)
    table = _units_table(pa.Table.from_pandas(frame, preserve_index=False))
    if kind == "csv":
        frame.to_csv(tmp_path / "t.csv", index=False)
        table = _units_table(str(tmp_path / "t.csv"))
    elif kind == "duckdb":
        with duckdb.connect(str(tmp_path / "t.duckdb")) as database:
            database.execute("CREATE TABLE rows AS SELECT * FROM frame")
        table = _units_table(str(tmp_path / "t.duckdb"), source_table="rows")
    session = open_session(table)
    session.sql("SELECT g, COUNT(*) FROM t GROUP BY g", epsilon=1.0)
    assert [chosen for _, chosen in session._passes.values()] == [kind == "arrow"]


def test_releases_are_the_same_whichever_plan_runs(tmp_path: Path) -> None:
    """Through the public API: one pass (Parquet) and two statements (CSV), the same noise."""
    frame = _units(np.tile(np.arange(4, 13), 3_000), shuffled=True)
    parquet, csv = str(tmp_path / "t.parquet"), str(tmp_path / "t.csv")
    frame.to_parquet(parquet)
    frame.to_csv(csv, index=False)
    queries = [
        "SELECT g, COUNT(*) AS n, SUM(x) AS s, AVG(x) AS a FROM t GROUP BY g",
        "SELECT g, COUNT(*) AS n FROM t WHERE x > 40 GROUP BY g",
        "SELECT COUNT(*) AS n, SUM(x) AS s FROM t",
    ]
    tables = []
    for source in (parquet, csv):
        session = open_session(_units_table(source), seed=11)
        tables.append([session.sql(q, epsilon=1.0).table for q in queries])
        chosen = [c for _, c in session._passes.values()]
        assert chosen == ([True, True] if source == parquet else [False, False])
    for one_pass, two_statements in zip(*tables, strict=True):
        pd.testing.assert_frame_equal(one_pass, two_statements)


def test_spark_keeps_the_units_beyond_bounds_plan(tmp_path: Path, spark: Any) -> None:
    """Spark reads no prefix (a job each): its sessions find the units beyond bounds first."""
    session = _session_on(
        _units(np.full(3_000, 10), shuffled=True), tmp_path / "t.parquet", "spark"
    )
    session.sql("SELECT g, COUNT(*) FROM t GROUP BY g", epsilon=1.0)
    assert [chosen for _, chosen in session._passes.values()] == [False]
    assert session._over
