"""Tests of dpcurator.curator._ledger: durable, budget-enforcing records of releases."""

from __future__ import annotations

import contextlib
import math
import os
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dpcurator.accounting import (
    ApproxDPEvent,
    Budget,
    ComposedEvent,
    GaussianEvent,
    LaplaceEvent,
    PoissonSampledEvent,
    PureDPEvent,
)
from dpcurator.curator import Ledger, LedgerEntry
from dpcurator.errors import BudgetExceededError, InvalidParameterError, UnsupportedEventError

SRC = str(Path(__file__).resolve().parents[2] / "src")


def _files(path: Path) -> dict[str, bytes]:
    """The bytes of the database and its write-ahead log (what a crash would leave)."""
    out = {}
    for suffix in ("", "-wal"):
        f = Path(str(path) + suffix)
        out[suffix] = f.read_bytes() if f.exists() else b""
    return out


def _child_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = SRC + os.pathsep + env.get("PYTHONPATH", "")
    return env


def test_records_and_reads_back(tmp_path: Path) -> None:
    path = tmp_path / "ledger.sqlite"
    before = datetime.now(UTC)
    with Ledger(path, budget=Budget(1.0, 1e-6)) as ledger:
        first = ledger.record("SELECT COUNT(*) FROM t", [LaplaceEvent(scale=4.0)])
        second = ledger.record(
            "SELECT SUM(x) FROM t", [PureDPEvent(0.125), ApproxDPEvent(0.125, 1e-7)]
        )
        entries = ledger.entries()
        assert ledger.spent == Budget(0.5, 1e-7)
        assert ledger.remaining == Budget(0.5, 1e-6 - 1e-7)
    assert entries == [first, second]
    assert [e.id for e in entries] == [1, 2]
    assert first.query == "SELECT COUNT(*) FROM t"
    assert first.events == (LaplaceEvent(scale=4.0),)
    assert second.events == (PureDPEvent(0.125), ApproxDPEvent(0.125, 1e-7))
    assert first.charged == Budget(0.25) and first.spent == Budget(0.25)
    assert first.remaining == Budget(0.75, 1e-6)
    assert second.charged == Budget(0.25, 1e-7) and second.spent == Budget(0.5, 1e-7)
    for entry in entries:
        assert entry.time.tzinfo is not None and entry.time.utcoffset() == timedelta(0)
        assert before <= entry.time <= datetime.now(UTC)
    assert first.time <= second.time
    with pytest.raises(AttributeError):
        first.query = "x"  # type: ignore[misc]
    # The raw table is readable by any SQLite client, with the documented columns.
    conn = sqlite3.connect(path)
    row = conn.execute(
        "SELECT query, events, epsilon_charged, epsilon_spent, epsilon_remaining FROM entries "
        "WHERE id = 1"
    ).fetchone()
    meta = dict(conn.execute("SELECT key, value FROM metadata").fetchall())
    conn.close()
    assert row[0] == "SELECT COUNT(*) FROM t"
    assert '"type":"LaplaceEvent"' in row[1]
    assert row[2:] == (0.25, 0.25, 0.75)
    assert meta["accountant"] == "basic" and float(meta["budget_epsilon"]) == 1.0


def test_reopen_resumes_spent_budget(tmp_path: Path) -> None:
    path = tmp_path / "ledger.sqlite"
    with Ledger(path, budget=Budget(1.0)) as ledger:
        ledger.record("q1", [PureDPEvent(0.5)])
        ledger.record("q2", [PureDPEvent(0.25)])
    with Ledger(str(path), budget=Budget(1.0)) as again:
        assert again.spent == Budget(0.75)
        assert again.remaining == Budget(0.25)
        assert [e.query for e in again.entries()] == ["q1", "q2"]
        with pytest.raises(BudgetExceededError):
            again.record("q3", [PureDPEvent(0.5)])
        third = again.record("q3", [PureDPEvent(0.25)])
        assert third.id == 3 and third.remaining == Budget(0.0)


def test_reopen_resumes_a_tight_accountant(tmp_path: Path) -> None:
    path = tmp_path / "ledger.sqlite"
    step = PoissonSampledEvent(0.01, GaussianEvent(sigma=1.0))
    budget = Budget(2.0, 1e-5)
    kwargs = {"budget": budget, "accountant": "rdp", "adaptive_parameters": False}
    with Ledger(path, **kwargs) as ledger:  # type: ignore[arg-type]
        for i in range(3):
            ledger.record(f"step {i}", [step])
        spent = ledger.spent
    assert 0.0 < spent.epsilon < budget.epsilon
    with Ledger(path, **kwargs) as again:  # type: ignore[arg-type]
        assert again.spent == spent
        assert again.entries()[-1].spent == spent
        assert again.entries()[-1].charged.epsilon > 0.0


def test_over_budget_refusal_writes_and_spends_nothing(tmp_path: Path) -> None:
    path = tmp_path / "ledger.sqlite"
    with Ledger(path, budget=Budget(1.0)) as ledger:
        ledger.record("q1", [PureDPEvent(0.75)])
        files = _files(path)
        entries = ledger.entries()
        with pytest.raises(BudgetExceededError) as info:
            ledger.record("q2", [PureDPEvent(0.125), PureDPEvent(0.25)])
        assert info.value.remaining == Budget(0.25)
        with pytest.raises(UnsupportedEventError):  # basic cannot account for a bare Gaussian
            ledger.record("q3", [GaussianEvent(sigma=1.0)])
        assert _files(path) == files
        assert ledger.entries() == entries
        assert ledger.spent == Budget(0.75)
        ok = ledger.record("q4", [PureDPEvent(0.25)])  # what remains can still be spent
        assert ok.id == 2 and ok.remaining == Budget(0.0)
    with Ledger(path, budget=Budget(1.0)) as again:
        assert [e.query for e in again.entries()] == ["q1", "q4"]


@pytest.mark.parametrize(
    ("kwargs", "name", "recorded"),
    [
        ({"budget": Budget(2.0)}, "budget", "Budget(epsilon=1.0, delta=1e-06)"),
        ({"budget": Budget(1.0)}, "budget", "Budget(epsilon=1.0, delta=1e-06)"),
        ({"budget": Budget(1.0, 1e-6), "accountant": "zcdp"}, "accountant", "'basic'"),
    ],
)
def test_mismatched_reopen_raises(
    tmp_path: Path, kwargs: dict[str, object], name: str, recorded: str
) -> None:
    path = tmp_path / "ledger.sqlite"
    with Ledger(path, budget=Budget(1.0, 1e-6)) as ledger:
        ledger.record("q", [PureDPEvent(0.5)])
    files = _files(path)
    with pytest.raises(InvalidParameterError) as info:
        Ledger(path, **kwargs)  # type: ignore[arg-type]
    assert info.value.name == name
    assert "recorded" in str(info.value) and recorded in str(info.value)
    assert _files(path)[""] == files[""]
    with Ledger(path, budget=Budget(1.0, 1e-6)) as ledger:  # the right one still opens
        assert ledger.spent == Budget(0.5)


def test_bad_arguments(tmp_path: Path) -> None:
    path = tmp_path / "ledger.sqlite"
    with pytest.raises(InvalidParameterError, match="accountant"):
        Ledger(path, budget=Budget(1.0), accountant="nope")
    with pytest.raises(InvalidParameterError, match="budget"):
        Ledger(path, budget=1.0)  # type: ignore[arg-type]
    with pytest.raises(InvalidParameterError, match="adaptive_parameters"):
        Ledger(path, budget=Budget(1.0), accountant="rdp")  # not fully adaptive
    with pytest.raises(InvalidParameterError, match="path"):
        Ledger(3, budget=Budget(1.0))  # type: ignore[arg-type]
    assert not path.exists()  # nothing was created by a refused constructor
    with Ledger(path, budget=Budget(1.0, 1e-6), accountant="rdp", adaptive_parameters=False) as led:
        with pytest.raises(InvalidParameterError, match=r"^query"):
            led.record(3, [PureDPEvent(0.1)])  # type: ignore[arg-type]
        with pytest.raises(InvalidParameterError, match=r"^events must be a sequence"):
            led.record("q", PureDPEvent(0.1))  # type: ignore[arg-type]
        with pytest.raises(InvalidParameterError, match=r"^events\[1\]"):
            led.record("q", [PureDPEvent(0.1), 0.1])  # type: ignore[list-item]
        assert led.entries() == []
        free = led.record("SELECT 'public'", [])
        assert free.charged == Budget(0.0) and free.events == ()
    other = tmp_path / "other.sqlite"
    Ledger(other, budget=Budget(1.0), adaptive_parameters=False).close()
    with pytest.raises(InvalidParameterError, match="adaptive_parameters must match"):
        Ledger(other, budget=Budget(1.0))
    led.close()  # idempotent
    with pytest.raises(InvalidParameterError, match="closed"):
        led.record("q", [PureDPEvent(0.1)])


def test_malformed_entries_are_reported(tmp_path: Path) -> None:
    path = tmp_path / "ledger.sqlite"
    with Ledger(path, budget=Budget(1.0)) as ledger:
        ledger.record("q", [PureDPEvent(0.5)])
    conn = sqlite3.connect(path)
    conn.execute("""UPDATE entries SET events = '[{"type": "Bogus"}]'""")
    conn.commit()
    conn.close()
    with pytest.raises(InvalidParameterError, match="well-formed ledger entries") as info:
        Ledger(path, budget=Budget(1.0))
    assert info.value.name == "path"


def test_two_ledgers_on_one_file_see_each_other(tmp_path: Path) -> None:
    path = tmp_path / "ledger.sqlite"
    a = Ledger(path, budget=Budget(1.0))
    b = Ledger(path, budget=Budget(1.0))
    a.record("from a", [PureDPEvent(0.75)])
    assert b.spent == Budget(0.75)
    with pytest.raises(BudgetExceededError):
        b.record("from b", [PureDPEvent(0.5)])
    b.record("from b", [PureDPEvent(0.25)])
    with pytest.raises(BudgetExceededError):
        a.record("from a", [PureDPEvent(0.125)])
    assert [e.query for e in a.entries()] == ["from a", "from b"]
    a.close()
    b.close()


def test_threads_never_exceed_the_budget(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path / "ledger.sqlite", budget=Budget(1.25))
    accepted: list[LedgerEntry] = []

    def worker() -> None:
        for i in range(10):
            with contextlib.suppress(BudgetExceededError):
                accepted.append(ledger.record(f"q{i}", [PureDPEvent(0.125)]))

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(accepted) == 10
    assert len(ledger.entries()) == 10
    assert ledger.spent == Budget(1.25)
    ledger.close()


_CRASH_SCRIPT = """
import sys, time
from dpcurator.accounting import Budget, PureDPEvent
from dpcurator.curator import Ledger
ledger = Ledger(sys.argv[1], budget=Budget(1.0))
ledger.record("released before the crash", [PureDPEvent(0.25)])
print("recorded", flush=True)
time.sleep(60)
"""


def test_entry_survives_sigkill_right_after_record(tmp_path: Path) -> None:
    path = tmp_path / "ledger.sqlite"
    child = subprocess.Popen(
        [sys.executable, "-c", _CRASH_SCRIPT, str(path)],
        stdout=subprocess.PIPE,
        text=True,
        env=_child_env(),
    )
    try:
        assert child.stdout is not None
        line = child.stdout.readline()
        os.kill(child.pid, signal.SIGKILL)
    finally:
        child.kill()
        child.wait(timeout=30)
        if child.stdout is not None:
            child.stdout.close()
    assert line == "recorded\n"
    assert child.returncode == -signal.SIGKILL
    with Ledger(path, budget=Budget(1.0)) as ledger:
        assert [e.query for e in ledger.entries()] == ["released before the crash"]
        assert ledger.spent == Budget(0.25)


_WORKER_SCRIPT = """
import sys, time
from pathlib import Path
from dpcurator.accounting import Budget, PureDPEvent
from dpcurator.curator import Ledger
from dpcurator.errors import BudgetExceededError
ledger = Ledger(sys.argv[1], budget=Budget(1.25))
print("ready", flush=True)
go = Path(sys.argv[2])
while not go.exists():
    time.sleep(0.01)
done = 0
for i in range(10):
    try:
        ledger.record(f"worker {sys.argv[3]} query {i}", [PureDPEvent(0.125)])
        done += 1
    except BudgetExceededError:
        pass
print(done, flush=True)
"""


def test_two_processes_never_exceed_the_budget_together(tmp_path: Path) -> None:
    path = tmp_path / "ledger.sqlite"
    go = tmp_path / "go"
    Ledger(path, budget=Budget(1.25)).close()
    workers = [
        subprocess.Popen(
            [sys.executable, "-c", _WORKER_SCRIPT, str(path), str(go), str(k)],
            stdout=subprocess.PIPE,
            text=True,
            env=_child_env(),
        )
        for k in range(2)
    ]
    for w in workers:  # both have opened the ledger (and read it, empty) before either records
        assert w.stdout is not None
        assert w.stdout.readline() == "ready\n"
    go.touch()
    counts = []
    for w in workers:
        out, _ = w.communicate(timeout=60)
        assert w.returncode == 0
        counts.append(int(out))
    assert sum(counts) == 10
    with Ledger(path, budget=Budget(1.25)) as ledger:
        entries = ledger.entries()
        assert len(entries) == 10
        assert ledger.spent == Budget(1.25)
    assert [e.spent.epsilon for e in entries] == [0.125 * (i + 1) for i in range(10)]


releases = st.lists(
    st.tuples(
        st.floats(min_value=0.01, max_value=0.6),
        st.sampled_from([0.0, 1e-8, 2e-7]),
    ),
    min_size=1,
    max_size=12,
)


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(releases)
def test_spent_never_exceeds_the_budget(sequence: list[tuple[float, float]]) -> None:
    budget = Budget(1.0, 5e-7)
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "ledger.sqlite"
        accepted: list[tuple[float, float]] = []
        with Ledger(path, budget=budget) as ledger:
            for i, (eps, delta) in enumerate(sequence):
                event = ApproxDPEvent(eps, delta) if delta else PureDPEvent(eps)
                before = ledger.spent
                try:
                    entry = ledger.record(f"q{i}", [event])
                except BudgetExceededError:
                    assert ledger.spent == before
                    # refused only when it truly would not fit
                    assert before.epsilon + eps > 1.0 - 1e-12 or before.delta + delta > 5e-7
                    continue
                accepted.append((eps, delta))
                assert budget.covers(entry.spent)
                assert entry.spent == ledger.spent
            spent = ledger.spent
        assert budget.covers(spent)
        assert math.isclose(spent.epsilon, math.fsum(e for e, _ in accepted), abs_tol=1e-12)
        with Ledger(path, budget=budget) as again:
            assert again.spent == spent
            assert len(again.entries()) == len(accepted)


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.floats(min_value=0.5, max_value=20.0), min_size=1, max_size=8))
def test_spent_never_exceeds_the_budget_zcdp(sigmas: list[float]) -> None:
    budget = Budget(1.0, 1e-6)
    with (
        tempfile.TemporaryDirectory() as folder,
        Ledger(Path(folder) / "l.sqlite", budget=budget, accountant="zcdp") as ledger,
    ):
        for sigma in sigmas:
            try:
                entry = ledger.record("q", [ComposedEvent((GaussianEvent(sigma=sigma),))])
            except BudgetExceededError:
                continue
            assert entry.spent.epsilon <= budget.epsilon
        assert ledger.spent.epsilon <= budget.epsilon
