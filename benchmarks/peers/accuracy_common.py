"""Shared pieces of the accuracy benchmark (``benchmarks/bench_accuracy.py`` and its peers).

Imported by the driver (``.venv``) and by every peer script (each in its own venv under
``.venv-peers/``), so it needs nothing but the standard library.

The driver writes a workload file (JSON): the two tables (a Parquet path each, already bounded
so that no system's own contribution bounding drops a row), their declarations (privacy unit,
rows per unit, groups per unit, rows per group, value bounds, public key domains), the queries,
the total budget per table and the number of repetitions. A peer reads it, answers every query
``repeats`` times at its share of the budget and prints one JSON line:
``{"library", "version", "seconds", "setup_seconds", "results": {query id: [rep answers]},
"notes": {...}, "unsupported": {query id: reason}}``, where a rep answer maps a cell key
(:func:`cell_key`) to the released value.
"""

from __future__ import annotations

import json
import math
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

Answer = dict[str, float]
"""One released table: cell key -> value (the one cell of an ungrouped query is ``""``)."""


def load_workload(path: Path) -> dict[str, Any]:
    workload: dict[str, Any] = json.loads(Path(path).read_text())
    return workload


def cell_key(values: Sequence[Any]) -> str:
    """The key of a group: its key values, integers written as integers, joined by ``|``."""
    parts = []
    for v in values:
        parts.append(str(int(v)) if isinstance(v, float) and v.is_integer() else str(v))
    return "|".join(parts)


def clamp(value: Any, lower: float, upper: float) -> float:
    """A released average or quantile clamped into the declared bounds (free post-processing)."""
    x = float(value) if value is not None else math.nan
    if math.isnan(x):
        return (lower + upper) / 2.0
    return min(max(x, lower), upper)


def quantile_candidates(lower: float, upper: float, points: int = 1025) -> list[float]:
    """The 1,025 evenly spaced points of the declared range (dpcurator's candidate set)."""
    return [lower + (upper - lower) * i / (points - 1) for i in range(points)]


def queries_of(workload: dict[str, Any], table: str) -> list[dict[str, Any]]:
    return [q for q in workload["queries"] if q["table"] == table]


def per_query_budget(workload: dict[str, Any], table: str) -> tuple[float, float]:
    """Each query's even share (epsilon, delta) of the table's total budget."""
    n = len(queries_of(workload, table))
    return workload["epsilon"] / n, workload["delta"] / n


def run_peer(
    library: str,
    version: Callable[[], str],
    answer_all: Callable[[dict[str, Any]], tuple[dict[str, list[Answer]], dict[str, str], float]],
    notes: dict[str, Any],
) -> int:
    """Read ``--workload``, run ``answer_all`` and print the record (one JSON line)."""
    import argparse

    parser = argparse.ArgumentParser(description=f"{library} on the accuracy benchmark")
    parser.add_argument("--workload", type=Path, required=True)
    args = parser.parse_args()
    workload = load_workload(args.workload)
    record: dict[str, Any] = {"library": library}
    try:
        record["version"] = version()
        t0 = time.perf_counter()
        results, unsupported, setup = answer_all(workload)
        record["seconds"] = time.perf_counter() - t0
        record["setup_seconds"] = setup
        record["results"] = results
        record["unsupported"] = unsupported
        record["notes"] = notes
    except Exception as error:  # reported, never a made-up figure
        record["error"] = f"{type(error).__name__}: {error}"
        traceback.print_exc(file=sys.stderr)
    print(json.dumps(record), flush=True)
    return 0 if "error" not in record else 1
