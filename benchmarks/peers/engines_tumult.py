"""Tumult Analytics for ``bench_engines.py``: one measurement in its own process.

Run in the Tumult venv (``.venv-peers/tumult``, made by ``benchmarks/peers/setup_peers.sh
tumult``): ``.venv-peers/tumult/bin/python benchmarks/peers/engines_tumult.py --data <file>
--later 1``. The query is ``sql_tumult.py``'s (the DP GROUP BY of ``bench_curator.py``): a
session ``Session.from_dataframe(..., protected_change=AddRowsWithID("unit_id"))``, and per
query three evaluations (count, sum, average at ``PureDPBudget(1/3)`` each) with
``MaxGroupsPerID("grp", 1)``, ``MaxRowsPerGroupPerID("grp", 5)`` and the 1,000 public keys.
Two differences from ``bench_curator.py``'s run, so that Tumult is measured like dpcurator on
Spark and the hand-written query: Spark is ``local[2]`` (``--spark-cores``) and the DataFrame
is ``spark.read.parquet(<file>)`` not cached (data on disk). ``setup`` times the Spark start
and the Tumult session; the first query is ``sql_tumult.query``; the later ones add
``.filter("value > i")`` before the constraints, like dpcurator's ``WHERE value > i``.
"""

from __future__ import annotations

import importlib.metadata
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "engines"))

import common  # noqa: E402


def measure(args: Any) -> None:
    import _sqlbench_common as sqlbench
    import sql_tumult
    from tmlt.analytics import MaxGroupsPerID, MaxRowsPerGroupPerID, PureDPBudget, QueryBuilder

    if args.groups != sqlbench.GROUPS:
        raise RuntimeError(f"sql_tumult.py's query has {sqlbench.GROUPS} public groups")
    common.emit(
        "info",
        pyspark=common.spark_version(),
        tumult=importlib.metadata.version("tmlt.analytics"),
        base_rss_mib=common.rss_mib(),
    )

    def open_session() -> tuple[Any, dict[str, Any]]:
        spark = common.spark_session("tumult-bench-engines", args.spark_memory, args.spark_cores)
        frame = common.read_parquet(spark, args)
        return spark, sql_tumult.setup(frame, args.later + 2)

    seconds, (spark, state) = common.timed(open_session)
    common.emit("setup", seconds=seconds, rss_mib=common.rss_mib())

    def query_where(i: int) -> int:
        session, keys = state["session"], state["keys"]
        part = PureDPBudget(common.EPSILON / 3)

        def grouped() -> Any:
            return (
                QueryBuilder(sql_tumult.SOURCE)
                .filter(f"value > {i}")
                .enforce(MaxGroupsPerID("grp", 1))
                .enforce(MaxRowsPerGroupPerID("grp", common.MAX_ROWS_PER_UNIT))
                .groupby(keys)
            )

        n = session.evaluate(grouped().count(name="n"), part).toPandas()
        session.evaluate(
            grouped().sum("value", common.LOWER, common.UPPER, name="total"), part
        ).toPandas()
        session.evaluate(
            grouped().average("value", common.LOWER, common.UPPER, name="mean"), part
        ).toPandas()
        return len(n)

    try:
        common.run_queries(
            args,
            lambda: sql_tumult.query(state),
            query_where,
            describe=lambda out: {"groups": out if isinstance(out, int) else len(out["count"])},
        )
    finally:
        common.stop_spark(spark)


if __name__ == "__main__":
    sys.exit(common.main_guard(lambda: measure(common.parse_args())))
