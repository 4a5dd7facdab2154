"""One DuckDB measurement of ``bench_engines.py`` in its own process (data read from Parquet).

``--kind``:

- ``floor``: the bare per-unit aggregation every bounded plan needs, on the same engine and
  file: ``SELECT unit_id, COUNT(*) AS n FROM t GROUP BY unit_id``, wrapped as
  ``SELECT COUNT(*), SUM(n) FROM (...)`` so that DuckDB computes every group (the hash
  aggregate over all units runs; only two numbers come back, so no time goes into moving
  millions of result rows to Python). Later runs repeat the same query.
- ``raw``: DuckDB's unbounded ``SELECT grp, COUNT(*), SUM(value), AVG(value) FROM t GROUP BY
  grp`` (no privacy), fetched to Python; the later runs add ``WHERE value > i`` like dpcurator's.
- ``dpcurator``: a :class:`~dpcurator.curator.Session` on the Parquet file (its DuckDB engine
  registers a view over ``read_parquet``, so every query reads the file), ``ledger=":memory:"``,
  budget 1e9; the first query is timed once the session is open (``setup``, timed apart), then
  the later queries each with another ``WHERE value > i``.

Run by the driver with the driver's Python; ``t`` is ``read_parquet(<file>)`` throughout.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent.parent / "src"))

import common  # noqa: E402
import duckdb  # noqa: E402

FLOOR_SQL = (
    "SELECT COUNT(*) AS units, SUM(n) AS rows "
    "FROM (SELECT unit_id, COUNT(*) AS n FROM t GROUP BY unit_id)"
)
RAW_SQL = "SELECT grp, COUNT(*) AS n, SUM(value) AS s, AVG(value) AS a FROM t {where}GROUP BY grp"


def _literal(path: Path) -> str:
    return "'" + str(path).replace("'", "''") + "'"


def measure_duckdb(args: Any) -> None:
    conn = duckdb.connect()
    conn.execute(f"CREATE VIEW t AS SELECT * FROM read_parquet({_literal(args.data)})")
    common.emit(
        "info",
        duckdb=duckdb.__version__,
        threads=conn.execute("SELECT current_setting('threads')").fetchone()[0],  # type: ignore[index]
        base_rss_mib=common.rss_mib(),
    )
    if args.kind == "floor":

        def floor() -> dict[str, int]:
            units, rows = conn.execute(FLOOR_SQL).fetchone()  # type: ignore[misc]
            return {"units": int(units), "rows": int(rows)}

        common.run_queries(args, floor, lambda i: floor(), describe=lambda out: out)
    else:

        def raw(where: str) -> dict[str, int]:
            out = conn.execute(RAW_SQL.format(where=where)).fetchall()
            return {"groups": len(out)}

        common.run_queries(
            args, lambda: raw(""), lambda i: raw(f"WHERE value > {i} "), describe=lambda o: o
        )
    conn.close()


def measure_dpcurator(args: Any) -> None:
    from dpcurator.accounting import Budget
    from dpcurator.curator import Column, Session, Table

    common.emit("info", duckdb=duckdb.__version__, base_rss_mib=common.rss_mib())
    table = Table(
        "t",
        str(args.data),
        privacy_unit="unit_id",
        max_rows_per_unit=common.MAX_ROWS_PER_UNIT,
        max_groups_per_unit=1,
        columns=[
            Column("grp", domain=list(range(args.groups))),
            Column("value", lower=common.LOWER, upper=common.UPPER, nullable=False),
        ],
    )
    seconds, session = common.timed(lambda: Session(table, Budget(1e9), ledger=":memory:"))
    common.emit("setup", seconds=seconds, rss_mib=common.rss_mib())

    def describe(release: Any) -> dict[str, Any]:
        return {"groups": len(release.table)}

    common.run_queries(
        args,
        lambda: session.sql(common.DP_SQL, epsilon=common.EPSILON),
        lambda i: session.sql(common.DP_SQL_WHERE.format(i=i), epsilon=common.EPSILON),
        describe=describe,
    )
    session.close()


def main() -> int:
    args = common.parse_args()
    if args.kind == "dpcurator":
        return common.main_guard(lambda: measure_dpcurator(args))
    if args.kind in ("floor", "raw"):
        return common.main_guard(lambda: measure_duckdb(args))
    raise SystemExit(f"unknown --kind {args.kind!r}")


if __name__ == "__main__":
    sys.exit(main())
