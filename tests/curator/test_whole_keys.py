"""A key column of an integer type skips the test that its values are whole: the same rows.

The domain test of a run of integers is ``x BETWEEN a AND b AND FLOOR(x) = x``. A plan drops
the ``FLOOR`` test where the engine reports the source column's type as an integer type (always
whole; a NULL fails the range test anyway) and keeps it for any other type. Checked on both
engines against sessions whose engine reports no integer column, with a negative control:
dropped for a column of doubles, the test would let ``2.5`` in.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest

from dpcurator.curator import Column, Table
from dpcurator.curator._duckdb import DuckDBEngine
from dpcurator.curator._spark import SparkEngine
from tests.curator.conftest import EngineKind, exact_aggregates, open_session

QUERIES = [
    "SELECT i, COUNT(*), SUM(x) FROM t GROUP BY i",
    "SELECT d, COUNT(*), SUM(x) FROM t GROUP BY d",
    "SELECT i, COUNT(*) FROM t WHERE x > 50 GROUP BY i",
]


def _frame() -> pd.DataFrame:
    rng = np.random.default_rng(2)
    n = 600
    doubles = rng.integers(-2, 22, n).astype(float)
    doubles[::7] += 0.5  # not whole: outside the domain
    doubles[::11] = np.nan
    integers = pd.array(rng.integers(-2, 22, n), dtype="Int64")
    integers[::13] = pd.NA
    return pd.DataFrame(
        {"u": rng.integers(0, 200, n), "i": integers, "d": doubles, "x": rng.uniform(0, 100, n)}
    )


def _table() -> Table:
    return Table(
        "t",
        _frame(),
        privacy_unit="u",
        max_rows_per_unit=3,
        max_groups_per_unit=1,
        columns=[
            Column("i", domain=list(range(20))),
            Column("d", domain=list(range(20))),
            Column("x", lower=0, upper=100),
        ],
    )


def _aggregates(engine: EngineKind) -> list[Any]:
    session = open_session(_table(), engine=engine)
    out = []
    for query in QUERIES:
        _, exact = exact_aggregates(session, query)
        order = sorted(range(len(exact.keys)), key=lambda i: repr(exact.keys[i]))
        columns = {name: column[order].tolist() for name, column in exact.columns.items()}
        out.append(([exact.keys[i] for i in order], columns))
    return out


def test_integer_keys_skip_the_whole_test_with_the_same_aggregates(
    engine_kind: EngineKind, monkeypatch: pytest.MonkeyPatch
) -> None:
    session = open_session(_table(), engine=engine_kind)
    plan = session.plan(QUERIES[0], epsilon=1.0)
    assert plan.statements.over is not None
    sql = session._engine.render(plan.statements.main, "t")
    assert "FLOOR(" not in sql
    plan = session.plan(QUERIES[1], epsilon=1.0)
    assert "FLOOR(" in session._engine.render(plan.statements.main, "t")
    skipped = _aggregates(engine_kind)
    for engine in (DuckDBEngine, SparkEngine):
        monkeypatch.setattr(engine, "integer_columns", lambda self, table: frozenset())
    session = open_session(_table(), engine=engine_kind)
    plan = session.plan(QUERIES[0], epsilon=1.0)
    assert "FLOOR(" in session._engine.render(plan.statements.main, "t")  # the control tests
    assert skipped == _aggregates(engine_kind)


def test_skipping_the_whole_test_of_doubles_would_change_the_aggregates(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Negative control: a column of doubles taken for integers lets ``2.5`` into the domain."""
    kept = _aggregates("duckdb")
    monkeypatch.setattr(DuckDBEngine, "integer_columns", lambda self, table: frozenset({"i", "d"}))
    assert _aggregates("duckdb")[1] != kept[1]
