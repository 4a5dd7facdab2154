"""Tumult's noise on a total count with ``MaxRowsPerID(60)`` at epsilon 1/6: stated and drawn.

The accuracy benchmark's flights ``COUNT(*)`` (``accuracy_tumult.py``) came out at an MAE of 118
for Tumult over 10 repetitions, where its declared bound implies Laplace-like noise of scale 360
(MAE 360). This script asks Tumult for the noise it adds to the same query shape
(``Session._noise_info``) and draws it ``--draws`` times on a table of 200 identifiers of 60 rows
each (12 months x 5), printing the drawn errors' mean, standard deviation and MAE. Run in the
Tumult environment (Java 17)::

    .venv-peers/tumult/bin/python benchmarks/peers/tumult_noise_check.py --draws 60
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np
import pandas as pd

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

from pyspark.sql import SparkSession
from tmlt.analytics import AddRowsWithID, MaxRowsPerID, PureDPBudget, QueryBuilder, Session

UNITS, MONTHS, PER_MONTH = 200, 12, 5


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--draws", type=int, default=60)
    args = parser.parse_args()
    spark = SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
    spark = spark.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    rows = [(f"u{u}", m) for u in range(UNITS) for m in range(MONTHS) for _ in range(PER_MONTH)]
    frame = spark.createDataFrame(pd.DataFrame(rows, columns=["unit", "month"]))
    session = Session.from_dataframe(
        privacy_budget=PureDPBudget(args.draws + 1),
        source_id="t",
        dataframe=frame,
        protected_change=AddRowsWithID("unit"),
    )
    query = QueryBuilder("t").enforce(MaxRowsPerID(MONTHS * PER_MONTH)).count(name="v")
    share = PureDPBudget(1 / 6)
    print("stated:", session._noise_info(query, share))
    truth = len(rows)
    errors = np.array(
        [session.evaluate(query, share).toPandas()["v"][0] - truth for _ in range(args.draws)]
    )
    print(
        f"{args.draws} draws: mean {errors.mean():.1f}, std {errors.std():.1f}, MAE "
        f"{np.abs(errors).mean():.1f} (scale 360: std 509, MAE 360, MAE's standard error "
        f"{360 / np.sqrt(args.draws):.0f})"
    )


if __name__ == "__main__":
    main()
