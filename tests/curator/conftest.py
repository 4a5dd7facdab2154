"""Fixtures for the curator tests: crafted tables and helpers to read exact bounded aggregates.

Tests that concern results run on both engines: they take the ``engine_kind`` fixture
(``"duckdb"``, then ``"spark"``) and pass it to :func:`open_session`, which opens a
:class:`~dpcurator.curator.SparkEngine` on the ``spark`` fixture's local Spark for ``"spark"``
(DuckDB stays the default). Sessions opened by :func:`open_session` are closed when their test
ends, so that Spark's views and cached tables do not pile up in the worker's one Spark.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Literal

import numpy as np
import pandas as pd
import pytest

from dpcurator.accounting import Budget
from dpcurator.curator import Column, Plan, Session, Table
from dpcurator.curator._measure import Exact, fetch
from dpcurator.noise import InsecureSeededSource

STATES = ["CA", "NY", "TX", "WA"]
ENGINES = ("duckdb", "spark")
EngineKind = Literal["duckdb", "spark"]

_SPARK: dict[str, Any] = {}
"""The ``spark`` fixture's SparkSession, once a test of this process asked for a Spark engine."""
_OPENED: list[Session] = []
"""Sessions opened by :func:`open_session` in the running test (closed at its end)."""


def people_frame(seed: int = 0, units: int = 200) -> pd.DataFrame:
    """Units with 1 to 3 rows each, a state per row, an income and an age."""
    rng = np.random.default_rng(seed)
    sizes = rng.integers(1, 4, size=units)
    pid = np.repeat(np.arange(units), sizes)
    n = pid.size
    return pd.DataFrame(
        {
            "pid": pid,
            "state": rng.choice(STATES, size=n),
            "income": rng.uniform(0, 1000, size=n).round(2),
            "age": rng.integers(0, 100, size=n),
        }
    )


def people_table(frame: pd.DataFrame, **options: Any) -> Table:
    settings: dict[str, Any] = {"privacy_unit": "pid", "max_rows_per_unit": 3}
    settings.update(options)
    columns = settings.pop(
        "columns",
        [
            Column("state", domain=STATES),
            Column("income", lower=0, upper=1000),
            Column("age", lower=0, upper=100, bins=[0, 18, 65, 100]),
        ],
    )
    source = settings.pop("source", frame)
    return Table("people", source, columns=columns, **settings)


def open_session(
    table: Table | list[Table],
    *,
    seed: int = 0,
    budget: float = 1e6,
    engine: EngineKind | None = None,
    **options: Any,
) -> Session:
    """A session with an in-memory ledger and seeded noise, on DuckDB (default) or Spark.

    ``engine="spark"`` needs the ``spark`` fixture started in this process: take the
    ``engine_kind`` fixture (or ``spark``) in the test.
    """
    tables = table if isinstance(table, list) else [table]
    if engine == "spark":
        options["engine"] = spark_engine()
    elif engine not in {None, "duckdb"}:
        raise ValueError(f"engine must be None, 'duckdb' or 'spark', got {engine!r}")
    session = Session(
        tables,
        Budget(budget, 1e-3),
        ledger=":memory:",
        source=InsecureSeededSource(seed),
        **options,
    )
    _OPENED.append(session)
    return session


def session_engine(kind: EngineKind | None) -> Any:
    """The ``engine`` argument of a :class:`Session` on ``kind``: None for DuckDB (the default)."""
    return spark_engine() if kind == "spark" else None


def spark_engine() -> Any:
    """A new SparkEngine on the ``spark`` fixture's local Spark."""
    from dpcurator.curator._spark import SparkEngine

    spark = _SPARK.get("session")
    if spark is None:
        raise RuntimeError("a Spark engine needs the `engine_kind` or `spark` fixture")
    return SparkEngine(spark=spark)


def exact_aggregates(
    session: Session, query: str, *, epsilon: float = 1.0, delta: float = 0.0
) -> tuple[Plan, Exact]:
    """The plan of ``query`` and its exact bounded aggregates (what noise is added to)."""
    plan = session.plan(query, epsilon=epsilon, delta=delta)
    return plan, fetch(plan, session._read(plan))


@pytest.fixture
def people() -> pd.DataFrame:
    return people_frame()


@pytest.fixture(params=ENGINES)
def engine_kind(request: pytest.FixtureRequest) -> str:
    """The engine a test's sessions run on: ``"duckdb"``, then ``"spark"`` (a local Spark)."""
    kind: str = request.param
    if kind == "spark":
        _SPARK["session"] = request.getfixturevalue("spark")
    return kind


@pytest.fixture(autouse=True)
def _close_opened_sessions(request: pytest.FixtureRequest) -> Iterator[None]:
    """Record the ``spark`` fixture's session for :func:`open_session`; close what it opened."""
    if "spark" in request.fixturenames:
        _SPARK["session"] = request.getfixturevalue("spark")
    yield
    while _OPENED:
        _OPENED.pop().close()
