"""Shared by the child processes of ``benchmarks/bench_engines.py`` (standard library only).

Every measurement of the engines benchmark runs in a fresh child process, so that its peak
memory is its own. A child prints one JSON object per line on stdout as it goes (``event``:
``info``, ``setup``, ``first``, ``later``, ``error``, ``done``), flushed at once, so that the
driver keeps every figure finished before a timeout and never invents one. The children run in
different environments (the driver's Python for DuckDB, a Python with PySpark for Spark, the
Tumult venv for Tumult), hence nothing here but the standard library; PySpark is imported only
inside the Spark helpers.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

EPSILON = 1.0
MAX_ROWS_PER_UNIT = 5
LOWER, UPPER = 0.0, 100.0
DP_SQL = "SELECT grp, COUNT(*), SUM(value), AVG(value) FROM t GROUP BY grp"
DP_SQL_WHERE = "SELECT grp, COUNT(*), SUM(value), AVG(value) FROM t WHERE value > {i} GROUP BY grp"
"""The later queries of a session: ``i`` = 1, 2, ... so that no two are the same."""


def emit(event: str, **fields: Any) -> None:
    """Print one event as a JSON line on stdout, flushed (the driver reads them)."""
    print(json.dumps({"event": event, **fields}, default=str), flush=True)


def rss_mib() -> float:
    """This process's peak resident memory so far, MiB (VmHWM, else ``ru_maxrss`` in KiB)."""
    hwm = hwm_mib()
    return hwm if hwm is not None else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def hwm_mib(pid: int | str = "self") -> float | None:
    """Peak resident memory (VmHWM) of a live process, MiB; None if unreadable."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return None


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description="one measurement of bench_engines.py")
    p.add_argument("--data", type=Path, required=True, help="the Parquet file")
    p.add_argument("--groups", type=int, default=1000, help="size of grp's public domain")
    p.add_argument("--kind", default="dpcurator", help="what to measure (child-specific)")
    p.add_argument("--later", type=int, default=5, help="later queries after the first")
    p.add_argument(
        "--max-seconds",
        type=float,
        default=60.0,
        help="no further later query once one took longer than this (at least one is run)",
    )
    p.add_argument("--spark-memory", default="8g", help="spark.driver.memory")
    p.add_argument("--spark-cores", type=int, default=2, help="local[N]")
    p.add_argument(
        "--spark-cache",
        action="store_true",
        help="cache the Spark DataFrame in memory (in the setup) instead of reading the file",
    )
    return p.parse_args(argv)


def run_queries(
    args: argparse.Namespace,
    first: Callable[[], Any],
    later: Callable[[int], Any],
    describe: Callable[[Any], dict[str, Any]] | None = None,
) -> None:
    """Time the first query, then ``args.later`` later ones (``later(i)``, i = 1, 2, ...)."""
    seconds, out = timed(first)
    emit("first", seconds=seconds, **(describe(out) if describe else {}))
    last = seconds
    for i in range(1, args.later + 1):
        if i > 1 and last > args.max_seconds:
            emit(
                "info", stopped_after=i - 1, reason=f"a later query took over {args.max_seconds} s"
            )
            break
        last, out = timed(lambda i=i: later(i))
        emit("later", i=i, seconds=last, **(describe(out) if describe else {}))


def main_guard(body: Callable[[], None]) -> int:
    """Run ``body``; report an exception as an ``error`` event (exit 1), then ``done``."""
    code = 0
    try:
        body()
    except Exception as exc:  # report why, never a made-up figure
        emit(
            "error",
            error=f"{type(exc).__name__}: {str(exc)[:2000]}",
            traceback=traceback.format_exc(limit=12)[-4000:],
        )
        code = 1
    emit("done", hwm_mib_self=hwm_mib())
    return code


# --------------------------------------------------------------------------------------------
# Spark (imported lazily: only the Spark children have PySpark)


def spark_session(app: str, memory: str, cores: int) -> Any:
    """A local Spark session, the same settings for every Spark measurement."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master(f"local[{cores}]")
        .appName(app)
        .config("spark.driver.memory", memory)
        .config("spark.sql.shuffle.partitions", str(2 * cores))
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def stop_spark(spark: Any) -> None:
    """Stop Spark and wait for its JVM, so that the JVM's peak memory reaches our rusage.

    The driver reads ``ru_maxrss`` of this process from ``wait4``, which covers the children
    that this process reaped; PySpark's JVM exits when its stdin closes.
    """
    from pyspark import SparkContext

    gateway = SparkContext._gateway
    proc = getattr(gateway, "proc", None)
    if proc is not None:
        emit("info", jvm_hwm_mib=hwm_mib(proc.pid))
    spark.stop()
    if proc is not None:
        try:
            if proc.stdin is not None:
                proc.stdin.close()
            proc.wait(timeout=60)
        except Exception as exc:  # the figure is then the largest Python process only
            emit("info", jvm_not_reaped=f"{type(exc).__name__}: {exc}")


def read_parquet(spark: Any, args: argparse.Namespace) -> Any:
    """The file as a Spark DataFrame: read lazily, or cached and counted with --spark-cache."""
    frame = spark.read.parquet(str(args.data))
    if args.spark_cache:
        frame = frame.cache()
        frame.count()
    return frame


def spark_version() -> str:
    import pyspark

    return str(pyspark.__version__)
