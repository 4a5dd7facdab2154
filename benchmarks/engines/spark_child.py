"""dpcurator on Spark, one measurement of ``bench_engines.py`` in its own process.

``Session(Table("t", <Spark DataFrame>, ...same declaration as on DuckDB...), Budget(1e9),
ledger=":memory:", engine=SparkEngine(spark=spark))``; the DataFrame is
``spark.read.parquet(<file>)``, not cached (the data stays on disk, as for DuckDB and for the
hand-written query and Tumult). ``setup`` times the Spark session's start (the JVM) and the
dpcurator session's opening; then the first query and the later ones (``WHERE value > i``).

Needs a Python with PySpark and dpcurator's dependencies (``bench_engines.py --setup-spark``
makes ``.venv-peers/spark``); dpcurator itself is imported from this checkout's ``src``. If the
installed dpcurator has no Spark engine yet (no ``SparkEngine``, or ``Session`` without an
``engine=`` keyword), the child reports why and measures nothing.
"""

from __future__ import annotations

import inspect
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent.parent / "src"))

import common  # noqa: E402


def spark_engine_class() -> Any:
    """``SparkEngine`` from the public API, else from its module; None when absent."""
    try:
        from dpcurator.curator import SparkEngine

        return SparkEngine
    except ImportError:
        pass
    try:
        from dpcurator.curator._spark import SparkEngine as Engine

        return Engine
    except ImportError:
        return None


def measure(args: Any) -> None:
    from dpcurator.accounting import Budget
    from dpcurator.curator import Column, Session, Table

    engine_class = spark_engine_class()
    if engine_class is None:
        raise RuntimeError("dpcurator API: no SparkEngine (dpcurator.curator.SparkEngine)")
    if "engine" not in inspect.signature(Session).parameters:
        raise RuntimeError("dpcurator API: Session(...) has no engine= keyword yet")
    common.emit("info", pyspark=common.spark_version(), base_rss_mib=common.rss_mib())

    def open_session() -> tuple[Any, Any]:
        spark = common.spark_session("dpcurator-bench-engines", args.spark_memory, args.spark_cores)
        frame = common.read_parquet(spark, args)
        table = Table(
            "t",
            frame,
            privacy_unit="unit_id",
            max_rows_per_unit=common.MAX_ROWS_PER_UNIT,
            max_groups_per_unit=1,
            columns=[
                Column("grp", domain=list(range(args.groups))),
                Column("value", lower=common.LOWER, upper=common.UPPER, nullable=False),
            ],
        )
        session = Session(table, Budget(1e9), ledger=":memory:", engine=engine_class(spark=spark))
        return spark, session

    seconds, (spark, session) = common.timed(open_session)
    common.emit("setup", seconds=seconds, rss_mib=common.rss_mib())
    try:
        common.run_queries(
            args,
            lambda: session.sql(common.DP_SQL, epsilon=common.EPSILON),
            lambda i: session.sql(common.DP_SQL_WHERE.format(i=i), epsilon=common.EPSILON),
            describe=lambda release: {"groups": len(release.table)},
        )
    finally:
        session.close()
        common.stop_spark(spark)


if __name__ == "__main__":
    sys.exit(common.main_guard(lambda: measure(common.parse_args())))
