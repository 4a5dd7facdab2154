"""What any bounded first query must pay, against the floor: hand-written DuckDB statements.

For each shape of ``bench_engines.py`` at 10 M rows (files in ``benchmarks/results/data``,
made by ``bench_engines.py``): CPU seconds (user + system, all DuckDB threads) and wall
seconds, medians of ``--repeats`` interleaved runs in one process, and each statement's CPU
over the floor's. The statements, none of which a session runs as written:

- ``floor``: ``SELECT unit_id, COUNT(*) ... GROUP BY unit_id``, as in ``bench_engines.py``;
- ``per-unit count and sum``: the floor with the bare ``SUM(value)`` per unit besides the count
  (no clamp, no key, no fixed point): what any bounding that scales or truncates a unit's
  values needs to learn in one pass, without testing its keys;
- ``per-unit, one pass``: the leanest single pass we could write for one group per unit: per
  unit its count, its packed key code (``BIT_OR``, as the session's test) and the sum of its
  rows' fixed-point indices (summed as DOUBLE, exact below 2**53), then one aggregation per
  group of the units' scaled sums (``min(n, 5)`` rows);
- ``raw per group``: DuckDB's unbounded ``GROUP BY grp`` of the values, the aggregation a
  second statement can at best cost.

Run::

    .venv/bin/python benchmarks/engines/lower_bounds.py --repeats 5
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

import duckdb

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench_engines import _timed

DATA = Path(__file__).resolve().parent.parent / "results" / "data"
FILES = {
    "1-5 rows per unit, 1,000 groups": "engines_10000000_rpu1-5_g1000.parquet",
    "1,000,000 units x 10 rows": "engines_10000000_rpu10-10_g1000.parquet",
    "100,000 units x 100 rows": "engines_10000000_rpu100-100_g1000.parquet",
}
VALUE = (
    "CASE WHEN CAST(value AS DOUBLE) BETWEEN 0.0 AND 100.0 THEN CAST(value AS DOUBLE) "
    "WHEN value IS NULL OR ISNAN(CAST(value AS DOUBLE)) THEN 50.0 "
    "WHEN CAST(value AS DOUBLE) < 0.0 THEN 0.0 ELSE 100.0 END"
)
SCALED = f"(({VALUE}) - 0.0) * 21474836.48 - 1073741824.0"
INDEX = (
    f"CAST(ROUND(CASE WHEN {SCALED} BETWEEN -1073741824.0 AND 1073741824.0 THEN {SCALED} "
    f"WHEN {SCALED} < -1073741824.0 THEN -1073741824.0 ELSE 1073741824.0 END) AS BIGINT)"
)
CODE = (
    "(CAST(32768 AS INT) - CASE WHEN grp BETWEEN 0 AND 999 AND FLOOR(grp) = grp "
    "THEN CAST(grp + 1 AS INT) ELSE CAST(0 AS INT) END) * 32767"
)


def statements(path: Path) -> dict[str, str]:
    rows = f"read_parquet('{path}')"
    return {
        "floor": f"SELECT COUNT(*), SUM(n) FROM (SELECT unit_id, COUNT(*) AS n FROM {rows} "
        "GROUP BY unit_id)",
        "per-unit count and sum": "SELECT COUNT(*), SUM(n), SUM(s) FROM (SELECT unit_id, "
        f"COUNT(*) AS n, SUM(value) AS s FROM {rows} GROUP BY unit_id)",
        "per-unit, one pass": "SELECT k, SUM(LEAST(n, 5)), SUM(s * LEAST(n, 5) / n) FROM ("
        "SELECT unit_id, COUNT(*) AS n, BIT_OR(c) & 32767 AS k, SUM(CAST(i AS DOUBLE)) AS s "
        f"FROM (SELECT unit_id, {CODE} AS c, {INDEX} AS i FROM {rows} "
        "WHERE unit_id IS NOT NULL) GROUP BY unit_id) GROUP BY k",
        "raw per group": f"SELECT grp, COUNT(*), SUM(value) FROM {rows} GROUP BY grp",
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    conn = duckdb.connect()
    conn.execute("SET perfect_ht_threshold = 17")  # as a session sets it
    for shape, name in FILES.items():
        path = DATA / name
        if not path.exists():
            raise SystemExit(f"{path} is missing: run bench_engines.py --only shapes first")
        sql = statements(path)
        for text in sql.values():
            conn.execute(text).fetchall()
        spent: dict[str, list[tuple[float, float]]] = {k: [] for k in sql}
        for _ in range(args.repeats):
            for key, text in sql.items():
                spent[key].append(_timed(conn, {}, text))  # CPU and wall seconds
        floor = statistics.median(c for c, _ in spent["floor"])
        print(f"{shape} (10 M rows): CPU s (wall s), medians of {args.repeats}")
        for key, runs in spent.items():
            c = statistics.median(x for x, _ in runs)
            w = statistics.median(y for _, y in runs)
            print(f"  {key:24s} {c:6.3f} ({w:6.3f})  {c / floor:5.2f}x the floor's CPU")


if __name__ == "__main__":
    main()
