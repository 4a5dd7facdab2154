"""Shared pieces of the DP GROUP BY benchmark (``benchmarks/bench_curator.py`` and its peers).

Imported by the driver (``.venv-bench``) and by every peer script (each in its own venv under
``.venv-peers/``), so it needs nothing but the standard library and numpy (plus pyarrow for
:func:`generate`, which only the driver calls).

The workload, the same for every library:

- data ``sql_<rows>.parquet``: ``unit_id`` (int64), ``grp`` (int64 in 0..999), ``value``
  (float64 in [0, 100]). Each unit has 1 to 5 rows, all in one group, so the contribution bounds
  (5 rows per unit, 1 group per unit, values in [0, 100]) drop nothing and the exact GROUP BY is
  the target of every library;
- the query: per group COUNT(*), SUM(value), AVG(value); total epsilon 1.0 for the whole query
  (each library splits it its own way), delta 1e-6 where a library needs one; the 1,000 group
  keys are public (no partition selection);
- timing: the library's session/reader/context is built first (its one-off ``setup_seconds``);
  then one warm-up and ``repeats`` timed runs from the data in memory to the DP result in hand;
- error: mean absolute error per metric over the 1,000 groups against the exact answer,
  averaged over the timed repeats.
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import statistics
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

GROUPS = 1000
MAX_ROWS_PER_UNIT = 5
LOWER, UPPER = 0.0, 100.0
EPSILON = 1.0
DELTA = 1e-6
METRICS = ("count", "sum", "avg")
SEED = 20261122

Estimate = dict[str, np.ndarray]
"""metric name -> float64 array of length GROUPS, indexed by group key (NaN where missing)."""


# --------------------------------------------------------------------------------------------
# data and truth


def data_path(directory: Path, rows: int) -> Path:
    return directory / f"sql_{rows}.parquet"


def truth_path(directory: Path, rows: int) -> Path:
    return directory / f"sql_{rows}.truth.json"


def generate(rows: int, path: Path, seed: int = SEED) -> None:
    """Write ``rows`` rows: units of 1..5 rows each (uniform), each unit in one uniform group.

    Values are normal around a per-group mean (uniform in [20, 80]) with sd 15, clipped to
    [0, 100]; the rows are shuffled so that a unit's rows are not adjacent. A fixture generator:
    numpy's seeded generator is fine here (no privacy noise is drawn).
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(seed)
    units = rows // 3 + 16
    sizes = rng.integers(1, MAX_ROWS_PER_UNIT + 1, size=units)
    while int(sizes.sum()) < rows:  # pragma: no cover - 1..5 averages 3, so rarely needed
        sizes = np.concatenate([sizes, rng.integers(1, MAX_ROWS_PER_UNIT + 1, size=units)])
    cut = int(np.searchsorted(np.cumsum(sizes), rows))
    sizes = sizes[: cut + 1].copy()
    sizes[-1] -= int(sizes.sum()) - rows
    n_units = sizes.size
    unit_group = rng.integers(0, GROUPS, size=n_units)
    group_mean = rng.uniform(20.0, 80.0, size=GROUPS)
    unit_id = np.repeat(np.arange(n_units, dtype=np.int64), sizes)
    grp = np.repeat(unit_group, sizes).astype(np.int64)
    value = np.clip(rng.normal(group_mean[grp], 15.0), LOWER, UPPER)
    order = rng.permutation(rows)
    table = pa.table(
        {"unit_id": unit_id[order], "grp": grp[order], "value": value[order].astype(np.float64)}
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    pq.write_table(table, tmp, row_group_size=1 << 20)
    tmp.replace(path)


def write_truth(path: Path, counts: np.ndarray, sums: np.ndarray) -> None:
    """Store the exact per-group COUNT(*) and SUM(value) (AVG follows)."""
    path.write_text(
        json.dumps({"count": [float(c) for c in counts], "sum": [float(s) for s in sums]})
    )


def load_truth(path: Path) -> Estimate:
    raw = json.loads(path.read_text())
    count = np.asarray(raw["count"], dtype=np.float64)
    total = np.asarray(raw["sum"], dtype=np.float64)
    return {"count": count, "sum": total, "avg": total / count}


# --------------------------------------------------------------------------------------------
# errors


def estimate_from_columns(
    keys: Sequence[Any], count: Sequence[Any], total: Sequence[Any], avg: Sequence[Any]
) -> Estimate:
    """Put a library's per-group output in group-key order (missing groups stay NaN)."""
    out = {m: np.full(GROUPS, np.nan) for m in METRICS}
    idx = np.asarray([int(k) for k in keys], dtype=np.int64)
    for name, col in (("count", count), ("sum", total), ("avg", avg)):
        out[name][idx] = np.asarray(
            [np.nan if v is None else float(v) for v in col], dtype=np.float64
        )
    return out


def errors(estimate: Estimate, truth: Estimate) -> dict[str, float]:
    """Mean absolute error per metric over the groups; a missing group counts as its truth.

    A group a library did not release (NaN) is scored as if it released 0: its absolute error is
    the true value. ``missing`` counts such groups. ``avg_clamped`` scores AVG clamped into
    [LOWER, UPPER] (a ratio of two noisy values is unbounded; clamping is free post-processing).
    """
    out: dict[str, float] = {}
    for m in METRICS:
        est = estimate[m]
        with np.errstate(invalid="ignore"):
            err = np.where(np.isnan(est), np.abs(truth[m]), np.abs(est - truth[m]))
        out[m] = float(np.mean(err))
    # A ratio of noisy sum to noisy count can be anything (count near 0): also score AVG after
    # the post-processing any user would apply, clamping into [LOWER, UPPER].
    avg = np.clip(np.nan_to_num(estimate["avg"], nan=0.0), LOWER, UPPER)
    out["avg_clamped"] = float(np.mean(np.abs(avg - truth["avg"])))
    out["missing"] = float(np.isnan(estimate["count"]).sum())
    return out


# --------------------------------------------------------------------------------------------
# the timing loop shared by every library


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--data", type=Path, required=True, help="the sql_<rows>.parquet file")
    p.add_argument("--truth", type=Path, required=True, help="the sql_<rows>.truth.json file")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--epsilon", type=float, default=EPSILON)
    p.add_argument("--delta", type=float, default=DELTA)
    p.add_argument(
        "--max-seconds",
        type=float,
        default=60.0,
        help="stop repeating once one run took longer than this (fewer repeats, reported)",
    )
    return p.parse_args(argv)


def measure(
    library: str,
    version: str,
    args: argparse.Namespace,
    *,
    load: Callable[[Path], Any],
    setup: Callable[[Any, int], Any],
    query: Callable[[Any], Estimate],
    notes: dict[str, Any],
) -> dict[str, Any]:
    """Load, set up, warm up, then time ``repeats`` runs of the DP query; return the record.

    ``load(path)`` reads the parquet file into the library's natural in-memory form (not timed);
    ``setup(data, runs)`` builds the library's session/reader/context able to answer ``runs``
    queries at ``args.epsilon`` each (timed once, reported as ``setup_seconds``);
    ``query(state)`` runs the DP query and returns the estimates (timed).
    """
    truth = load_truth(args.truth)
    data = load(args.data)
    runs = args.repeats + 1
    t0 = time.perf_counter()
    state = setup(data, runs)
    setup_seconds = time.perf_counter() - t0
    t0 = time.perf_counter()
    query(state)  # warm-up (JIT, caches, Spark's first job)
    warmup = time.perf_counter() - t0
    times: list[float] = []
    errs: list[dict[str, float]] = []
    for _ in range(args.repeats):
        if times and times[-1] > args.max_seconds:
            break
        t0 = time.perf_counter()
        est = query(state)
        times.append(time.perf_counter() - t0)
        errs.append(errors(est, truth))
    mean_err = {k: statistics.fmean(e[k] for e in errs) for k in errs[0]}
    return {
        "library": library,
        "version": version,
        "rows": rows_of(args.data),
        "seconds": statistics.median(times),
        "min_seconds": min(times),
        "times": times,
        "repeats": len(times),
        "repeats_asked": args.repeats,
        "warmup_seconds": warmup,
        "setup_seconds": setup_seconds,
        "epsilon": args.epsilon,
        "errors": mean_err,
        "python": platform.python_version(),
        **notes,
    }


def run_main(
    library: str,
    version: Callable[[], str],
    *,
    load: Callable[[Path], Any],
    setup: Callable[[Any, int], Any],
    query: Callable[[Any], Estimate],
    notes: dict[str, Any],
    argv: Sequence[str] | None = None,
) -> int:
    """Run :func:`measure` and print its record as one JSON line (or an error record)."""
    args = parse_args(argv)
    try:
        record = measure(library, version(), args, load=load, setup=setup, query=query, notes=notes)
    except Exception as exc:  # report why a peer could not run, never a made-up figure
        record = {
            "library": library,
            "error": f"{type(exc).__name__}: {exc}",
            "traceback": traceback.format_exc(limit=8),
        }
        print(json.dumps(record), flush=True)
        return 1
    print(json.dumps(record, default=_json_default), flush=True)
    return 0


def _json_default(obj: Any) -> Any:
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, float) and math.isnan(obj):  # pragma: no cover
        return None
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")


def rows_of(path: Path) -> int:
    """Row count from the file name sql_<rows>.parquet."""
    return int(path.stem.split("_")[1])


if __name__ == "__main__":  # pragma: no cover
    sys.exit("a library module: run bench_curator.py or a peer script")
