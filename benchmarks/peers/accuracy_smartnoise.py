"""SmartNoise SQL on the accuracy benchmark; run by ``benchmarks/bench_accuracy.py``.

Run in its own venv: ``.venv-peers/smartnoise/bin/python benchmarks/peers/accuracy_smartnoise.py
--workload benchmarks/results/data/accuracy_workload.json``. Prints one JSON line.

How the workload is expressed (smartnoise-sql 1.0.10, ``snsql.from_df`` over a pandas DataFrame,
copied once per table into SmartNoise's SQL engine; one ``PrivateReader`` per query budget over
that copy):

- metadata: the unit column is the ``private_id``; ``max_ids`` = rows per unit (4 households, 60
  aircraft), enforced by reservoir sampling (``sample_max_ids``); numeric columns bounded as
  declared (``clamp_columns``); ``censor_dims: False`` (no thresholding of groups: the keys are
  public, and SmartNoise releases the groups present in the data; an absent group scores 0).
  SmartNoise has no groups-per-unit or rows-per-group bound: one unit moves the vector of cells
  by ``max_ids`` rows (L1), the same L1 as the other systems' bounds;
- budget: each query gets an even share ``1/Q`` of the table's epsilon 1.0 (and ``1e-6/Q`` of
  delta, which nothing here uses); SmartNoise's ``Privacy(epsilon=e)`` is spent by each noisy
  column, so ``e`` is chosen so that ``reader.get_privacy_cost(query)`` (its odometer) is the
  query's share (an AVG is a noisy SUM and a noisy COUNT: 2 shares). Mechanisms: SmartNoise's
  defaults (discrete Laplace for counts and integer sums).
- the median: SmartNoise SQL 1.0.10 has no private quantile (``PERCENTILE_CONT`` is a token of
  its grammar, nothing more): the query is tried and recorded as not supported;
- ``year`` and ``month`` are reserved words of its SQL: the columns are renamed in its copy;
- SmartNoise refuses a mechanism whose rough noise scale exceeds 10,000,000 (``(upper - lower)
  x max_ids / epsilon``): AVG(wages) over [0, 250,000] with 4 rows per household at epsilon
  1/14 per noisy column is refused (recorded as not supported at this budget).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import accuracy_common as common
import pandas as pd
import snsql
from snsql.sql.private_reader import PrivateReader

RENAMED = {"year": "yr", "month": "mon"}
"""Columns whose names are reserved words in SmartNoise's SQL grammar, renamed in its copy."""


def _n(column: str) -> str:
    return RENAMED.get(column, column)


def version() -> str:
    import importlib.metadata

    return importlib.metadata.version("smartnoise-sql")


def metadata(name: str, decl: dict[str, Any], frame: pd.DataFrame) -> dict[str, Any]:
    cols: dict[str, Any] = {
        "rows": len(frame),
        "row_privacy": False,
        "max_ids": decl["max_rows_per_unit"],
        "sample_max_ids": True,
        "censor_dims": False,
        "clamp_counts": False,
        "clamp_columns": True,
    }
    ints = set(decl["int_columns"])
    unit_type = "string" if frame[decl["unit"]].dtype == object else "int"
    cols[decl["unit"]] = {"type": unit_type, "private_id": True}
    for key in decl["domains"]:
        cols[_n(key)] = {"type": "int" if key in ints else "string"}
    for col, (lo, hi) in decl["bounds"].items():
        cols[col] = {
            "type": "int" if col in ints else "float",
            "lower": lo,
            "upper": hi,
            "nullable": False,
        }
    return {"s": {"s": {name: cols}}}


def sql(q: dict[str, Any]) -> str:
    col = q.get("column")
    agg = {
        "count": "COUNT(*)",
        "sum": f"SUM({col})",
        "mean": f"AVG({col})",
        "median": f"PERCENTILE_CONT(0.5) WITHIN GROUP (ORDER BY {col})",
    }[q["agg"]]
    keys = ", ".join(_n(k) for k in q["by"])
    select = f"{keys}, {agg} AS v" if keys else f"{agg} AS v"
    group = f" GROUP BY {keys}" if keys else ""
    return f"SELECT {select} FROM s.{q['table']}{group}"


def reader_at(base: Any, meta: dict[str, Any], query: str, target: float, delta: float) -> Any:
    """A PrivateReader whose odometer cost for ``query`` is ``target`` (never above)."""
    probe = PrivateReader(base, meta, privacy=snsql.Privacy(epsilon=1.0, delta=delta))
    cost_at_one = float(probe.get_privacy_cost(query)[0])
    eps = target / cost_at_one
    for _ in range(60):
        reader = PrivateReader(base, meta, privacy=snsql.Privacy(epsilon=eps, delta=delta))
        if float(reader.get_privacy_cost(query)[0]) <= target * (1 + 1e-12):
            return reader
        eps *= 1 - 1e-9
    raise RuntimeError("could not calibrate the per-column epsilon")


def answer_all(
    workload: dict[str, Any],
) -> tuple[dict[str, list[common.Answer]], dict[str, str], float]:
    results: dict[str, list[common.Answer]] = {q["id"]: [] for q in workload["queries"]}
    unsupported: dict[str, str] = {}
    setup = 0.0
    for name, decl in workload["tables"].items():
        s0 = time.perf_counter()
        frame = pd.read_parquet(decl["path"]).rename(columns=RENAMED)
        meta = metadata(name, decl, frame)
        base = snsql.from_df(
            frame, privacy=snsql.Privacy(epsilon=1.0, delta=workload["delta"]), metadata=meta
        ).reader
        setup += time.perf_counter() - s0
        eps_q, delta_q = common.per_query_budget(workload, name)
        for q in common.queries_of(workload, name):
            text = sql(q)
            try:
                reader = reader_at(base, meta, text, eps_q, delta_q)
            except Exception as error:  # not supported: recorded with the reason
                unsupported[q["id"]] = f"{type(error).__name__}: {error}"
                continue
            for _ in range(workload["peer_repeats"]["smartnoise"]):
                out = reader.execute_df(text)
                answer: common.Answer = {}
                for _, row in out.iterrows():
                    v = row["v"]
                    if q["agg"] in ("mean", "median"):
                        v = common.clamp(v, *decl["bounds"][q["column"]])
                    answer[common.cell_key([row[_n(k)] for k in q["by"]])] = float(v)
                results[q["id"]].append(answer)
            NOTES["per_query"][q["id"]] = (
                f"Privacy(epsilon={reader.privacy.epsilon:.5g}) per noisy column, odometer cost "
                f"{float(reader.get_privacy_cost(text)[0]):.5g}"
            )
    return results, unsupported, setup


NOTES: dict[str, Any] = {
    "budget": "each query at 1/Q of the table's epsilon 1.0 by SmartNoise's odometer; basic "
    "composition over the Q queries",
    "unit": "private_id, max_ids = rows per unit (reservoir sampling); no per-group bounds",
    "per_query": {},
}


if __name__ == "__main__":
    sys.exit(common.run_peer("SmartNoise SQL", version, answer_all, NOTES))
