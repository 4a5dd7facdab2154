"""Tests of the Budget value object (src/dpcurator/accounting/_budget.py)."""

from __future__ import annotations

import dataclasses
import math
from fractions import Fraction

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
    # Exact: no tolerance, an overdraft of one ulp is refused; differences round down.
    with pytest.raises(InvalidParameterError, match="a budget cannot go negative"):
        Budget(1.0) - Budget(1.0 + 1e-13)
    with pytest.raises(InvalidParameterError, match="a budget cannot go negative"):
        Budget(1.0) - Budget(math.nextafter(1.0, 2.0))
    assert Budget(1.0) - Budget(0.1) == Budget(0.8999999999999999)  # 1 - 0.1000...0055
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


def test_is_finite_and_exact() -> None:
    assert Budget(1.0, 1e-6).is_finite and Budget(0.0).is_finite
    assert not Budget.unlimited().is_finite
    assert not Budget(math.inf, 1e-6).is_finite
    assert Budget(0.1, 1e-6).exact == (Fraction(0.1), Fraction(1e-6))
    assert Budget(0.5).exact == (Fraction(1, 2), Fraction(0))
    with pytest.raises(InvalidParameterError, match="must be finite to have an exact value"):
        _ = Budget.unlimited().exact


def test_addition_rounds_up_and_subtraction_down() -> None:
    # Regression: 1 + 1e-17 rounded to the nearest float is 1.0.
    assert Budget(1.0) + Budget(1e-17) == Budget(math.nextafter(1.0, 2.0))
    total = Budget(0.1, 1e-7) + Budget(0.2, 2e-7)  # 0.3000000000000000166 exactly
    assert Fraction(total.epsilon) >= Fraction(0.1) + Fraction(0.2)
    assert Fraction(math.nextafter(total.epsilon, 0.0)) < Fraction(0.1) + Fraction(0.2)
    assert Fraction(total.delta) >= Fraction(1e-7) + Fraction(2e-7)
    left = Budget(1.0, 1e-6) - Budget(0.1, 1e-7)
    assert Fraction(left.epsilon) <= 1 - Fraction(0.1)
    assert Fraction(left.delta) <= Fraction(1e-6) - Fraction(1e-7)
    assert (Budget(1.0) + Budget(1e-17)) - Budget(1.0) == Budget(2.220446049250313e-16)
    assert Budget(1.0) + Budget(1e308) + Budget(1e308) == Budget.unlimited()  # overflows to inf
    # Deltas: an overdraft of 1e-30 is refused too.
    with pytest.raises(InvalidParameterError, match="a budget cannot go negative"):
        Budget(1.0, 1e-6) - Budget(0.0, 1e-6 + 1e-21)
    with pytest.raises(InvalidParameterError, match="a budget cannot go negative"):
        Budget.unlimited() - Budget(math.inf, 1e-9)
    with pytest.raises(InvalidParameterError, match="a budget cannot go negative"):
        Budget(5.0) - Budget.unlimited()


def test_exact_inputs_are_rounded_down() -> None:
    # A budget never allows more than was given: exact rationals round down to a float.
    assert Budget(Fraction(1, 10)).epsilon == math.nextafter(0.1, 0.0)
    assert Fraction(Budget(Fraction(1, 3)).epsilon) <= Fraction(1, 3)
    assert Budget(10**17 + 1).epsilon == 1e17
    assert Budget(1.0, Fraction(1, 10**5)).delta < 1e-5  # the float 1e-5 is above 1/10^5
    assert Budget(np.float32(0.1)).epsilon == float(np.float32(0.1))  # exact already


@pytest.mark.parametrize(
    ("epsilon", "pattern"),
    [
        (10**400, "epsilon must be a finite real number"),
        (Fraction(10**400, 3), "epsilon must be a finite real number"),
        (Fraction(-1, 10**400), "epsilon must be >= 0"),
    ],
)
def test_budget_refuses_values_a_float_cannot_hold(epsilon: object, pattern: str) -> None:
    with pytest.raises(InvalidParameterError, match=pattern):
        Budget(epsilon)  # type: ignore[arg-type]


@given(a=_budgets, b=_budgets)
def test_arithmetic_is_exact(a: Budget, b: Budget) -> None:
    total = a + b
    assert Fraction(total.epsilon) >= Fraction(a.epsilon) + Fraction(b.epsilon)
    assert Fraction(total.delta) >= Fraction(a.delta) + Fraction(b.delta)
    back = total - b  # never raises: the sum was rounded up
    assert back.covers(a)
    if a.covers(b):
        left = a - b
        assert Fraction(left.epsilon) <= Fraction(a.epsilon) - Fraction(b.epsilon)
        assert Fraction(left.delta) <= Fraction(a.delta) - Fraction(b.delta)
    else:
        with pytest.raises(InvalidParameterError):
            a - b
