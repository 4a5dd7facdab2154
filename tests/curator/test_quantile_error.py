"""The quantiles' error statement (issue 14): a rank-error bound that holds at its rate.

A median is the exponential mechanism over the 1,025 evenly spaced candidate points of the
declared range; the release states ``rank_errors[alias]``: with probability at least the
confidence, the chosen point's rank is within it of the best candidate's rank error (the
mechanism's utility bound). Checked by repeating the noise stage with a seeded source on fixed
exact aggregates; the negative control (an eighth of the bound) must fail.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from dpcurator.accounting import Budget
from dpcurator.curator import Column, Session, Table
from dpcurator.curator._measure import compute, fetch
from dpcurator.curator._plan import QUANTILE_BUCKETS
from dpcurator.noise import InsecureSeededSource

VALUES = (np.arange(1000) % 100) + 0.37  # never on a candidate point (multiples of 100/1024)
QUERY = "SELECT MEDIAN(x) AS m FROM t"


@pytest.mark.statistical
def test_the_median_rank_error_holds_at_its_rate() -> None:
    table = Table("t", pd.DataFrame({"x": VALUES}), columns=[Column("x", lower=0, upper=100)])
    with Session(table, Budget(10.0), ledger=":memory:", source=InsecureSeededSource(3)) as s:
        release = s.sql(QUERY, epsilon=0.05)
        plan = s.plan(QUERY, epsilon=0.05)
        exact = fetch(plan, s._read(plan))
    bound = release.rank_errors["m"]
    assert bound == pytest.approx(2 * 0.5 / 0.05 * math.log(1025 / 0.05))
    assert "rank within" in release.interval_note
    candidates = np.linspace(0.0, 100.0, QUANTILE_BUCKETS + 1)
    errors = {c: abs(np.count_nonzero(c > VALUES) - 500) for c in candidates}
    best = min(errors.values())
    source, repeats = InsecureSeededSource(11), 400
    chosen = [
        float(compute(plan, exact, source=source, confidence=0.95)[0]["m"].iloc[0])
        for _ in range(repeats)
    ]
    excess = np.array([errors[min(candidates, key=lambda c: abs(c - v))] - best for v in chosen])
    slack = 4 * math.sqrt(0.95 * 0.05 / repeats)
    assert np.mean(excess <= bound) >= 0.95 - slack
    assert np.mean(excess <= bound / 8) < 0.95 - slack  # negative control: a bound too tight
