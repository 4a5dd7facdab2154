"""Tests of the shared parameter checks and directed rounding (src/dpcurator/_validation.py)."""

from __future__ import annotations

import math
import numbers
import sys
from collections.abc import Callable
from decimal import Decimal
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpcurator._validation import (
    ceil_float,
    check_delta,
    check_epsilon,
    check_finite,
    check_integer,
    check_positive,
    check_probability,
    check_rational,
    floor_float,
    next_down,
    next_up,
)
from dpcurator.errors import InvalidParameterError

# -- no input makes a check raise anything but InvalidParameterError ------------------------------


class _BrokenReal(numbers.Real):
    """A "real number" whose conversions fail with an unexpected error."""

    def __float__(self) -> float:
        raise RuntimeError("no float today")

    def __repr__(self) -> str:
        raise RuntimeError("no repr either")


class _BrokenIntegral(numbers.Integral):
    def __int__(self) -> int:
        raise RuntimeError("no int today")


# Abstract methods are irrelevant to the checks: clear them so the odd objects can be built.
_BrokenReal.__abstractmethods__ = frozenset()
_BrokenIntegral.__abstractmethods__ = frozenset()
BROKEN_REAL = _BrokenReal()  # type: ignore[abstract]
BROKEN_INTEGRAL = _BrokenIntegral()  # type: ignore[abstract]

_ANYTHING = st.one_of(
    st.integers(),
    st.integers(min_value=308, max_value=6000).map(lambda k: 10**k),  # too large for a float
    st.integers(min_value=308, max_value=6000).map(lambda k: -(10**k)),
    st.floats(allow_nan=True, allow_infinity=True),
    st.fractions(),
    st.builds(Fraction, st.integers(), st.integers(min_value=1, max_value=10**400)),
    st.integers(min_value=300, max_value=5000).map(lambda k: Fraction(1, 10**k)),
    st.integers(min_value=300, max_value=5000).map(lambda k: Fraction(10**k, 3)),
    st.decimals(allow_nan=True, allow_infinity=True),
    st.text(max_size=20),
    st.sampled_from(["1e999999999", "1/3", "0.1", "nan", "-inf", "1e-400", "1" * 5000]),
    st.none(),
    st.booleans(),
    st.binary(max_size=8),
    st.complex_numbers(allow_nan=True),
    st.lists(st.floats(), max_size=3),
    st.floats(width=32).map(np.float32),
    st.floats().map(np.float64),
    st.integers(min_value=-(2**63), max_value=2**63 - 1).map(np.int64),
    st.sampled_from(
        [
            np.longdouble("1e4000"),
            np.longdouble("-1e4000"),
            np.longdouble("1e-4000"),
            np.float16(np.inf),
            np.float32(np.nan),
            np.bool_(True),
            np.uint64(2**64 - 1),
        ]
    ),
    st.just(BROKEN_REAL),
    st.just(BROKEN_INTEGRAL),
    st.just(object()),
)

_CHECKS: list[Callable[[object], object]] = [
    check_epsilon,
    lambda v: check_epsilon(v, allow_zero=True),
    check_delta,
    lambda v: check_positive(v, "x"),
    lambda v: check_positive(v, "x", allow_zero=True),
    lambda v: check_finite(v, "x"),
    lambda v: check_integer(v, "n"),
    lambda v: check_integer(v, "n", minimum=1),
    lambda v: check_probability(v, "p"),
    lambda v: check_probability(v, "p", open_left=True, open_right=True),
    lambda v: check_rational(v, "r"),
    lambda v: check_rational(v, "r", positive=False),
]


@settings(max_examples=400, deadline=None)
@given(value=_ANYTHING, which=st.integers(0, len(_CHECKS) - 1))
def test_checks_return_or_raise_invalid_parameter(value: object, which: int) -> None:
    try:
        out = _CHECKS[which](value)
    except InvalidParameterError as exc:
        assert exc.value is value  # the error keeps the value as given
        str(exc)  # and its message can be written
        return
    assert isinstance(out, float | int | Fraction)


@settings(max_examples=300, deadline=None)
@given(value=_ANYTHING)
def test_what_the_checks_return_satisfies_them(value: object) -> None:
    try:
        eps = check_epsilon(value)
    except InvalidParameterError:
        pass
    else:
        assert type(eps) is float and math.isfinite(eps) and eps > 0
    try:
        delta = check_delta(value)
    except InvalidParameterError:
        pass
    else:
        assert type(delta) is float and 0.0 <= delta < 1.0
    try:
        p = check_probability(value, "p", open_left=True, open_right=True)
    except InvalidParameterError:
        pass
    else:
        assert 0.0 < p < 1.0
    try:
        n = check_integer(value, "n", minimum=1)
    except InvalidParameterError:
        pass
    else:
        assert type(n) is int and n >= 1


def test_too_large_for_a_float() -> None:
    # Regression: check_epsilon(10**400) raised a raw OverflowError.
    with pytest.raises(
        InvalidParameterError, match=r"epsilon must be a finite real number; got 1000"
    ):
        check_epsilon(10**400)
    for check in (check_delta, check_epsilon):
        with pytest.raises(InvalidParameterError, match="must be a finite real number"):
            check(Fraction(10**400, 3))
    with pytest.raises(InvalidParameterError, match="x must be a finite real number"):
        check_finite(-(10**400), "x")
    with pytest.raises(InvalidParameterError, match="must be a finite real number"):
        check_positive(np.longdouble("1e4000"), "x")
    # Too many digits even to print: the message says so, the error keeps the value.
    huge = 10**5000
    with pytest.raises(InvalidParameterError, match="int that cannot be shown") as info:
        check_epsilon(huge)
    assert info.value.value is huge
    # Infinities keep their own message.
    with pytest.raises(InvalidParameterError, match="epsilon must be finite; got inf"):
        check_epsilon(math.inf)


def test_tiny_values() -> None:
    assert check_epsilon(5e-324) == 5e-324
    assert check_delta(5e-324) == 5e-324
    # A positive value that rounds to 0 is not a positive float: refused, saying so.
    tiny = Fraction(1, 10**400)
    with pytest.raises(
        InvalidParameterError, match=r"epsilon must be > 0 \(as a float it is 0\.0\); got Fraction"
    ):
        check_epsilon(tiny)
    assert check_epsilon(tiny, allow_zero=True) == 0.0
    with pytest.raises(
        InvalidParameterError, match=r"must be in \(0, 1\) \(as a float it is 0\.0\)"
    ):
        check_probability(tiny, "p", open_left=True, open_right=True)
    # Just below 1, but 1.0 as a float.
    almost_one = 1 - Fraction(1, 10**30)
    with pytest.raises(InvalidParameterError, match=r"\[0, 1\) \(as a float it is 1\.0\)"):
        check_delta(almost_one)


def test_negative_values_that_round_to_zero_are_refused() -> None:
    below_zero = Fraction(-1, 10**400)  # a float cannot hold it: it rounds to -0.0
    with pytest.raises(InvalidParameterError, match=r"\[0, 1\) \(as a float it is -0\.0\)"):
        check_delta(below_zero)
    with pytest.raises(InvalidParameterError, match="must be >= 0"):
        check_epsilon(below_zero, allow_zero=True)
    with pytest.raises(InvalidParameterError, match=r"must be in \[0, 1\]"):
        check_probability(np.longdouble("-1e-4000"), "p")
    # The float -0.0 is zero, and comes back as 0.0.
    for out in (
        check_delta(-0.0),
        check_epsilon(-0.0, allow_zero=True),
        check_probability(-0.0, "p"),
    ):
        assert out == 0.0 and math.copysign(1.0, out) == 1.0


@settings(max_examples=300, deadline=None)
@given(
    value=st.one_of(
        st.fractions(), st.integers(-(10**5), 10**5).map(lambda k: Fraction(k, 10**400))
    )
)
def test_accepted_rationals_keep_their_sign(value: Fraction) -> None:
    try:
        out = check_delta(value)
    except InvalidParameterError:
        assert not 0 <= value < 1 or float(value) >= 1.0
    else:
        assert value >= 0 and math.copysign(1.0, out) == 1.0


def test_messages_show_the_value_as_given() -> None:
    with pytest.raises(InvalidParameterError, match=r"got Fraction\(-1, 3\)\.$"):
        check_epsilon(Fraction(-1, 3))
    with pytest.raises(InvalidParameterError, match=r"got -1\.0\.$"):
        check_epsilon(-1.0)  # a float is shown as it is, with no "as a float" note
    with pytest.raises(
        InvalidParameterError, match=r"must be a real number; got Decimal\('0\.5'\)"
    ):
        check_epsilon(Decimal("0.5"))
    with pytest.raises(InvalidParameterError, match="must be a real number; got None"):
        check_delta(None)
    with pytest.raises(InvalidParameterError, match=r"must be a real number; got '1\.0'"):
        check_finite("1.0", "x")
    with pytest.raises(InvalidParameterError, match=r"must be an integer; got 3\.0"):
        check_integer(3.0, "n")
    broken = BROKEN_REAL
    with pytest.raises(InvalidParameterError, match="_BrokenReal that cannot be shown") as info:
        check_epsilon(broken)
    assert info.value.value is broken
    with pytest.raises(InvalidParameterError, match="must be an integer"):
        check_integer(BROKEN_INTEGRAL, "n")


def test_numpy_scalars() -> None:
    assert check_epsilon(np.float32(0.5)) == 0.5
    assert check_integer(np.int64(3), "n", minimum=1) == 3
    assert type(check_integer(np.int64(3), "n")) is int
    with pytest.raises(InvalidParameterError, match="must be a number, not NaN"):
        check_delta(np.float32(np.nan))


def test_rational() -> None:
    assert check_rational(Decimal("0.1"), "r") == Fraction(1, 10)
    assert check_rational("1e-400", "r") == Fraction(1, 10**400)
    assert check_rational(np.float32(0.1), "r") == Fraction(float(np.float32(0.1)))
    with pytest.raises(InvalidParameterError, match="decimal exponent"):
        check_rational("1e999999999", "r")  # refused at once, not expanded
    with pytest.raises(InvalidParameterError, match="decimal exponent"):
        check_rational(Decimal("1e999999"), "r")
    with pytest.raises(InvalidParameterError, match="must be finite"):
        check_rational(Decimal("Infinity"), "r")
    with pytest.raises(InvalidParameterError, match="must be a rational number"):
        check_rational("1" * 5000, "r")  # more digits than Python converts
    with pytest.raises(InvalidParameterError, match="must be > 0"):
        check_rational("-1/3", "r")


# -- directed rounding --------------------------------------------------------------------------

_RATIONALS = st.one_of(
    st.fractions(),
    st.builds(
        Fraction, st.integers(-(10**320), 10**320), st.integers(min_value=1, max_value=10**330)
    ),
    st.floats(allow_nan=False, allow_infinity=False).map(Fraction),
    st.integers(-(2**1100), 2**1100).map(Fraction),
)


@settings(max_examples=500, deadline=None)
@given(value=_RATIONALS)
def test_ceil_and_floor_are_the_neighbouring_floats(value: Fraction) -> None:
    up, down = ceil_float(value), floor_float(value)
    if math.isfinite(up):
        assert Fraction(up) >= value
        below = math.nextafter(up, -math.inf)
        assert not math.isfinite(below) or Fraction(below) < value
    else:
        assert up == math.inf and value > Fraction(sys.float_info.max)
    if math.isfinite(down):
        assert Fraction(down) <= value
        above = math.nextafter(down, math.inf)
        assert not math.isfinite(above) or Fraction(above) > value
    else:
        assert down == -math.inf and value < -Fraction(sys.float_info.max)
    if math.isfinite(up) and math.isfinite(down):  # equal, or neighbours around value
        assert up == down if Fraction(up) == value else next_up(down) == up


def test_directed_rounding_examples() -> None:
    assert ceil_float(1 + Fraction(1, 10**17)) == math.nextafter(1.0, 2.0)
    assert floor_float(1 + Fraction(1, 10**17)) == 1.0
    assert ceil_float(Fraction(1, 10**400)) == 5e-324
    assert floor_float(Fraction(1, 10**400)) == 0.0
    assert ceil_float(-Fraction(1, 10**400)) == 0.0
    assert floor_float(-Fraction(1, 10**400)) == -5e-324
    assert ceil_float(10**400) == math.inf
    assert floor_float(10**400) == sys.float_info.max
    assert ceil_float(-(10**400)) == -sys.float_info.max
    assert floor_float(-(10**400)) == -math.inf
    assert ceil_float(0.1) == 0.1 and floor_float(0.1) == 0.1  # floats are exact
    assert ceil_float(Fraction(1, 10)) == 0.1 and floor_float(Fraction(1, 10)) < 0.1
    assert ceil_float(7) == 7.0 and type(ceil_float(7)) is float
    assert next_up(1.0, 2) == math.nextafter(math.nextafter(1.0, 2.0), 2.0)
    assert next_down(next_up(0.3, 5), 5) == 0.3
    assert next_up(1.0, 0) == 1.0
