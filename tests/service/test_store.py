"""The ledger store on SQLite and on PostgreSQL: atomic charges to two budgets, request ids
charged once, budgets only raised (audited), keys hashed and revocable, several stores (as
several server processes) sharing one database without overspending."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from dpcurator import BudgetExceededError, InvalidParameterError
from dpcurator.accounting import Budget, PureDPEvent
from dpcurator.client import AuthenticationError, BadRequestError, PermissionDeniedError
from dpcurator.service import STEWARD, Charge, LedgerStore

from .conftest import Postgres


@pytest.fixture(params=["sqlite", "postgresql"])
def ledger(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield str(tmp_path / "books.sqlite")
        return
    cluster: Postgres = request.getfixturevalue("postgres")
    yield cluster.create_database(f"store_{abs(hash(request.node.name)) % 10**9}")


def _store(ledger: str, table_budget: float = 1.0) -> LedgerStore:
    store = LedgerStore(ledger)
    store.add_table("t", Budget(table_budget), actor="test")
    for name in ("ann", "bob"):
        store.add_analyst(name, actor="test")
        store.set_budget(name, "t", Budget(0.6), actor="test")
    return store


def _ask(
    store: LedgerStore,
    who: str,
    request_id: str,
    epsilon: float = 0.25,
    answer: Callable[[Charge], str] | None = None,
) -> Charge:
    return store.charge(
        who,
        "t",
        request_id=request_id,
        query="SELECT COUNT(*) FROM t",
        epsilon=epsilon,
        delta=0.0,
        events=[PureDPEvent(epsilon)],
        answer=answer,
    )


def test_a_charge_counts_against_the_analyst_and_the_table(ledger: str) -> None:
    with _store(ledger, table_budget=0.8) as store:
        _ask(store, "ann", "a1", 0.5)
        with pytest.raises(BudgetExceededError, match="global budget"):
            _ask(store, "bob", "b1", 0.5)
        with pytest.raises(BudgetExceededError):
            _ask(store, "ann", "a2", 0.25)  # 0.75 > ann's 0.6
        _ask(store, "bob", "b2", 0.25)
        assert store.standing("ann", "t")[1] == Budget(0.5)
        assert store.standing(None, "t")[1] == Budget(0.75)
        assert [r.analyst for r in store.history()] == ["bob", "ann"]


def test_a_request_id_is_charged_once_and_reused_for_the_same_query_only(ledger: str) -> None:
    with _store(ledger) as store:
        first = _ask(store, "ann", "same")  # charged, not answered (a process that stopped)
        again = _ask(store, "ann", "same")
        assert again.repeated and again.id == first.id and again.answer is None
        answered = _ask(store, "ann", "same", answer=lambda c: f"A{c.id}")
        assert answered.repeated and answered.answer == f"A{first.id}"
        assert _ask(store, "ann", "same", answer=lambda c: "B").answer == f"A{first.id}"
        assert _ask(store, "ann", "same").answer == f"A{first.id}"  # the first answer stays
        with pytest.raises(BadRequestError):
            _ask(store, "ann", "same", epsilon=0.5)
        _ask(store, "bob", "same")  # ids are per analyst
        assert store.standing(None, "t")[1] == Budget(0.5)


def test_an_answer_is_stored_with_its_charge_and_a_charge_without_one_answered_later(
    ledger: str,
) -> None:
    with _store(ledger) as store:
        seen: list[Charge] = []

        def answer(charge: Charge) -> str:
            seen.append(charge)
            # the charge is decided and written before the answer reads anything
            assert store.standing("ann", "t")[1] == Budget(0.25 * len(seen))
            return f"answer to {charge.id}"

        made = _ask(store, "ann", "r1", answer=answer)
        assert made.answer == f"answer to {made.id}" and seen[0].id == made.id
        assert [(r.id, r.answered) for r in store.history("ann")] == [(made.id, True)]

        def broken(charge: Charge) -> str:
            raise RuntimeError("the process stopped while answering")

        with pytest.raises(RuntimeError):
            _ask(store, "ann", "r2", answer=broken)
        # charged and not answered, as after a crash: the same request id answers it once
        assert store.standing("ann", "t")[1] == Budget(0.5)
        again = _ask(store, "ann", "r2", answer=answer)
        assert again.repeated and again.answer == f"answer to {again.id}"
        assert _ask(store, "ann", "r2", answer=broken).answer == again.answer
        assert store.standing("ann", "t")[1] == Budget(0.5)


def test_no_budget_on_a_table_is_permission_denied(ledger: str) -> None:
    with _store(ledger) as store:
        store.add_analyst("cy", actor="test")
        with pytest.raises(PermissionDeniedError):
            _ask(store, "cy", "c1")


def test_budgets_are_only_raised_and_every_change_is_audited(ledger: str) -> None:
    with _store(ledger) as store:
        _ask(store, "ann", "a1", 0.5)
        with pytest.raises(InvalidParameterError, match="only"):
            store.set_budget("ann", "t", Budget(0.4), actor="alice", reason="oops")
        store.set_budget("ann", "t", Budget(0.9), actor="alice", reason="new project")
        _ask(store, "ann", "a2", 0.25)
        trail = store.audit()
        assert trail[0].actor == "alice" and "new project" in trail[0].detail
        assert trail[0].action == "raise_budget" and "0.6" in trail[0].detail


def test_keys_are_stored_hashed_and_revocation_is_immediate(ledger: str) -> None:
    with _store(ledger) as store:
        key = store.issue_key("ann", actor="test")
        steward = store.issue_key(STEWARD, actor="test")
        assert store.authenticate(key.text).owner == "ann"
        assert store.authenticate(steward.text).is_steward
        assert all(key.text not in str(row) for row in store.list_keys())
        with LedgerStore(ledger) as other:  # another server process
            assert other.authenticate(key.text).owner == "ann"
            store.revoke_key(key.id, actor="test")
            with pytest.raises(AuthenticationError):
                other.authenticate(key.text)
        second = store.issue_key("ann", actor="test")
        store.remove_analyst("ann", actor="test")
        with pytest.raises(AuthenticationError):
            store.authenticate(second.text)
        with pytest.raises(InvalidParameterError):
            store.issue_key("ann", actor="test")


def test_the_accountant_is_bound_to_the_database(ledger: str) -> None:
    LedgerStore(ledger).close()
    with pytest.raises(InvalidParameterError, match="accountant"):
        LedgerStore(ledger, accountant="zcdp")


def test_several_stores_on_one_database_never_overspend(ledger: str) -> None:
    """Four stores (as four server processes) charge at once; the budgets hold exactly."""
    _store(ledger, table_budget=1.0).close()
    stores = [LedgerStore(ledger) for _ in range(4)]
    answered: list[str] = []
    lock = threading.Lock()

    def worker(index: int) -> None:
        for i in range(12):
            who = "ann" if i % 2 else "bob"
            try:
                _ask(stores[index], who, f"{index}-{i}", 0.0625)
            except BudgetExceededError:
                continue
            with lock:
                answered.append(who)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    with LedgerStore(ledger) as books:
        assert len(books.history()) == len(answered)
        # 24 tries each at 1/16: at most 9 fit in an analyst's 0.6, and 16 in the table's 1.0.
        assert len(answered) == 16 and max(answered.count("ann"), answered.count("bob")) <= 9
        assert books.standing("ann", "t")[1].epsilon <= 0.6
        assert books.standing(None, "t")[1] == Budget(1.0)
    for store in stores:
        store.close()


def test_threads_sharing_one_store_never_overspend_or_compose_twice(ledger: str) -> None:
    """Eight threads on one store (its pool of connections): charges and reads at once.

    The readers compose the same charges as the chargers (into the process's books): each
    charge must be composed once, so what the store says was spent is what was charged.
    """
    store = _store(ledger, table_budget=1.0)
    answered: list[str] = []
    lock = threading.Lock()

    def charger(index: int) -> None:
        for i in range(10):
            who = "ann" if (index + i) % 2 else "bob"
            try:
                _ask(store, who, f"{index}-{i}", 0.0625)
            except BudgetExceededError:
                continue
            with lock:
                answered.append(who)

    def reader() -> None:
        for _ in range(20):
            store.standing("ann", "t")
            store.standing(None, "t")

    threads = [threading.Thread(target=charger, args=(i,)) for i in range(6)]
    threads += [threading.Thread(target=reader) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert len(store.history()) == len(answered) == 16
    assert max(answered.count("ann"), answered.count("bob")) <= 9
    assert store.standing(None, "t")[1] == Budget(1.0)
    for who in ("ann", "bob"):
        assert store.standing(who, "t")[1] == Budget(0.0625 * answered.count(who))
    store.close()
