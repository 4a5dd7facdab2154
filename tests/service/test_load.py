"""Load and faults, on 127.0.0.1 with bounded loops that stop by themselves.

- 20 analysts x 50 queries at once, with budgets that run out mid-test (the analysts' and the
  table's): every answer received has its ledger entry, no budget is exceeded, every refusal is
  a clean BudgetExceededError.
- The server (`dpcurator serve`, a SQLite ledger) SIGKILLed mid-load and restarted, and
  PostgreSQL stopped and restarted mid-load: clients send again with the same request id, and
  nothing is lost, nothing charged twice, nothing overspent.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from dpcurator import BudgetExceededError
from dpcurator.accounting import Budget
from dpcurator.client import Client
from dpcurator.curator import QueryRelease
from dpcurator.service import LedgerStore, load_config

from .conftest import LiveServer, Postgres, ServerProcess, write_config

COUNT = "SELECT region, COUNT(*) AS n FROM people GROUP BY region"
EPSILON = 0.0625  # a power of two: the budgets below hold an exact number of queries


@dataclass
class Outcomes:
    answers: dict[str, QueryRelease] = field(default_factory=dict)  # request id -> release
    refused: list[str] = field(default_factory=list)
    other: list[BaseException] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


def _run_analysts(
    url: str, keys: dict[str, str], queries: int, outcomes: Outcomes, on_answer: Callable[[], None]
) -> None:
    def analyst(name: str) -> None:
        with Client(url, keys[name], retries=25, timeout=120) as client:
            for i in range(queries):
                request_id = f"{name}-{i}"
                try:
                    release = client.sql(COUNT, epsilon=EPSILON, request_id=request_id)
                except BudgetExceededError:
                    with outcomes.lock:
                        outcomes.refused.append(request_id)
                    continue
                except Exception as exc:  # recorded, and the test fails on it
                    with outcomes.lock:
                        outcomes.other.append(exc)
                    continue
                with outcomes.lock:
                    outcomes.answers[request_id] = release
                on_answer()

    threads = [threading.Thread(target=analyst, args=(name,)) for name in keys]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=600)
        assert not thread.is_alive(), "an analyst's loop did not finish"


def _check_books(ledger: str, outcomes: Outcomes, analysts: list[str], table_budget: float) -> None:
    assert not outcomes.other, outcomes.other[:3]
    with LedgerStore(ledger) as books:
        charges = books.history(limit=100_000)
        by_id = {c.id: c for c in charges}
        for release in outcomes.answers.values():
            entry = by_id[release.entry_id]  # every answer received has its entry
            assert entry.answered and entry.charged == Budget(EPSILON)
        assert len(charges) == len({(c.analyst, c.id) for c in charges})
        assert len(charges) == len(outcomes.answers)  # nothing charged twice or lost
        for name in analysts:
            budget, spent, _ = books.standing(name, "people")
            assert spent.epsilon <= budget.epsilon
        assert books.standing(None, "people")[1].epsilon <= table_budget


@pytest.mark.slow
def test_twenty_analysts_fifty_queries_budgets_run_out(live: Callable[..., LiveServer]) -> None:
    analysts = [f"a{i:02d}" for i in range(20)]
    # 4 queries fit in an analyst's 0.25 and 48 in the table's 3.0: 1000 asked, 48 answered.
    server = live(tables={"people": 3.0}, analysts={a: {"people": 0.25} for a in analysts})
    keys = {a: server.key(a) for a in analysts}
    outcomes = Outcomes()
    _run_analysts(server.url, keys, 50, outcomes, lambda: None)
    assert len(outcomes.answers) == 48 and len(outcomes.refused) == 952
    assert all(len([r for r in outcomes.answers if r.startswith(a)]) <= 4 for a in analysts)
    _check_books(server.curator.config.ledger, outcomes, analysts, 3.0)
    assert len(server.store.refusals(limit=10_000)) == 952


def _fault_midway(
    answers_before: int, outcomes: Outcomes, fault: Callable[[], None]
) -> Callable[[], None]:
    fired = threading.Event()

    def on_answer() -> None:
        if len(outcomes.answers) >= answers_before and not fired.is_set():
            fired.set()
            threading.Thread(target=fault).start()

    return on_answer


@pytest.mark.slow
def test_sigkill_the_server_mid_load_and_restart(tmp_path: Path) -> None:
    analysts = [f"k{i}" for i in range(8)]
    path = write_config(
        tmp_path, tables={"people": 2.0}, analysts={a: {"people": 0.375} for a in analysts}
    )
    config = load_config(path)
    with LedgerStore(config.ledger) as store:
        store.add_table("people", Budget(2.0), actor="test")
        for a in analysts:
            store.add_analyst(a, actor="test")
        keys = {a: store.issue_key(a, actor="test").text for a in analysts}
    server = ServerProcess(path).start()
    outcomes = Outcomes()
    killed = threading.Event()

    def kill_and_restart() -> None:
        server.kill()
        killed.set()
        server.start()

    try:
        _run_analysts(server.url, keys, 20, outcomes, _fault_midway(10, outcomes, kill_and_restart))
    finally:
        server.stop()
    assert killed.is_set()
    # 32 queries fit in the table's 2.0 (6 in each analyst's 0.375): 160 asked.
    assert len(outcomes.answers) == 32 and len(outcomes.refused) == 128
    _check_books(config.ledger, outcomes, analysts, 2.0)


@pytest.mark.slow
def test_stop_and_restart_postgres_mid_load(
    live: Callable[..., LiveServer], postgres: Postgres
) -> None:
    analysts = [f"p{i}" for i in range(8)]
    url = postgres.create_database("faults")
    server = live(
        ledger=url, tables={"people": 2.0}, analysts={a: {"people": 0.375} for a in analysts}
    )
    keys = {a: server.key(a) for a in analysts}
    outcomes = Outcomes()
    restarted = threading.Event()

    def restart() -> None:
        postgres.stop("fast")
        time.sleep(1.0)
        postgres.start()
        restarted.set()

    _run_analysts(server.url, keys, 20, outcomes, _fault_midway(10, outcomes, restart))
    assert restarted.is_set()
    assert len(outcomes.answers) == 32 and len(outcomes.refused) == 128
    _check_books(url, outcomes, analysts, 2.0)


def _workers_of(server: ServerProcess) -> int:
    """The number of uvicorn worker processes under the server (spawned by multiprocessing)."""
    assert server.process is not None
    count = 0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            parent = int(stat.read_text().rsplit(")", 1)[1].split()[1])
            command = (stat.parent / "cmdline").read_bytes()
        except (OSError, ValueError, IndexError):
            continue  # a process that ended meanwhile
        count += parent == server.process.pid and b"spawn_main" in command
    return count


@pytest.mark.slow
@pytest.mark.parametrize("store", ["sqlite", "postgresql"])
def test_two_workers_share_the_budgets(
    tmp_path: Path, store: str, request: pytest.FixtureRequest
) -> None:
    analysts = [f"w{i}" for i in range(8)]
    ledger = (
        request.getfixturevalue("postgres").create_database("workers")
        if store == "postgresql"
        else "books.sqlite"
    )
    # 4 queries fit in each analyst's 0.25 and 20 in the table's 1.25: 80 asked, 20 answered,
    # by whichever worker each client's connection reached.
    path = write_config(
        tmp_path,
        ledger=ledger,
        tables={"people": 1.25},
        analysts={a: {"people": 0.25} for a in analysts},
    )
    config = load_config(path)
    with LedgerStore(config.ledger) as books:
        books.add_table("people", Budget(1.25), actor="test")
        for a in analysts:
            books.add_analyst(a, actor="test")
        keys = {a: books.issue_key(a, actor="test").text for a in analysts}
    server = ServerProcess(path, workers=2).start()
    outcomes = Outcomes()
    try:
        _run_analysts(server.url, keys, 10, outcomes, lambda: None)
        assert _workers_of(server) == 2
    finally:
        server.stop()
    assert len(outcomes.answers) == 20 and len(outcomes.refused) == 60
    _check_books(config.ledger, outcomes, analysts, 1.25)
