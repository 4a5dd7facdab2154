"""Fixtures for the curator tests: crafted tables and helpers to read exact bounded aggregates."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest

from dpcurator.accounting import Budget
from dpcurator.curator import Column, Plan, Session, Table
from dpcurator.curator._measure import Exact, fetch
from dpcurator.noise import InsecureSeededSource

STATES = ["CA", "NY", "TX", "WA"]


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


def open_session(table: Table, *, seed: int = 0, budget: float = 1e6, **options: Any) -> Session:
    return Session(
        table,
        Budget(budget, 1e-3),
        ledger=":memory:",
        source=InsecureSeededSource(seed),
        **options,
    )


def exact_aggregates(
    session: Session, query: str, *, epsilon: float = 1.0, delta: float = 0.0
) -> tuple[Plan, Exact]:
    """The plan of ``query`` and its exact bounded aggregates (what noise is added to)."""
    plan = session.plan(query, epsilon=epsilon, delta=delta)
    return plan, fetch(plan, session._read(plan))


@pytest.fixture
def people() -> pd.DataFrame:
    return people_frame()
