"""One curator query, timed in process: for comparing two versions of dpcurator side by side.

``SELECT grp, COUNT(*), SUM(value), AVG(value) FROM t WHERE value > 1 GROUP BY grp`` at epsilon
1 over ``ROWS`` rows in a DuckDB table (units of 1 to 5 rows, 1,000 public groups, values in
[0, 100]); prints the median of 7 timed queries after one warm-up, in seconds. Run it with
``PYTHONPATH`` pointing at each version's ``src`` in turn, e.g.::

    git worktree add /tmp/base 17f5586
    for i in 1 2 3 4 5; do
      PYTHONPATH=/tmp/base/src .venv/bin/python benchmarks/bench_curator_query.py 1000000
      PYTHONPATH=src .venv/bin/python benchmarks/bench_curator_query.py 1000000
    done
"""

from __future__ import annotations

import statistics
import sys
import time

import duckdb
import numpy as np
import pandas as pd

from dpcurator.accounting import Budget
from dpcurator.curator import Column, Session, Table


def main(rows: int) -> float:
    rng = np.random.default_rng(0)
    sizes = rng.integers(1, 6, size=rows // 3)
    unit = np.repeat(np.arange(sizes.size), sizes)[:rows]
    frame = pd.DataFrame(
        {
            "unit_id": unit,
            "grp": rng.integers(0, 1000, size=sizes.size)[unit],
            "value": rng.uniform(0, 100, unit.size),
        }
    )
    connection = duckdb.connect()
    connection.register("rows_in", frame)
    connection.execute("CREATE TABLE t AS SELECT * FROM rows_in")
    table = Table(
        "t",
        connection,
        source_table="t",
        privacy_unit="unit_id",
        max_rows_per_unit=5,
        max_groups_per_unit=1,
        columns=[
            Column("grp", domain=list(range(1000))),
            Column("value", lower=0, upper=100, nullable=False),
        ],
    )
    query = "SELECT grp, COUNT(*), SUM(value), AVG(value) FROM t WHERE value > 1 GROUP BY grp"
    with Session(table, Budget(1e6), ledger=":memory:") as session:
        session.sql(query, epsilon=1.0)
        times = []
        for _ in range(7):
            start = time.perf_counter()
            session.sql(query, epsilon=1.0)
            times.append(time.perf_counter() - start)
    return statistics.median(times)


if __name__ == "__main__":
    print(f"{main(int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000):.4f}")
