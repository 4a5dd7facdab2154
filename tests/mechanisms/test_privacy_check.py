"""The auditing helper itself: Clopper-Pearson bounds and the epsilon lower bound."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from privacy_check import audit, clopper_pearson, threshold_events, value_events


def test_clopper_pearson_closed_forms() -> None:
    # With 0 (or n) successes the one-sided bounds have closed forms: 1 - alpha^(1/n).
    n, alpha = 1000, 0.025
    lo, hi = clopper_pearson(0, n, alpha)
    assert lo == 0.0
    assert hi == pytest.approx(1 - alpha ** (1 / n), rel=1e-12)
    lo, hi = clopper_pearson(n, n, alpha)
    assert lo == pytest.approx(alpha ** (1 / n), rel=1e-12)
    assert hi == 1.0


def test_clopper_pearson_brackets_the_estimate_and_inverts_the_binomial() -> None:
    lo, hi = clopper_pearson(30, 100, 0.01)
    assert lo < 0.3 < hi
    # Definition: P[Bin(n, UCB) <= k] = alpha and P[Bin(n, LCB) >= k] = alpha.
    assert stats.binom.cdf(30, 100, hi) == pytest.approx(0.01, rel=1e-8)
    assert stats.binom.sf(29, 100, lo) == pytest.approx(0.01, rel=1e-8)
    with pytest.raises(ValueError, match="successes"):
        clopper_pearson(5, 3, 0.01)


def test_research_note_table_value() -> None:
    # Research note B: 1000 trials per side, 0 errors, 95 % total confidence -> eps_LB 5.60.
    lcb, _ = clopper_pearson(1000, 1000, 0.025)
    _, ucb = clopper_pearson(0, 1000, 0.025)
    assert math.log(lcb / ucb) == pytest.approx(5.60, abs=0.005)


def test_audit_of_perfectly_distinguishable_samples_is_large() -> None:
    result = audit(np.zeros(1000), np.ones(1000), value_events([0.0]), alpha=0.05)
    # One event, four bounds at 0.0125 each: ln(0.0125^(1/1000) / (1 - 0.0125^(1/1000))).
    expected = math.log(0.0125 ** (1 / 1000) / (1 - 0.0125 ** (1 / 1000)))
    assert result.epsilon_lower_bound == pytest.approx(expected, rel=1e-9)
    assert result.direction == "D over D'"


def test_audit_of_identical_distributions_is_at_most_zero() -> None:
    samples = np.repeat([0.0, 1.0, 2.0], 10_000)
    result = audit(samples, samples, value_events([0.0, 1.0, 2.0]), alpha=0.05)
    assert result.epsilon_lower_bound < 0.0
    assert result.estimate == pytest.approx(0.0)


def test_delta_form_is_weaker_than_pure_form() -> None:
    a = np.concatenate([np.ones(300), np.zeros(700)])
    b = np.concatenate([np.ones(100), np.zeros(900)])
    pure = audit(a, b, threshold_events([0.5]), alpha=0.05)
    approx = audit(a, b, threshold_events([0.5]), alpha=0.05, delta=0.1)
    assert pure.epsilon_lower_bound > approx.epsilon_lower_bound > 0
