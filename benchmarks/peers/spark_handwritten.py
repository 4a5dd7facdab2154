"""Hand-written Spark SQL doing dpcurator's contribution bounding, for ``bench_engines.py``.

No dpcurator and no noise: what the bounding costs when a data engineer writes it by hand in
plain Spark SQL, the baseline of dpcurator-on-Spark. The same bounds as the declaration: per
privacy unit (``unit_id``) rows in one group only, at most 5 rows, ``value`` clamped to
[0, 100], rows outside ``grp``'s public domain dropped; then per ``grp`` COUNT(*), SUM and AVG.
One window over the units (one sort) does both choices, by hashes of the unit's own rows:

- rows ordered within the unit by ``xxhash64`` of (unit, group), then of (unit, group, value):
  the rows of the unit's kept group (the smallest group hash) come first;
- ``FIRST_VALUE(grp)`` is the kept group and ``ROW_NUMBER() <= 5`` keeps its first five rows.

Every unit goes through the window (dpcurator's plan sends only the units beyond a bound
there). The data: ``spark.read.parquet(<file>)`` as the temporary view ``t``, not cached.
``setup`` times the Spark session's start; then the first query and the later ones (each with
``WHERE value > i`` before the bounding, like dpcurator's), collected to the driver.

Run with any Python that has PySpark (the driver uses the one of dpcurator-on-Spark, else the
Tumult venv's): ``python benchmarks/peers/spark_handwritten.py --data <file> --later 3``.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "engines"))

import common

BOUNDED_SQL = """
SELECT grp, COUNT(*) AS n, SUM(v) AS s, AVG(v) AS a
FROM (
  SELECT grp,
         LEAST(GREATEST(value, {lower}D), {upper}D) AS v,
         ROW_NUMBER() OVER w AS rn,
         FIRST_VALUE(grp) OVER w AS kept_grp
  FROM t
  WHERE grp IN ({domain}){where}
  WINDOW w AS (PARTITION BY unit_id
               ORDER BY xxhash64(unit_id, grp, 1), xxhash64(unit_id, grp, value, 2))
) AS bounded
WHERE rn <= {max_rows} AND grp = kept_grp
GROUP BY grp
"""


def bounded_sql(groups: int, where: str = "") -> str:
    return BOUNDED_SQL.format(
        lower=common.LOWER,
        upper=common.UPPER,
        domain=", ".join(str(g) for g in range(groups)),
        where=f" AND ({where})" if where else "",
        max_rows=common.MAX_ROWS_PER_UNIT,
    )


def measure(args: Any) -> None:
    common.emit("info", pyspark=common.spark_version(), base_rss_mib=common.rss_mib())

    def open_session() -> Any:
        spark = common.spark_session(
            "handwritten-bench-engines", args.spark_memory, args.spark_cores
        )
        common.read_parquet(spark, args).createOrReplaceTempView("t")
        return spark

    seconds, spark = common.timed(open_session)
    common.emit("setup", seconds=seconds, rss_mib=common.rss_mib())
    try:
        common.run_queries(
            args,
            lambda: spark.sql(bounded_sql(args.groups)).collect(),
            lambda i: spark.sql(bounded_sql(args.groups, f"value > {i}")).collect(),
            describe=lambda rows: {"groups": len(rows)},
        )
    finally:
        common.stop_spark(spark)


if __name__ == "__main__":
    sys.exit(common.main_guard(lambda: measure(common.parse_args())))
