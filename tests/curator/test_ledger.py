"""Tests of dpcurator.curator._ledger: durable, budget-enforcing records of releases."""

from __future__ import annotations

import contextlib
import json
import math
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
from datetime import UTC, datetime, timedelta
from fractions import Fraction
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
from dpcurator.curator import Ledger, LedgerEntry, read_declaration
from dpcurator.curator._ledger import _FIELDS
from dpcurator.curator._ledger_key import Chain
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
    # Without a key the chain catches the edit (an accident) ...
    with pytest.raises(InvalidParameterError, match="was altered") as info:
        Ledger(path, budget=Budget(1.0))
    assert info.value.name == "ledger"
    # ... but anyone can recompute an unkeyed chain: then the entry is parsed, and refused.
    header = dict(conn.execute("SELECT key, value FROM metadata").fetchall())["mac"]
    row = conn.execute(f"SELECT {_FIELDS} FROM entries").fetchone()
    conn.execute("UPDATE entries SET mac = ?", (Chain(None).entry(header, row),))
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
key = sys.argv[4] if len(sys.argv) > 4 else None
ledger = Ledger(sys.argv[1], budget=Budget(1.25), key=key)
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


@pytest.mark.parametrize("keyed", [False, True])
def test_two_processes_never_exceed_the_budget_together(tmp_path: Path, keyed: bool) -> None:
    path = tmp_path / "ledger.sqlite"
    go = tmp_path / "go"
    key = [str(tmp_path / "ledger.key")] if keyed else []
    Ledger(path, budget=Budget(1.25), key=key[0] if keyed else None).close()
    workers = [
        subprocess.Popen(
            [sys.executable, "-c", _WORKER_SCRIPT, str(path), str(go), str(k), *key],
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
    with Ledger(path, budget=Budget(1.25), key=key[0] if keyed else None) as ledger:
        entries = ledger.entries()
        assert len(entries) == 10
        assert ledger.spent == Budget(1.25)
    assert [e.spent.epsilon for e in entries] == [0.125 * (i + 1) for i in range(10)]
    if keyed:  # the two writers moved the anchor forward, never back: it is at the end
        anchor = json.loads(Path(key[0]).read_text())["anchor"]
        assert (anchor["last_id"], anchor["entries"]) == (10, 10)


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


# -- budgets an analyst cannot reset: the keyed chain and its anchor ---------------------------


def _keyed(tmp_path: Path, queries: int = 3) -> tuple[Path, Path]:
    """A keyed ledger with ``queries`` entries of epsilon 0.25 each (budget 1)."""
    path, key = tmp_path / "people.ledger.sqlite", tmp_path / "people.ledger.key"
    with Ledger(path, budget=Budget(1.0), key=key) as ledger:
        for i in range(queries):
            ledger.record(f"q{i}", [PureDPEvent(0.25)])
    return path, key


def _sql(path: Path, *statements: str) -> None:
    conn = sqlite3.connect(path)
    for statement in statements:
        conn.execute(statement)
    conn.commit()
    conn.close()


def _refused_as_altered(path: Path, key: Path, needle: str) -> str:
    with pytest.raises(InvalidParameterError) as info:
        Ledger(path, budget=Budget(1.0), key=key)
    message = str(info.value)
    assert info.value.name == "ledger"
    assert "was altered" in message and needle in message, message
    assert "steward can restore the ledger" in message and str(key) in message  # what to do
    return message


def test_key_file_is_created_private_and_anchors_the_ledger(tmp_path: Path) -> None:
    path, key = _keyed(tmp_path)
    assert key.stat().st_mode & 0o777 == 0o600
    data = json.loads(key.read_text())
    assert data["format"] == "dpcurator ledger key" and len(bytes.fromhex(data["secret"])) == 32
    conn = sqlite3.connect(path)
    meta = dict(conn.execute("SELECT key, value FROM metadata").fetchall())
    macs = [m for (m,) in conn.execute("SELECT mac FROM entries ORDER BY id")]
    conn.close()
    assert meta["format_version"] == "2" and meta["chain"] == "hmac-sha256"
    assert data["anchor"] == {
        "ledger_id": meta["ledger_id"],
        "last_id": 3,
        "entries": 3,
        "mac": macs[-1],
    }
    assert len(set(macs)) == 3 and all(len(m) == 64 for m in macs)
    with Ledger(path, budget=Budget(1.0), key=key) as again:  # reopening resumes the budget
        assert again.spent == Budget(0.75) and again.key == str(key)
        again.record("q3", [PureDPEvent(0.25)])
        with pytest.raises(BudgetExceededError):
            again.record("q4", [PureDPEvent(0.25)])
    assert json.loads(key.read_text())["secret"] == data["secret"]  # the secret never changes
    assert json.loads(key.read_text())["anchor"]["last_id"] == 4


@pytest.mark.parametrize(
    ("statements", "needle"),
    [
        (["UPDATE entries SET epsilon_spent = 0.0 WHERE id = 3"], "entry 3 does not match"),
        (["UPDATE entries SET epsilon_charged = 0.0, epsilon_charged_exact = '0/1'"], "entry 1"),
        (["UPDATE entries SET events = replace(events, '0.25', '0.0')"], "entry 1 does not"),
        (["UPDATE entries SET query = 'harmless' WHERE id = 2"], "entry 2 does not match"),
        (["DELETE FROM entries WHERE id = 3"], "removed from its end"),
        (["DELETE FROM entries"], "removed from its end"),
        (["DELETE FROM entries WHERE id = 1"], "entry 2 does not match"),
        (
            [
                "UPDATE entries SET id = 100 WHERE id = 1",
                "UPDATE entries SET id = 1 WHERE id = 2",
                "UPDATE entries SET id = 2 WHERE id = 100",
            ],
            "entry 1 does not match",
        ),
        (["UPDATE metadata SET value = '100.0' WHERE key = 'budget_epsilon'"], "its header"),
        (["DELETE FROM metadata"], "file is empty"),
    ],
    ids=[
        "spent",
        "charged",
        "events",
        "query",
        "last-entry-deleted",
        "all-entries-deleted",
        "first-entry-deleted",
        "reordered",
        "budget",
        "header-deleted",
    ],
)
def test_an_edited_ledger_is_refused_on_open(
    tmp_path: Path, statements: list[str], needle: str
) -> None:
    path, key = _keyed(tmp_path)
    anchor = key.read_bytes()
    _sql(path, *statements)
    _refused_as_altered(path, key, needle)
    assert key.read_bytes() == anchor  # a refused open rewrites nothing


def test_an_edit_after_opening_is_caught_by_the_next_read(tmp_path: Path) -> None:
    path, key = _keyed(tmp_path)
    with Ledger(path, budget=Budget(1.0), key=key) as ledger:
        _sql(path, "UPDATE entries SET epsilon_spent = 0.0 WHERE id = 1")
        with pytest.raises(InvalidParameterError, match="entry 1 does not match"):
            ledger.entries()
        _sql(path, "UPDATE entries SET epsilon_spent = 0.25 WHERE id = 1")  # put back
        ledger.record("q3", [PureDPEvent(0.25)])  # chained to the verified entries
        assert len(ledger.entries()) == 4
        _sql(path, "UPDATE entries SET query = 'other' WHERE id = 4")
        with pytest.raises(InvalidParameterError, match="entry 4 does not match"):
            ledger.entries()


def test_a_deleted_ledger_is_refused_and_not_recreated(tmp_path: Path) -> None:
    path, key = _keyed(tmp_path)
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    message = _refused_as_altered(path, key, "the file is missing")
    assert "3 entries" in message
    assert not path.exists()  # no fresh, empty ledger was put in its place
    with pytest.raises(InvalidParameterError, match="was altered"):
        Ledger.open(path, key=key)
    with pytest.raises(InvalidParameterError, match="was altered"):
        Ledger.open(path)  # the key file named like the ledger says there was one
    path.write_bytes(b"")  # an empty file in its place is no better
    _refused_as_altered(path, key, "the file is empty")


def test_a_replaced_ledger_is_refused(tmp_path: Path) -> None:
    path, key = _keyed(tmp_path)
    other = tmp_path / "other"
    other.mkdir()
    fresh, fresh_key = _keyed(other, queries=0)  # a valid ledger, with its own key
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
        if Path(f"{fresh}{suffix}").exists():
            shutil.copy(f"{fresh}{suffix}", f"{path}{suffix}")
    _refused_as_altered(path, key, "written with another key")
    # Even with the other key (its secret stolen, say), it is not the ledger this key anchors.
    shutil.copy(fresh_key, key)
    with Ledger(path, budget=Budget(1.0), key=key) as ledger:  # (now a consistent pair)
        assert ledger.spent == Budget(0.0)


def test_an_older_copy_put_back_is_refused(tmp_path: Path) -> None:
    path, key = _keyed(tmp_path, queries=1)
    backup = tmp_path / "backup.sqlite"
    with sqlite3.connect(path) as source, sqlite3.connect(backup) as copy:
        source.backup(copy)
    source.close()
    copy.close()
    with Ledger(path, budget=Budget(1.0), key=key) as ledger:
        ledger.record("q1", [PureDPEvent(0.5)])
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    shutil.copy(backup, path)
    _refused_as_altered(path, key, "entries up to entry 2")


def test_an_unkeyed_or_keyless_ledger_in_place_of_a_keyed_one_is_refused(tmp_path: Path) -> None:
    path, key = _keyed(tmp_path)
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    Ledger(path, budget=Budget(1.0)).close()  # a fresh ledger without the key
    with pytest.raises(InvalidParameterError, match="created without a key") as info:
        Ledger(path, budget=Budget(1.0), key=key)
    assert info.value.name == "key"
    with pytest.raises(InvalidParameterError, match="created without a key"):
        Ledger.open(path)  # the key file beside it says this ledger must be keyed
    # The other way round: a keyed ledger cannot be opened without its key ...
    (tmp_path / "other").mkdir()
    other, other_key = _keyed(tmp_path / "other")
    with pytest.raises(InvalidParameterError, match="must name the steward's key file"):
        Ledger(other, budget=Budget(1.0))
    # ... nor once its key file is gone.
    other_key.unlink()
    with pytest.raises(InvalidParameterError, match="does not exist") as info:
        Ledger(other, budget=Budget(1.0), key=other_key)
    assert info.value.name == "key"
    assert not other_key.exists()  # not silently replaced by a new key


def test_a_key_file_deleted_while_open_stops_the_ledger(tmp_path: Path) -> None:
    path, key = _keyed(tmp_path, queries=1)
    with Ledger(path, budget=Budget(1.0), key=key) as ledger:
        key.unlink()
        with pytest.raises(InvalidParameterError, match="deleted while its ledger was open"):
            ledger.record("q1", [PureDPEvent(0.25)])
        assert ledger.spent == Budget(0.5)  # the entry was committed (and charged) first
    assert not key.exists()  # never silently replaced by a new key


def test_one_key_file_serves_one_ledger(tmp_path: Path) -> None:
    _path, key = _keyed(tmp_path)
    with pytest.raises(InvalidParameterError, match="key file records a ledger of 3 entries"):
        Ledger(tmp_path / "second.sqlite", budget=Budget(1.0), key=key)


def test_a_ledger_ahead_of_its_anchor_is_accepted_and_the_anchor_follows(tmp_path: Path) -> None:
    """What a crash between an entry's commit and the key file's rewrite leaves behind."""
    path, key = _keyed(tmp_path, queries=1)
    lagging = key.read_bytes()
    with Ledger(path, budget=Budget(1.0), key=key) as ledger:
        ledger.record("q1", [PureDPEvent(0.25)])
        ledger.record("q2", [PureDPEvent(0.25)])
    key.write_bytes(lagging)  # the anchor still at entry 1
    with Ledger(path, budget=Budget(1.0), key=key) as again:
        assert again.spent == Budget(0.75)
    assert json.loads(key.read_text())["anchor"]["last_id"] == 3
    # Once brought forward, cutting the ledger back to where the old anchor was is caught.
    _sql(path, "DELETE FROM entries WHERE id > 1")
    _refused_as_altered(path, key, "removed from its end")


def test_open_finds_the_key_named_like_the_ledger(tmp_path: Path) -> None:
    path, key = _keyed(tmp_path)
    with Ledger.open(path) as ledger:
        assert ledger.key == str(key) and ledger.spent == Budget(0.75)
    elsewhere = tmp_path / "steward.key"
    key.rename(elsewhere)
    with pytest.raises(InvalidParameterError, match="no key file at the default"):
        Ledger.open(path)
    with Ledger.open(path, key=elsewhere) as ledger:
        assert ledger.spent == Budget(0.75)


def test_a_ledger_enforces_a_finite_budget(tmp_path: Path) -> None:
    path = tmp_path / "ledger.sqlite"
    for budget in (Budget.unlimited(), Budget(math.inf, 1e-6)):
        with pytest.raises(InvalidParameterError, match="a ledger enforces a finite budget"):
            Ledger(path, budget=budget)
    assert not path.exists()
    with Ledger(":memory:", budget=Budget.unlimited(), key=tmp_path / "k") as simulation:
        simulation.record("q", [PureDPEvent(100.0)])  # not kept: a trusted simulation
        assert simulation.key is None  # a ledger that keeps nothing has nothing to protect
    assert not (tmp_path / "k").exists()


def test_exact_rationals_are_stored_beside_the_reals(tmp_path: Path) -> None:
    path = tmp_path / "ledger.sqlite"
    with Ledger(path, budget=Budget(1.0, 1e-6)) as ledger:
        ledger.record("q", [ApproxDPEvent(0.1, 1e-7)])
    conn = sqlite3.connect(path)
    row = conn.execute(
        "SELECT epsilon_charged, epsilon_charged_exact, delta_spent_exact, "
        "epsilon_remaining_exact FROM entries"
    ).fetchone()
    meta = dict(conn.execute("SELECT key, value FROM metadata").fetchall())
    conn.close()
    assert Fraction(row[1]) == Fraction(row[0]) == Fraction(0.1)  # exactly the float 0.1
    assert Fraction(row[2]) == Fraction(1e-7)
    assert Fraction(row[3]) == Fraction(1.0) - Fraction(0.1) or Fraction(row[3]) < Fraction(9, 10)
    assert meta["budget_epsilon_exact"] == "1/1"
    assert Fraction(meta["budget_delta_exact"]) == Fraction(1e-6)


def test_version_1_ledgers_are_refused_with_a_way_forward(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite"
    _sql(
        path,
        "PRAGMA journal_mode=WAL",  # as version 1 wrote them
        "CREATE TABLE metadata (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
        "CREATE TABLE entries (id INTEGER PRIMARY KEY AUTOINCREMENT, time TEXT NOT NULL, "
        "query TEXT NOT NULL, events TEXT NOT NULL, epsilon_charged REAL NOT NULL, "
        "delta_charged REAL NOT NULL, epsilon_spent REAL NOT NULL, delta_spent REAL NOT NULL, "
        "epsilon_remaining REAL NOT NULL, delta_remaining REAL NOT NULL)",
        "INSERT INTO metadata VALUES ('format_version', '1'), ('budget_epsilon', '1.0'), "
        "('budget_delta', '0.0'), ('accountant', 'basic'), ('adaptive_parameters', 'True')",
    )
    before = path.read_bytes()
    with pytest.raises(InvalidParameterError, match="layout version 2") as info:
        Ledger.open(path)
    assert "Version 1 ledgers carry no tamper-evident chain" in str(info.value)
    assert "start a new ledger" in str(info.value)
    assert path.read_bytes() == before


def test_a_declaration_names_its_ledger_and_key(tmp_path: Path) -> None:
    toml = tmp_path / "people.toml"
    toml.write_text('[table]\nname = "people"\nsource = "p.csv"\n[budget]\nepsilon = 1\n')
    declaration = read_declaration(toml)
    assert declaration.ledger_path == str(tmp_path / "people.ledger.sqlite")
    assert declaration.ledger_key == str(tmp_path / "people.ledger.key")
    toml.write_text(
        '[table]\nname = "people"\nsource = "p.csv"\n'
        '[ledger]\npath = "books/people.sqlite"\nkey = "/srv/steward/people.key"\n'
    )
    declaration = read_declaration(toml)
    assert declaration.ledger_path == str(tmp_path / "books" / "people.sqlite")
    assert declaration.ledger_key == "/srv/steward/people.key"


@pytest.mark.parametrize(
    ("section", "needle"),
    [
        ("[budget]\nepsilon = inf\n", "give a finite budget"),
        ("[budget]\nepsilon = nan\n", "give a finite budget"),
        ("[budget]\nepsilon = -1.0\n", "give a finite budget"),
        ("[budget]\nepsilon = 1.0\ndelta = inf\n", "budget.delta"),
        ("[budget]\nepsilon = true\n", "must be a number"),
        ("[budget]\ndelta = 0.1\n", "budget.epsilon"),
        ('[ledger]\npath = ":memory:"\n', "ledger.path must be a file path"),
        ('[ledger]\nkey = ""\n', "ledger.key must be a file path"),
        ('[ledger]\npath = "a.sqlite"\nkey = "a.sqlite"\n', "must differ"),
        ('[ledger]\nfile = "a.sqlite"\n', "unknown keys"),
    ],
)
def test_a_declaration_refuses_an_infinite_budget_or_a_bad_ledger(
    tmp_path: Path, section: str, needle: str
) -> None:
    toml = tmp_path / "people.toml"
    toml.write_text(f'[table]\nname = "people"\nsource = "p.csv"\n{section}')
    with pytest.raises(InvalidParameterError, match=needle):
        read_declaration(toml)
