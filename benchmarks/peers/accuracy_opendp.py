"""OpenDP (Polars API) on the accuracy benchmark; run by ``benchmarks/bench_accuracy.py``.

Run in its own venv: ``.venv-peers/opendp/bin/python benchmarks/peers/accuracy_opendp.py
--workload benchmarks/results/data/accuracy_workload.json``. Prints one JSON line per
configuration (pure DP, then zCDP).

How the workload is expressed (OpenDP 0.16, ``opendp.prelude``, Polars ``LazyFrame``):

- one ``dp.Context.compositor`` per table and configuration, privacy unit
  ``dp.unit_of(contributions=1, identifier=<unit>)``, the budget of all the repetitions split
  evenly over every query (``split_evenly_over``): each query gets 1/Q of the table's epsilon 1.0
  (``max_divergence``: Laplace/geometric noise, exponential mechanism for the median), or of
  ``rho = zcdp_rho_for(1, 1e-6)`` in the zCDP configuration (Gaussian noise), which answers
  only the queries where Gaussian noise applies (``workload["gaussian"]``), at the share they
  would have in the whole workload. Scales seen (pure DP): counts Laplace 28 (cps), 360
  (flights); SUM(wages) 7e6; AVG(wages) a sum at 1.4e7 and a count at 56; the median the
  exponential mechanism at scale 56 (cps) and 720 (flights);
- contribution bounds: ``truncate_per_group(k)`` before grouping (at most k rows per unit in
  all: 4 per household, 60 per aircraft; L1 and L2 sensitivity k). The per-month bounds that
  would lower the L2 sensitivity under zCDP (``truncate_num_groups(12, by=["month"])`` then
  ``truncate_per_group(5, by=["month"])``) fail in OpenDP 0.16 with polars 1.36.1 ("multiple
  fields with name 'month' found", the failure ``sql_opendp.py`` records for ``grp``), and a
  failed ``release()`` still uses up its share of the compositor; so they are not used;
- keys public: ``with_keys`` of the declared domains (the product for two keys);
- ``dp.len()``, ``dp.sum(bounds)``, ``dp.mean(bounds)``; the median ``dp.median(candidates)``
  over the same 1,025 evenly spaced points of the declared range as dpcurator's;
- margins: ``max_length`` = the table's rows for every grouping (float sums need it).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import accuracy_common as common
import opendp.prelude as dp
import polars as pl

dp.enable_features("contrib")


def version() -> str:
    import importlib.metadata

    return f"{importlib.metadata.version('opendp')} (polars {pl.__version__})"


def expression(q: dict[str, Any], decl: dict[str, Any]) -> Any:
    if q["agg"] == "count":
        return dp.len(signed=True).alias("v")
    col = q["column"]
    lo, hi = decl["bounds"][col]
    x = pl.col(col).cast(pl.Float64).fill_null(0.0)
    if q["agg"] == "sum":
        return pl.col(col).fill_null(0).dp.sum((int(lo), int(hi))).alias("v")
    if q["agg"] == "mean":
        return x.dp.mean((float(lo), float(hi))).alias("v")
    return x.dp.median(common.quantile_candidates(lo, hi)).alias("v")


def keys_frame(q: dict[str, Any], decl: dict[str, Any], schema: dict[str, Any]) -> pl.DataFrame:
    cells: list[tuple[Any, ...]] = [()]
    for key in q["by"]:
        cells = [(*c, v) for c in cells for v in decl["domains"][key]]
    return pl.DataFrame(
        {k: pl.Series([c[i] for c in cells], dtype=schema[k]) for i, k in enumerate(q["by"])}
    )


def build(context: Any, q: dict[str, Any], decl: dict[str, Any], schema: Any) -> Any:
    query = context.query().truncate_per_group(decl["max_rows_per_unit"])
    if q["by"]:
        keys = keys_frame(q, decl, schema)
        return query.group_by(q["by"]).agg(expression(q, decl)).with_keys(keys)
    return query.select(expression(q, decl))


def answer_all(workload: dict[str, Any], zcdp: bool) -> dict[str, Any]:
    repeats = workload["peer_repeats"]["opendp"]
    results: dict[str, list[common.Answer]] = {q["id"]: [] for q in workload["queries"]}
    unsupported: dict[str, str] = {}
    notes: dict[str, str] = {}
    seconds: dict[str, float] = {q["id"]: 0.0 for q in workload["queries"]}
    t0 = time.perf_counter()
    setup = 0.0
    for name, decl in workload["tables"].items():
        s0 = time.perf_counter()
        lf = pl.read_parquet(decl["path"]).lazy()
        schema = lf.collect_schema()
        rows = decl["rows"]
        queries = common.queries_of(workload, name)
        groupings = {tuple(q["by"]) for q in queries} | {()}
        loss = (
            dp.loss_of(rho=workload["rho"] * repeats)
            if zcdp
            else dp.loss_of(epsilon=workload["epsilon"] * repeats)
        )
        context = dp.Context.compositor(
            data=lf,
            privacy_unit=dp.unit_of(contributions=1, identifier=decl["unit"]),
            privacy_loss=loss,
            split_evenly_over=len(queries) * repeats,
            margins=[dp.polars.Margin(by=list(g), max_length=rows) for g in groupings],
        )
        setup += time.perf_counter() - s0
        for _rep in range(repeats):
            for q in queries:
                if q["id"] in unsupported or (zcdp and q["id"] not in workload["gaussian"]):
                    continue
                q0 = time.perf_counter()
                try:
                    built = build(context, q, decl, schema)
                    out = built.release().collect()
                    seconds[q["id"]] += time.perf_counter() - q0
                except Exception as error:  # recorded as not answered, with the reason
                    unsupported[q["id"]] = f"{type(error).__name__}: {error}"
                    results[q["id"]] = []
                    continue
                answer: common.Answer = {}
                for row in out.iter_rows(named=True):
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
        "notes": {"per_query": notes},
        "query_seconds": seconds,
    }


def main() -> int:
    import argparse

    parser = argparse.ArgumentParser(description="OpenDP on the accuracy benchmark")
    parser.add_argument("--workload", type=Path, required=True)
    parser.add_argument("--modes", nargs="*", default=["pure", "zcdp"])
    args = parser.parse_args()
    workload = common.load_workload(args.workload)
    for mode in args.modes:
        label = "OpenDP (pure DP)" if mode == "pure" else "OpenDP (zCDP)"
        record: dict[str, Any] = {"library": label}
        try:
            record["version"] = version()
            record.update(answer_all(workload, mode == "zcdp"))
        except Exception as error:
            record["error"] = f"{type(error).__name__}: {error}"
        print(json.dumps(record), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
