"""Tumult Analytics on the DP GROUP BY benchmark; run by ``benchmarks/bench_curator.py``.

Run in its own venv: ``.venv-peers/tumult/bin/python benchmarks/peers/sql_tumult.py --data
benchmarks/results/data/sql_100000.parquet --truth ..truth.json --repeats 2``. Needs Java 17.

How the query is expressed (tmlt-analytics 0.21.0 on PySpark 3.5, ``local[*]``):

- data: ``spark.read.parquet`` then ``cache()`` and ``count()`` (the Spark DataFrame in memory);
- ``Session.from_dataframe(..., protected_change=AddRowsWithID("unit_id"))``: add/remove all the
  rows of one unit; each query enforces ``MaxGroupsPerID("grp", 1)`` and
  ``MaxRowsPerGroupPerID("grp", 5)`` (truncation; drops nothing on this data);
- ``groupby(KeySet.from_dict({"grp": range(1000)}))``: public keys, no partition selection;
- Tumult's query builder has one aggregate per query, so the SQL query is three queries
  (``count()``, ``sum("value", 0, 100)``, ``average("value", 0, 100)``), each evaluated with
  ``PureDPBudget(1/3)`` (sequential composition: 1.0 in total, pure DP). ``average`` splits its
  third in two internally (a noisy sum and a noisy count). Default mechanisms: geometric
  (double-sided) noise for the count, and for the sums of the float column Laplace noise.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _sqlbench_common as common

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

from pyspark.sql import SparkSession
from tmlt.analytics import (
    AddRowsWithID,
    KeySet,
    MaxGroupsPerID,
    MaxRowsPerGroupPerID,
    PureDPBudget,
    QueryBuilder,
    Session,
)

SOURCE = "t"


def version() -> str:
    import importlib.metadata

    import pyspark

    return f"{importlib.metadata.version('tmlt.analytics')} (pyspark {pyspark.__version__})"


def spark_session() -> SparkSession:
    cores = os.cpu_count() or 2
    return (
        SparkSession.builder.master(f"local[{cores}]")
        .appName("dpcurator-bench-tumult")
        .config("spark.driver.memory", os.environ.get("BENCH_SPARK_MEMORY", "8g"))
        .config("spark.sql.shuffle.partitions", str(2 * cores))
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .getOrCreate()
    )


def load(path: Path) -> Any:
    spark = spark_session()
    spark.sparkContext.setLogLevel("ERROR")
    df = spark.read.parquet(str(path)).cache()
    df.count()
    return df


def setup(df: Any, runs: int) -> dict[str, Any]:
    session = Session.from_dataframe(
        privacy_budget=PureDPBudget(common.EPSILON * runs),
        source_id=SOURCE,
        dataframe=df,
        protected_change=AddRowsWithID("unit_id"),
    )
    keys = KeySet.from_dict({"grp": list(range(common.GROUPS))})
    return {"session": session, "keys": keys}


def _grouped(keys: KeySet) -> Any:
    return (
        QueryBuilder(SOURCE)
        .enforce(MaxGroupsPerID("grp", 1))
        .enforce(MaxRowsPerGroupPerID("grp", common.MAX_ROWS_PER_UNIT))
        .groupby(keys)
    )


def query(state: dict[str, Any]) -> common.Estimate:
    session, keys = state["session"], state["keys"]
    part = PureDPBudget(common.EPSILON / 3)
    count = session.evaluate(_grouped(keys).count(name="n"), part).toPandas()
    total = session.evaluate(
        _grouped(keys).sum("value", common.LOWER, common.UPPER, name="total"), part
    ).toPandas()
    mean = session.evaluate(
        _grouped(keys).average("value", common.LOWER, common.UPPER, name="mean"), part
    ).toPandas()
    merged = count.merge(total, on="grp").merge(mean, on="grp")
    return common.estimate_from_columns(
        merged["grp"].tolist(),
        merged["n"].tolist(),
        merged["total"].tolist(),
        merged["mean"].tolist(),
    )


NOTES: dict[str, Any] = {
    "epsilon_split": "3 queries (count, sum, average) at PureDPBudget(1/3) each; average splits "
    "its 1/3 into a noisy sum and a noisy count",
    "delta": 0.0,
    "unit": "AddRowsWithID(unit_id) + MaxGroupsPerID(grp, 1) + MaxRowsPerGroupPerID(grp, 5)",
    "keys": "KeySet.from_dict(grp: 0..999)",
    "engine": f"PySpark local[{os.cpu_count()}], DataFrame cached in memory before timing",
}


if __name__ == "__main__":
    sys.exit(
        common.run_main(
            "Tumult Analytics", version, load=load, setup=setup, query=query, notes=NOTES
        )
    )
