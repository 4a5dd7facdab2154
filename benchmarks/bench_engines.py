"""The curator's engines side by side: DuckDB on Parquet, dpcurator on Spark, Tumult, floors.

Reproduce (the figures of BENCHMARKS.md come from one run of the first line)::

    .venv/bin/python benchmarks/bench_engines.py                 # everything, 1M 10M 100M rows
    .venv/bin/python benchmarks/bench_engines.py --quick         # 1M rows only, few repeats
    .venv/bin/python benchmarks/bench_engines.py --only duckdb --sizes 1000000 10000000
    .venv/bin/python benchmarks/bench_engines.py --show benchmarks/results/engines.json
    .venv/bin/python benchmarks/bench_engines.py --statements --repeats 3   # see 5.

Spark needs a Python with PySpark and dpcurator's dependencies (``.venv-peers/spark``, made by
``--setup-spark`` with Tumult's PySpark 3.5.9, else this one if it has PySpark; or
``--spark-python``; dpcurator itself always comes from this checkout's ``src``); the
hand-written query runs in the same Python (else in the Tumult venv); Tumult needs
``bash benchmarks/peers/setup_peers.sh tumult``; all need Java 17. A part that cannot run is
recorded with the reason, never with a figure.

Data (``benchmarks/engines/data.py``, generated once into ``benchmarks/results/data/``, seeded):
``unit_id`` int64, ``grp`` int64, ``value`` float64 in [0, 100], every unit's rows in one group,
rows shuffled, as ``bench_curator.py``'s data but in row groups of 2**17 rows, so that both
engines read even the 1M-row file with all their threads. Before the measurements of a file, the
driver reads it once, so every measurement finds it in the OS page cache (read through the
engine's Parquet reader every query, but not from a cold disk).

Every measurement runs in a fresh child process (``benchmarks/engines/*_child.py``,
``benchmarks/peers/spark_handwritten.py``, ``benchmarks/peers/engines_tumult.py``), spawned by
a small launcher (``benchmarks/engines/launch.py``: Linux starts a child's ``ru_maxrss`` at its
parent's peak, so a child spawned by this driver would report at least the driver's). Its peak
memory is the child's ``ru_maxrss`` from ``os.wait4`` in the launcher (the largest of the child
and the processes it reaped: Spark children stop their JVM and wait for it, so for Spark this
is the JVM's; the JSON also has the sampled sum over the child's process tree, every 0.2 s,
which is all there is for a child that timed out). In each
child: ``setup`` (opening the session: for Spark, the JVM's start too) is timed apart; the
*first* query is the first one the session answers (cold: nothing of the session warmed), the
*later* queries are further queries of the same session, each with another ``WHERE value > i``
(i = 1, 2, ...), so none repeats an earlier one; "later" is their median, pooled over the child
processes. ``--repeats`` fresh processes per DuckDB measurement (interleaved: floor, raw,
dpcurator, floor, ...; ``--spark-repeats`` for Spark, default 1); figures are medians over them.
``--later`` later queries per session (default 5; Tumult ``--tumult-later``, default 2), none
after one that took over ``--max-seconds`` (default 60 s).

1. DuckDB, data on disk (Parquet), per size (``--sizes``, default 1M 10M 100M rows):

   - *floor*: ``SELECT unit_id, COUNT(*) AS n FROM t GROUP BY unit_id`` on DuckDB reading the
     same file, computed in full: DuckDB runs ``SELECT COUNT(*), SUM(n) FROM (<that>)``, so its
     hash aggregate builds every unit's group and only two numbers come back;
   - *raw*: DuckDB's unbounded ``SELECT grp, COUNT(*), SUM(value), AVG(value) FROM t GROUP BY
     grp`` (no privacy), later runs with the same ``WHERE value > i`` as dpcurator's;
   - *dpcurator*: ``Session(Table("t", "<file>.parquet", privacy_unit="unit_id",
     max_rows_per_unit=5, max_groups_per_unit=1, columns=[Column("grp", domain=range(G)),
     Column("value", lower=0, upper=100, nullable=False)]), Budget(1e9), ledger=":memory:")``,
     the query ``SELECT grp, COUNT(*), SUM(value), AVG(value) FROM t GROUP BY grp`` at
     epsilon 1;
   - ratios: first query / floor (first run), peak memory / floor's peak memory, later query /
     raw (later runs).

2. Shapes that fall off (``--shape-rows``, default 10M rows; DuckDB, on disk): units of 10 rows
   each (every unit over the bound of 5 rows), units of 100 rows each, and 1-5 rows per unit with
   100,000 public groups. Same measurements and ratios as 1.

3. Spark ``local[2]`` at 1M and 10M rows (those of ``--sizes``), same files: dpcurator on Spark
   (``Session(..., engine=SparkEngine(spark=spark))`` over ``spark.read.parquet``), the
   hand-written Spark SQL doing the same bounding without dpcurator or noise
   (``benchmarks/peers/spark_handwritten.py``), and Tumult Analytics in its own venv
   (``benchmarks/peers/engines_tumult.py``, ``sql_tumult.py``'s query). The three read
   ``spark.read.parquet(<file>)``, not cached (``--spark-cache`` caches and counts it in the
   setup, as ``bench_curator.py`` does for Tumult); driver memory ``--spark-memory`` (8g).
   ``--timeout`` per child process (default 600 s); a child that times out is recorded so, with
   the figures it had finished. Ratios: Tumult / dpcurator-on-Spark, dpcurator-on-Spark /
   hand-written.

4. Scaling: the DuckDB figures of 1 and 2 arranged by rows (1M, 10M, 100M), rows per unit
   (1-5, 10, 100) and groups (1,000, 100,000); a table and ``benchmarks/results/engines.png``.

5. ``--statements`` (alone): the first query's statements against a single pass over the rows
   (the session's ``Statements.single``), interleaved in this process, CPU and wall seconds,
   no JSON written
   (see :func:`statement_timings`). With ``--compare SRC``: the statements a session runs
   (units beyond their bounds, first and later query) as rendered by another checkout's ``src``
   and by this one, alternated in this process, their aggregates checked equal (see
   :func:`compare_statements`). With ``--memory``: the peak memory of those statements, of
   the floor and of ``import dpcurator.curator``, one fresh process each (see
   :func:`statement_memory`).

Writes ``benchmarks/results/engines.json`` (``--out``) and prints markdown tables for
BENCHMARKS.md with the command, the machine and the versions.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import os
import platform
import shlex
import signal
import statistics
import subprocess
import sys
import threading
import time
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE / "engines"))

import data as engines_data  # noqa: E402
import duckdb  # noqa: E402

DATA_DIR = HERE / "results" / "data"
LOG_DIR = HERE / "results" / "logs" / "engines"
PEERS_DIR = Path(os.environ.get("PEERS_DIR", REPO / ".venv-peers"))
SPARK_VENV = PEERS_DIR / "spark"
PYSPARK_PIN = "pyspark==3.5.9"  # the version in the Tumult venv (requirements-tumult.txt)
PARTS = ("duckdb", "shapes", "spark", "scaling")
DEFAULT_SIZES = (1_000_000, 10_000_000, 100_000_000)
SPARK_SIZES = (1_000_000, 10_000_000)
LAUNCHER = HERE / "engines" / "launch.py"
CHILD = {
    "duckdb": HERE / "engines" / "duckdb_child.py",
    "dpcurator-spark": HERE / "engines" / "spark_child.py",
    "handwritten": HERE / "peers" / "spark_handwritten.py",
    "tumult": HERE / "peers" / "engines_tumult.py",
}
DUCKDB_KINDS = ("floor", "raw", "dpcurator")
SPARK_KINDS = ("handwritten", "dpcurator", "tumult")


# --------------------------------------------------------------------------------------------
# one child process: timed events, peak memory


class TreeSampler(threading.Thread):
    """Sample the summed RSS of the processes of a session (the child and its JVM).

    The launcher (the session's leader, ``skip``) is left out.
    """

    def __init__(self, session: int, skip: int, interval: float = 0.2) -> None:
        super().__init__(daemon=True)
        self.session = session
        self.skip = skip
        self.interval = interval
        self.peak_bytes = 0
        self._stop_event = threading.Event()
        self._page = os.sysconf("SC_PAGE_SIZE")

    def run(self) -> None:
        while not self._stop_event.is_set():
            total = 0
            for entry in os.scandir("/proc"):
                if not entry.name.isdigit() or int(entry.name) == self.skip:
                    continue
                try:
                    with open(f"/proc/{entry.name}/stat", "rb") as f:
                        stat = f.read().decode(errors="replace")
                except OSError:
                    continue
                fields = stat[stat.rindex(")") + 2 :].split()
                if int(fields[3]) == self.session:
                    total += int(fields[21]) * self._page
            self.peak_bytes = max(self.peak_bytes, total)
            self._stop_event.wait(self.interval)

    def stop(self) -> float:
        self._stop_event.set()
        self.join()
        return self.peak_bytes / 2**20


def run_child(
    cmd: list[str], *, timeout: float, log: Path, sample_tree: bool = False
) -> dict[str, Any]:
    """Run one measurement through the launcher; return its events, status and peak memory.

    The launcher (``benchmarks/engines/launch.py``) spawns the child from a small process, so
    that the child's ``ru_maxrss`` is its own and not this driver's (see the launcher).
    """
    log.parent.mkdir(parents=True, exist_ok=True)
    out_path = log.with_suffix(".out")
    usage_path = log.with_suffix(".rusage.json")
    usage_path.unlink(missing_ok=True)
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    launcher = [sys.executable, "-I", "-S", str(LAUNCHER), str(usage_path), "--", *cmd]
    t0 = time.perf_counter()
    with out_path.open("w") as out, log.open("w") as err:
        proc = subprocess.Popen(
            launcher, stdout=out, stderr=err, start_new_session=True, env=env, cwd=REPO
        )
        timed_out = threading.Event()

        def kill() -> None:
            timed_out.set()
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)  # launcher, child and JVM

        timer = threading.Timer(timeout, kill)
        timer.start()
        sampler = TreeSampler(proc.pid, skip=proc.pid) if sample_tree else None
        if sampler is not None:
            sampler.start()
        _, status, _ = os.wait4(proc.pid, 0)
        timer.cancel()
        proc.returncode = os.waitstatus_to_exitcode(status)
        wall = time.perf_counter() - t0
        tree_mib = sampler.stop() if sampler is not None else None
        with contextlib.suppress(ProcessLookupError):  # an orphaned JVM goes too
            os.killpg(proc.pid, signal.SIGKILL)
    events = []
    for line in out_path.read_text().splitlines():
        if line.startswith("{"):
            with contextlib.suppress(json.JSONDecodeError):
                events.append(json.loads(line))
    run: dict[str, Any] = {
        "returncode": proc.returncode,
        "wall_seconds": wall,
        "events": events,
        "log": str(log.relative_to(REPO)),
    }
    if usage_path.exists():
        usage = json.loads(usage_path.read_text())
        run["peak_rss_mib"] = usage["ru_maxrss_kib"] / 1024.0
        run["cpu_seconds"] = usage["cpu_seconds"]
    if tree_mib is not None:
        run["tree_peak_rss_mib"] = tree_mib
    if timed_out.is_set():
        run["timed_out"] = True
        run["error"] = f"timed out after {timeout:.0f} s (whole child: start, setup, queries)"
    else:
        errors = [e for e in events if e.get("event") == "error"]
        if errors:
            run["error"] = errors[-1]["error"]
        elif not any(e.get("event") == "done" for e in events):
            tail = log.read_text()[-1500:] if log.exists() else ""
            run["error"] = f"exit {proc.returncode}, no result; stderr tail: {tail}"
    return run


def summarise_runs(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Medians over the child processes (later: pooled over all later queries)."""

    def of(event: str) -> list[float]:
        return [e["seconds"] for r in runs for e in r["events"] if e.get("event") == event]

    def median(xs: list[float]) -> float | None:
        return statistics.median(xs) if xs else None

    firsts = [
        next(e["seconds"] for e in r["events"] if e.get("event") == "first")
        for r in runs
        if any(e.get("event") == "first" for e in r["events"])
    ]
    base = [
        e["base_rss_mib"] for r in runs for e in r["events"] if e.get("base_rss_mib") is not None
    ]
    complete = [r for r in runs if "error" not in r]
    out: dict[str, Any] = {
        "setup_s": median(of("setup")),
        "first_s": median(firsts),
        "later_s": median(of("later")),
        "later_n": len(of("later")),
        "processes": len(runs),
        "processes_ok": len(complete),
        "peak_mib": median([r["peak_rss_mib"] for r in complete if "peak_rss_mib" in r]),
        "base_mib": median(base),
        "groups_released": sorted(
            {e["groups"] for r in runs for e in r["events"] if "groups" in e}
        ),
    }
    trees = [r["tree_peak_rss_mib"] for r in runs if "tree_peak_rss_mib" in r]
    if trees:
        out["tree_peak_mib"] = median(trees)
    errors = [r["error"] for r in runs if "error" in r]
    if errors:
        out["error"] = errors[0]
        out["timed_out"] = any(r.get("timed_out") for r in runs)
    return out


# --------------------------------------------------------------------------------------------
# what to measure

DEFINITIONS = {
    "floor": "DuckDB: SELECT COUNT(*), SUM(n) FROM (SELECT unit_id, COUNT(*) AS n FROM "
    "read_parquet(file) GROUP BY unit_id); first run of a fresh process, later = the same again",
    "raw": "DuckDB: SELECT grp, COUNT(*), SUM(value), AVG(value) FROM read_parquet(file) GROUP BY "
    "grp (later: WHERE value > i), fetched",
    "dpcurator": "Session(Table(t, file, privacy_unit=unit_id, max_rows_per_unit=5, "
    "max_groups_per_unit=1, grp domain range(G), value [0, 100] not null), Budget(1e9), "
    "ledger=':memory:'[, engine=SparkEngine(spark=spark)]).sql('SELECT grp, COUNT(*), SUM(value), "
    "AVG(value) FROM t GROUP BY grp', epsilon=1) (later: WHERE value > i)",
    "handwritten": "Spark SQL without dpcurator or noise: one window per unit ordered by "
    "xxhash64, rows of the first group only, at most 5 rows, value clamped to [0, 100], then "
    "COUNT/SUM/AVG per grp (benchmarks/peers/spark_handwritten.py)",
    "tumult": "tmlt.analytics 0.21: AddRowsWithID(unit_id), MaxGroupsPerID(grp, 1), "
    "MaxRowsPerGroupPerID(grp, 5), KeySet grp 0..999, count + sum + average at PureDPBudget(1/3) "
    "each (benchmarks/peers/engines_tumult.py)",
    "setup": "opening the session (Spark: the SparkSession's start, the JVM, included)",
    "first": "the first query of a fresh session",
    "later": "median of the later queries of the same session (WHERE value > i, i = 1, 2, ...), "
    "pooled over the processes",
    "peak": "ru_maxrss of the measuring process (os.wait4 in benchmarks/engines/launch.py; for "
    "Spark the JVM's, reaped by the child); tree_peak: summed RSS of the process tree sampled "
    "every 0.2 s",
}


@dataclass(frozen=True)
class Job:
    engine: str  # "duckdb" or "spark"
    kind: str  # floor, raw, dpcurator | handwritten, dpcurator, tumult
    shape: engines_data.Shape
    rows: int

    @property
    def key(self) -> str:
        return f"{self.engine}/{self.kind}/{self.shape.key}/{self.rows}"


def plan_jobs(args: argparse.Namespace) -> list[tuple[engines_data.Shape, int, str, list[str]]]:
    """(shape, rows, engine, kinds) in run order, each file once per engine."""
    parts = set(args.only)
    wanted: list[tuple[engines_data.Shape, int, str, list[str]]] = []
    seen: set[tuple[str, int, str]] = set()

    def add(shape: engines_data.Shape, rows: int, engine: str, kinds: tuple[str, ...]) -> None:
        if (shape.key, rows, engine) not in seen:
            seen.add((shape.key, rows, engine))
            wanted.append((shape, rows, engine, list(kinds)))

    if parts & {"duckdb", "scaling"}:
        for rows in args.sizes:
            add(engines_data.BASE, rows, "duckdb", DUCKDB_KINDS)
    if parts & {"shapes", "scaling"}:
        add(engines_data.BASE, args.shape_rows, "duckdb", DUCKDB_KINDS)
        for shape in (engines_data.ROWS10, engines_data.ROWS100, engines_data.GROUPS100K):
            add(shape, args.shape_rows, "duckdb", DUCKDB_KINDS)
    if "spark" in parts:
        for rows in args.sizes:
            if rows in SPARK_SIZES:
                add(engines_data.BASE, rows, "spark", SPARK_KINDS)
    return wanted


def python_with(python: str | Path, modules: str) -> bool:
    try:
        done = subprocess.run(
            [str(python), "-c", f"import {modules}"],
            capture_output=True,
            timeout=120,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


def spark_pythons(args: argparse.Namespace) -> dict[str, tuple[str | None, str]]:
    """The interpreter of each Spark measurement, or None and why not."""
    need = "pyspark, numpy, pandas, pyarrow, duckdb, sqlglot, scipy"
    candidates = (
        [Path(args.spark_python)]
        if args.spark_python
        else [SPARK_VENV / "bin" / "python", Path(sys.executable)]
    )
    spark_py = next((str(c) for c in candidates if c.exists() and python_with(c, need)), None)
    why_not = (
        f"no Python with PySpark and dpcurator's dependencies among "
        f"{', '.join(str(c) for c in candidates)} (run bench_engines.py --setup-spark, or give "
        "--spark-python)"
    )
    tumult_py = PEERS_DIR / "tumult" / "bin" / "python"
    if not (PEERS_DIR / "tumult" / ".stamp").exists():
        failed = PEERS_DIR / "tumult.install-failed"
        tumult: tuple[str | None, str] = (
            None,
            "install failed: " + failed.read_text().strip()[-800:]
            if failed.exists()
            else f"not installed in {PEERS_DIR / 'tumult'} (bash benchmarks/peers/setup_peers.sh "
            "tumult)",
        )
    else:
        tumult = (str(tumult_py), "")
    handwritten = (spark_py, "") if spark_py else (tumult[0], "" if tumult[0] else why_not)
    return {
        "dpcurator": (spark_py, "" if spark_py else why_not),
        "handwritten": handwritten,
        "tumult": tumult,
    }


def setup_spark_venv() -> int:
    """Make ``.venv-peers/spark``: PySpark (Tumult's version) and dpcurator's dependencies."""
    deps = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    python = os.environ.get("PYTHON", "python3")
    steps = [
        [python, "-m", "venv", str(SPARK_VENV)],
        [str(SPARK_VENV / "bin" / "python"), "-m", "pip", "install", "--quiet", "--upgrade", "pip"],
        [str(SPARK_VENV / "bin" / "python"), "-m", "pip", "install", "--quiet", PYSPARK_PIN, *deps],
    ]
    for step in steps:
        print("+", shlex.join(step), flush=True)
        code = subprocess.call(step)
        if code:
            return code
    print(f"ready: {SPARK_VENV} (dpcurator itself is imported from {REPO / 'src'})")
    return 0


def child_command(job: Job, python: str, args: argparse.Namespace, path: Path) -> list[str]:
    if job.engine == "duckdb":
        script = CHILD["duckdb"]
    elif job.kind == "dpcurator":
        script = CHILD["dpcurator-spark"]
    else:
        script = CHILD[job.kind]
    later = (
        args.later if not (job.engine == "spark" and job.kind == "tumult") else args.tumult_later
    )
    return [
        python,
        str(script),
        "--data",
        str(path),
        "--groups",
        str(job.shape.groups),
        "--kind",
        job.kind,
        "--later",
        str(later),
        "--max-seconds",
        str(args.max_seconds),
        "--spark-memory",
        args.spark_memory,
        "--spark-cores",
        str(args.spark_cores),
        *(["--spark-cache"] if args.spark_cache else []),
    ]


def measure_all(args: argparse.Namespace, result: dict[str, Any]) -> None:
    pythons = spark_pythons(args) if "spark" in args.only else {}
    measurements: dict[str, Any] = result["measurements"]
    for shape, rows, engine, kinds in plan_jobs(args):
        path = shape.path(DATA_DIR, rows)
        if not path.exists():  # in a process of its own: 100M rows take several GiB
            subprocess.run(
                [sys.executable, str(HERE / "engines" / "data.py"), shape.key, str(rows), DATA_DIR],
                check=True,
            )
        engines_data.prewarm(path)
        repeats = args.repeats if engine == "duckdb" else args.spark_repeats
        print(f"\n--- {engine}: {shape.label(rows)}, {rows:,} rows ({path.name}) ---", flush=True)
        runs: dict[str, list[dict[str, Any]]] = {k: [] for k in kinds}
        skipped: dict[str, str] = {}
        for rep in range(repeats):
            for kind in kinds:
                job = Job(engine, kind, shape, rows)
                if engine == "duckdb":
                    python: str | None = sys.executable
                else:
                    python, why = pythons[kind]
                    if python is None:
                        skipped[kind] = why
                        continue
                if rep > 0 and runs[kind] and runs[kind][-1].get("timed_out"):
                    continue  # one timeout is enough: no more processes of that kind
                cmd = child_command(job, python, args, path)
                run = run_child(
                    cmd,
                    timeout=args.timeout,
                    log=LOG_DIR / f"{engine}_{kind}_{shape.key}_{rows}_{rep}.log",
                    sample_tree=engine == "spark",
                )
                run["python"] = python
                runs[kind].append(run)
                print(f"  {kind:12s} {brief(run)}", flush=True)
        for kind in kinds:
            job = Job(engine, kind, shape, rows)
            entry: dict[str, Any] = {
                "engine": engine,
                "kind": kind,
                "shape": shape.key,
                "shape_label": shape.label(rows),
                "rows": rows,
                "groups": shape.groups,
                "file": str(path.relative_to(REPO)),
            }
            if kind in skipped:
                entry["summary"] = {"error": f"not measured: {skipped[kind]}"}
            else:
                entry["runs"] = runs[kind]
                entry["summary"] = summarise_runs(runs[kind])
                collect_versions(result["versions"], runs[kind], engine, kind)
            measurements[job.key] = entry


def brief(run: dict[str, Any]) -> str:
    parts = []
    for e in run["events"]:
        if e.get("event") in ("setup", "first"):
            parts.append(f"{e['event']} {e['seconds']:.3f}s")
    later = [e["seconds"] for e in run["events"] if e.get("event") == "later"]
    if later:
        parts.append(f"later {statistics.median(later):.3f}s (n={len(later)})")
    if "peak_rss_mib" in run:
        parts.append(f"peak {run['peak_rss_mib']:.0f} MiB")
    if "tree_peak_rss_mib" in run:
        parts.append(f"tree {run['tree_peak_rss_mib']:.0f} MiB")
    if "error" in run:
        parts.append("ERROR " + str(run["error"])[:400])
    return ", ".join(parts)


def collect_versions(
    versions: dict[str, Any], runs: list[dict[str, Any]], engine: str, kind: str
) -> None:
    for r in runs:
        for e in r["events"]:
            if e.get("event") != "info":
                continue
            for name in ("pyspark", "tumult", "duckdb"):
                if name in e:
                    label = name if name != "pyspark" else f"pyspark ({kind})"
                    versions.setdefault(label, e[name])


# --------------------------------------------------------------------------------------------
# ratios and tables


def summary(
    result: dict[str, Any], engine: str, kind: str, shape: str, rows: int
) -> dict[str, Any]:
    entry = result["measurements"].get(f"{engine}/{kind}/{shape}/{rows}")
    return entry["summary"] if entry else {}


def ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def duckdb_ratios(result: dict[str, Any], shape: str, rows: int) -> dict[str, float | None]:
    floor = summary(result, "duckdb", "floor", shape, rows)
    raw = summary(result, "duckdb", "raw", shape, rows)
    dp = summary(result, "duckdb", "dpcurator", shape, rows)
    return {
        "first_over_floor": ratio(dp.get("first_s"), floor.get("first_s")),
        "peak_over_floor_peak": ratio(dp.get("peak_mib"), floor.get("peak_mib")),
        "later_over_raw": ratio(dp.get("later_s"), raw.get("later_s")),
    }


def spark_ratios(result: dict[str, Any], rows: int) -> dict[str, float | None]:
    hw = summary(result, "spark", "handwritten", "base", rows)
    dp = summary(result, "spark", "dpcurator", "base", rows)
    tm = summary(result, "spark", "tumult", "base", rows)
    return {
        "tumult_over_dpcurator_first": ratio(tm.get("first_s"), dp.get("first_s")),
        "tumult_over_dpcurator_later": ratio(tm.get("later_s"), dp.get("later_s")),
        "dpcurator_over_handwritten_first": ratio(dp.get("first_s"), hw.get("first_s")),
        "dpcurator_over_handwritten_later": ratio(dp.get("later_s"), hw.get("later_s")),
    }


def secs(x: float | None) -> str:
    if x is None:
        return "-"
    if x < 0.1:
        return f"{x:.4f}"
    return f"{x:.3f}" if x < 10 else f"{x:.1f}"


def times(x: float | None) -> str:
    return "-" if x is None else f"**{x:.1f}x**" if x >= 10 else f"**{x:.2f}x**"


def mib(x: float | None) -> str:
    return "-" if x is None else f"{x:,.0f}"


def cell(s: dict[str, Any], key: str) -> str:
    """A seconds cell, or why there is none."""
    if s.get(key) is not None:
        text = secs(s[key])
        if s.get("timed_out") and key == "later_s":
            text += " (then timed out)"
        return text
    if s.get("timed_out"):
        return "timed out"
    if "error" in s:
        return "not measured" if str(s["error"]).startswith("not measured") else "failed"
    return "-"


DUCKDB_HEADER = (
    "floor: GROUP BY unit_id, s",
    "raw GROUP BY grp, first / later, s",
    "dpcurator: open, s",
    "dpcurator first, s",
    "dpcurator later, s",
    "first / floor",
    "later / raw",
    "peak MiB: floor / dpcurator (after imports)",
    "peak / floor's",
)


def duckdb_row(result: dict[str, Any], shape: str, rows: int) -> list[str]:
    floor = summary(result, "duckdb", "floor", shape, rows)
    raw = summary(result, "duckdb", "raw", shape, rows)
    dp = summary(result, "duckdb", "dpcurator", shape, rows)
    r = duckdb_ratios(result, shape, rows)
    return [
        cell(floor, "first_s"),
        f"{cell(raw, 'first_s')} / {cell(raw, 'later_s')}",
        cell(dp, "setup_s"),
        cell(dp, "first_s"),
        cell(dp, "later_s"),
        times(r["first_over_floor"]),
        times(r["later_over_raw"]),
        f"{mib(floor.get('peak_mib'))} / {mib(dp.get('peak_mib'))} ({mib(dp.get('base_mib'))})",
        times(r["peak_over_floor_peak"]),
    ]


def spark_peak(s: dict[str, Any]) -> str:
    """ru_maxrss (the JVM's), else the sampled sum over the process tree, marked with ~."""
    if s.get("peak_mib") is not None:
        return mib(s["peak_mib"])
    if s.get("tree_peak_mib") is not None:
        return "~" + mib(s["tree_peak_mib"])
    return "-"


def md_table(header: list[str], rows: list[list[str]], numeric_from: int = 1) -> str:
    lines = ["| " + " | ".join(header) + " |"]
    aligns = ["---" if i < numeric_from else "---:" for i in range(len(header))]
    lines.append("| " + " | ".join(aligns) + " |")
    lines.extend("| " + " | ".join(r) + " |" for r in rows)
    return "\n".join(lines)


def report(result: dict[str, Any]) -> str:
    out: list[str] = []
    m = result["machine"]
    v = result["versions"]
    out.append(f"Reproduce: `{result['command']}`")
    out.append(
        f"Machine: {m['cores']} cores ({m['cpu']}), {m['memory_gib']:.0f} GiB, Python "
        f"{m['python']}, {m['date']}. Versions: dpcurator {v.get('dpcurator')}, "
        + ", ".join(f"{k} {val}" for k, val in sorted(v.items()) if k != "dpcurator")
        + f". Settings: {result['settings_text']}."
    )
    ms = result["measurements"]
    parts = result["settings"]["only"]
    sizes = result["settings"]["sizes"]
    shape_rows = result["settings"]["shape_rows"]
    if "duckdb" in parts:
        rows = [
            [f"{n:,}", *duckdb_row(result, "base", n)]
            for n in sizes
            if f"duckdb/dpcurator/base/{n}" in ms
        ]
        out.append(
            "\nDuckDB, data on disk (Parquet, 1-5 rows per unit, 1,000 groups): seconds, medians "
            "over fresh processes; peak = ru_maxrss of the measuring process\n"
        )
        out.append(md_table(["rows", *DUCKDB_HEADER], rows))
    if "shapes" in parts:
        rows = []
        for key in ("base", "rows10", "rows100", "groups100k"):
            if f"duckdb/dpcurator/{key}/{shape_rows}" in ms:
                label = ms[f"duckdb/dpcurator/{key}/{shape_rows}"]["shape_label"]
                rows.append([label, *duckdb_row(result, key, shape_rows)])
        out.append(f"\nShapes that fall off ({shape_rows:,} rows, DuckDB, on disk)\n")
        out.append(md_table(["shape", *DUCKDB_HEADER], rows))
    if "spark" in parts:
        rows = []
        for n in sizes:
            if f"spark/dpcurator/base/{n}" not in ms:
                continue
            hw = summary(result, "spark", "handwritten", "base", n)
            dp = summary(result, "spark", "dpcurator", "base", n)
            tm = summary(result, "spark", "tumult", "base", n)
            r = spark_ratios(result, n)
            rows.append(
                [
                    f"{n:,}",
                    f"{cell(hw, 'first_s')} / {cell(hw, 'later_s')}",
                    f"{cell(dp, 'first_s')} / {cell(dp, 'later_s')}",
                    f"{cell(tm, 'first_s')} / {cell(tm, 'later_s')}",
                    f"{times(r['tumult_over_dpcurator_first'])} / "
                    f"{times(r['tumult_over_dpcurator_later'])}",
                    f"{times(r['dpcurator_over_handwritten_first'])} / "
                    f"{times(r['dpcurator_over_handwritten_later'])}",
                    f"{secs(hw.get('setup_s'))} / {secs(dp.get('setup_s'))} / "
                    f"{secs(tm.get('setup_s'))}",
                    " / ".join(spark_peak(x) for x in (hw, dp, tm)),
                ]
            )
        out.append(
            f"\nSpark local[{result['settings']['spark_cores']}], same Parquet files, "
            + ("cached" if result["settings"].get("spark_cache") else "not cached")
            + " (first / later query, seconds)\n"
        )
        out.append(
            md_table(
                [
                    "rows",
                    "hand-written Spark SQL (no noise)",
                    "dpcurator on Spark",
                    "Tumult Analytics",
                    "Tumult / dpcurator",
                    "dpcurator / hand-written",
                    "setup s (Spark start + session): hw / dp / Tumult",
                    "peak MiB (JVM; ~ sampled tree): hw / dp / Tumult",
                ],
                rows,
            )
        )
    if "scaling" in parts:
        out.append("\nScaling (DuckDB, on disk): seconds, and x the first line of each block\n")
        out.append(md_table(SCALING_HEADER, scaling_rows(result), numeric_from=2))
    notes = [
        f"  {key}: {entry['summary']['error'][:300]}"
        for key, entry in ms.items()
        if "error" in entry["summary"]
    ]
    if notes:
        out.append("\nNot measured or incomplete:")
        out.extend(notes)
    return "\n".join(out)


SCALING_HEADER = [
    "by",
    "setting",
    "floor s",
    "raw later s",
    "dpcurator first s",
    "dpcurator later s",
    "x: floor / dp first / dp later",
]


def scaling_blocks(result: dict[str, Any]) -> list[tuple[str, list[tuple[str, str, int]]]]:
    sizes = result["settings"]["sizes"]
    n = result["settings"]["shape_rows"]
    return [
        ("rows", [(f"{r / 1e6:g}M rows", "base", r) for r in sizes]),
        (
            "rows per unit",
            [("1-5", "base", n), ("10", "rows10", n), ("100", "rows100", n)],
        ),
        ("groups", [("1,000", "base", n), ("100,000", "groups100k", n)]),
    ]


def scaling_rows(result: dict[str, Any]) -> list[list[str]]:
    rows: list[list[str]] = []
    for by, settings in scaling_blocks(result):
        first: dict[str, Any] | None = None
        for label, shape, n in settings:
            floor = summary(result, "duckdb", "floor", shape, n)
            raw = summary(result, "duckdb", "raw", shape, n)
            dp = summary(result, "duckdb", "dpcurator", shape, n)
            if not dp:
                continue
            values = {
                "floor": floor.get("first_s"),
                "first": dp.get("first_s"),
                "later": dp.get("later_s"),
            }
            if first is None:
                first = values
            growth = " / ".join(
                "-" if ratio(values[k], first[k]) is None else f"{ratio(values[k], first[k]):.1f}"
                for k in ("floor", "first", "later")
            )
            rows.append(
                [
                    by if label == settings[0][0] else "",
                    f"{label}" + (f" ({n:,} rows)" if by != "rows" else ""),
                    cell(floor, "first_s"),
                    cell(raw, "later_s"),
                    cell(dp, "first_s"),
                    cell(dp, "later_s"),
                    growth,
                ]
            )
    return rows


def plot(result: dict[str, Any], path: Path) -> str:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        return f"no plot: {exc}"
    blocks = scaling_blocks(result)
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.5))
    series = (
        ("floor", "floor", "first_s", "floor: GROUP BY unit_id"),
        ("raw", "raw", "later_s", "raw GROUP BY grp (later)"),
        ("dpcurator", "dp", "first_s", "dpcurator first query"),
        ("dpcurator", "dp", "later_s", "dpcurator later queries"),
    )
    for ax, (by, settings) in zip(axes, blocks, strict=True):
        labels = [label for label, _, _ in settings]
        xs = list(range(len(settings)))
        for kind, _, key, name in series:
            ys = [summary(result, "duckdb", kind, shape, n).get(key) for _, shape, n in settings]
            pts = [(x, y) for x, y in zip(xs, ys, strict=True) if y is not None]
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=name)
        ax.set_xticks(xs, labels)
        ax.set_yscale("log")
        ax.set_xlabel(by)
        ax.set_ylabel("seconds")
        ax.grid(True, which="both", alpha=0.3)
        ax.set_title(f"by {by}")
    axes[0].legend(fontsize=8)
    fig.suptitle("dpcurator on DuckDB, data on disk (Parquet): seconds per query")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return f"wrote {path}"


# --------------------------------------------------------------------------------------------
# machine, versions, main


def machine() -> dict[str, Any]:
    cpu = "?"
    memory = 0.0
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                memory = int(line.split()[1]) / 2**20
    except OSError:
        pass
    return {
        "cores": os.cpu_count(),
        "cpu": cpu,
        "memory_gib": memory,
        "python": platform.python_version(),
        "machine": platform.machine(),
        "load_average": os.getloadavg(),
        "date": datetime.date.today().isoformat(),
    }


def git_rev() -> str:
    env = {**os.environ, "GIT_OPTIONAL_LOCKS": "0"}  # read only: no index refresh
    try:
        rev = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=REPO,
            capture_output=True,
            text=True,
            check=True,
            env=env,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no", "--", "src"],
            cwd=REPO,
            capture_output=True,
            text=True,
            check=True,
            env=env,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return rev + (" + uncommitted changes in src/" if dirty else "")


# --------------------------------------------------------------------------------------------
# --statements: the first query's statements against the single pass, in one process


def statement_timings(args: argparse.Namespace) -> None:
    """Time the first query's statements and the single pass, in one process.

    For each shape at ``--shape-rows`` rows: the floor, the current units-beyond-bounds
    statement (``over``), the aggregation a session runs after it (without bounding steps
    when no unit is beyond its bounds, else every unit's pairs scaled), both together, and
    the single pass (``Statements.single``: one aggregation per unit, the same aggregates);
    each ``--repeats`` times, interleaved, CPU seconds of this process (user + system, all
    DuckDB threads) and wall seconds, medians. The statements are the ones dpcurator renders
    for the benchmark's declaration (``src`` of this checkout).
    """

    sys.path.insert(0, str(REPO / "src"))
    from dpcurator.accounting import Budget
    from dpcurator.curator import Column, Session, Table
    from dpcurator.curator._statements import all_pairs, without_heavy

    rows = args.shape_rows
    print(f"statements at {rows:,} rows: CPU s (wall s), medians of {args.repeats}")
    for shape in (engines_data.BASE, engines_data.ROWS10, engines_data.ROWS100):
        path = shape.path(DATA_DIR, rows)
        if not path.exists():
            subprocess.run(
                [sys.executable, str(HERE / "engines" / "data.py"), shape.key, str(rows), DATA_DIR],
                check=True,
            )
        table = Table(
            "t",
            str(path),
            privacy_unit="unit_id",
            max_rows_per_unit=5,
            max_groups_per_unit=1,
            columns=[
                Column("grp", domain=list(range(shape.groups))),
                Column("value", lower=0.0, upper=100.0, nullable=False),
            ],
        )
        session = Session(table, Budget(1e9), ledger=":memory:")
        plan = session.plan("SELECT grp, COUNT(*), SUM(value) FROM t GROUP BY grp", epsilon=1)
        engine = session._engine
        assert plan.statements.over is not None
        heavy = shape.key != engines_data.BASE.key
        main = all_pairs(plan.statements.main) if heavy else without_heavy(plan.statements.main)
        relation = engine.relation("t")
        assert plan.statements.single is not None
        over = engine.render(plan.statements.over, "t")
        statements = {
            "floor": f"SELECT COUNT(*), SUM(n) FROM (SELECT unit_id, COUNT(*) AS n FROM "
            f"{relation} GROUP BY unit_id)",
            "over": f"SELECT COUNT(*) FROM ({over})",
            "aggregation": engine.render(main, "t"),
            "single pass": engine.render(plan.statements.single, "t"),
        }
        conn = engine._connection
        today = sorted(tuple(r) for r in conn.execute(statements["aggregation"]).fetchall())
        single = sorted(tuple(r) for r in conn.execute(statements["single pass"]).fetchall())
        if today != single:
            raise SystemExit(f"{shape.key}: the single pass differs from the aggregation")
        spent: dict[str, list[tuple[float, float]]] = {name: [] for name in statements}
        for _ in range(args.repeats):
            for name, sql in statements.items():
                spent[name].append(_timed(conn, {}, sql))
        med = {
            name: (statistics.median(c for c, _ in xs), statistics.median(w for _, w in xs))
            for name, xs in spent.items()
        }
        both = (med["over"][0] + med["aggregation"][0], med["over"][1] + med["aggregation"][1])
        med["over + aggregation (today)"] = both
        floor = med["floor"][0]
        print(f"\n{shape.label(rows)}:")
        for name, (c, w) in med.items():
            print(f"  {name:28s} {c:7.3f} ({w:6.3f})  {c / floor:5.2f}x the floor's CPU")
        session.close()


# --------------------------------------------------------------------------------------------
# --statements --compare SRC: a session's statements from two checkouts, in one process

COMPARED_QUERIES = {
    "first": "SELECT grp, COUNT(*), SUM(value), AVG(value) FROM t GROUP BY grp",
    "later": "SELECT grp, COUNT(*), SUM(value), AVG(value) FROM t WHERE value > 1 GROUP BY grp",
}
"""The benchmark's first query and a later one (``WHERE value > i``, as in the sessions)."""
CACHE = "__bench_cache"
"""The name the compared statements read the units beyond their bounds from."""


def render_session_statements(src: str, path: str, groups: int, heavy: bool) -> dict[str, str]:
    """Return the DuckDB SQL a session of ``src``'s dpcurator runs for :data:`COMPARED_QUERIES`.

    ``over`` (materialized by the session as :data:`CACHE`), then per query the statement the
    session runs with that cache: every unit's pairs scaled (``heavy``: at least 65,536 units
    beyond their bounds) or the rows as they are (none beyond). The rows are read with
    ``read_parquet`` instead of the session's view of it. Run in a child process
    (``--render-statements``), so that ``src`` is the only dpcurator imported.
    """
    sys.path.insert(0, src)
    from sqlglot import exp

    from dpcurator.accounting import Budget
    from dpcurator.curator import Column, Session, Table
    from dpcurator.curator._statements import all_pairs, with_over, without_heavy

    table = Table(
        "t",
        path,
        privacy_unit="unit_id",
        max_rows_per_unit=5,
        max_groups_per_unit=1,
        columns=(
            Column("grp", domain=tuple(range(groups))),
            Column("value", lower=0.0, upper=100.0, nullable=False),
        ),
    )
    session = Session(table, Budget(1e9), ledger=":memory:")
    engine: Any = session._engine  # a DuckDBEngine
    relation, reader = engine.relation("t"), f"read_parquet('{path}')"
    out: dict[str, str] = {}
    for name, query in COMPARED_QUERIES.items():
        plan = session.plan(query, epsilon=1)
        main = plan.statements.main
        tree = all_pairs(with_over(main, exp.to_table(CACHE))) if heavy else without_heavy(main)
        out[name] = engine.render(tree, "t").replace(relation, reader)
        assert plan.statements.over is not None
        out["over"] = engine.render(plan.statements.over, "t").replace(relation, reader)
    out["settings"] = json.dumps(_changed_settings(engine._connection))
    session.close()
    return out


def _changed_settings(conn: Any) -> dict[str, str]:
    """The settings of ``conn`` that differ from a fresh connection's (the engine's own)."""
    query = "SELECT name, value FROM duckdb_settings()"
    fresh = dict(duckdb.connect().execute(query).fetchall())
    return {k: v for k, v in conn.execute(query).fetchall() if fresh.get(k) != v}


def compare_statements(args: argparse.Namespace) -> None:
    """Time the statements of ``--compare``'s checkout and of this one, alternated.

    Per shape at ``--shape-rows`` rows, each ``--repeats`` times: the floor, then each
    checkout's units beyond their bounds materialized as the session does (``CREATE TEMP
    TABLE``), its first query's statement and its later one's, both reading its own cache,
    each under the settings that checkout's engine gives its own DuckDB connection; the two
    checkouts take turns going first. CPU
    seconds of this process (user + system, all DuckDB threads), wall seconds, medians; the
    two checkouts' aggregates are checked equal.
    """
    checkouts = {"before": str(Path(args.compare).resolve()), "after": str(REPO / "src")}
    conn = duckdb.connect()
    rows = args.shape_rows
    print(f"statements at {rows:,} rows: CPU s (wall s), medians of {args.repeats}")
    print(f"before: {checkouts['before']}; after: {checkouts['after']}")
    shapes = (engines_data.BASE, engines_data.ROWS10, engines_data.ROWS100, engines_data.GROUPS100K)
    for shape in shapes:
        path = engines_data.ensure(shape, rows, DATA_DIR)
        floor = (
            f"SELECT COUNT(*), SUM(n) FROM (SELECT unit_id, COUNT(*) AS n FROM "
            f"read_parquet('{path}') GROUP BY unit_id)"
        )
        tasks: dict[str, tuple[dict[str, str], str]] = {"floor": ({}, floor)}
        for label, src in checkouts.items():
            tasks.update(_checkout_tasks(label, src, shape, path))
        _check_same(conn, tasks)
        spent: dict[str, list[tuple[float, float]]] = {name: [] for name in tasks}
        names = list(tasks)
        for repeat in range(args.repeats):
            # The floor, then the checkouts in turn, in the other order every other repeat
            # (whichever runs second finds more of the file in DuckDB's and the OS's caches).
            order = names if repeat % 2 == 0 else [names[0], *names[4:], *names[1:4]]
            for name in order:
                settings, sql = tasks[name]
                spent[name].append(_timed(conn, settings, sql))
        _print_compared(shape.label(rows), spent)


def _checkout_tasks(
    label: str, src: str, shape: engines_data.Shape, path: Path
) -> dict[str, tuple[dict[str, str], str]]:
    """One checkout's statements (rendered in a child process) with its engine's settings."""
    command = [sys.executable, __file__, "--render-statements", src, str(path)]
    command += [str(shape.groups), "1" if shape.lo > 5 else "0"]
    done = subprocess.run(command, check=True, capture_output=True, text=True)
    rendered: dict[str, str] = json.loads(done.stdout)
    settings: dict[str, str] = json.loads(rendered.pop("settings"))
    sql = {k: v.replace(CACHE, f"{CACHE}_{label}") for k, v in rendered.items()}
    return {
        f"over {label}": (
            settings,
            f"CREATE OR REPLACE TEMP TABLE {CACHE}_{label} AS {sql['over']}",
        ),
        f"first {label}": (settings, sql["first"]),
        f"later {label}": (settings, sql["later"]),
    }


def _timed(conn: Any, settings: dict[str, str], sql: str) -> tuple[float, float]:
    """CPU and wall seconds of ``sql`` under ``settings`` (reset afterwards)."""
    import resource

    for name, value in settings.items():
        conn.execute(f"SET {name} = '{value}'")
    usage = resource.getrusage(resource.RUSAGE_SELF)
    c0, t0 = usage.ru_utime + usage.ru_stime, time.perf_counter()
    conn.execute(sql).fetchall()
    wall = time.perf_counter() - t0
    usage = resource.getrusage(resource.RUSAGE_SELF)
    for name in settings:
        conn.execute(f"RESET {name}")
    return usage.ru_utime + usage.ru_stime - c0, wall


def _check_same(conn: Any, tasks: dict[str, tuple[dict[str, str], str]]) -> None:
    """Run each checkout's statements once; their aggregates must be equal."""
    results: dict[str, list[Any]] = {}
    for name, (_, sql) in tasks.items():
        out = conn.execute(sql).fetchall()
        results[name] = sorted(tuple(r) for r in out)
    for query in ("first", "later"):
        if results[f"{query} before"] != results[f"{query} after"]:
            raise SystemExit(f"the two checkouts' {query} queries differ")


def _print_compared(label: str, spent: dict[str, list[tuple[float, float]]]) -> None:
    med = {
        name: (statistics.median(c for c, _ in xs), statistics.median(w for _, w in xs))
        for name, xs in spent.items()
    }
    for label_ in ("before", "after"):
        over, first = med[f"over {label_}"], med[f"first {label_}"]
        med[f"first query {label_} (both)"] = (over[0] + first[0], over[1] + first[1])
    floor = med["floor"][0]
    print(f"\n{label}:")
    for name, (c, w) in med.items():
        print(f"  {name:28s} {c:7.3f} ({w:6.3f})  {c / floor:5.2f}x the floor's CPU")


MEMORY_CHILD = HERE / "engines" / "statement_child.py"


def statement_memory(args: argparse.Namespace) -> None:
    """Peak memory of a session's statements and of its imports, one fresh process each.

    For the 1-5 rows per unit shape at each of ``--sizes`` rows, ``--repeats`` times: the
    floor (DuckDB's default settings), then for this checkout (and ``--compare``'s, the two
    taking turns going first) ``import dpcurator.curator`` alone, the units beyond their
    bounds materialized as a session does (``CREATE TEMP TABLE``) alone, and followed by the
    first query's statement, under the settings that checkout's engine gives its connection.
    Each runs in its own child through ``launch.py``: its peak is the child's ``ru_maxrss``.
    Medians, and each against the floor's. A session's peak is about its statements' plus its
    imports' beyond DuckDB's own (the floor's process imports DuckDB only).
    """
    checkouts = {"after": str(REPO / "src")}
    if args.compare:
        checkouts = {"before": str(Path(args.compare).resolve()), **checkouts}
    print(f"peak memory, MiB (ru_maxrss of one fresh process each), medians of {args.repeats}")
    for label, src in checkouts.items():
        print(f"{label}: {src}")
    for rows in args.sizes:
        path = engines_data.ensure(engines_data.BASE, rows, DATA_DIR)
        floor = (
            f"SELECT COUNT(*), SUM(n) FROM (SELECT unit_id, COUNT(*) AS n FROM "
            f"read_parquet('{path}') GROUP BY unit_id)"
        )
        tasks: dict[str, dict[str, Any]] = {"floor": {"statements": [floor]}}
        for label, src in checkouts.items():
            rendered = _checkout_tasks(label, src, engines_data.BASE, path)
            settings, over = rendered[f"over {label}"]
            first = rendered[f"first {label}"][1]
            tasks[f"imports {label}"] = {"imports": ["dpcurator.curator"], "src": src}
            tasks[f"over {label}"] = {"settings": settings, "statements": [over]}
            tasks[f"over + first {label}"] = {"settings": settings, "statements": [over, first]}
        peaks: dict[str, list[float]] = {name: [] for name in tasks}
        names = list(tasks)
        for repeat in range(args.repeats):
            order = names if repeat % 2 == 0 else [names[0], *names[4:], *names[1:4]]
            for name in order:
                task_path = LOG_DIR / "memory_task.json"
                task_path.parent.mkdir(parents=True, exist_ok=True)
                task_path.write_text(json.dumps(tasks[name]))
                cmd = [sys.executable, str(MEMORY_CHILD), str(task_path)]
                log = LOG_DIR / f"memory_{rows}_{name.replace(' ', '_').replace('+', 'and')}.log"
                run = run_child(cmd, timeout=args.timeout, log=log)
                if "error" in run or "peak_rss_mib" not in run:
                    raise SystemExit(f"{name}: {run.get('error', 'no peak memory')}")
                peaks[name].append(run["peak_rss_mib"])
        floor_peak = statistics.median(peaks["floor"])
        print(f"\n{engines_data.BASE.label(rows)}, {rows:,} rows:")
        for name, xs in peaks.items():
            peak = statistics.median(xs)
            runs = ", ".join(f"{x:,.0f}" for x in xs)
            print(f"  {name:22s} {peak:8,.0f}  {peak / floor_peak:5.2f}x the floor's  ({runs})")


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=list(DEFAULT_SIZES))
    parser.add_argument("--only", nargs="+", choices=PARTS, default=list(PARTS))
    parser.add_argument(
        "--repeats",
        type=int,
        default=None,
        help="fresh processes per DuckDB measurement (default 3; --quick 2)",
    )
    parser.add_argument(
        "--spark-repeats", type=int, default=1, help="fresh processes per Spark measurement"
    )
    parser.add_argument(
        "--later", type=int, default=None, help="later queries per session (default 5; --quick 3)"
    )
    parser.add_argument(
        "--tumult-later", type=int, default=2, help="later queries per Tumult session"
    )
    parser.add_argument(
        "--max-seconds", type=float, default=60.0, help="no more later queries once one took longer"
    )
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per child process")
    parser.add_argument(
        "--shape-rows", type=int, default=None, help="rows of the shapes (default 10M; --quick 1M)"
    )
    parser.add_argument("--quick", action="store_true", help="1M rows only, few repeats")
    parser.add_argument("--spark-python", default=None)
    parser.add_argument("--spark-memory", default="8g", help="spark.driver.memory")
    parser.add_argument("--spark-cores", type=int, default=2, help="Spark local[N]")
    parser.add_argument(
        "--spark-cache",
        action="store_true",
        help="Spark: cache the DataFrame in memory in the setup (default: read the file)",
    )
    parser.add_argument("--setup-spark", action="store_true", help=f"make {SPARK_VENV} and stop")
    parser.add_argument("--out", type=Path, default=HERE / "results" / "engines.json")
    parser.add_argument("--plot", type=Path, default=HERE / "results" / "engines.png")
    parser.add_argument("--show", type=Path, default=None, help="print a saved JSON's tables")
    parser.add_argument(
        "--statements",
        action="store_true",
        help="time the first query's statements against a single pass (one process) and stop",
    )
    parser.add_argument(
        "--compare",
        default=None,
        metavar="SRC",
        help="with --statements: time the statements a session runs as rendered by another "
        "checkout's src (e.g. of `git worktree add /tmp/base HEAD`) and by this one, alternated",
    )
    parser.add_argument(
        "--memory",
        action="store_true",
        help="with --statements: peak memory of a session's statements and imports at --sizes "
        "rows, one fresh process each (with --compare SRC: that checkout's too)",
    )
    parser.add_argument("--render-statements", nargs=4, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.render_statements is not None:
        src, path, groups, heavy = args.render_statements
        print(json.dumps(render_session_statements(src, path, int(groups), heavy == "1")))
        return {}
    if args.setup_spark:
        sys.exit(setup_spark_venv())
    if args.show is not None:
        saved: dict[str, Any] = json.loads(args.show.read_text())
        print(report(saved))
        return saved
    if args.quick:
        args.sizes = [1_000_000]
    args.repeats = args.repeats or (2 if args.quick else 3)
    args.later = args.later or (3 if args.quick else 5)
    args.shape_rows = args.shape_rows or (1_000_000 if args.quick else 10_000_000)
    args.sizes = sorted(set(args.sizes))
    if args.statements and args.memory:
        statement_memory(args)
        return {}
    if args.statements and args.compare:
        compare_statements(args)
        return {}
    if args.statements:
        statement_timings(args)
        return {}
    python = (
        os.path.relpath(sys.executable, REPO)
        if sys.executable.startswith(str(REPO))
        else sys.executable
    )
    command = shlex.join(
        [python, "benchmarks/bench_engines.py", *(argv if argv is not None else sys.argv[1:])]
    )
    result: dict[str, Any] = {
        "benchmark": "the curator's engines side by side (bench_engines.py)",
        "command": command,
        "machine": machine(),
        "versions": {"dpcurator": git_rev(), "duckdb": duckdb.__version__},
        "settings": {
            "only": args.only,
            "sizes": args.sizes,
            "shape_rows": args.shape_rows,
            "repeats": args.repeats,
            "spark_repeats": args.spark_repeats,
            "later": args.later,
            "tumult_later": args.tumult_later,
            "max_seconds": args.max_seconds,
            "timeout": args.timeout,
            "spark_memory": args.spark_memory,
            "spark_cores": args.spark_cores,
            "spark_cache": args.spark_cache,
            "epsilon": 1.0,
        },
        "settings_text": (
            f"{args.repeats} fresh processes per DuckDB measurement, {args.spark_repeats} per "
            f"Spark one; {args.later} later queries per session ({args.tumult_later} for "
            f"Tumult); timeout {args.timeout:.0f} s per process; Spark local[{args.spark_cores}], "
            f"driver memory {args.spark_memory}, DataFrames "
            + ("cached in memory in the setup" if args.spark_cache else "read from the file")
        ),
        "definitions": DEFINITIONS,
        "measurements": {},
    }
    started = time.perf_counter()
    measure_all(args, result)
    result["ratios"] = {
        "duckdb": {
            f"{shape}/{n}": duckdb_ratios(result, shape, n)
            for key in result["measurements"]
            if key.startswith("duckdb/dpcurator/")
            for shape, n in [(key.split("/")[2], int(key.split("/")[3]))]
        },
        "spark": {
            str(n): spark_ratios(result, n)
            for n in args.sizes
            if f"spark/dpcurator/base/{n}" in result["measurements"]
        },
    }
    result["total_seconds"] = time.perf_counter() - started
    if "scaling" in args.only:
        result["plot"] = plot(result, args.plot)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2, default=str) + "\n")
    print()
    print(report(result))
    print(f"\ntotal {result['total_seconds']:.0f} s; wrote {args.out}")
    if "plot" in result:
        print(result["plot"])
    return result


if __name__ == "__main__":
    main()
