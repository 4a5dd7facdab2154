"""PipelineDP on the DP GROUP BY benchmark; run by ``benchmarks/bench_curator.py``.

Run in its own venv: ``.venv-peers/pipelinedp/bin/python benchmarks/peers/sql_pipelinedp.py
--data benchmarks/results/data/sql_100000.parquet --truth ..truth.json --repeats 2``.

How the query is expressed (pipeline-dp 0.3.1, ``DPEngine`` on the ``LocalBackend``: PipelineDP's
DataFrame API needs a Spark DataFrame, so the in-memory pandas frame is fed to the engine as an
iterator of (unit_id, grp, value) rows, which is timed with the query):

- ``AggregateParams(metrics=[COUNT, SUM, MEAN], noise_kind=LAPLACE,
  max_partitions_contributed=1, max_contributions_per_partition=5, min_value=0,
  max_value=100)``: cross-partition and per-partition contribution bounding by sampling,
  values clamped;
- ``public_partitions=range(1000)``: no partition selection;
- epsilon: ``NaiveBudgetAccountant(total_epsilon=1.0, total_delta=1e-6)``; the accountant splits
  the budget equally over the mechanisms the combiners register (recorded below from the
  accountant's own mechanism specs). Noise from Google's C++ DP library (python-dp).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _sqlbench_common as common
import pandas as pd
import pipeline_dp


def version() -> str:
    return str(pipeline_dp.__version__)


def load(path: Path) -> pd.DataFrame:
    return pd.read_parquet(path)


def setup(df: pd.DataFrame, runs: int) -> dict[str, Any]:
    params = pipeline_dp.AggregateParams(
        metrics=[pipeline_dp.Metrics.COUNT, pipeline_dp.Metrics.SUM, pipeline_dp.Metrics.MEAN],
        noise_kind=pipeline_dp.NoiseKind.LAPLACE,
        max_partitions_contributed=1,
        max_contributions_per_partition=common.MAX_ROWS_PER_UNIT,
        min_value=common.LOWER,
        max_value=common.UPPER,
    )
    extractors = pipeline_dp.DataExtractors(
        privacy_id_extractor=lambda row: row[0],
        partition_extractor=lambda row: row[1],
        value_extractor=lambda row: row[2],
    )
    return {"df": df, "params": params, "extractors": extractors}


def query(state: dict[str, Any]) -> common.Estimate:
    df = state["df"]
    accountant = pipeline_dp.NaiveBudgetAccountant(
        total_epsilon=common.EPSILON, total_delta=common.DELTA
    )
    engine = pipeline_dp.DPEngine(accountant, pipeline_dp.LocalBackend())
    rows = zip(df["unit_id"].to_numpy(), df["grp"].to_numpy(), df["value"].to_numpy(), strict=True)
    result = engine.aggregate(
        rows,
        state["params"],
        state["extractors"],
        public_partitions=list(range(common.GROUPS)),
    )
    accountant.compute_budgets()
    out = list(result)  # the LocalBackend is lazy: the work happens here
    if "epsilon_split" not in NOTES:
        NOTES["epsilon_split"] = describe_budget(accountant)
    keys = [k for k, _ in out]
    return common.estimate_from_columns(
        keys, [m.count for _, m in out], [m.sum for _, m in out], [m.mean for _, m in out]
    )


def describe_budget(accountant: Any) -> str:
    specs = [s.mechanism_spec for s in accountant._mechanisms]
    parts = [f"{s.mechanism_type.value} eps={s.eps:.4g}" for s in specs]
    return (
        f"NaiveBudgetAccountant(total_epsilon=1.0) split equally over {len(specs)} mechanisms: "
        + "; ".join(parts)
    )


NOTES: dict[str, Any] = {
    "delta": common.DELTA,
    "unit": "privacy_id unit_id, max_partitions_contributed=1, "
    "max_contributions_per_partition=5 (bounding by sampling)",
    "keys": "public_partitions=range(1000)",
    "engine": "LocalBackend over an iterator of the pandas columns (pure Python per row)",
}


if __name__ == "__main__":
    sys.exit(
        common.run_main("PipelineDP", version, load=load, setup=setup, query=query, notes=NOTES)
    )
