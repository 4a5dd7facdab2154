"""One curator query, timed in process: for comparing two versions of dpcurator side by side.

``SELECT grp, COUNT(*), SUM(value), AVG(value) FROM t WHERE value > 1 GROUP BY grp`` at epsilon
1 over ``ROWS`` rows in a DuckDB table (units of 1 to 5 rows, ``--groups`` public groups,
default 1,000, values in [0, 100]); prints the median of 7 timed queries after one warm-up, in
seconds. The same query text each time by default (the session reuses its plan and its exact
aggregates: what is timed is noise and the release); with ``--new-plans`` each query has a
filter of its own (``value > 1.001``, ``1.002``, ...), so each is planned, bound and read anew.
Run it with ``PYTHONPATH`` pointing at each version's ``src`` in turn, e.g.::

    git worktree add /tmp/base 17f5586
    for i in 1 2 3 4 5; do
      PYTHONPATH=/tmp/base/src .venv/bin/python benchmarks/bench_curator_query.py 1000000
      PYTHONPATH=src .venv/bin/python benchmarks/bench_curator_query.py 1000000
    done
"""

from __future__ import annotations

import argparse
import statistics
import time

import duckdb
import numpy as np
import pandas as pd

from dpcurator.accounting import Budget
from dpcurator.curator import Column, Session, Table


def main(rows: int, groups: int = 1000, new_plans: bool = False) -> float:
    rng = np.random.default_rng(0)
    sizes = rng.integers(1, 6, size=rows // 3)
    unit = np.repeat(np.arange(sizes.size), sizes)[:rows]
    frame = pd.DataFrame(
        {
            "unit_id": unit,
            "grp": rng.integers(0, groups, size=sizes.size)[unit],
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
            Column("grp", domain=list(range(groups))),
            Column("value", lower=0, upper=100, nullable=False),
        ],
    )
    query = "SELECT grp, COUNT(*), SUM(value), AVG(value) FROM t WHERE value > {} GROUP BY grp"
    with Session(table, Budget(1e6), ledger=":memory:") as session:
        session.sql(query.format(1), epsilon=1.0)
        times = []
        for i in range(1, 8):
            text = query.format(f"{1 + i / 1000:.3f}" if new_plans else 1)
            start = time.perf_counter()
            session.sql(text, epsilon=1.0)
            times.append(time.perf_counter() - start)
    return statistics.median(times)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("rows", type=int, nargs="?", default=1_000_000)
    parser.add_argument("--groups", type=int, default=1000)
    parser.add_argument("--new-plans", action="store_true")
    args = parser.parse_args()
    print(f"{main(args.rows, args.groups, args.new_plans):.4f}")
