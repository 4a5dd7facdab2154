"""Statistical checks of whole queries: empirical privacy on neighbouring tables, and coverage.

The exact bounded aggregates of a query are computed once on each of two neighbouring tables
(one with a unit of 1,000 rows, one without it); then the query's noise and post-processing
(:func:`dpcurator.curator._measure.compute`, what :meth:`Session.sql` runs after the engine) is
repeated with a seeded source. The Clopper-Pearson audit of ``tests/privacy_check.py`` must not
certify more than the query's epsilon; a negative control (the unit's rows not truncated, so the
declared sensitivity is wrong) must be caught. Intervals must cover the bounded truth at their
stated rate (exact and conservative intervals at least at it, approximate ones near it), and
intervals shrunk to 40% must fail.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from dpcurator.curator._measure import compute
from dpcurator.noise import InsecureSeededSource
from tests.curator.conftest import STATES, exact_aggregates, open_session, people_table
from tests.privacy_check import audit, threshold_events

pytestmark = pytest.mark.statistical

N = 4000
ALPHA = 1e-3
QUERY = "SELECT state, COUNT(*) AS n, SUM(income) AS total FROM people GROUP BY state"


def _neighbours(people: pd.DataFrame, bound: int) -> tuple[object, object, object]:
    heavy = pd.DataFrame({"pid": -1, "state": "CA", "income": np.full(1000, 5000.0), "age": 40})
    with_unit = pd.concat([people, heavy], ignore_index=True)
    plan, exact = exact_aggregates(
        open_session(people_table(with_unit, max_rows_per_unit=bound)), QUERY, epsilon=1.0
    )
    _, exact_other = exact_aggregates(
        open_session(people_table(people, max_rows_per_unit=bound)), QUERY, epsilon=1.0
    )
    return plan, exact, exact_other


def _samples(plan: object, exact: object, column: str, seed: int, n: int = N) -> np.ndarray:
    source = InsecureSeededSource(seed)
    out = np.empty(n)
    for i in range(n):
        table, _ = compute(plan, exact, source=source, confidence=0.95)  # type: ignore[arg-type]
        out[i] = table.loc[table["state"] == "CA", column].iloc[0]
    return out


@pytest.mark.slow
def test_query_privacy_on_neighbouring_tables(people: pd.DataFrame) -> None:
    plan, exact, exact_other = _neighbours(people, bound=3)
    counts = _samples(plan, exact, "n", 1), _samples(plan, exact_other, "n", 2)
    truth = float(np.median(counts[1]))
    events = threshold_events(truth + d for d in np.arange(-6, 10, 1.0))
    result = audit(*counts, events, alpha=ALPHA)
    # The count measurement has epsilon 1/2 (COUNT and SUM split epsilon 1).
    assert result.epsilon_lower_bound <= 0.5, result
    assert result.epsilon_lower_bound > 0.2, result  # the audit has power
    # Negative control: exact aggregates without truncation, noise for a bound of 3 rows.
    _, loose, _ = _neighbours(people, bound=1000)
    broken = _samples(plan, loose, "n", 3, n=500), counts[1][:500]
    assert audit(*broken, events, alpha=ALPHA).epsilon_lower_bound > 0.5


def _coverage(column: str, shrink: float = 1.0, seed: int = 7, repeats: int = 400) -> float:
    pid = np.arange(3000) // 2  # two rows per unit, in one state
    people = pd.DataFrame(
        {
            "pid": pid,
            "state": np.array(STATES)[pid % 4],
            "income": np.linspace(0, 900, 3000),
            "age": 30,
        }
    )
    session = open_session(people_table(people, max_rows_per_unit=2))
    query = (
        "SELECT state, COUNT(*) AS n, SUM(income) AS total, AVG(income) AS mean "
        "FROM people GROUP BY state"
    )
    plan, exact = exact_aggregates(session, query, epsilon=0.3)
    truth = (
        {
            "n": people.groupby("state").size(),
            "total": people.groupby("state")["income"].sum(),
            "mean": people.groupby("state")["income"].mean(),
        }[column]
        .reindex(STATES)
        .to_numpy()
    )
    source = InsecureSeededSource(seed)
    covered = 0
    for _ in range(repeats):
        table, _ = compute(plan, exact, source=source, confidence=0.95)
        centre = table[column].to_numpy(dtype=float)
        low = centre - shrink * (centre - table[f"{column}_ci_low"].to_numpy())
        high = centre + shrink * (table[f"{column}_ci_high"].to_numpy() - centre)
        covered += int(np.count_nonzero((low <= truth) & (truth <= high)))
    return covered / (repeats * len(STATES))


@pytest.mark.parametrize(
    ("column", "kind"), [("n", "exact"), ("total", "conservative"), ("mean", "approximate")]
)
def test_intervals_cover_the_truth_at_their_rate(column: str, kind: str) -> None:
    trials = 400 * len(STATES)
    slack = 4 * math.sqrt(0.95 * 0.05 / trials)  # four binomial standard deviations
    rate = _coverage(column)
    assert rate >= 0.95 - slack, (column, rate)
    if kind == "approximate":  # delta method and a normal interval: near the level
        assert rate <= 0.99, (column, rate)
    # Negative control: intervals 40% as wide miss far more often.
    assert _coverage(column, shrink=0.4) < 0.95 - slack
