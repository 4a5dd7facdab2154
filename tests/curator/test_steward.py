"""Steward-side measurements (Session.charged_measurements): charged first, metered, no exact out.

DuckDB only: the engine plays no part in the metering. The exponential mechanism's test is
statistical (seeded) with a negative control: with the plans' weights at 0 the choice carries
no information and is no longer concentrated on the worst plan.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest

from dpcurator import BudgetExceededError, InvalidParameterError, QueryFailedError
from dpcurator.accounting import ApproxDPEvent, ZCDPEvent, zcdp_to_epsilon
from dpcurator.curator import ChargedMeasurements, DuckDBEngine, Session, count_sensitivities
from tests.curator.conftest import STATES, exact_aggregates, open_session, people_table

BY_STATE = "SELECT state, COUNT(*) AS n FROM people GROUP BY state"
BY_AGE = (
    "SELECT CASE WHEN age < 50 THEN 0 WHEN age >= 50 THEN 1 END AS a, COUNT(*) AS n "
    "FROM people GROUP BY CASE WHEN age < 50 THEN 0 WHEN age >= 50 THEN 1 END"
)
CELLS = [(s,) for s in STATES]


def _session(people: pd.DataFrame) -> Session:
    return open_session(people_table(people), accountant="zcdp")


def _exact_by_state(session: Session) -> np.ndarray:
    """The bounded exact counts by state (the test's view from the steward's side)."""
    plan, exact = exact_aggregates(session, BY_STATE)
    counts = dict(zip(exact.keys, exact.columns[plan.measurements[0].result], strict=True))
    return np.array([counts.get((s,), 0) for s in STATES], dtype=np.float64)


def test_every_read_happens_after_the_charge(
    people: pd.DataFrame, monkeypatch: pytest.MonkeyPatch
) -> None:
    session = _session(people)
    plan = session.plan(BY_STATE, epsilon=1.0)
    entries: list[int] = []
    original = DuckDBEngine.run

    def run(self: DuckDBEngine, statement: Any, table: str) -> Any:
        entries.append(len(session.ledger.entries()))
        return original(self, statement, table)

    monkeypatch.setattr(DuckDBEngine, "run", run)
    steps = session.charged_measurements("mechanism", [ZCDPEvent(rho=10.0)], 10.0)
    assert isinstance(steps, ChargedMeasurements) and steps.entry.id == 1
    assert not entries  # charging read nothing
    _, l2sq = count_sensitivities(plan)
    assert l2sq == 9  # three rows per unit, all in one state
    noisy = steps.gaussian(plan, CELLS, sigma=1.0)  # rho = 9 / 2
    assert entries and all(n == 1 for n in entries)  # every read after the entry
    assert np.abs(noisy - _exact_by_state(session)).max() < 8  # sigma 1: within 8 std
    assert float(steps.rho_left) == pytest.approx(10.0 - 4.5)
    assert not hasattr(steps, "exact") and not hasattr(session, "exact")


def test_steps_beyond_the_charge_are_refused_before_reading(
    people: pd.DataFrame, monkeypatch: pytest.MonkeyPatch
) -> None:
    session = _session(people)
    by_state, by_age = session.plan(BY_STATE, epsilon=1.0), session.plan(BY_AGE, epsilon=1.0)
    steps = session.charged_measurements("mechanism", [ZCDPEvent(rho=4.5)], 4.5)
    steps.gaussian(by_state, CELLS, sigma=1.0)  # all of it
    ran: list[str] = []
    monkeypatch.setattr(DuckDBEngine, "run", lambda *a: ran.append("run"))
    with pytest.raises(BudgetExceededError, match="nothing was read"):
        steps.gaussian(by_age, [(0,), (1,)], sigma=1.0)
    with pytest.raises(BudgetExceededError):
        steps.select(
            [by_age], [[(0,), (1,)]], [np.zeros(2)], weights=[1.0], penalties=[0.0], epsilon=0.1
        )
    assert not ran and len(session.ledger.entries()) == 1


def test_the_events_must_cover_rho(people: pd.DataFrame) -> None:
    session = _session(people)
    with pytest.raises(InvalidParameterError, match="events"):
        session.charged_measurements("too little", [ZCDPEvent(rho=0.1)], 0.5)
    with pytest.raises(InvalidParameterError, match="events"):
        session.charged_measurements("two", [ZCDPEvent(rho=1.0), ZCDPEvent(rho=1.0)], 0.5)
    assert session.ledger.entries() == []
    basic = open_session(people_table(people))  # (epsilon, delta) only
    epsilon = zcdp_to_epsilon(0.5, 1e-6)
    with pytest.raises(InvalidParameterError, match="events"):
        basic.charged_measurements("short", [ApproxDPEvent(epsilon=epsilon / 2, delta=1e-6)], 0.5)
    steps = basic.charged_measurements("ok", [ApproxDPEvent(epsilon=epsilon, delta=1e-6)], 0.5)
    assert float(steps.rho_left) == 0.5


def test_a_failed_read_is_one_fixed_message(
    people: pd.DataFrame, monkeypatch: pytest.MonkeyPatch
) -> None:
    session = _session(people)
    plan = session.plan(BY_STATE, epsilon=1.0)
    steps = session.charged_measurements("mechanism", [ZCDPEvent(rho=10.0)], 10.0)

    def fail(*_: Any) -> Any:
        raise RuntimeError("secret row value 42")

    monkeypatch.setattr(DuckDBEngine, "run", fail)
    with pytest.raises(QueryFailedError) as caught:
        steps.gaussian(plan, CELLS, sigma=1.0)
    assert "42" not in str(caught.value) and "ledger entry 1" in str(caught.value)
    assert caught.value.__cause__ is None and caught.value.__context__ is None
    assert len(session.ledger.entries()) == 1  # the charge stands


def test_only_counts_over_distinct_public_cells(people: pd.DataFrame) -> None:
    session = _session(people)
    steps = session.charged_measurements("mechanism", [ZCDPEvent(rho=10.0)], 10.0)
    summed = session.plan("SELECT state, SUM(income) AS s FROM people GROUP BY state", epsilon=1)
    with pytest.raises(InvalidParameterError, match=r"COUNT\(\*\)"):
        steps.gaussian(summed, CELLS, sigma=1.0)
    plan = session.plan(BY_STATE, epsilon=1.0)
    with pytest.raises(InvalidParameterError, match="distinct"):
        steps.gaussian(plan, [("CA",), ("CA",)], sigma=1.0)
    with pytest.raises(InvalidParameterError, match="sigma"):
        steps.gaussian(plan, CELLS, sigma=0.0)
    # An estimate that would broadcast (and multiply the sensitivity) is refused, unspent.
    left = steps.rho_left
    with pytest.raises(InvalidParameterError, match="estimates"):
        steps.select(
            [plan], [CELLS], [np.zeros((4, 1))], weights=[1.0], penalties=[0.0], epsilon=0.1
        )
    assert steps.rho_left == left
    # A cell without rows counts 0; a group outside the cells is not released.
    noisy = steps.gaussian(plan, [("CA",), ("nowhere",)], sigma=1.0)
    assert noisy.shape == (2,) and abs(noisy[1]) < 8


@pytest.mark.statistical
def test_select_prefers_the_worst_estimate_with_a_negative_control(people: pd.DataFrame) -> None:
    session = _session(people)
    plan = session.plan(BY_STATE, epsilon=1.0)
    exact = _exact_by_state(session)
    # Three candidates over the same counts: exact, off by 40 in all, off by 4 in one cell.
    estimates = [exact, exact + 40.0, exact + np.array([4.0, 0, 0, 0])]
    steps = session.charged_measurements("mechanism", [ZCDPEvent(rho=100.0)], 100.0)
    draws = 200

    def choices(weights: list[float]) -> np.ndarray:
        return np.array(
            [
                steps.select(
                    [plan] * 3,
                    [CELLS] * 3,
                    estimates,
                    weights=weights,
                    penalties=[0.0] * 3,
                    epsilon=0.5,  # rho 1/32 per draw
                )
                for _ in range(draws)
            ]
        )

    informed = choices([1.0, 1.0, 1.0])
    # Utilities 0, 160, 16 with sensitivity 3: candidate 1 has all but e^-12 of the mass.
    assert (informed == 1).mean() > 0.97
    blind = choices([0.0, 0.0, 0.0])  # negative control: no information, uniform choice
    assert 0.2 < (blind == 1).mean() < 0.5
    assert float(steps.rho_left) == pytest.approx(100.0 - 2 * draws * 0.25 / 8)
