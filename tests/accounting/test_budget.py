"""Tests of the Budget value object (src/dpcurator/accounting/_budget.py)."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from dpcurator.accounting import Budget
from dpcurator.errors import InvalidParameterError


def test_budget_is_frozen() -> None:
    b = Budget(1.0, 1e-6)
    with pytest.raises(dataclasses.FrozenInstanceError):
        b.epsilon = 2.0  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        b.delta = 0.0  # type: ignore[misc]
    with pytest.raises((AttributeError, TypeError)):
        b.extra = 1  # type: ignore[attr-defined]
    assert b == Budget(1.0, 1e-6)
    assert hash(b) == hash(Budget(1.0, 1e-6))


def test_budget_converts_to_float() -> None:
    b = Budget(1, 0)
    assert type(b.epsilon) is float and type(b.delta) is float
    assert Budget(np.float64(0.5), np.float64(1e-7)) == Budget(0.5, 1e-7)
    assert Budget(0.0).epsilon == 0.0  # a budget that allows nothing
    assert repr(Budget(1.0, 1e-6)) == "Budget(epsilon=1.0, delta=1e-06)"


@pytest.mark.parametrize(
    ("epsilon", "delta", "pattern"),
    [
        (-1.0, 0.0, r"epsilon must be >= 0; got -1\.0\."),
        (math.nan, 0.0, "epsilon must be a number, not NaN; got nan"),
        (-math.inf, 0.0, "epsilon must be finite; got -inf"),
        ("1.0", 0.0, "epsilon must be a real number; got '1.0'"),
        (True, 0.0, "epsilon must be a real number; got True"),
        (None, 0.0, "epsilon must be a real number; got None"),
        (1.0, 1.0, r"delta must be in \[0, 1\); got 1\.0"),
        (1.0, -1e-9, r"delta must be in \[0, 1\); got -1e-09"),
        (1.0, math.nan, "delta must be a number, not NaN"),
        (1.0, math.inf, r"delta must be in \[0, 1\); got inf"),
    ],
)
def test_budget_validation_names_argument_and_value(
    epsilon: object, delta: object, pattern: str
) -> None:
    with pytest.raises(InvalidParameterError, match=pattern) as info:
        Budget(epsilon, delta)  # type: ignore[arg-type]
    assert isinstance(info.value, ValueError)  # also catchable as a ValueError


def test_unlimited() -> None:
    u = Budget.unlimited()
    assert u.epsilon == math.inf and u.delta == 0.0
    assert u.covers(Budget(1e9, 0.0))
    assert (u - Budget(5.0)).epsilon == math.inf
    assert (u + Budget(5.0)).epsilon == math.inf


def test_infinite_epsilon_with_a_delta() -> None:
    # Filters and odometers report "no finite epsilon is certified at this delta" this way.
    # (The class docstring says inf must come from unlimited(); the code accepts it directly.)
    b = Budget(math.inf, 1e-6)
    assert b.epsilon == math.inf and b.delta == 1e-6
    assert not Budget(1.0, 1e-6).covers(b)


def test_unlimited_minus_unlimited() -> None:
    assert (Budget.unlimited() - Budget.unlimited()).epsilon == math.inf


def test_addition() -> None:
    assert Budget(0.25, 1e-7) + Budget(0.5, 2e-7) == Budget(0.75, 3e-7)
    # Deltas that would reach 1 are kept a valid (vacuous) probability.
    total = Budget(1.0, 0.6) + Budget(1.0, 0.6)
    assert total.epsilon == 2.0 and 0.99 < total.delta < 1.0
    with pytest.raises(TypeError):
        Budget(1.0) + 1.0  # type: ignore[operator]


def test_subtraction() -> None:
    assert Budget(1.0, 1e-6) - Budget(0.25, 4e-7) == Budget(0.75, 6e-7)
    assert Budget(1.0) - Budget(1.0) == Budget(0.0, 0.0)
    # Round-off below 1e-12 is absorbed (and clamped at 0), real overdrafts are refused.
    assert Budget(1.0) - Budget(1.0 + 1e-13) == Budget(0.0, 0.0)
    with pytest.raises(InvalidParameterError, match="other must not exceed"):
        Budget(1.0) - Budget(1.5)
    with pytest.raises(InvalidParameterError, match="a budget cannot go negative"):
        Budget(1.0, 1e-6) - Budget(0.5, 2e-6)
    with pytest.raises(TypeError):
        Budget(1.0) - 0.5  # type: ignore[operator]


def test_covers() -> None:
    big = Budget(1.0, 1e-6)
    assert big.covers(Budget(1.0, 1e-6))
    assert big.covers(Budget(0.5, 0.0))
    assert not big.covers(Budget(1.1, 0.0))
    assert not big.covers(Budget(0.5, 2e-6))


_budgets = st.builds(Budget, st.floats(0.0, 100.0), st.floats(0.0, 0.4))


@given(a=_budgets, b=_budgets)
def test_arithmetic_round_trips(a: Budget, b: Budget) -> None:
    total = a + b
    assert total.covers(a) and total.covers(b)
    back = total - b
    assert back.epsilon == pytest.approx(a.epsilon, abs=1e-12)
    assert back.delta == pytest.approx(a.delta, abs=1e-15)
    assert a + b == b + a
