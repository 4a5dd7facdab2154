"""Consistent sessions (src/dpcurator/curator/_consistent.py): counts combined by least squares.

Checked: consistency (totals equal the sums of their groups), the combined variance against the
closed form for a total and its groups, never worse than the raw answer, an empirical variance
(seeded repetitions) that matches the reported one and is clearly below the raw one (the
negative control: the raw variance is rejected), and what is not combined.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from dpcurator.accounting import Budget
from dpcurator.curator import Column, Session, Table
from dpcurator.curator._consistent import KEPT_ANSWERS
from dpcurator.errors import QueryError
from dpcurator.noise import InsecureSeededSource

STATES = ["CA", "NY", "TX", "WA"]
STATUS = ["single", "joint", "head"]
TOTAL = "SELECT COUNT(*) AS n FROM t"
BY_STATE = "SELECT state, COUNT(*) AS n FROM t GROUP BY state"
BY_BOTH = "SELECT state, status, COUNT(*) AS n FROM t GROUP BY state, status"


def _table() -> Table:
    rows = 1200
    frame = pd.DataFrame(
        {
            "state": np.array(STATES)[np.arange(rows) % 4],
            "status": np.array(STATUS)[(np.arange(rows) // 4) % 3],
            "age": np.arange(rows) % 90,
        }
    )
    return Table(
        "t",
        frame,
        columns=[
            Column("state", domain=STATES),
            Column("status", domain=STATUS),
            Column("age", lower=0, upper=90, bins=[0, 30, 60, 90]),
        ],
    )


def _session(seed: int = 0) -> Session:
    return Session(_table(), Budget(1e6), ledger=":memory:", source=InsecureSeededSource(seed))


def test_combined_counts_are_consistent_and_never_worse() -> None:
    with _session() as session:
        total = session.sql(TOTAL, epsilon=0.5)
        by_state = session.sql(BY_STATE, epsilon=0.5)
        by_both = session.sql(BY_BOTH, epsilon=0.5)
        combined = {
            "total": session.combined(total),
            "state": session.combined(by_state),
            "both": session.combined(by_both),
        }
    assert all(c.attrs["answers"] == 3 for c in combined.values())
    grand = combined["total"]["n_combined"].iloc[0]
    assert combined["state"]["n_combined"].sum() == pytest.approx(grand)
    sums = combined["both"].groupby("state")["n_combined"].sum()
    states = combined["state"].set_index("state")["n_combined"]
    assert np.allclose(sums.reindex(STATES), states.reindex(STATES))
    for frame in combined.values():
        assert (frame["n_combined_std"] <= frame["n_std"] * (1 + 1e-9)).all()
        assert (frame["n"] == frame["n"].round()).all()  # the raw answers are kept as released


def test_the_combined_total_has_the_variance_of_theory() -> None:
    """A total (std s_t) and k groups (std s_g each): 1 / (1/s_t^2 + 1/(k s_g^2))."""
    with _session() as session:
        total = session.sql(TOTAL, epsilon=0.5)
        session.sql(BY_STATE, epsilon=0.25)
        frame = session.combined(total)
        s_g = session.sql(BY_STATE, epsilon=0.25).table["n_std"].iloc[0]  # the same std
    s_t = frame["n_std"].iloc[0]
    expected = 1.0 / math.sqrt(1.0 / s_t**2 + 1.0 / (len(STATES) * s_g**2))
    assert frame["n_combined_std"].iloc[0] == pytest.approx(expected, rel=1e-9)


@pytest.mark.statistical
def test_the_combined_estimate_is_unbiased_with_the_reported_variance() -> None:
    """200 seeded sessions: a coarse total (epsilon 0.05) and finer counts by state and by
    state and status (0.5 each). The combined total's mean and variance against the truth and
    the reported std (4 standard errors of the mean; the variance ratio within the 1e-4
    quantiles of chi-square(199)/199, [0.67, 1.42]); theory: variance
    ``1 / (1/s_t^2 + 1/(4 s^2) + 1/(12 s^2))``. The raw total's variance is rejected."""
    repeats, truth = 200, 1200.0
    values, reported, raw = [], [], []
    for seed in range(repeats):
        with _session(seed) as session:
            total = session.sql(TOTAL, epsilon=0.05)
            fine = session.sql(BY_STATE, epsilon=0.5).table["n_std"].iloc[0]
            session.sql(BY_BOTH, epsilon=0.5)
            frame = session.combined(total)
        values.append(frame["n_combined"].iloc[0])
        reported.append(frame["n_combined_std"].iloc[0])
        raw.append(frame["n_std"].iloc[0])
    std, raw_std = float(np.mean(reported)), float(np.mean(raw))
    theory = 1.0 / math.sqrt(1.0 / raw_std**2 + 1.0 / (4 * fine**2) + 1.0 / (12 * fine**2))
    assert std == pytest.approx(theory, rel=1e-9)
    assert abs(np.mean(values) - truth) <= 4 * std / math.sqrt(repeats)
    variance = float(np.var(values, ddof=1))
    assert 0.67 <= variance / std**2 <= 1.42, variance / std**2
    # Negative control: the raw answer's variance does not describe the combined estimate.
    assert not 0.67 <= variance / raw_std**2 <= 1.42


def test_what_is_not_combined() -> None:
    with _session() as session:
        session.sql(BY_STATE, epsilon=0.5)
        filtered = session.sql(
            "SELECT state, COUNT(*) AS n FROM t WHERE age >= 18 GROUP BY state", epsilon=0.5
        )
        assert session.combined(filtered).attrs["answers"] == 1  # another population
        histogram = session.sql("SELECT HISTOGRAM(age) FROM t", epsilon=0.5)
        assert session.combined(histogram).attrs["answers"] == 2  # with the counts by state
        limited = session.sql(BY_STATE + " ORDER BY n DESC LIMIT 2", epsilon=0.5)
        with pytest.raises(QueryError, match="LIMIT"):
            session.combined(limited)
        mean = session.sql("SELECT AVG(age) AS a FROM t", epsilon=0.5)
        with pytest.raises(QueryError, match="cannot be combined"):
            session.combined(mean)
    with _session() as other, pytest.raises(QueryError):
        other.combined(filtered)  # another session's release


def test_the_oldest_answers_leave_the_combination() -> None:
    with _session() as session:
        first = session.sql(TOTAL, epsilon=1.0)
        for _ in range(KEPT_ANSWERS):
            last = session.sql(TOTAL, epsilon=1.0)
        assert session.combined(last).attrs["answers"] == KEPT_ANSWERS
        with pytest.raises(QueryError, match="cannot be combined"):
            session.combined(first)
