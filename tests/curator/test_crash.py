"""A curator process killed mid-query loses no ledger entry of an answer it returned."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pandas as pd

from dpcurator.curator import Ledger

CHILD = textwrap.dedent(
    """
    import sys
    from dpcurator.accounting import Budget
    from dpcurator.curator import Column, Session, Table

    table = Table("people", sys.argv[1], privacy_unit="pid", max_rows_per_unit=3,
                  columns=[Column("state", domain=["CA", "NY"]), Column("x", lower=0, upper=1)])
    with Session(table, Budget(1e6), ledger=sys.argv[2]) as session:
        while True:
            r = session.sql("SELECT state, COUNT(*), AVG(x) FROM people GROUP BY state",
                            epsilon=0.01)
            print(r.entry_id, flush=True)  # the answer leaves only after its entry is durable
    """
)


def test_killed_mid_query_keeps_every_returned_entry(tmp_path: Path) -> None:
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
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    child = subprocess.Popen(
        [sys.executable, str(script), str(data), str(ledger)],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
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
    with Ledger.open(ledger) as reopened:
        ids = [e.id for e in reopened.entries()]
        assert set(returned) <= set(ids)
        assert reopened.spent.epsilon >= 0.01 * len(returned) * (1 - 1e-9)
