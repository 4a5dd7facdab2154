"""Tests of ``dpcurator.attacks._session``: the attacks against a curator ``Session``.

Issue 7's done-means: the same reconstruction, differencing and averaging attacks run against
an unprotected interface and against the curator on real data (UCI Adult, the secret bit is
``income > 50K``). The unprotected interface loses the bits; the session charges every answer,
its budget stops the attacks, and at epsilon 1 the reconstruction recovers no more than chance
plus what epsilon allows (``dp_reconstruction_bound``, research note C.1).

Tolerances: the DP bound is on the expected fraction of uniformly random bits recovered; the
attacked slices are balanced (chance is 1/2) and the fraction of ``n`` guesses right has standard
deviation at most ``1 / (2 sqrt(n))``; the tests allow three of them.
"""

from __future__ import annotations

import itertools
import math
from fractions import Fraction
from typing import Any

import numpy as np
import pandas as pd
import pytest

from dpcurator.accounting import Budget
from dpcurator.attacks import (
    AggregateInterface,
    averaging_attack,
    differencing_attack,
    dp_reconstruction_bound,
    lp_reconstruction,
    repeats_to_pin,
    subset_sum_oracle,
)
from dpcurator.attacks._session import SessionInterface, SessionOracle
from dpcurator.curator import Column, Session, Table
from dpcurator.datasets import load_adult
from dpcurator.errors import BudgetExceededError, InvalidParameterError, QueryError
from dpcurator.noise import InsecureSeededSource

RICH = "income = '>50K'"


@pytest.fixture(scope="module")
def adult() -> pd.DataFrame:
    frame = load_adult()[["person_id", "age", "sex", "income", "hours_per_week"]].copy()
    frame["rich"] = (frame["income"] == ">50K").astype(int)
    return frame


def _table(frame: pd.DataFrame) -> Table:
    return Table(
        "adult",
        frame,
        columns=[
            Column("person_id"),
            Column("age", lower=0, upper=100),
            Column("sex", domain=["Female", "Male"]),
            Column("income", domain=["<=50K", ">50K"]),
            Column("hours_per_week", lower=0, upper=100),
        ],
    )


def _session(frame: pd.DataFrame, epsilon: float, seed: int) -> Session:
    return Session(
        _table(frame), Budget(epsilon), ledger=":memory:", source=InsecureSeededSource(seed)
    )


def _balanced_slice(adult: pd.DataFrame, n: int) -> pd.DataFrame:
    """The first ``n/2`` people with income >50K and the first ``n/2`` without, by id."""
    rich = adult[adult["rich"] == 1].head(n // 2)
    poor = adult[adult["rich"] == 0].head(n // 2)
    return pd.concat([rich, poor]).sort_values("person_id").reset_index(drop=True)


def _oracle(session: Session, rows: pd.DataFrame, epsilon: float, queries: int) -> SessionOracle:
    return SessionOracle(
        session,
        "adult",
        row_id="person_id",
        ids=rows["person_id"].to_numpy(),
        secret=RICH,
        epsilon=epsilon,
        queries=queries,
    )


# -- reconstruction ------------------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.statistical
def test_reconstruction_against_a_session_at_epsilon_1(adult: pd.DataFrame) -> None:
    n, m, eps = 200, 800, 1.0
    rows = _balanced_slice(adult, n)
    bits = rows["rich"].to_numpy()
    assert bits.sum() == n // 2  # chance is 1/2
    tolerance = 3 / (2 * math.sqrt(n))
    # Negative control: the unprotected interface, answers within 0.05 sqrt(n), loses >= 95 %.
    leaky = subset_sum_oracle(
        bits, noise="uniform", scale=0.05 * math.sqrt(n), source=InsecureSeededSource(1)
    )
    leaked = lp_reconstruction(leaky, n, queries=m, source=InsecureSeededSource(2))
    assert leaked.fraction_recovered(bits) >= 0.95
    # The same attack (same subsets) through the curator: 800 counts at epsilon 1/800 each.
    session = _session(rows, eps, seed=3)
    oracle = _oracle(session, rows, eps, m)
    assert oracle.epsilon_per_query == pytest.approx(1 / 800, rel=1e-15)
    assert m * Fraction(oracle.epsilon_per_query) <= 1  # (the float 1/800 is above 1/800)
    result = lp_reconstruction(oracle, n, queries=m, source=InsecureSeededSource(2))
    assert result.queries == oracle.asked == m
    assert result.fraction_recovered(bits) <= dp_reconstruction_bound(eps) + tolerance
    # The ledger charged every query and the whole attack spent the budget, no more.
    assert len(session.ledger.entries()) == m
    assert oracle.spent == pytest.approx(eps) and session.spent.epsilon <= eps
    with pytest.raises(BudgetExceededError, match="Refused"):
        oracle(np.array([0]))
    with pytest.raises(BudgetExceededError):
        session.sql("SELECT COUNT(*) FROM adult", epsilon=1e-3)
    session.close()


@pytest.mark.statistical
def test_reconstruction_through_a_session_with_a_large_budget_succeeds(
    adult: pd.DataFrame,
) -> None:
    # The curator is no defence by itself: at epsilon 1 per answer (4n in all) the counts are
    # accurate enough for the attack, as the bound e^(4n)/(1 + e^(4n)) = 1 allows.
    n = 50
    rows = _balanced_slice(adult, n)
    session = _session(rows, 4.0 * n, seed=4)
    oracle = _oracle(session, rows, 4.0 * n, 4 * n)
    assert oracle.epsilon_per_query == 1.0
    result = lp_reconstruction(oracle, n, source=InsecureSeededSource(5))
    assert result.fraction_recovered(rows["rich"].to_numpy()) >= 0.95
    assert dp_reconstruction_bound(1.0) + 3 / (2 * math.sqrt(n)) < 0.95
    session.close()


def test_oracle_query_text_and_budget_split(adult: pd.DataFrame) -> None:
    rows = adult.head(5)
    session = _session(rows, 3.0, seed=6)
    oracle = _oracle(session, rows, 1.0, 3)
    ids = rows["person_id"].tolist()
    mask = np.array([True, False, True, False, False])
    expected = (
        f'SELECT COUNT(*) AS value FROM "adult" WHERE ({RICH}) AND '
        f'"person_id" IN ({ids[0]}, {ids[2]})'
    )
    assert oracle.to_sql(mask) == oracle.to_sql(np.array([0, 2])) == expected
    assert oracle.to_sql(np.zeros(5, dtype=bool)).endswith("AND FALSE")
    assert oracle.rows == 5 and "asked=0" in repr(oracle)
    # The shares never add up to more than the total, exactly.
    for eps, m in [(1.0, 3), (0.7, 800), (1.0, 49), (2.5, 1234)]:
        share = SessionOracle(
            session, "adult", row_id="person_id", ids=ids, secret=RICH, epsilon=eps, queries=m
        ).epsilon_per_query
        assert m * Fraction(share) <= Fraction(eps)
        assert share == pytest.approx(eps / m, rel=1e-15)
    # Planning at construction spent nothing; the answers are noisy counts of the subset.
    assert session.spent.epsilon == 0.0
    answers = [oracle(mask) for _ in range(3)]
    assert all(float(a).is_integer() for a in answers)
    assert session.spent.epsilon == pytest.approx(1.0) and oracle.asked == 3
    session.close()


def test_oracle_with_text_ids() -> None:
    frame = pd.DataFrame({"name": ["O'Hara", "Bo", "Cy"], "sick": [1, 0, 1]})
    table = Table("t", frame, columns=[Column("name"), Column("sick", domain=[0, 1])])
    with Session(table, Budget(100.0), ledger=":memory:", source=InsecureSeededSource(0)) as s:
        oracle = SessionOracle(
            s,
            "t",
            row_id="name",
            ids=frame["name"].tolist(),
            secret="sick = 1",
            epsilon=100.0,
            queries=2,
        )
        assert "IN ('O''Hara', 'Cy')" in oracle.to_sql(np.array([0, 2]))
        # At epsilon 50 per count the noise is almost always 0.
        assert oracle(np.array([0, 2])) == 2.0 and oracle(np.array([1])) == 0.0


def test_oracle_stops_at_its_share_or_at_the_session_budget(adult: pd.DataFrame) -> None:
    rows = adult.head(20)
    # The oracle's own allotment: 4 answers of 1/4, though the session has more.
    session = _session(rows, 10.0, seed=7)
    oracle = _oracle(session, rows, 1.0, 4)
    for _ in range(4):
        oracle(np.arange(10))
    with pytest.raises(BudgetExceededError, match="4 answers"):
        oracle(np.arange(10))
    assert session.spent.epsilon == pytest.approx(1.0)
    # The session's budget: it refuses the third answer, and the attack gets the refusal.
    small = _session(rows, 0.5, seed=8)
    greedy = _oracle(small, rows, 1.0, 4)
    with pytest.raises(BudgetExceededError):
        lp_reconstruction(greedy, 20, queries=4, source=InsecureSeededSource(9))
    assert greedy.asked == 2 and small.spent.epsilon == pytest.approx(0.5)
    session.close()
    small.close()


# -- differencing and averaging -----------------------------------------------------------------
def _group(adult: pd.DataFrame, person: int) -> tuple[Any, Any, str, str]:
    """The rich of the target's age and sex: as masks (open interface) and as SQL (session)."""
    row = adult.loc[adult["person_id"] == person].iloc[0]
    mask = (adult["age"] == row["age"]) & (adult["sex"] == row["sex"]) & (adult["rich"] == 1)
    where = f"age = {row['age']} AND sex = '{row['sex']}' AND {RICH}"
    return mask, mask & (adult["person_id"] != person), where, f"{where} AND person_id <> {person}"


@pytest.mark.statistical
def test_differencing_open_interface_versus_session(adult: pd.DataFrame) -> None:
    # 50 targets with income >50K and 50 without. The open interface gives every bit away;
    # each session (budget 1, 0.5 per count) answers one pair, then refuses, and guessing
    # "rich" when the difference exceeds 1/2 cannot beat e / (1 + e) = 0.731 on average
    # (research note C.2); sd of 100 guesses <= 0.05.
    rich = adult.loc[adult["rich"] == 1, "person_id"].to_numpy()[:50]
    poor = adult.loc[adult["rich"] == 0, "person_id"].to_numpy()[:50]
    open_interface = AggregateInterface(adult)
    right_open = right_dp = 0
    for k, (person, bit) in enumerate([(p, 1) for p in rich] + [(p, 0) for p in poor]):
        mask_with, mask_without, sql_with, sql_without = _group(adult, int(person))
        leak = differencing_attack(open_interface.count, mask_with, mask_without)
        right_open += (leak.estimate > 0.5) == bit
        with _session(adult, 1.0, seed=100 + k) as session:
            interface = SessionInterface(session, "adult", epsilon=0.5)
            dp = differencing_attack(interface.count, sql_with, sql_without, repeats=20)
            assert dp.repeats == 1 and dp.refused and interface.answered == 2
            assert dp.refusal == interface.refusal and "Refused" in (dp.refusal or "")
            assert session.spent.epsilon == pytest.approx(1.0)
        right_dp += (dp.estimate > 0.5) == bit
    assert right_open == 100
    assert right_dp / 100 <= dp_reconstruction_bound(1.0) + 3 * 0.05


def test_session_charges_every_repeat_of_a_differencing_pair(adult: pd.DataFrame) -> None:
    _, _, sql_with, sql_without = _group(adult, 8)
    with _session(adult, 5.0, seed=10) as session:
        interface = SessionInterface(session, "adult", epsilon=0.25)
        result = differencing_attack(interface.count, sql_with, sql_without, repeats=1000)
        assert result.repeats == 10 and result.refused  # 20 answers of 0.25
        assert len(session.ledger.entries()) == 20
        assert [e.charged.epsilon for e in session.ledger.entries()] == [0.25] * 20
        # Hours per week by differencing sums: charged as well, and refused now.
        with pytest.raises(BudgetExceededError):
            interface.sum("hours_per_week", sql_without)
        assert interface.answered == 20 and interface.spent == pytest.approx(5.0)


@pytest.mark.statistical
def test_averaging_open_interface_versus_session(adult: pd.DataFrame) -> None:
    # Fresh Laplace(10) noise per answer: without accounting, repeats_to_pin(10, 0.5) answers
    # put the mean within 0.5 of the count with probability about 0.95. The session (budget 1,
    # 0.1 per answer, noise of scale 10 as well) answers 10 of them, rewritten or not, then
    # refuses: the mean of 10 answers has standard deviation sqrt(2) 10 / sqrt(10) = 4.5.
    query = (adult["age"] == 37) & (adult["rich"] == 1)
    truth = float(query.sum())
    k = repeats_to_pin(10.0, 0.5)
    unaccounted = AggregateInterface(adult, noise_scale=10.0, source=InsecureSeededSource(11))
    pinned = averaging_attack(unaccounted.count, query, repeats=k)
    assert pinned.repeats == k and not pinned.refused
    assert abs(pinned.estimate - truth) < 0.5
    rewrites = itertools.cycle(
        [f"age = 37 AND {RICH}", f"{RICH} AND age = 37", f"age BETWEEN 37 AND 37 AND {RICH}"]
    )
    with _session(adult, 1.0, seed=12) as session:
        interface = SessionInterface(session, "adult", epsilon=0.1)
        result = averaging_attack(lambda _: interface.count(next(rewrites)), None, repeats=k)
        assert result.refused and result.repeats == 10 and interface.answered == 10
        assert session.spent.epsilon == pytest.approx(1.0)
        assert len({e.query for e in session.ledger.entries()}) == 3  # every rewrite charged
        assert result.std_error > 2.0  # far from pinned
        with pytest.raises(BudgetExceededError):
            interface.count(f"age = 37 AND {RICH}")
    # Without the default stop the refusal reaches the caller.
    with _session(adult, 0.1, seed=13) as session:
        interface = SessionInterface(session, "adult", epsilon=0.1)
        with pytest.raises(BudgetExceededError):
            averaging_attack(interface.count, f"age = 37 AND {RICH}", repeats=2, stop_on=())


def test_interface_queries(adult: pd.DataFrame) -> None:
    rows = adult.head(50)
    with _session(rows, 1e4, seed=14) as session:
        interface = SessionInterface(session, "adult", epsilon=1e3)  # noise ~ 1e-3 counts
        assert interface.count() == 50.0
        assert interface.count("sex = 'Male'") == float((rows["sex"] == "Male").sum())
        total = interface.sum("hours_per_week", "age < 40")
        assert total == pytest.approx(rows.loc[rows["age"] < 40, "hours_per_week"].sum(), abs=1)
        assert interface.sql("SELECT AVG(age) FROM adult") == pytest.approx(
            rows["age"].mean(), abs=0.5
        )
        spent = session.spent.epsilon
        # Queries releasing several values are refused before anything is spent.
        with pytest.raises(InvalidParameterError, match="query"):
            interface.sql("SELECT sex, COUNT(*) FROM adult GROUP BY sex")
        with pytest.raises(InvalidParameterError, match="query"):
            interface.sql("SELECT COUNT(*), SUM(age) FROM adult")
        with pytest.raises(QueryError):
            interface.count("fnlwgt > 3")  # an undeclared column
        assert session.spent.epsilon == spent and interface.refusal is None
        assert "answered=4" in repr(interface)


@pytest.mark.parametrize(
    ("call", "name"),
    [
        (
            lambda s, ids: SessionOracle(
                "s", "adult", row_id="person_id", ids=ids, secret=RICH, epsilon=1.0, queries=4
            ),
            "session",
        ),
        (
            lambda s, ids: SessionOracle(
                s, "people", row_id="person_id", ids=ids, secret=RICH, epsilon=1.0, queries=4
            ),
            "table",
        ),
        (
            lambda s, ids: SessionOracle(
                s, "adult", row_id="", ids=ids, secret=RICH, epsilon=1.0, queries=4
            ),
            "row_id",
        ),
        (
            lambda s, ids: SessionOracle(
                s, "adult", row_id="person_id", ids=[], secret=RICH, epsilon=1.0, queries=4
            ),
            "ids",
        ),
        (
            lambda s, ids: SessionOracle(
                s, "adult", row_id="person_id", ids=[1, 1], secret=RICH, epsilon=1.0, queries=4
            ),
            "ids",
        ),
        (
            lambda s, ids: SessionOracle(
                s, "adult", row_id="person_id", ids=[1.5], secret=RICH, epsilon=1.0, queries=4
            ),
            "ids",
        ),
        (
            lambda s, ids: SessionOracle(
                s, "adult", row_id="person_id", ids=ids, secret=" ", epsilon=1.0, queries=4
            ),
            "secret",
        ),
        (
            lambda s, ids: SessionOracle(
                s, "adult", row_id="person_id", ids=ids, secret=RICH, epsilon=0.0, queries=4
            ),
            "epsilon",
        ),
        (
            lambda s, ids: SessionOracle(
                s, "adult", row_id="person_id", ids=ids, secret=RICH, epsilon=1.0, queries=0
            ),
            "queries",
        ),
        (
            lambda s, ids: SessionOracle(
                s, "adult", row_id="person_id", ids=ids, secret=RICH, epsilon=1.0, queries=4
            )(np.array([0, 9])),
            "subset",
        ),
        (lambda s, ids: SessionInterface(s, "adult", epsilon=-1.0), "epsilon"),
        (lambda s, ids: SessionInterface(s, "adult", epsilon=1.0, delta=2.0), "delta"),
        (lambda s, ids: SessionInterface(s, "adult", epsilon=1.0).count(""), "where"),
        (lambda s, ids: SessionInterface(s, "adult", epsilon=1.0).sum("", None), "column"),
        (lambda s, ids: SessionInterface(s, "adult", epsilon=1.0).sql(3), "query"),
    ],
)
def test_bad_input_names_the_argument(adult: pd.DataFrame, call: Any, name: str) -> None:
    rows = adult.head(4)
    with _session(rows, 1.0, seed=15) as session:
        with pytest.raises(InvalidParameterError, match=name):
            call(session, rows["person_id"].to_numpy())
        assert session.spent.epsilon == 0.0


def test_refused_query_shapes_cost_nothing(adult: pd.DataFrame) -> None:
    rows = adult.head(4)
    with _session(rows, 1.0, seed=16) as session:
        with pytest.raises(QueryError, match="fnlwgt"):
            SessionOracle(
                session,
                "adult",
                row_id="person_id",
                ids=rows["person_id"].to_numpy(),
                secret="fnlwgt > 100",
                epsilon=1.0,
                queries=4,
            )
        with pytest.raises(QueryError):
            SessionOracle(
                session,
                "adult",
                row_id="fnlwgt",
                ids=rows["person_id"].to_numpy(),
                secret=RICH,
                epsilon=1.0,
                queries=4,
            )
        assert session.spent.epsilon == 0.0 and session.ledger.entries() == []
