"""OpenDP (Polars API) on the DP GROUP BY benchmark; run by ``benchmarks/bench_curator.py``.

Run in its own venv: ``.venv-peers/opendp/bin/python benchmarks/peers/sql_opendp.py --data
benchmarks/results/data/sql_100000.parquet --truth ..truth.json --repeats 2``. Prints one JSON line.

How the query is expressed (OpenDP 0.16, ``opendp.prelude``, Polars ``LazyFrame``):

- privacy unit: ``dp.unit_of(contributions=1, identifier="unit_id")`` (user-level: add/remove
  one identifier); the query truncates with ``truncate_per_group(5)`` (at most 5 rows per unit in
  all, dropping nothing on this data: L1 sensitivity of 5 rows, what the 5-rows-in-1-group bound
  gives). ``truncate_num_groups(1, by=["grp"])`` is left out: it does not lower the pure-DP
  sensitivity, and with its default ``keep="sample"`` OpenDP 0.16 fails on polars 1.36.1
  ("multiple fields with name 'grp' found"). (Passing the bounds as ``contributions=[Bound(...)]``
  together with ``identifier`` bounds *identifiers* per group, not rows: 5x the noise.)
- the query groups by ``grp``, aggregates ``dp.len(signed=True)``, ``value.dp.sum((0, 100))`` and
  ``value.dp.mean((0, 100))``, and joins the public 1,000 keys with ``with_keys`` (no partition
  selection);
- epsilon 1.0 (pure DP, ``max_divergence``) for the whole query: ``Context.query(epsilon=1.0)``
  searches one global scale parameter for the query so that the summed loss of its four noisy
  statistics (len, sum, and the mean's own sum and len) is 1.0; the resulting per-statistic
  scales are recorded (``summarize()``). The float sum's noise grows with the declared
  ``max_length`` (OpenDP accounts for float rounding in sums; observed: sum scale 2,005 at 100k
  rows, 55,290 at 10M, while the count's scale falls from 20 to 12).
- a ``Margin(by=["grp"], max_length=rows)`` bounds the group sizes (float sums need it).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _sqlbench_common as common
import opendp.prelude as dp
import polars as pl

dp.enable_features("contrib")


def version() -> str:
    import importlib.metadata

    return f"{importlib.metadata.version('opendp')} (polars {pl.__version__})"


def load(path: Path) -> pl.LazyFrame:
    return pl.read_parquet(path).lazy()


def setup(lf: pl.LazyFrame, runs: int) -> dict[str, Any]:
    rows = lf.select(pl.len()).collect().item()
    context = dp.Context.compositor(
        data=lf,
        privacy_unit=dp.unit_of(contributions=1, identifier="unit_id"),
        privacy_loss=dp.loss_of(epsilon=common.EPSILON * runs),
        split_evenly_over=runs,
        margins=[dp.polars.Margin(by=["grp"], max_length=rows)],
    )
    keys = pl.DataFrame({"grp": pl.Series(range(common.GROUPS), dtype=pl.Int64)})
    return {"context": context, "keys": keys}


def describe(state: dict[str, Any]) -> str:
    summary = build(state).summarize()  # resolves the scale again; spends nothing
    scales = "; ".join(
        f"{c} {a} {d} scale={sc:.4g}"
        for c, a, d, sc in zip(
            summary["column"],
            summary["aggregate"],
            summary["distribution"],
            summary["scale"],
            strict=True,
        )
    )
    return (
        "OpenDP searches one global scale so that the summed loss of all the query's noisy "
        f"statistics is eps=1.0 (pure DP); the resulting scales: {scales}"
    )


def build(state: dict[str, Any]) -> Any:
    bounds = (common.LOWER, common.UPPER)
    return (
        state["context"]
        .query()
        .truncate_per_group(common.MAX_ROWS_PER_UNIT)
        .group_by("grp")
        .agg(
            dp.len(signed=True).alias("count"),
            pl.col("value").fill_null(0.0).dp.sum(bounds).alias("sum"),
            pl.col("value").fill_null(0.0).dp.mean(bounds).alias("avg"),
        )
        .with_keys(state["keys"])
    )


def query(state: dict[str, Any]) -> common.Estimate:
    out = build(state).release().collect()
    if "epsilon_split" not in NOTES:  # during the warm-up, not timed
        NOTES["epsilon_split"] = describe(state)
    return common.estimate_from_columns(
        out["grp"].to_list(), out["count"].to_list(), out["sum"].to_list(), out["avg"].to_list()
    )


NOTES: dict[str, Any] = {
    "delta": 0.0,
    "unit": "unit_of(contributions=1, identifier='unit_id') + truncate_per_group(5) (at most 5 "
    "rows per unit in all: L1 sensitivity 5 rows, as the 1-group bound gives); "
    "truncate_num_groups(1, by=['grp']) is left out: it does not lower the pure-DP sensitivity "
    "and its default keep='sample' fails in OpenDP 0.16 with polars 1.36.1 "
    "(\"multiple fields with name 'grp' found\")",
    "keys": "public: with_keys(all 1,000 grp values)",
}


if __name__ == "__main__":
    sys.exit(
        common.run_main(
            "OpenDP (Polars)", version, load=load, setup=setup, query=query, notes=NOTES
        )
    )
