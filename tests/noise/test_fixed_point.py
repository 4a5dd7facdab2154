"""Tests of declared ranges and the fixed-point rule (src/dpcurator/noise/_fixed_point.py)."""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from dpcurator.errors import InvalidParameterError
from dpcurator.noise import (
    ENCODING_KINDS,
    MAX_ENCODING_BITS,
    MAX_MAGNITUDE,
    MIN_WIDTH,
    FixedPointEncoding,
    FixedPointRange,
    pow2,
)

# --- Declared ranges --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("lower", "upper", "name", "phrase"),
    [
        (math.nan, 1.0, "lower", "NaN"),
        (0.0, math.nan, "upper", "NaN"),
        (-math.inf, 1.0, "lower", "finite"),
        (0.0, math.inf, "upper", "finite"),
        (-1.7e308, 1.7e308, "lower", "2**64"),  # width inf in float64
        (-1e300, 1e300, "lower", "2**64"),
        (0.0, 1e300, "upper", "2**64"),
        (0.0, 2**64 + 1, "upper", "2**64"),
        (1.0, 1.0, "upper", "greater than lower"),
        (2.0, 1.0, "upper", "swap the bounds"),
        (0.0, Fraction(1, 2**65), "upper", "2**-64"),
        (0.0, 5e-324, "upper", "2**-64"),
        ("a", 1.0, "lower", "rational"),
        (None, 1.0, "lower", "rational"),
        (True, 2.0, "lower", "rational"),
    ],
)
def test_range_refusals_say_what_to_change(lower: Any, upper: Any, name: str, phrase: str) -> None:
    with pytest.raises(InvalidParameterError) as info:
        FixedPointRange.from_bounds(lower, upper)
    assert info.value.name == name
    assert phrase in str(info.value)


def test_range_refusal_names_carry_the_prefix() -> None:
    with pytest.raises(InvalidParameterError) as info:
        FixedPointRange.from_bounds(0.0, math.inf, name="income")
    assert info.value.name == "income.upper"


def test_direct_construction_is_checked_too() -> None:
    with pytest.raises(InvalidParameterError):
        FixedPointRange(Fraction(1), Fraction(1))
    with pytest.raises(InvalidParameterError):
        FixedPointRange(Fraction(0), Fraction(2**65))


def test_range_limits_are_accepted() -> None:
    r = FixedPointRange.from_bounds(-MAX_MAGNITUDE, MAX_MAGNITUDE)
    assert r.width == 2**65 and math.isfinite(r.width_float)
    # post-processing stays finite: 2**40 rows of squared half-widths
    assert math.isfinite(2.0**40 * r.half_float**2)
    tiny = FixedPointRange.from_bounds(0, MIN_WIDTH)
    assert tiny.width == MIN_WIDTH
    for kind in ENCODING_KINDS:
        for enc in (r.encoding(MAX_ENCODING_BITS, kind), tiny.encoding(MAX_ENCODING_BITS, kind)):
            assert math.isfinite(enc.multiplier) and enc.multiplier > 2.0**-1022
            assert float(enc.unit) > 2.0**-1022


def test_exact_views_and_float_views() -> None:
    r = FixedPointRange.from_bounds(-1, 0.1)
    assert r.lower == -1 and r.upper == Fraction(0.1)  # the float 0.1, exactly
    assert r.width == Fraction(0.1) + 1
    assert r.half == r.width / 2 and r.mid == (Fraction(0.1) - 1) / 2
    assert r.magnitude == 1
    assert r.lower_float == -1.0 and r.upper_float == 0.1
    assert r.mid_float == float(r.mid) and r.half_float == float(r.half)
    assert r.magnitude_float == 1.0 and r.width_float == float(r.width)
    assert all(isinstance(v, Fraction) for v in (r.lower, r.upper, r.width, r.half, r.mid))


def test_range_accepts_integers_fractions_and_numpy_scalars() -> None:
    r = FixedPointRange.from_bounds(np.int64(-3), np.float64(2.5))
    assert (r.lower, r.upper) == (-3, Fraction(5, 2))
    q = FixedPointRange.from_bounds(Fraction(1, 3), 2**53 + 1)  # neither is a float
    assert q.lower == Fraction(1, 3) and q.upper == 2**53 + 1


@pytest.mark.parametrize(
    ("lower", "upper", "mid"),
    [
        (1e15, 1e15 + 0.125, Fraction(10**15) + Fraction(1, 16)),
        (2.0**53, 2.0**53 + 2, Fraction(2**53 + 1)),
    ],
)
def test_mid_is_exact_where_the_float_midpoint_is_not(
    lower: float, upper: float, mid: Fraction
) -> None:
    r = FixedPointRange.from_bounds(lower, upper)
    assert r.mid == mid
    float_mid = (lower + upper) / 2
    assert Fraction(float_mid) != mid
    assert float_mid == lower  # rounded half a range away
    # The former rule: a row at U sits two half-widths from the float midpoint, so it moved a
    # centred sum by 2x and a centred square by 4x what the plan charged ...
    assert (upper - float_mid) / float(r.half) == 2.0
    # ... while the rule's indices stay within one half-width (2**b units) and are exact here.
    for bits in (0, 8, 30):
        centred = r.encoding(bits).indices([lower, upper]).tolist()
        squares = r.encoding(bits, "squares").indices([lower, upper]).tolist()
        assert centred == [-(2**bits), 2**bits]
        assert squares == [2**bits, 2**bits]


# --- Encodings --------------------------------------------------------------------------------


def test_encoding_pieces() -> None:
    r = FixedPointRange.from_bounds(-2, 6)  # mid 2, half 4, magnitude 6
    centred = r.encoding(10)
    assert centred.unit == Fraction(4, 1024)
    assert centred.multiplier == 256.0 and centred.offset == -2.0 and centred.shift == 1024.0
    assert (centred.min_index, centred.max_index, centred.row_units) == (-1024, 1024, 1024)
    squares = r.encoding(10, "squares")
    assert squares.unit == Fraction(16, 1024)
    assert (squares.min_index, squares.max_index, squares.row_units) == (0, 1024, 1024)
    raw = r.encoding(10, "raw")
    assert raw.unit == Fraction(6, 1024) and raw.multiplier == 1024 / 6
    assert raw.offset == 0.0 and raw.shift == 0.0
    # unit * 2**b is what one row may contribute: h, h**2, M
    assert centred.unit * 2**10 == r.half
    assert squares.unit * 2**10 == r.half**2
    assert raw.unit * 2**10 == r.magnitude


def test_multiplier_is_the_nearest_float() -> None:
    r = FixedPointRange.from_bounds(0, 3)  # 2**b / 1.5 is not dyadic
    enc = r.encoding(20)
    assert enc.multiplier == float(pow2(20) / Fraction(3, 2))
    assert abs(Fraction(enc.multiplier) - pow2(20) / Fraction(3, 2)) <= Fraction(
        enc.multiplier
    ) * Fraction(1, 2**53)


@pytest.mark.parametrize(
    ("bits", "kind", "name"),
    [(-1, "centred", "bits"), (63, "centred", "bits"), (1.5, "raw", "bits"), (4, "sum", "kind")],
)
def test_encoding_refusals(bits: Any, kind: Any, name: str) -> None:
    r = FixedPointRange.from_bounds(0, 1)
    with pytest.raises(InvalidParameterError) as info:
        r.encoding(bits, kind)
    assert info.value.name == name


def test_encoding_needs_a_range() -> None:
    with pytest.raises(InvalidParameterError) as info:
        FixedPointEncoding((0, 1), 4)  # type: ignore[arg-type]
    assert info.value.name == "bounds"


def test_indices_refuse_nan_without_echoing_values() -> None:
    enc = FixedPointRange.from_bounds(0, 1).encoding(4)
    with pytest.raises(InvalidParameterError) as info:
        enc.indices([0.123456789, math.nan])
    assert "0.123456789" not in str(info.value)
    with pytest.raises(InvalidParameterError):
        enc.indices(["a"])


def test_indices_clamp_out_of_range_and_infinite_values() -> None:
    enc = FixedPointRange.from_bounds(-1, 3).encoding(3)
    out = enc.indices([-math.inf, -100.0, 100.0, math.inf, 1e308])
    assert out.tolist() == [-8, -8, 8, 8, 8] and out.dtype == np.int64
    assert enc.indices(np.zeros((2, 3))).shape == (2, 3)


# --- The sensitivity rule, brute force ---------------------------------------------------------

finite = st.floats(min_value=-(2.0**64), max_value=2.0**64, allow_nan=False)


@st.composite
def ranges(draw: st.DrawFn) -> tuple[float, float]:
    """Declared float ranges: wide ones, and ranges a few floats wide anywhere (the hard case)."""
    lower = draw(finite)
    if draw(st.booleans()):
        upper = draw(finite)
    else:
        upper = lower
        for _ in range(draw(st.integers(min_value=1, max_value=4))):
            upper = math.nextafter(upper, math.inf)
    assume(upper > lower and Fraction(upper) - Fraction(lower) >= MIN_WIDTH)
    assume(max(abs(lower), abs(upper)) <= MAX_MAGNITUDE)
    return lower, upper


@st.composite
def values_in(draw: st.DrawFn, bounds: tuple[float, float]) -> list[float]:
    lower, upper = bounds
    inside = st.floats(min_value=lower, max_value=upper, allow_nan=False)
    anywhere = st.floats(allow_nan=False)  # clamped first
    return draw(st.lists(st.one_of(inside, anywhere, st.sampled_from([lower, upper])), max_size=8))


def _clamped(x: float, lower: float, upper: float) -> Fraction:
    return Fraction(min(max(x, lower), upper))


@settings(max_examples=400, deadline=None)
@given(data=st.data(), bits=st.integers(min_value=0, max_value=MAX_ENCODING_BITS))
def test_every_index_lies_in_its_range_and_near_the_exact_value(
    data: st.DataObject, bits: int
) -> None:
    """One row moves a sum by at most 2**b units, whatever the range and the value; and the
    float computation is accurate: within 1/2 unit (rounding) plus the float64 error of the
    expression (relative 2**-52 per operation on values of at most 2**(b+1) units)."""
    bounds = data.draw(ranges())
    xs = data.draw(values_in(bounds))
    r = FixedPointRange.from_bounds(*bounds)
    scale = pow2(bits)
    slack = Fraction(1, 2) + pow2(bits - 48)
    for kind in ENCODING_KINDS:
        enc = r.encoding(bits, kind)
        out = enc.indices(xs)
        assert out.dtype == np.int64
        for x, index in zip(xs, out.tolist(), strict=True):
            assert enc.min_index <= index <= enc.max_index
            assert abs(index) <= enc.row_units == 2**bits
            x_exact = _clamped(x, *bounds)
            if kind == "centred":
                target = (x_exact - r.mid) / r.half * scale
            elif kind == "squares":
                target = ((x_exact - r.mid) / r.half) ** 2 * scale
            else:
                target = x_exact / r.magnitude * scale
            target = min(max(target, Fraction(enc.min_index)), Fraction(enc.max_index))
            assert abs(index - target) <= slack, (kind, x, index, float(target))


@settings(max_examples=200, deadline=None)
@given(
    lower=finite,
    width=st.floats(min_value=2.0**-60, max_value=2.0**60),
    bits=st.integers(min_value=0, max_value=40),
)
def test_sum_of_indices_moves_by_at_most_row_units_per_row(
    lower: float, width: float, bits: int
) -> None:
    """Add/remove one row: the exact integer sum moves by at most 2**b (the unit charged)."""
    upper = lower + width
    assume(math.isfinite(upper) and upper > lower and abs(upper) <= MAX_MAGNITUDE)
    r = FixedPointRange.from_bounds(lower, upper)
    rows = [lower, upper, (lower + upper) / 2, upper + 1e300, lower - 1e300]
    for kind in ENCODING_KINDS:
        enc = r.encoding(bits, kind)
        indices = [int(i) for i in enc.indices(rows)]
        total = sum(indices)
        for removed in range(len(rows)):
            assert abs(total - (total - indices[removed])) <= enc.row_units
        assert max(indices) - min(indices) <= enc.max_index - enc.min_index
