"""Private SQL: a DP GROUP BY with COUNT, SUM and AVG, next to raw DuckDB and four DP-SQL peers.

Run with the benchmark environment after the peers' environments are set up:

    bash benchmarks/peers/setup_peers.sh        # one venv per peer under .venv-peers/
    .venv-bench/bin/python benchmarks/bench_curator.py [--rows 1000000 10000000] [--quick]
        [--repeats R] [--peers smartnoise opendp pipelinedp tumult] [--peer-timeout 600]
        [--out benchmarks/results/curator.json] [--show benchmarks/results/curator.json]

Data (``benchmarks/peers/_sqlbench_common.py``, generated once into
``benchmarks/results/data/sql_<rows>.parquet``): ``unit_id`` (int64), ``grp`` (int64, 1,000
groups), ``value`` (float64 in [0, 100]); every unit has 1 to 5 rows, all in one group, so the
bounds (5 rows per unit, 1 group per unit, values in [0, 100]) drop nothing and the exact
GROUP BY, computed once by DuckDB, is every library's target.

The query, the same for all: per group COUNT(*), SUM(value), AVG(value), epsilon 1.0 in total
for the whole query (each library splits it its own way: the table says how), the 1,000 keys
public (no partition selection). dpcurator:
``SELECT grp, COUNT(*), SUM(value), AVG(value) FROM t GROUP BY grp`` at ``epsilon=1.0`` on a
:class:`~dpcurator.curator.Session` over a :class:`~dpcurator.curator.Table` with
``privacy_unit="unit_id"``, ``max_rows_per_unit=5``, ``max_groups_per_unit=1``, ``grp``
declared with its public domain and ``value`` with bounds [0, 100] and ``nullable=False`` (the
column is NOT NULL, so AVG reuses the noisy COUNT(*)); the session's budget is large and its
ledger ``":memory:"``, so the timed part is the query only. Noise: dpcurator's default secure
source (OS CSPRNG, exact samplers).

Timing: every library first loads the parquet file into its natural in-memory form (a DuckDB
table, a pandas DataFrame, a Polars LazyFrame, a cached Spark DataFrame; not timed) and builds its
session/reader/context (``setup``, reported apart); then one warm-up and the median (and min) of
``R`` timed runs from the data in memory to the DP result in hand (R = 5 at 1M rows, 3 above;
a library whose run exceeds 60 s stops after that run, and the table says how many it did).
Each peer runs in its own process with its own venv's Python (``.venv-peers/<peer>``), under a
``--peer-timeout`` (default 600 s); a peer that is not installed, fails or times out is recorded
with the reason, never with a made-up figure. Error: mean absolute error per metric over the
1,000 groups, averaged over the timed runs (``avg~`` is AVG clamped into [0, 100], free
post-processing, since a ratio of two noisy values is unbounded).

Prints one table per size and writes JSON (``--out``, default ``benchmarks/results/curator.json``).
The ratio the issue's target is about is ``fastest peer seconds / dpcurator seconds``.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import platform
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(HERE / "peers"))

import _sqlbench_common as common  # noqa: E402
import duckdb  # noqa: E402
import pandas as pd  # noqa: E402

from dpcurator.accounting import Budget  # noqa: E402
from dpcurator.curator import Column, Session, Table  # noqa: E402

PEERS = {
    "smartnoise": "sql_smartnoise.py",
    "opendp": "sql_opendp.py",
    "pipelinedp": "sql_pipelinedp.py",
    "tumult": "sql_tumult.py",
}
RAW_SQL = "SELECT grp, COUNT(*) AS n, SUM(value) AS s, AVG(value) AS a FROM t GROUP BY grp"
DP_SQL = "SELECT grp, COUNT(*), SUM(value), AVG(value) FROM t GROUP BY grp"
DATA_DIR = HERE / "results" / "data"
PEERS_DIR = Path(os.environ.get("PEERS_DIR", REPO / ".venv-peers"))


# --------------------------------------------------------------------------------------------
# data and truth


def prepare(rows: int) -> tuple[Path, Path]:
    data = common.data_path(DATA_DIR, rows)
    truth = common.truth_path(DATA_DIR, rows)
    if not data.exists():
        t0 = time.perf_counter()
        common.generate(rows, data)
        print(f"generated {data} in {time.perf_counter() - t0:.1f} s", flush=True)
    if not truth.exists() or truth.stat().st_mtime < data.stat().st_mtime:
        conn = duckdb.connect()
        exact = conn.execute(
            "SELECT grp, COUNT(*) AS n, SUM(value) AS s FROM read_parquet(?) GROUP BY grp "
            "ORDER BY grp",
            [str(data)],
        ).fetchnumpy()
        conn.close()
        if not np.array_equal(exact["grp"], np.arange(common.GROUPS)):
            raise RuntimeError(f"{data}: expected every group 0..{common.GROUPS - 1}")
        common.write_truth(truth, exact["n"], exact["s"])
    return data, truth


# --------------------------------------------------------------------------------------------
# in-process measurements: raw DuckDB and dpcurator


def timed(
    run: Callable[[], common.Estimate | None],
    repeats: int,
    truth: common.Estimate | None,
    max_seconds: float = 60.0,
) -> dict[str, Any]:
    t0 = time.perf_counter()
    run()
    warmup = time.perf_counter() - t0
    times: list[float] = []
    errs: list[dict[str, float]] = []
    for _ in range(repeats):
        if times and times[-1] > max_seconds:
            break
        t0 = time.perf_counter()
        est = run()
        times.append(time.perf_counter() - t0)
        if truth is not None and est is not None:
            errs.append(common.errors(est, truth))
    out: dict[str, Any] = {
        "seconds": statistics.median(times),
        "min_seconds": min(times),
        "times": times,
        "repeats": len(times),
        "repeats_asked": repeats,
        "warmup_seconds": warmup,
    }
    if errs:
        out["errors"] = {k: statistics.fmean(e[k] for e in errs) for k in errs[0]}
    return out


def table_declaration(source: Any, source_table: str | None) -> Table:
    return Table(
        name="t",
        source=source,
        source_table=source_table,
        privacy_unit="unit_id",
        max_rows_per_unit=common.MAX_ROWS_PER_UNIT,
        max_groups_per_unit=1,
        columns=[
            Column("unit_id"),
            Column("grp", domain=list(range(common.GROUPS))),
            Column("value", lower=common.LOWER, upper=common.UPPER, nullable=False),
        ],
    )


def dpcurator_version() -> str:
    import importlib.metadata

    return f"{importlib.metadata.version('dpcurator')} (duckdb {duckdb.__version__})"


def measure_in_process(data: Path, truth_file: Path, repeats: int) -> list[dict[str, Any]]:
    """Raw DuckDB and dpcurator, over a DuckDB table and over a pandas DataFrame."""
    truth = common.load_truth(truth_file)
    rows = common.rows_of(data)
    records: list[dict[str, Any]] = []
    conn = duckdb.connect()
    conn.execute("CREATE TABLE t AS SELECT * FROM read_parquet(?)", [str(data)])
    frame = pd.read_parquet(data)
    conn_pd = duckdb.connect()
    conn_pd.register("t", frame)
    for form, connection, source, source_table in (
        ("DuckDB table", conn, conn, "t"),
        ("pandas DataFrame", conn_pd, frame, None),
    ):

        def raw(connection: duckdb.DuckDBPyConnection = connection) -> common.Estimate:
            out = connection.execute(RAW_SQL).fetchnumpy()
            return common.estimate_from_columns(out["grp"], out["n"], out["s"], out["a"])

        rec = timed(raw, repeats, truth)
        records.append(
            {
                "library": f"raw DuckDB ({form})",
                "kind": "raw",
                "form": form,
                "version": duckdb.__version__,
                "rows": rows,
                "setup_seconds": 0.0,
                "epsilon": None,
                "epsilon_split": "no privacy: the exact GROUP BY",
                **rec,
            }
        )
        print(f"  raw DuckDB ({form}): {rec['seconds']:.4f} s", flush=True)

        t0 = time.perf_counter()
        session = Session(
            table_declaration(source, source_table),
            Budget(1e9),
            ledger=":memory:",
            connection=None if source_table else duckdb.connect(),
        )
        setup = time.perf_counter() - t0
        split: list[str] = []

        def private(session: Session = session, split: list[str] = split) -> common.Estimate:
            release = session.sql(DP_SQL, epsilon=common.EPSILON)
            if not split:
                split.extend(
                    f"{m.name} {m.mechanism} eps={m.epsilon:.4g} scale={m.scale:.4g}"
                    for m in release.split
                )
            t = release.table
            return common.estimate_from_columns(
                t["grp"].tolist(),
                t["count"].tolist(),
                t["sum_value"].tolist(),
                t["avg_value"].tolist(),
            )

        rec = timed(private, repeats, truth)
        session.close()
        records.append(
            {
                "library": f"dpcurator ({form})",
                "kind": "dpcurator",
                "form": form,
                "version": dpcurator_version(),
                "rows": rows,
                "setup_seconds": setup,
                "epsilon": common.EPSILON,
                "delta": 0.0,
                "epsilon_split": "; ".join(split),
                "unit": "privacy_unit unit_id, max_rows_per_unit=5, max_groups_per_unit=1 "
                "(bounding in the DuckDB plan)",
                "keys": "Column('grp', domain=range(1000))",
                **rec,
            }
        )
        print(f"  dpcurator ({form}): {rec['seconds']:.4f} s", flush=True)
    conn.close()
    conn_pd.close()
    return records


# --------------------------------------------------------------------------------------------
# peers, each in its own venv


def run_peer(
    peer: str, data: Path, truth: Path, *, repeats: int, timeout: float, logs: Path
) -> dict[str, Any]:
    python = PEERS_DIR / peer / "bin" / "python"
    failed = PEERS_DIR / f"{peer}.install-failed"
    rows = common.rows_of(data)
    base = {"library": peer, "kind": "peer", "rows": rows}
    if not (PEERS_DIR / peer / ".stamp").exists():
        reason = f"not installed in {PEERS_DIR / peer} (run benchmarks/peers/setup_peers.sh)"
        if failed.exists():
            reason = "install failed: " + failed.read_text().strip()[-800:]
        return {**base, "error": reason}
    logs.mkdir(parents=True, exist_ok=True)
    log = logs / f"{peer}_{rows}.log"
    cmd = [
        str(python),
        str(HERE / "peers" / PEERS[peer]),
        "--data",
        str(data),
        "--truth",
        str(truth),
        "--repeats",
        str(repeats),
    ]
    t0 = time.perf_counter()
    with log.open("w") as err:
        proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=err, text=True, start_new_session=True
        )
        try:
            stdout, _ = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)  # the peer and its children (Spark's JVM)
            proc.communicate()
            return {
                **base,
                "error": f"timed out after {timeout:.0f} s (whole peer run: load, setup, warm-up "
                f"and repeats); log {log.relative_to(REPO)}",
                "wall_seconds": time.perf_counter() - t0,
            }
    wall = time.perf_counter() - t0
    lines = [ln for ln in stdout.splitlines() if ln.startswith("{")]
    if not lines:
        tail = log.read_text()[-1500:] if log.exists() else ""
        return {**base, "error": f"exit {proc.returncode}, no result; stderr tail: {tail}"}
    record: dict[str, Any] = json.loads(lines[-1])
    record.update(kind="peer", peer=peer, wall_seconds=wall)
    return record


# --------------------------------------------------------------------------------------------
# report


def _fmt_seconds(x: float | None) -> str:
    if x is None:
        return "-"
    return f"{x:.4f}" if x < 1 else f"{x:.2f}"


def _fmt_err(x: float | None) -> str:
    if x is None:
        return "-"
    if not math.isfinite(x):
        return "inf"
    return f"{x:.3g}" if abs(x) < 1000 else f"{x:,.0f}"


def summarise(records: list[dict[str, Any]]) -> dict[str, Any]:
    ok = [r for r in records if "seconds" in r]
    raw = next((r for r in ok if r.get("kind") == "raw" and r["form"] == "DuckDB table"), None)
    ours = [r for r in ok if r.get("kind") == "dpcurator"]
    best_ours = min(ours, key=lambda r: r["seconds"]) if ours else None
    peers = [r for r in ok if r.get("kind") == "peer"]
    fastest = min(peers, key=lambda r: r["seconds"]) if peers else None
    out: dict[str, Any] = {}
    if best_ours is not None:
        out["dpcurator"] = best_ours["library"]
        out["dpcurator_seconds"] = best_ours["seconds"]
        if raw is not None:
            out["dpcurator_over_raw_duckdb"] = best_ours["seconds"] / raw["seconds"]
    if fastest is not None and best_ours is not None:
        out["fastest_peer"] = fastest["library"]
        out["fastest_peer_seconds"] = fastest["seconds"]
        out["speedup_vs_fastest_peer"] = fastest["seconds"] / best_ours["seconds"]
        out["speedup_vs_fastest_peer_duckdb_table"] = fastest["seconds"] / min(
            r["seconds"] for r in ours if r["form"] == "DuckDB table"
        )
        out["speedup_vs_fastest_peer_pandas"] = fastest["seconds"] / min(
            r["seconds"] for r in ours if r["form"] == "pandas DataFrame"
        )
    return out


def print_table(rows: int, records: list[dict[str, Any]], summary: dict[str, Any]) -> None:
    ok = [r for r in records if "seconds" in r]
    raw = next((r for r in ok if r.get("kind") == "raw" and r["form"] == "DuckDB table"), None)
    ours = [r for r in ok if r.get("kind") == "dpcurator"]
    ours_fast = min((r["seconds"] for r in ours), default=None)
    print()
    print(
        f"DP GROUP BY, {rows:,} rows, 1,000 groups, COUNT(*) + SUM + AVG, epsilon 1.0 in total; "
        "seconds = median from data in memory to result (setup apart)"
    )
    header = (
        "library",
        "version",
        "seconds",
        "min",
        "runs",
        "setup s",
        "x raw DuckDB",
        "this / dpcurator",
        "count MAE",
        "sum MAE",
        "avg MAE",
        "avg~ MAE",
    )
    print("| " + " | ".join(header) + " |")
    print("| --- | --- | " + " | ".join(["---:"] * (len(header) - 2)) + " |")
    for r in records:
        if "seconds" not in r:
            continue
        e = r.get("errors", {})
        raw_ratio = f"{r['seconds'] / raw['seconds']:.1f}x" if raw else "-"
        ours_ratio = f"{r['seconds'] / ours_fast:.1f}x" if ours_fast else "-"
        cells = (
            r["library"],
            str(r.get("version", "")),
            _fmt_seconds(r["seconds"]),
            _fmt_seconds(r["min_seconds"]),
            f"{r['repeats']}/{r['repeats_asked']}",
            _fmt_seconds(r.get("setup_seconds")),
            raw_ratio,
            ours_ratio,
            _fmt_err(e.get("count")) if r.get("kind") != "raw" else "0",
            _fmt_err(e.get("sum")) if r.get("kind") != "raw" else "0",
            _fmt_err(e.get("avg")) if r.get("kind") != "raw" else "0",
            _fmt_err(e.get("avg_clamped")) if r.get("kind") != "raw" else "0",
        )
        print("| " + " | ".join(cells) + " |")
    for r in records:
        if "seconds" not in r:
            print(f"  {r['library']}: NOT MEASURED: {r.get('error', '?')}")
    if "speedup_vs_fastest_peer" in summary:
        print(
            f"fastest peer {summary['fastest_peer']} {summary['fastest_peer_seconds']:.3f} s; "
            f"dpcurator {summary['dpcurator_seconds']:.4f} s: "
            f"{summary['speedup_vs_fastest_peer']:.1f}x faster (target >= 10x)"
        )
    print("epsilon splits:")
    for r in records:
        if r.get("epsilon_split") and r.get("kind") != "raw":
            print(f"  {r['library']}: {r['epsilon_split']}")


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[1_000_000, 10_000_000])
    parser.add_argument("--quick", action="store_true", help="100,000 rows, 2 repeats")
    parser.add_argument("--repeats", type=int, default=None, help="default 5 at 1M, 3 above")
    parser.add_argument("--peers", nargs="*", default=list(PEERS), choices=list(PEERS))
    parser.add_argument("--peer-timeout", type=float, default=600.0)
    parser.add_argument("--out", type=Path, default=HERE / "results" / "curator.json")
    parser.add_argument(
        "--show", type=Path, default=None, help="print the tables of a saved JSON and stop"
    )
    args = parser.parse_args(argv)
    if args.show is not None:
        saved: dict[str, Any] = json.loads(args.show.read_text())
        for rows, entry in saved["sizes"].items():
            print_table(int(rows), entry["records"], entry["summary"])
        print(f"\ntotal {saved['total_seconds']:.0f} s")
        return saved
    sizes = [100_000] if args.quick else args.rows
    started = time.perf_counter()
    result: dict[str, Any] = {
        "benchmark": "DP GROUP BY: COUNT(*), SUM(value), AVG(value) over 1,000 public groups",
        "epsilon": common.EPSILON,
        "delta_where_needed": common.DELTA,
        "bounds": {"max_rows_per_unit": 5, "max_groups_per_unit": 1, "value": [0, 100]},
        "machine": {
            "python": platform.python_version(),
            "machine": platform.machine(),
            "cpus": os.cpu_count(),
            "numpy": np.__version__,
            "date": datetime.date.today().isoformat(),
        },
        "sizes": {},
    }
    for rows in sizes:
        repeats = args.repeats or (2 if args.quick else (5 if rows <= 1_000_000 else 3))
        print(f"\n--- {rows:,} rows, {repeats} timed runs each ---", flush=True)
        data, truth = prepare(rows)
        records = measure_in_process(data, truth, repeats)
        for peer in args.peers:
            print(f"  {peer} ...", flush=True)
            rec = run_peer(
                peer,
                data,
                truth,
                repeats=repeats,
                timeout=args.peer_timeout,
                logs=HERE / "results" / "logs",
            )
            shown = f"{rec['seconds']:.3f} s" if "seconds" in rec else rec.get("error", "")
            print(f"  {peer}: {str(shown)[:300]}", flush=True)
            records.append(rec)
        summary = summarise(records)
        result["sizes"][str(rows)] = {"repeats": repeats, "records": records, "summary": summary}
        print_table(rows, records, summary)
    result["total_seconds"] = time.perf_counter() - started
    print(f"\ntotal {result['total_seconds']:.0f} s")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {args.out}")
    return result


if __name__ == "__main__":
    main()
