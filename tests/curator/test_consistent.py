"""Consistent sessions (src/dpcurator/curator/_consistent.py): counts and sums by least squares.

Checked: consistency (totals equal the sums of their groups, for counts and sums; an AVG equals
the combined sum over the combined count), the combined variance against the closed forms (a
total and its groups; the scalars (N, S) measured by COUNT(*), AVG's count and centred sum and
SUM), never worse than the raw answer, empirical variances and interval coverage (seeded
repetitions) that match the reported ones and are clearly below the raw ones (the negative
control: the raw variance is rejected), and what is not combined (another WHERE, a nullable
column, a quantile, LIMIT).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from dpcurator.accounting import Budget
from dpcurator.curator import Column, Session, Table
from dpcurator.curator._consistent import KEPT_ANSWERS
from dpcurator.curator._measures import RowCount, ValueSum
from dpcurator.curator._release import QueryRelease
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


# -- counts and sums of AVG, VARIANCE and SUM join the combination ---------------------------

MID = 50.0  # the midpoint of x's bounds [0, 100]


def _sum_table() -> Table:
    rows = 1200
    frame = pd.DataFrame(
        {
            "state": np.array(STATES)[np.arange(rows) % 4],
            "x": (np.arange(rows) * 37) % 101,
            "y": np.where(np.arange(rows) % 5 == 0, np.nan, 1.0),
        }
    )
    return Table(
        "t",
        frame,
        columns=[
            Column("state", domain=STATES, nullable=False),
            Column("x", lower=0, upper=100, nullable=False),
            Column("y", lower=0, upper=2),  # nullable: AVG(y) counts its non-NULL rows
        ],
    )


def _sum_session(seed: int = 0) -> Session:
    return Session(_sum_table(), Budget(1e6), ledger=":memory:", source=InsecureSeededSource(seed))


def _gls_covariance(
    count_stds: list[float], centred_stds: list[float], sum_stds: list[float]
) -> np.ndarray:
    """``M^-1`` of the scalars ``(N, S)``: counts ``N``, centred sums ``S - m N``, sums ``S``."""
    info = np.zeros((2, 2))
    for s in count_stds:
        info += np.outer([1.0, 0.0], [1.0, 0.0]) / s**2
    for s in centred_stds:
        info += np.outer([-MID, 1.0], [-MID, 1.0]) / s**2
    for s in sum_stds:
        info += np.outer([0.0, 1.0], [0.0, 1.0]) / s**2
    return np.asarray(np.linalg.inv(info))


def _split_std(release: QueryRelease, kind: str) -> float:
    """The noise std of a release's ``count`` or ``centred`` sum (column units)."""
    measure = RowCount() if kind == "count" else ValueSum("x", "centred")
    noisy = release.measured[1][measure]
    return float(noisy.std * noisy.unit)


def test_avg_and_sum_join_the_counts_with_the_variance_of_theory() -> None:
    """COUNT(*) (std s1), AVG(x) (count s2, centred sum s3) and SUM(x) (sum s4): the combined
    count, sum and average have the closed-form GLS variances of the scalars (N, S)."""
    with _sum_session() as session:
        count = session.sql("SELECT COUNT(*) AS v FROM t", epsilon=0.5)
        avg = session.sql("SELECT AVG(x) AS v FROM t", epsilon=0.5)
        total = session.sql("SELECT SUM(x) AS v FROM t", epsilon=0.5)
        frames = [session.combined(r) for r in (count, avg, total)]
    s1 = float(count.table["v_std"].iloc[0])
    s2, s3 = _split_std(avg, "count"), _split_std(avg, "centred")
    s4 = float(total.table["v_std"].iloc[0])
    cov = _gls_covariance([s1, s2], [s3], [s4])
    assert all(f.attrs["answers"] == 3 for f in frames)
    assert frames[0]["v_combined_std"].iloc[0] == pytest.approx(math.sqrt(cov[0, 0]), rel=1e-9)
    assert frames[2]["v_combined_std"].iloc[0] == pytest.approx(math.sqrt(cov[1, 1]), rel=1e-9)
    # The average from the combined centred sum S - m N and count, delta method.
    n = frames[0]["v_combined"].iloc[0]
    s = frames[2]["v_combined"].iloc[0]
    mu = (s - MID * n) / n
    a = np.array([-MID, 1.0])
    var_c, cov_cn = a @ cov @ a, a @ cov[:, 0]
    std = math.sqrt(var_c - 2 * mu * cov_cn + mu**2 * cov[0, 0]) / n
    assert frames[1]["v_combined"].iloc[0] == pytest.approx(s / n, rel=1e-9)
    assert frames[1]["v_combined_std"].iloc[0] == pytest.approx(std, rel=1e-9)
    for frame in frames:
        assert frame["v_combined_std"].iloc[0] <= frame["v_std"].iloc[0] * (1 + 1e-9)


def test_sums_and_averages_by_group_are_consistent() -> None:
    with _sum_session() as session:
        total = session.sql("SELECT SUM(x) AS s FROM t", epsilon=0.5)
        both = session.sql(
            "SELECT state, AVG(x) AS a, SUM(x) AS s FROM t GROUP BY state", epsilon=0.5
        )
        counts = session.sql("SELECT state, COUNT(*) AS n FROM t GROUP BY state", epsilon=0.5)
        vars_ = session.sql("SELECT VARIANCE(x) AS v, COUNT(*) AS n FROM t", epsilon=0.5)
        grand = session.combined(total)
        by_state = session.combined(both)
        n_state = session.combined(counts)
        n_all = session.combined(vars_)
    assert grand.attrs["answers"] == 4
    assert list(n_all.columns) == ["n", "n_std", "n_combined", "n_combined_std"]  # not VARIANCE
    assert by_state["s_combined"].sum() == pytest.approx(grand["s_combined"].iloc[0], rel=1e-9)
    assert n_state["n_combined"].sum() == pytest.approx(n_all["n_combined"].iloc[0], rel=1e-9)
    ratio = by_state["s_combined"] / n_state["n_combined"]
    assert np.allclose(by_state["a_combined"], ratio, rtol=1e-9)  # AVG = SUM / COUNT
    for frame, col in ((by_state, "a"), (by_state, "s"), (n_state, "n"), (n_all, "n")):
        assert (frame[f"{col}_combined_std"] <= frame[f"{col}_std"] * (1 + 1e-9)).all()


def test_other_populations_and_nullable_columns_are_not_combined() -> None:
    """Negative controls: another WHERE, a nullable column's AVG and a quantile stay alone."""
    with _sum_session() as session:
        session.sql("SELECT COUNT(*) AS n, SUM(x) AS s FROM t", epsilon=0.5)
        filtered = session.sql("SELECT AVG(x) AS a FROM t WHERE x >= 10", epsilon=0.5)
        same = session.sql("SELECT AVG(x) AS a FROM t", epsilon=0.5)
        assert session.combined(filtered).attrs["answers"] == 1
        assert session.combined(same).attrs["answers"] == 2
        with pytest.raises(QueryError, match="cannot be combined"):
            session.combined(session.sql("SELECT AVG(y) AS a FROM t", epsilon=0.5))
        with pytest.raises(QueryError, match="cannot be combined"):
            session.combined(session.sql("SELECT MEDIAN(x) AS m FROM t", epsilon=0.5))


@pytest.mark.statistical
def test_combined_sum_and_average_against_the_truth() -> None:
    """200 seeded sessions: SUM(x), AVG(x), AVG(x) by state and COUNT(*) by state (epsilon 0.2
    each). The combined SUM's variance matches its reported std (ratio within the 1e-4
    quantiles of chi-square(199)/199, [0.67, 1.42]; theory at least the scalar GLS of SUM and
    AVG) and its mean the truth (4 standard errors); the raw SUM's variance is rejected (the
    negative control). The combined AVG's 95% normal interval (delta method) covers the truth
    at 0.95 within 4 binomial standard deviations (0.062)."""
    repeats = 200
    truth_sum = float(((np.arange(1200) * 37) % 101).sum())  # x of _sum_table
    truth_avg = truth_sum / 1200
    sums, sum_stds, raw_stds, covered = [], [], [], 0
    for seed in range(repeats):
        with _sum_session(seed) as session:
            total = session.sql("SELECT SUM(x) AS v FROM t", epsilon=0.2)
            avg = session.sql("SELECT AVG(x) AS v FROM t", epsilon=0.2)
            session.sql("SELECT state, AVG(x) AS v FROM t GROUP BY state", epsilon=0.2)
            session.sql("SELECT state, COUNT(*) AS v FROM t GROUP BY state", epsilon=0.2)
            s, a = session.combined(total), session.combined(avg)
        sums.append(s["v_combined"].iloc[0])
        sum_stds.append(s["v_combined_std"].iloc[0])
        raw_stds.append(s["v_std"].iloc[0])
        half = 1.959964 * a["v_combined_std"].iloc[0]
        covered += abs(a["v_combined"].iloc[0] - truth_avg) <= half
    std, raw = float(np.mean(sum_stds)), float(np.mean(raw_stds))
    theory = math.sqrt(
        _gls_covariance([_split_std(avg, "count")], [_split_std(avg, "centred")], [raw])[1, 1]
    )
    assert std <= theory * (1 + 1e-9)  # the groups add information
    assert abs(np.mean(sums) - truth_sum) <= 4 * std / math.sqrt(repeats)
    variance = float(np.var(sums, ddof=1))
    assert 0.67 <= variance / std**2 <= 1.42, variance / std**2
    assert not 0.67 <= variance / raw**2 <= 1.42  # negative control
    assert abs(covered / repeats - 0.95) <= 0.062, covered / repeats
