"""A curator process killed mid-query loses no ledger entry of an answer it returned, and leaves
a ledger that still opens (a keyed one included: the kill may fall between an entry's commit and
the key file's rewrite)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dpcurator.accounting import Budget
from dpcurator.curator import Ledger, read_declaration

CHILD = textwrap.dedent(
    """
    import sys
    from dpcurator.accounting import Budget
    from dpcurator.curator import Column, Session, Table

    if sys.argv[2].endswith(".toml"):  # the declaration's ledger, chained with its key
        session = Session.from_toml(sys.argv[2])
    else:
        table = Table("people", sys.argv[1], privacy_unit="pid", max_rows_per_unit=3,
                      columns=[Column("state", domain=["CA", "NY"]), Column("x", lower=0, upper=1)])
        session = Session(table, Budget(1e6), ledger=sys.argv[2])
    with session:
        while True:
            r = session.sql("SELECT state, COUNT(*), AVG(x) FROM people GROUP BY state",
                            epsilon=0.01)
            print(r.entry_id, flush=True)  # the answer leaves only after its entry is durable
    """
)

TOML = """\
[table]
name = "people"
source = "people.parquet"
privacy_unit = "pid"
max_rows_per_unit = 3

[budget]
epsilon = 1e6

[columns.state]
domain = ["CA", "NY"]

[columns.x]
lower = 0
upper = 1
"""


def _child_env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}


@pytest.mark.parametrize("keyed", [False, True], ids=["unkeyed", "declaration-keyed"])
def test_killed_mid_query_keeps_every_returned_entry(tmp_path: Path, keyed: bool) -> None:
    n = 200_000
    frame = pd.DataFrame(
        {
            "pid": np.arange(n) // 2,
            "state": np.where(np.arange(n) % 4 < 2, "CA", "NY"),
            "x": np.linspace(0, 1, n),
        }
    )
    data = tmp_path / "people.parquet"
    frame.to_parquet(data)
    ledger = tmp_path / "ledger.sqlite"
    key = None
    target = ledger
    if keyed:
        target = tmp_path / "people.toml"
        target.write_text(TOML)
        declaration = read_declaration(target)
        ledger, key = Path(declaration.ledger_path), Path(declaration.ledger_key)
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    child = subprocess.Popen(
        [sys.executable, str(script), str(data), str(target)],
        stdout=subprocess.PIPE,
        text=True,
        env=_child_env(),
    )
    assert child.stdout is not None
    returned = []
    for line in child.stdout:
        returned.append(int(line))
        if len(returned) >= 8:
            break
    time.sleep(0.013)  # somewhere inside the next query
    os.kill(child.pid, signal.SIGKILL)
    child.wait()
    child.stdout.close()
    with Ledger.open(ledger, key=key) as reopened:
        ids = [e.id for e in reopened.entries()]
        assert set(returned) <= set(ids)
        assert reopened.spent.epsilon >= 0.01 * len(returned) * (1 - 1e-9)
        assert reopened.key == (None if key is None else str(key))


RECORDER = textwrap.dedent(
    """
    import sys
    from dpcurator.accounting import Budget, PureDPEvent
    from dpcurator.curator import Ledger

    with Ledger(sys.argv[1], budget=Budget(1e6), key=sys.argv[2]) as ledger:
        while True:
            print(ledger.record("q", [PureDPEvent(0.001)]).id, flush=True)
    """
)


def test_killed_while_recording_leaves_a_keyed_ledger_that_opens(tmp_path: Path) -> None:
    """Kills land anywhere in ``record``: before, during or after the commit and the rewrite of
    the key file. Every reopening must succeed, with every returned entry (a ledger ahead of its
    anchor is accepted; a torn key file must never happen)."""
    ledger, key = tmp_path / "ledger.sqlite", tmp_path / "ledger.key"
    returned: list[int] = []
    for attempt in range(6):
        child = subprocess.Popen(
            [sys.executable, "-c", RECORDER, str(ledger), str(key)],
            stdout=subprocess.PIPE,
            text=True,
            env=_child_env(),
        )
        assert child.stdout is not None
        for count, line in enumerate(child.stdout):
            returned.append(int(line))
            if count >= 3 + attempt:
                break
        time.sleep(0.0007 * attempt)
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
        child.stdout.close()
        with Ledger(ledger, budget=Budget(1e6), key=key) as reopened:
            ids = [e.id for e in reopened.entries()]
            assert set(returned) <= set(ids)
            assert ids == list(range(1, len(ids) + 1))
        anchor = json.loads(key.read_text())["anchor"]
        assert anchor["last_id"] == ids[-1]  # reopening brought a lagging anchor forward
