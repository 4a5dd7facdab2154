"""SmartNoise SQL on the DP GROUP BY benchmark; run by ``benchmarks/bench_curator.py``.

Run in its own venv: ``.venv-peers/smartnoise/bin/python benchmarks/peers/sql_smartnoise.py
--data benchmarks/results/data/sql_100000.parquet --truth ..truth.json --repeats 2``.

How the query is expressed (smartnoise-sql 1.0.10, ``snsql.from_df`` over a pandas DataFrame;
SmartNoise copies the frame into an in-memory SQLite database when the reader is built, which is
its ``setup_seconds``, then rewrites every query into SQLite SQL):

- metadata: ``unit_id`` is the ``private_id``; ``max_ids: 5`` (rows per unit, enforced by
  ``sample_max_ids`` reservoir sampling with ROW_NUMBER() OVER (PARTITION BY unit_id));
  ``value`` bounded to [0, 100] (``clamp_columns``); ``censor_dims: False`` (no thresholding of
  groups: the 1,000 keys are treated as public; every key is present in the data);
- SmartNoise has no "groups per unit" bound: a unit with 5 rows may touch 5 groups, so the
  sensitivity of the per-group vector is the one of 5 rows (count 5, sum 500), the same as
  a unit of 5 rows in one group under an L1 bound;
- epsilon: SmartNoise's ``Privacy(epsilon=e)`` is spent by EACH noisy column. AVG is rewritten
  to SUM/COUNT(value) and COUNT(*) is kept apart from COUNT(value), so the query draws 3 noisy
  statistics: e is chosen so that ``reader.get_privacy_cost(query)`` (its odometer, basic or
  advanced composition, whichever is smaller) is 1.0, i.e. e = 1/3. Mechanisms: discrete
  Laplace for counts, Laplace for the float sum. delta 1e-6 is declared (needed by nothing here).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _sqlbench_common as common
import pandas as pd
import snsql

QUERY = (
    "SELECT grp, COUNT(*) AS n, SUM(value) AS total, AVG(value) AS mean FROM bench.t GROUP BY grp"
)


def version() -> str:
    import importlib.metadata

    return importlib.metadata.version("smartnoise-sql")


def metadata(rows: int) -> dict[str, Any]:
    return {
        "bench": {
            "bench": {
                "t": {
                    "rows": rows,
                    "row_privacy": False,
                    "max_ids": common.MAX_ROWS_PER_UNIT,
                    "sample_max_ids": True,
                    "censor_dims": False,
                    "clamp_counts": False,
                    "clamp_columns": True,
                    "unit_id": {"type": "int", "private_id": True},
                    "grp": {"type": "int"},
                    "value": {
                        "type": "float",
                        "lower": common.LOWER,
                        "upper": common.UPPER,
                        "nullable": False,
                    },
                }
            }
        }
    }


def load(path: Path) -> pd.DataFrame:
    return pd.read_parquet(path)


def per_statistic_epsilon(df: pd.DataFrame, meta: dict[str, Any]) -> tuple[float, int]:
    """The per-column epsilon whose odometer cost for QUERY is the total epsilon."""
    probe = snsql.from_df(
        df.head(10), privacy=snsql.Privacy(epsilon=1.0, delta=common.DELTA), metadata=meta
    )
    cost_at_one = float(probe.get_privacy_cost(QUERY)[0])
    k = round(cost_at_one)  # basic composition at eps=1 and tiny tolerance: the mechanism count
    eps = common.EPSILON / cost_at_one
    for _ in range(60):  # shrink until the odometer confirms the total (never above EPSILON)
        reader = snsql.from_df(
            df.head(10), privacy=snsql.Privacy(epsilon=eps, delta=common.DELTA), metadata=meta
        )
        if float(reader.get_privacy_cost(QUERY)[0]) <= common.EPSILON * (1 + 1e-12):
            break
        eps *= 1 - 1e-9
    return eps, k


def setup(df: pd.DataFrame, runs: int) -> dict[str, Any]:
    meta = metadata(len(df))
    eps, k = per_statistic_epsilon(df, meta)
    privacy = snsql.Privacy(epsilon=eps, delta=common.DELTA)
    reader = snsql.from_df(df, privacy=privacy, metadata=meta)
    cost = reader.get_privacy_cost(QUERY)
    NOTES["epsilon_split"] = (
        f"Privacy(epsilon={eps:.6g}) per noisy column x {k} noisy columns (COUNT(*), and AVG "
        f"rewritten to SUM(value)/COUNT(value); SUM reuses the same noisy sum): odometer cost "
        f"{float(cost[0]):.6g}"
    )
    return {"reader": reader}


def query(state: dict[str, Any]) -> common.Estimate:
    out = state["reader"].execute_df(QUERY)
    return common.estimate_from_columns(
        out["grp"].tolist(), out["n"].tolist(), out["total"].tolist(), out["mean"].tolist()
    )


NOTES: dict[str, Any] = {
    "delta": common.DELTA,
    "unit": "private_id unit_id, max_ids=5 (reservoir sampling); no groups-per-unit bound",
    "keys": "censor_dims=False: no thresholding, keys as found in the data (all 1,000)",
    "engine": "pandas DataFrame copied into in-memory SQLite at reader construction (setup)",
}


if __name__ == "__main__":
    sys.exit(
        common.run_main("SmartNoise SQL", version, load=load, setup=setup, query=query, notes=NOTES)
    )
