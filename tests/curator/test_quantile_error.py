"""The quantiles' error statement (issue 14): a rank-error bound that holds at its rate.

A median is the exponential mechanism over the evenly spaced candidate points of the declared
range (here ``[0, 100]``: 819,201 points, every ``1/8192``); the release states
``rank_errors[alias]``: with probability at least the confidence, the chosen point's rank is
within it of the best candidate's rank error (the mechanism's utility bound). Checked by
repeating the noise stage with a seeded source on fixed exact aggregates; the negative control
(an eighth of the bound) must fail.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from dpcurator.accounting import Budget
from dpcurator.curator import Column, Session, Table
from dpcurator.curator._measure import compute, fetch
from dpcurator.curator._statements import quantile_buckets
from dpcurator.noise import InsecureSeededSource

VALUES = (np.arange(1000) % 100) + 0.37  # never on a candidate point (multiples of 1/8192)
QUERY = "SELECT MEDIAN(x) AS m FROM t"


@pytest.mark.statistical
def test_the_median_rank_error_holds_at_its_rate() -> None:
    table = Table("t", pd.DataFrame({"x": VALUES}), columns=[Column("x", lower=0, upper=100)])
    with Session(table, Budget(10.0), ledger=":memory:", source=InsecureSeededSource(3)) as s:
        release = s.sql(QUERY, epsilon=0.05)
        plan = s.plan(QUERY, epsilon=0.05)
        exact = fetch(plan, s._read(plan))
    bound = release.rank_errors["m"]
    buckets = quantile_buckets(plan.values[0])
    assert buckets == 100 * 2**13
    assert bound == pytest.approx(2 * 0.5 / 0.05 * math.log((buckets + 1) / 0.05))
    assert "rank within" in release.interval_note
    candidates = np.arange(buckets + 1) * (100.0 / buckets)
    errors = np.abs(np.searchsorted(np.sort(VALUES), candidates, side="left") - 500)
    best = int(errors.min())
    source, repeats = InsecureSeededSource(11), 400
    chosen = np.array(
        [
            float(compute(plan, exact, source=source, confidence=0.95)[0]["m"].iloc[0])
            for _ in range(repeats)
        ]
    )
    index = np.rint(chosen * (buckets / 100.0)).astype(np.int64)
    assert np.allclose(candidates[index], chosen)  # every release is a candidate point
    excess = errors[index] - best
    slack = 4 * math.sqrt(0.95 * 0.05 / repeats)
    assert np.mean(excess <= bound) >= 0.95 - slack
    assert np.mean(excess <= bound / 8) < 0.95 - slack  # negative control: a bound too tight
