"""Tumult Analytics on the accuracy benchmark; run by ``benchmarks/bench_accuracy.py``.

Run in its own venv: ``.venv-peers/tumult/bin/python benchmarks/peers/accuracy_tumult.py
--workload benchmarks/results/data/accuracy_workload.json``. Needs Java 17. Prints one JSON line
per configuration (pure DP, then zCDP), both from one Spark session.

How the workload is expressed (tmlt-analytics 0.21.0 on PySpark 3.5, ``local[*]``):

- one ``Session.from_dataframe(..., protected_change=AddRowsWithID(unit))`` per table and
  configuration, with the budget of all the repetitions; each query is evaluated at an even
  share of the table's total: ``PureDPBudget(1/Q)`` (basic composition, Tumult's default noise:
  geometric for integer counts and sums, exponential mechanism for the median), or in the zCDP
  configuration ``RhoZCDPBudget(rho/Q)`` with ``rho = zcdp_rho_for(1, 1e-6)`` as for dpcurator
  (Tumult's default under zCDP: discrete Gaussian for counts and integer sums). The zCDP
  configuration answers only the queries where Gaussian noise applies (the flights groupings by
  month, ``workload["gaussian"]``), at the share ``rho/Q`` they would have in the whole workload:
  on Spark every query takes tens of seconds, and elsewhere its pure-DP answers are the better;
- contribution bounds: ``MaxRowsPerID(k)`` (4 per household, 60 per aircraft) for every query,
  except under zCDP the flights groupings by month, which enforce ``MaxGroupsPerID("month", 12)``
  and ``MaxRowsPerGroupPerID("month", 5)`` (L2 sensitivity sqrt(12) x 5 rather than 60, the same
  bound dpcurator declares); under pure DP both bounds give the same L1 (60);
- group keys public: ``KeySet.from_dict`` of the declared domains (products for two keys);
- averages, medians: ``average``/``median(column, low, high)``; clamped into the bounds after.

A workload that lists only some queries may give ``queries_per_table`` (each table's number of
queries in the whole workload): each query then keeps the share it has there.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import accuracy_common as common

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

from pyspark.sql import SparkSession
from tmlt.analytics import (
    AddRowsWithID,
    KeySet,
    MaxGroupsPerID,
    MaxRowsPerGroupPerID,
    MaxRowsPerID,
    PureDPBudget,
    QueryBuilder,
    RhoZCDPBudget,
    Session,
)


def version() -> str:
    import importlib.metadata

    import pyspark

    return f"{importlib.metadata.version('tmlt.analytics')} (pyspark {pyspark.__version__})"


def spark_session() -> SparkSession:
    cores = os.cpu_count() or 2
    spark = (
        SparkSession.builder.master(f"local[{cores}]")
        .appName("dpcurator-bench-accuracy-tumult")
        .config("spark.driver.memory", os.environ.get("BENCH_SPARK_MEMORY", "4g"))
        .config("spark.sql.shuffle.partitions", str(2 * cores))
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def build(q: dict[str, Any], decl: dict[str, Any], zcdp: bool) -> Any:
    b = QueryBuilder(q["table"])
    by = q["by"]
    if zcdp and by and "month" in by and q["table"] == "flights":
        b = b.enforce(MaxGroupsPerID("month", decl["max_groups_per_unit"])).enforce(
            MaxRowsPerGroupPerID("month", decl["max_rows_per_group"])
        )
    else:
        b = b.enforce(MaxRowsPerID(decl["max_rows_per_unit"]))
    if by:
        b = b.groupby(KeySet.from_dict({k: decl["domains"][k] for k in by}))
    col = q.get("column")
    if q["agg"] == "count":
        return b.count(name="v")
    lo, hi = decl["bounds"][col]
    if q["agg"] == "sum":
        return b.sum(col, lo, hi, name="v")
    if q["agg"] == "mean":
        return b.average(col, lo, hi, name="v")
    return b.median(col, lo, hi, name="v")


def answer_all(workload: dict[str, Any], zcdp: bool, frames: dict[str, Any]) -> dict[str, Any]:
    repeats = workload["peer_repeats"]["tumult"]
    rho_total = workload["rho"]
    results: dict[str, list[common.Answer]] = {q["id"]: [] for q in workload["queries"]}
    unsupported: dict[str, str] = {}
    seconds: dict[str, float] = {q["id"]: 0.0 for q in workload["queries"]}
    t0 = time.perf_counter()
    setup = 0.0
    for name, decl in workload["tables"].items():
        queries = common.queries_of(workload, name)
        # a rerun of a few queries keeps each one's share of the whole workload's budget
        n = workload.get("queries_per_table", {}).get(name, len(queries))
        s0 = time.perf_counter()
        total = (
            RhoZCDPBudget(rho_total * repeats)
            if zcdp
            else PureDPBudget(workload["epsilon"] * repeats)
        )
        session = Session.from_dataframe(
            privacy_budget=total,
            source_id=name,
            dataframe=frames[name],
            protected_change=AddRowsWithID(decl["unit"]),
        )
        setup += time.perf_counter() - s0
        share = RhoZCDPBudget(rho_total / n) if zcdp else PureDPBudget(workload["epsilon"] / n)
        for _ in range(repeats):
            for q in queries:
                if q["id"] in unsupported or (zcdp and q["id"] not in workload["gaussian"]):
                    continue
                q0 = time.perf_counter()
                try:
                    out = session.evaluate(build(q, decl, zcdp), share).toPandas()
                    seconds[q["id"]] += time.perf_counter() - q0
                    print(f"{q['id']}: {time.perf_counter() - q0:.1f} s", file=sys.stderr)
                except Exception as error:  # recorded as not answered, with the reason
                    unsupported[q["id"]] = f"{type(error).__name__}: {error}"
                    results[q["id"]] = []
                    continue
                answer: common.Answer = {}
                for _, row in out.iterrows():
                    v = row["v"]
                    if q["agg"] in ("mean", "median"):
                        v = common.clamp(v, *decl["bounds"][q["column"]])
                    answer[common.cell_key([row[k] for k in q["by"]])] = float(v)
                results[q["id"]].append(answer)
    return {
        "seconds": time.perf_counter() - t0,
        "setup_seconds": setup,
        "results": results,
        "unsupported": unsupported,
        "query_seconds": seconds,
    }


NOTES = {
    "pure": "PureDPBudget(1/Q) per query (basic composition of a table's Q queries); "
    "AddRowsWithID(unit) + MaxRowsPerID(k)",
    "zcdp": "RhoZCDPBudget(rho/Q) per query, rho = zcdp_rho_for(1, 1e-6); MaxRowsPerID(k), "
    "except flights by month: MaxGroupsPerID(month, 12) + MaxRowsPerGroupPerID(month, 5)",
}


def main() -> int:
    import argparse

    parser = argparse.ArgumentParser(description="Tumult Analytics on the accuracy benchmark")
    parser.add_argument("--workload", type=Path, required=True)
    parser.add_argument("--modes", nargs="*", default=["pure", "zcdp"])
    args = parser.parse_args()
    workload = common.load_workload(args.workload)
    try:
        t0 = time.perf_counter()
        spark = spark_session()
        frames = {}
        for name, decl in workload["tables"].items():
            frames[name] = spark.read.parquet(decl["path"]).cache()
            frames[name].count()
        start = time.perf_counter() - t0
        ver = version()
    except Exception as error:
        print(json.dumps({"library": "Tumult Analytics", "error": repr(error)}), flush=True)
        return 1
    for mode in args.modes:
        label = "Tumult (pure DP)" if mode == "pure" else "Tumult (zCDP)"
        record: dict[str, Any] = {"library": label, "version": ver}
        try:
            record.update(answer_all(workload, mode == "zcdp", frames))
            record["setup_seconds"] += start
            record["notes"] = {"budget": NOTES[mode]}
        except Exception as error:
            record["error"] = f"{type(error).__name__}: {error}"
        print(json.dumps(record), flush=True)
        start = 0.0
    return 0


if __name__ == "__main__":
    sys.exit(main())
