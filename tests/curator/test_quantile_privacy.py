"""The fine-grained quantiles (issue 14): private on neighbours, fine, and read lean.

Privacy: the seeded noise stage is run many times on the exact aggregates of two neighbouring
tables (one privacy unit with many rows, bounded to 3, present or not) and a confidence-correct
audit bounds the epsilon the releases show; the negative control feeds the same plan the
aggregates of an unbounded unit, which the audit must catch. Resolution: at a large epsilon,
the median of data concentrated at 20,801 comes back within 0.25 of it (with 1,025 points of
[0, 250,000], multiples of 244.14, it was at least 49 away). Reads: quantiles over public
groups read the bucket counts only, and release the same as with the group statement; without
GROUP BY the engine returns only the buckets near the quantile, from which every one of the
candidate points still gets its clamped utility exactly (on DuckDB and Spark).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from dpcurator.accounting import Budget
from dpcurator.curator import Column, Session, Table
from dpcurator.curator._measure import Exact, _quantile_runs, compute, fetch
from dpcurator.curator._plan import Plan
from dpcurator.curator._statements import quantile_buckets, quantile_clamp
from dpcurator.mechanisms import exponential_mechanism_runs
from dpcurator.noise import InsecureSeededSource
from tests.curator.conftest import EngineKind, exact_aggregates, open_session
from tests.privacy_check import audit, threshold_events

EPSILON = 2.0
QUERY = "SELECT MEDIAN(x) AS m FROM t"
BASE = pd.DataFrame(
    {
        "u": np.arange(30),
        "x": np.concatenate([10_000 + 500.0 * np.arange(15), 100_000 + 500.0 * np.arange(15)]),
    }
)


def _aggregates(
    frame: pd.DataFrame, rows_per_unit: int, epsilon: float = EPSILON, query: str = QUERY
) -> tuple[Plan, Exact]:
    """The plan of ``query`` on ``frame`` (``x`` in [0, 250,000]) and its exact aggregates."""
    table = Table(
        "t",
        frame,
        privacy_unit="u",
        max_rows_per_unit=rows_per_unit,
        columns=[Column("x", lower=0, upper=250_000)],
    )
    with Session(table, Budget(100.0), ledger=":memory:", source=InsecureSeededSource(0)) as s:
        plan = s.plan(query, epsilon=epsilon)
        return plan, fetch(plan, s._read(plan))


def _medians(plan: Plan, exact: Exact, seed: int, n: int) -> np.ndarray:
    source = InsecureSeededSource(seed)
    return np.array(
        [
            float(compute(plan, exact, source=source, confidence=0.95)[0]["m"].iloc[0])
            for _ in range(n)
        ]
    )


@pytest.mark.statistical
def test_median_privacy_on_neighbouring_tables() -> None:
    heavy = pd.DataFrame({"u": -1, "x": np.full(1000, 240_000.0)})
    plan, with_unit = _aggregates(pd.concat([BASE, heavy], ignore_index=True), 3)
    _, without = _aggregates(BASE, 3)
    samples = _medians(plan, with_unit, 1, 3000), _medians(plan, without, 2, 3000)
    events = threshold_events([50_000.0, 100_250.0, 100_750.0, 101_250.0, 102_000.0])
    result = audit(*samples, events, alpha=1e-3)
    assert result.epsilon_lower_bound <= EPSILON, result
    assert result.epsilon_lower_bound > 0.2, result  # the audit has power
    # Negative control: the plan's noise (a unit moves 3 ranks) on an unbounded unit's buckets.
    _, loose = _aggregates(pd.concat([BASE, heavy], ignore_index=True), 1000)
    broken = _medians(plan, loose, 3, 300), samples[1][:300]
    assert audit(*broken, events, alpha=1e-3).epsilon_lower_bound > EPSILON


def test_the_median_resolution_is_fine() -> None:
    """2,001 values within 10 of 20,801 in [0, 250,000]: the median comes back within 0.25."""
    values = 20_801.0 + 0.01 * (np.arange(2001) - 1000)  # the median is 20,801
    plan, exact = _aggregates(pd.DataFrame({"u": np.arange(2001), "x": values}), 1, 10.0)
    medians = _medians(plan, exact, 5, 50)
    assert np.all(np.abs(medians - 20_801.0) <= 0.25), medians
    # Negative control: the old grid's (1,025 points) nearest point is 49 away from 20,801.
    old_grid = np.linspace(0.0, 250_000.0, 1025)
    assert np.min(np.abs(old_grid - 20_801.0)) > 40.0


@pytest.mark.parametrize(
    ("query", "statements"),
    [
        ("SELECT MEDIAN(x) AS m FROM t", 1),
        ("SELECT g, MEDIAN(x) AS m, QUANTILE(x, 0.9) AS p FROM t GROUP BY g", 1),
        ("SELECT g, COUNT(*) AS n, MEDIAN(x) AS m FROM t GROUP BY g", 2),
    ],
)
def test_public_quantiles_skip_the_group_statement(query: str, statements: int) -> None:
    """Quantiles over public groups need only the bucket counts: the same release, one read."""
    frame = pd.DataFrame({"u": np.arange(300), "g": np.arange(300) % 3, "x": np.arange(300.0)})
    table = Table(
        "t",
        frame,
        privacy_unit="u",
        max_rows_per_unit=1,
        columns=[Column("g", domain=[0, 1, 2, 3]), Column("x", lower=0, upper=1000)],
    )
    with Session(table, Budget(100.0), ledger=":memory:") as s:
        plan = s.plan(query, epsilon=1.0)
        reads: list[object] = []

        def read(statement: object) -> object:
            reads.append(statement)
            return s._read(plan)(statement)  # type: ignore[arg-type]

        lean = fetch(plan, read, groups=False)  # type: ignore[arg-type]
        assert len(reads) == statements
        full = fetch(plan, s._read(plan))
    assert {k: v.tolist() for k, v in lean.buckets.items()} == {
        k: v.tolist() for k, v in full.buckets.items()
    }
    released = [
        compute(plan, e, source=InsecureSeededSource(9), confidence=0.95)[0] for e in (lean, full)
    ]
    pd.testing.assert_frame_equal(*released)


def _gamma_values() -> np.ndarray:
    return np.round(np.random.default_rng(4).gamma(2.0, 80.0, 5000), 1)  # ties and gaps


def _tied_values() -> np.ndarray:
    """Runs of 40-400 equal values, one per bucket (1/1024 apart): adjacent, crowded buckets."""
    rng = np.random.default_rng(5)
    return np.repeat(300 + np.arange(30) / 1024, rng.integers(40, 400, 30))


def _edge_values() -> np.ndarray:
    """A median 0.5 rank into a bucket of 400, below it buckets of 5 and 1, then a gap.

    The best point is the mid-rank of the bucket of 5 (3 ranks from ``n / 2``), while the rank
    between it and the bucket of 400 (0.5 away) belongs to no point: at epsilon 20 (``T`` 3.9)
    a filter measuring from that rank drops the bucket of 1 (mid-rank 6 away) and the gap below
    it (6.5), which the clamped utility still tells apart from ``OPT - T``.
    """
    step = 1 / 1024
    return np.concatenate(
        [
            np.full(400, 100.0),
            [300.0],
            np.full(5, 300 + step),
            np.full(400, 300 + 2 * step),
            np.full(7, 900.0),
        ]
    )


@pytest.mark.parametrize(
    "values",
    [_gamma_values(), _tied_values(), _edge_values()],
    ids=["gamma", "ties", "edge"],
)
@pytest.mark.parametrize("level", [0.5, 0.1, 0.97])
@pytest.mark.parametrize("epsilon", [1.0, 20.0])
def test_the_engine_returns_what_the_clamped_utility_needs(
    level: float, epsilon: float, values: np.ndarray, engine_kind: EngineKind
) -> None:
    """Every one of the 1,024,001 points gets ``max(u, OPT - T)``, from a few buckets only.

    ``u`` is the mid-rank's distance to ``q n``; at epsilon 20 the clamp ``T`` is smaller than
    the ties, so a filter that measured the best point by the ranks between buckets (which do
    not exist between adjacent buckets) would drop buckets the mechanism needs.
    """
    table = Table("t", pd.DataFrame({"x": values}), columns=[Column("x", lower=0, upper=1000)])
    session = open_session(table, engine=engine_kind)
    plan, exact = exact_aggregates(
        session, f"SELECT QUANTILE(x, {level}) AS q FROM t", epsilon=epsilon
    )
    (m,) = plan.measurements
    buckets = quantile_buckets(plan.values[0])
    clamp = quantile_clamp(m.epsilon, m.sensitivity, buckets)
    entry = exact.buckets[((), "x")]
    assert entry.shape[1] < np.unique(values).size / 4 or entry.shape[1] < 10  # few buckets
    lengths, utilities = _quantile_runs(entry, level, buckets, clamp)
    points = np.repeat(utilities, lengths)
    index = np.sort(np.minimum(np.floor(np.clip(values, 0, 1000) * 1024), buckets - 1))
    below = np.searchsorted(index, np.arange(buckets + 1), "left")
    at_or_below = np.searchsorted(index, np.arange(buckets + 1), "right")
    u = -np.abs((below + at_or_below) / 2 - level * values.size)  # the mid-rank
    assert np.array_equal(points, np.maximum(u, u.max() - clamp))
    # Negative control: without the clamp, the far points differ.
    assert not np.array_equal(points, u)


def _median_runs_with_plain_ranks(entry: np.ndarray, buckets: int) -> tuple[np.ndarray, np.ndarray]:
    """The runs as before the mid-rank: every point ranked by the values below it."""
    index, counts, below, total = entry
    target = 0.5 * float(total[0])
    starts = np.concatenate([[0], index + 1])
    lengths = np.diff(np.append(starts, buckets + 1))
    ranks = np.concatenate([below[:1], below + counts])
    return lengths, -np.abs(ranks - target)


def test_a_median_inside_a_tie_comes_back_exact() -> None:
    """400 rows at 10, 201 at 500, 400 at 900: the median, 500, is the tie's own value.

    The mid-rank scores the point 500 by where the median falls among its 201 rows (distance
    0); every other point is 100.5 ranks away, so the draw is 500 (error 0) but with
    probability about ``1e6 e^(-100)``. Negative control: ranked by the values below it, the
    point 500 is 100.5 away like every point between 10 and 900, and the draws spread over
    that whole range.
    """
    values = np.concatenate([np.full(400, 10.0), np.full(201, 500.0), np.full(400, 900.0)])
    frame = pd.DataFrame({"u": np.arange(values.size), "x": values})
    plan, exact = _aggregates(frame, 1, 1.0)
    assert np.all(_medians(plan, exact, 7, 40) == 500.0)
    (m,) = plan.measurements
    buckets = quantile_buckets(plan.values[0])
    lengths, utilities = _median_runs_with_plain_ranks(exact.buckets[((), "x")], buckets)
    source = InsecureSeededSource(8)
    step = 250_000 / buckets
    plain = [
        step
        * exponential_mechanism_runs(
            lengths, utilities, epsilon=m.epsilon, sensitivity=m.sensitivity, source=source
        ).value
        for _ in range(40)
    ]
    assert np.median(np.abs(np.array(plain) - 500.0)) > 50.0
