"""Several quantiles of one column released jointly (JointExp, issue 14) through the curator.

One exponential mechanism over sorted tuples pays for all of a column's quantiles at once: the
plan charges it once (its epsilon the pool of the levels' shares), the engine returns every
non-empty bucket (even without GROUP BY, where single quantiles get only the buckets near
their level), the releases are sorted, private on neighbouring tables, within their stated
rank errors, and more accurate than the levels drawn separately at the same total epsilon.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from dpcurator.accounting import Budget, NoOpEvent, PureDPEvent
from dpcurator.curator import Column, Session, Table
from dpcurator.curator import _measure as measure_module
from dpcurator.curator._measure import Exact, compute, fetch
from dpcurator.curator._measures import JOINT
from dpcurator.curator._plan import Plan
from dpcurator.curator._statements import quantile_buckets
from dpcurator.errors import QueryError
from dpcurator.noise import InsecureSeededSource
from tests.curator.conftest import EngineKind, exact_aggregates, open_session
from tests.curator.test_quantile_privacy import _aggregates
from tests.privacy_check import audit, threshold_events

QUERY = "SELECT QUANTILE(x, 0.25) AS a, MEDIAN(x) AS b, QUANTILE(x, 0.75) AS c FROM t"
LEVELS = {"a": 0.25, "b": 0.5, "c": 0.75}
VALUES = np.round(np.random.default_rng(0).gamma(2.0, 15_000.0, 2000), 2)


def _table(frame: pd.DataFrame, **options: object) -> Table:
    return Table(
        "t",
        frame,
        columns=[Column("x", lower=0, upper=250_000), Column("g", domain=[0, 1, 2])],
        **options,  # type: ignore[arg-type]
    )


def _frame() -> pd.DataFrame:
    return pd.DataFrame({"x": VALUES, "g": np.arange(VALUES.size) % 3})


def _released(plan: Plan, exact: Exact, seed: int, n: int) -> pd.DataFrame:
    source = InsecureSeededSource(seed)
    frames = [compute(plan, exact, source=source, confidence=0.95)[0] for _ in range(n)]
    return pd.concat(frames, ignore_index=True)


# -- the plan and its charge ---------------------------------------------------------------------
def test_the_plan_charges_one_mechanism_for_the_columns_quantiles() -> None:
    with Session(_table(_frame()), Budget(10.0), ledger=":memory:") as s:
        plan = s.plan(QUERY + " WHERE x > 0", epsilon=0.9)
        release = s.sql(QUERY, epsilon=0.9)
    rows = [m for m in plan.measurements if m.kind == "quantile"]
    assert [m.mechanism for m in rows] == [JOINT] * 3
    assert plan.events[0] == PureDPEvent(epsilon=0.9)
    assert plan.events[1:] == (NoOpEvent(), NoOpEvent())
    assert sum(m.epsilon for m in rows) == pytest.approx(0.9)
    assert all(m.sensitivity == 0.75 for m in rows)  # 1 - min gap, one row per unit
    assert "jointly" in rows[0].why
    assert release.charged.epsilon == pytest.approx(0.9)
    frame = release.table
    assert frame["a"].iloc[0] <= frame["b"].iloc[0] <= frame["c"].iloc[0]


def test_single_quantiles_and_other_columns_are_unchanged() -> None:
    frame = _frame().assign(y=VALUES / 2)
    table = Table(
        "t",
        frame,
        columns=[Column("x", lower=0, upper=250_000), Column("y", lower=0, upper=250_000)],
    )
    with Session(table, Budget(10.0), ledger=":memory:") as s:
        single = s.plan("SELECT MEDIAN(x) AS m, COUNT(*) AS n FROM t", epsilon=1.0)
        mixed = s.plan(
            "SELECT MEDIAN(x) AS m, QUANTILE(x, 0.9) AS p, MEDIAN(y) AS my FROM t", epsilon=0.9
        )
    assert [m.mechanism for m in single.measurements] == ["geometric", "exponential"]
    kinds = {(m.column, m.mechanism) for m in mixed.measurements}
    assert kinds == {("x", JOINT), ("y", "exponential")}
    assert sum(isinstance(e, PureDPEvent) for e in mixed.events) == 2
    assert PureDPEvent(epsilon=0.6) in mixed.events  # x's two shares of 0.3


def test_a_zcdp_query_pools_its_shares_in_rho() -> None:
    """Under zCDP the joint epsilon has ``epsilon_J**2 / 2 <= sum(rho_i)``, the levels' rho."""
    with Session(_table(_frame()), Budget(10.0, 1e-6), accountant="zcdp", ledger=":memory:") as s:
        plan = s.plan(QUERY, rho=0.3)
    (event,) = [e for e in plan.events if isinstance(e, PureDPEvent)]
    assert event.epsilon**2 / 2 <= 0.3
    assert event.epsilon**2 / 2 == pytest.approx(0.3, rel=1e-12)


@pytest.mark.parametrize("query", ["SELECT QUANTILE(x, 1.5) FROM t", "SELECT QUANTILE(x) FROM t"])
def test_refusals_are_as_before(query: str) -> None:
    with Session(_table(_frame()), Budget(10.0), ledger=":memory:") as s, pytest.raises(QueryError):
        s.sql(query.replace("FROM t", ", MEDIAN(x) FROM t"), epsilon=1.0)


# -- what the engine returns ---------------------------------------------------------------------
def test_without_group_by_the_engine_returns_every_bucket(engine_kind: EngineKind) -> None:
    session = open_session(_table(_frame()), engine=engine_kind)
    plan, exact = exact_aggregates(session, QUERY, epsilon=30.0)
    entry = exact.buckets[((), "x")]
    index = np.minimum(np.floor(VALUES * quantile_buckets(plan.values[0]) / 250_000), 2**20 - 1)
    assert entry[0].tolist() == np.unique(index).astype(int).tolist()
    assert entry[1].sum() == VALUES.size
    # Negative control: one quantile's statement keeps only the buckets near its level.
    single = session.plan("SELECT QUANTILE(x, 0.3) FROM t", epsilon=30.0)
    assert single.statements.quantiles is not None
    near = session._read(single)(single.statements.quantiles)
    assert len(near["__n"]) < np.unique(index).size / 4


# -- privacy, accuracy, error statements -----------------------------------------------------------
@pytest.mark.statistical
def test_joint_quantiles_are_private_on_neighbouring_tables() -> None:
    """A unit of many rows, bounded to 3, present or not: the audit stays below epsilon."""
    eps = 2.0
    base = pd.DataFrame({"u": np.arange(200), "x": 10_000 + 100.0 * np.arange(200)})
    heavy = pd.DataFrame({"u": -1, "x": np.full(1000, 240_000.0)})

    query = "SELECT QUANTILE(x, 0.3) AS a, QUANTILE(x, 0.8) AS b FROM t"

    plan, with_unit = _aggregates(pd.concat([base, heavy], ignore_index=True), 3, eps, query)
    _, without = _aggregates(base, 3, eps, query)
    assert plan.measurements[0].sensitivity == pytest.approx(
        3 * 0.8
    )  # 1 - min(0.3, 0.5, 0.2), 3 rows
    samples = [
        _released(plan, e, seed, 1500)["b"].to_numpy() for seed, e in ((1, with_unit), (2, without))
    ]
    events = threshold_events([25_000.0, 25_500.0, 26_000.0, 26_500.0, 27_000.0])
    result = audit(*samples, events, alpha=1e-3)
    assert result.epsilon_lower_bound <= eps, result
    assert result.epsilon_lower_bound > 0.2, result  # the audit has power
    # Negative control: the plan's noise on an unbounded unit's buckets is caught.
    _, loose = _aggregates(pd.concat([base, heavy], ignore_index=True), 1000, eps, query)
    broken = _released(plan, loose, 3, 300)["b"].to_numpy(), samples[1][:300]
    assert audit(*broken, events, alpha=1e-3).epsilon_lower_bound > eps


def _rank_errors(frame: pd.DataFrame) -> pd.DataFrame:
    ordered = np.sort(VALUES)
    return pd.DataFrame(
        {
            alias: np.abs(np.searchsorted(ordered, frame[alias].to_numpy()) - q * VALUES.size)
            for alias, q in LEVELS.items()
        }
    )


@pytest.mark.statistical
def test_joint_beats_split_epsilon_at_equal_total_budget() -> None:
    """Mean rank error of the three quantiles: jointly at epsilon, or each at epsilon / 3.

    Over 300 seeded repetitions the joint mean must be below the split one by more than three
    standard errors of the difference (independent repetitions); the negative control, the
    joint mechanism at a third of the budget, must not be.
    """
    eps, repeats = 0.3, 300
    with Session(_table(_frame()), Budget(100.0), ledger=":memory:") as s:
        joint = s.plan(QUERY, epsilon=eps)
        thin = s.plan(QUERY, epsilon=eps / 3)
        exact = fetch(joint, s._read(joint))
        singles = []
        for alias, q in LEVELS.items():
            plan = s.plan(f"SELECT QUANTILE(x, {q}) AS {alias} FROM t", epsilon=eps / 3)
            singles.append((alias, plan, fetch(plan, s._read(plan))))
    joint_errors = _rank_errors(_released(joint, exact, 1, repeats)).mean(axis=1)
    split = pd.concat(
        [_released(plan, e, 2 + i, repeats)[[alias]] for i, (alias, plan, e) in enumerate(singles)],
        axis=1,
    )
    split_errors = _rank_errors(split).mean(axis=1)

    def below(a: pd.Series, b: pd.Series) -> bool:
        se = math.sqrt(a.var() / a.size + b.var() / b.size)
        return bool(a.mean() < b.mean() - 3 * se)

    assert below(joint_errors, split_errors), (joint_errors.mean(), split_errors.mean())
    thin_errors = _rank_errors(_released(thin, exact, 9, repeats)).mean(axis=1)
    assert not below(thin_errors, split_errors)  # negative control


@pytest.mark.statistical
def test_the_stated_rank_errors_hold_at_their_rate() -> None:
    """Every level's rank error is within its stated bound (plus the best tuple's, 0 here)."""
    with Session(_table(_frame()), Budget(100.0), ledger=":memory:") as s:
        release = s.sql(QUERY, epsilon=0.2)
        plan = s.plan(QUERY, epsilon=0.2)
        exact = fetch(plan, s._read(plan))
    repeats = 300
    errors = _rank_errors(_released(plan, exact, 4, repeats))
    sensitivity = plan.measurements[0].sensitivity
    epsilon = 0.2  # the one mechanism's
    slack = 4 * math.sqrt(0.95 * 0.05 / repeats)
    for alias in LEVELS:
        bound = release.rank_errors[alias]
        best = 1.0  # the best candidate's rank error: values are distinct at this resolution
        assert np.mean(errors[alias] <= bound + best) >= 0.95 - slack
        # Negative control: a claim that forgets the ln(tuples) term is violated.
        no_log = 2 * sensitivity / epsilon * math.log(1 / 0.05)
        assert np.mean(errors[alias] <= no_log) < 0.95 - slack


def test_grouped_joint_quantiles_are_sorted_in_every_group() -> None:
    with Session(_table(_frame()), Budget(100.0), ledger=":memory:") as s:
        plan = s.plan(
            "SELECT g, QUANTILE(x, 0.9) AS c, QUANTILE(x, 0.1) AS a, MEDIAN(x) AS b "
            "FROM t GROUP BY g",
            epsilon=1.0,
        )
        exact = fetch(plan, s._read(plan))
    frame = _released(plan, exact, 5, 20)
    assert (frame["a"] <= frame["b"]).all() and (frame["b"] <= frame["c"]).all()
    assert frame["a"].between(0, 250_000).all() and frame["c"].between(0, 250_000).all()


# -- ties: positions within a point ---------------------------------------------------------------
def _positions(index: list[int], counts: list[int], buckets: int, k: int) -> list[int]:
    """Every position's rank, one by one: ``k`` of rank 0 (value L), then ``below(j) +
    min(s, n_j)`` for ``s < k`` at each point ``j``."""
    n = np.zeros(buckets + 1, dtype=np.int64)
    n[index] = counts
    ranks = [int(n[:j].sum()) + min(s, int(n[j])) for j in range(buckets + 1) for s in range(k)]
    return [0] * k + ranks


@pytest.mark.parametrize(
    ("index", "counts", "buckets"),
    [([0, 2], [1, 3], 4), ([1], [7], 3), ([3], [2], 3), ([0, 1, 2], [1, 1, 1], 2), ([], [], 2)],
)
def test_joint_runs_are_the_positions_ranks(
    index: list[int], counts: list[int], buckets: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(measure_module, "SUB_POSITIONS", 4)
    idx, cnt = np.array(index, dtype=np.int64), np.array(counts, dtype=np.int64)
    entry = np.vstack([idx, cnt, np.cumsum(cnt) - cnt, np.full(idx.size, cnt.sum())])
    lengths, ranks, total = measure_module._joint_runs(entry if index else None, buckets)
    assert np.repeat(ranks, lengths).tolist() == _positions(index, counts, buckets, 4)
    assert total == sum(counts)
    assert np.all(np.diff(ranks) > 0)  # one run per rank


def test_one_value_more_raises_the_rank_of_an_upper_set_of_positions() -> None:
    """What the joint sensitivity needs: adding a value adds 1 from some position on, else 0."""
    for bucket in range(4):
        before = np.array(_positions([1, 2], [2, 1], 4, 5))
        counts = {1: 2, 2: 1}
        counts[bucket] = counts.get(bucket, 0) + 1
        after = np.array(_positions(list(counts), list(counts.values()), 4, 5))
        change = after - before
        assert set(change.tolist()) <= {0, 1}
        assert np.all(np.diff(change) >= 0)


@pytest.mark.statistical
def test_a_level_inside_tied_values_is_not_flat(monkeypatch: pytest.MonkeyPatch) -> None:
    """40 % zeros: the 0.25 quantile's best point is 15 % of the rows away from its rank.

    Among points alone the joint utility is flat for the median and the 0.75 quantile between
    that error and 0 (half total variation), so they wander over thousands of ranks; with the
    positions they come back near their ranks. Negative control: one position per point.
    """
    rng = np.random.default_rng(1)
    values = np.concatenate([np.zeros(800), np.round(rng.gamma(2.0, 15_000.0, 1200), 2)])
    frame = pd.DataFrame({"x": values, "g": np.arange(values.size) % 3})
    with Session(_table(frame), Budget(100.0), ledger=":memory:") as s:
        plan = s.plan(QUERY, epsilon=1.0)
        exact = fetch(plan, s._read(plan))
    ordered = np.sort(values)

    def median_rank_error(seed: int) -> float:
        released = _released(plan, exact, seed, 40)["b"].to_numpy()
        return float(np.mean(np.abs(np.searchsorted(ordered, released) - 0.5 * values.size)))

    assert median_rank_error(6) < 20
    monkeypatch.setattr(measure_module, "SUB_POSITIONS", 1)
    assert median_rank_error(7) > 60  # negative control: flat between 0 and 300 ranks
