"""Tests of the public grid (src/dpcurator/noise/_grid.py)."""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpcurator.errors import InvalidParameterError
from dpcurator.noise import (
    InsecureSeededSource,
    discrete_laplace,
    floor_log2,
    from_grid,
    grid_exponent,
    pow2,
    to_grid,
)


def exact_grid_index(x: float, bits: int) -> int:
    """round-half-even of x * 2**bits in exact rational arithmetic, clamped to +-2**52."""
    scaled = Fraction(x) * Fraction(2) ** bits
    clamped = max(min(scaled, Fraction(2**52)), Fraction(-(2**52)))
    return round(clamped)  # Fraction.__round__ rounds half to even


@settings(max_examples=300, deadline=None)
@given(
    x=st.floats(allow_nan=False, allow_infinity=False, width=64),
    bits=st.integers(min_value=-60, max_value=80),
)
def test_to_grid_is_exact_rounding(x: float, bits: int) -> None:
    assert int(to_grid([x], bits)[0]) == exact_grid_index(x, bits)


def test_to_grid_ties_to_even() -> None:
    assert to_grid([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 3.5], 0).tolist() == [0, 2, 2, 0, -2, -2, 4]
    # bits = 2: 0.125 * 4 = 0.5 -> 0 and 0.375 * 4 = 1.5 -> 2
    assert to_grid([0.125, 0.375, -0.625], 2).tolist() == [0, 2, -2]


def test_to_grid_clamps_to_fixed_range() -> None:
    out = to_grid([1e300, -1e300, math.inf, -math.inf, 2.0**60], 0)
    assert out.tolist() == [2**52, -(2**52), 2**52, -(2**52), 2**52]
    assert to_grid([1.0], 900).tolist() == [2**52]
    assert to_grid([1e-300], -900).tolist() == [0]  # underflow rounds to 0, exactly
    assert out.dtype == np.int64


def test_grid_round_trip_is_exact() -> None:
    rng = np.random.default_rng(1)
    k = rng.integers(-(2**52), 2**52, size=10_000, dtype=np.int64)
    k[:3] = [0, 2**52, -(2**52)]
    for bits in (-900, -10, 0, 7, 52, 900):
        values = from_grid(k, bits)
        assert np.array_equal(to_grid(values, bits), k)
        # exactness: values * 2**bits are the integers k, checked in rational arithmetic
        for v, idx in zip(values[:50].tolist(), k[:50].tolist(), strict=True):
            assert Fraction(v) == Fraction(idx) * Fraction(2) ** -bits
    assert from_grid([2**53, -(2**53)], 0).tolist() == [2.0**53, -(2.0**53)]


def test_noisy_outputs_lie_on_the_same_grid_whatever_the_input() -> None:
    """from_grid(to_grid(x) + noise) takes values in 2**-bits Z for every x (no porous set)."""
    bits = 10
    for x in (0.0, 1.0, 1 / 3, 1e6 + 0.1, -7.77, 2.0**-40):
        index = to_grid(np.full(5000, x), bits)
        noise = discrete_laplace(3, size=5000, source=InsecureSeededSource(2))
        out = from_grid(index + noise, bits)
        scaled = np.ldexp(out, bits)
        assert np.array_equal(scaled, np.rint(scaled))  # every output is k * 2**-bits
        assert np.array_equal(to_grid(out, bits), index + noise)  # and maps back exactly
        # outputs near x are spaced exactly 2**-bits apart, as for any other input
        distinct = np.unique(out)
        gaps = np.diff(distinct) * 2.0**bits
        assert np.array_equal(gaps, np.rint(gaps))


def test_to_grid_shapes_and_dtypes() -> None:
    assert to_grid(0.75, 2).shape == ()
    assert int(to_grid(0.75, 2)) == 3
    assert to_grid(np.zeros((2, 3)), 4).shape == (2, 3)
    assert to_grid(np.array([3], dtype=np.int64), 1).tolist() == [6]
    assert to_grid(np.array([1.5], dtype=np.float32), 0).tolist() == [2]


@pytest.mark.parametrize("values", [[math.nan], [1.0, math.nan], np.array([np.nan])])
def test_to_grid_rejects_nan(values: Any) -> None:
    with pytest.raises(InvalidParameterError) as info:
        to_grid(values, 3)
    assert info.value.name == "values"


@pytest.mark.parametrize("values", [["a"], [True], [1 + 2j], None])
def test_to_grid_rejects_non_real(values: Any) -> None:
    with pytest.raises(InvalidParameterError) as info:
        to_grid(values, 3)
    assert info.value.name == "values"


@pytest.mark.parametrize("bits", [961, -961, 1.5, "3", None, True])
def test_grid_rejects_bad_bits(bits: Any) -> None:
    for call in (lambda: to_grid([1.0], bits), lambda: from_grid([1], bits)):
        with pytest.raises(InvalidParameterError) as info:
            call()
        assert info.value.name == "bits"


@pytest.mark.parametrize(
    "indices", [[0.5], [math.nan], [math.inf], [2**53 + 1], [-(2**53) - 1], ["1"], [2.0**54]]
)
def test_from_grid_rejects_bad_indices(indices: Any) -> None:
    with pytest.raises(InvalidParameterError) as info:
        from_grid(indices, 0)
    assert info.value.name == "indices"


def test_from_grid_accepts_integral_floats() -> None:
    assert from_grid([3.0, -2.0], 1).tolist() == [1.5, -1.0]


def test_grid_maps_do_not_modify_their_input() -> None:
    values = np.array([0.3, 1.7, -2.5])
    indices = np.array([3, -4], dtype=np.int64)
    to_grid(values, 4)
    from_grid(indices, 4)
    assert values.tolist() == [0.3, 1.7, -2.5]
    assert indices.tolist() == [3, -4]


# --- The one grid rule: pow2, floor_log2, grid_exponent -------------------------------------


def brute_floor_log2(x: Fraction) -> int:
    """The e with 2**e <= x < 2**(e+1), by stepping through powers of two (no bit tricks)."""
    e = 0
    while Fraction(2) ** e > x:
        e -= 1
    while Fraction(2) ** (e + 1) <= x:
        e += 1
    return e


def brute_grid_exponent(bound: Fraction, precision: int, coordinates: int = 1) -> int:
    """The smallest k with 2**-k <= bound / sqrt(m) * 2**-p, i.e. (2**(k-p) bound)**2 >= m."""

    def fine_enough(k: int) -> bool:
        return (Fraction(2) ** (k - precision) * bound) ** 2 >= coordinates

    k = precision - math.floor(math.log2(float(bound)) - math.log2(coordinates) / 2)  # a guess
    while not fine_enough(k):
        k += 1
    while fine_enough(k - 1):
        k -= 1
    return k


positive_fractions = st.fractions(min_value=Fraction(1, 10**40), max_value=10**40).filter(
    lambda q: q > 0
)
positive_floats = st.floats(min_value=5e-324, max_value=1.7e308, allow_nan=False)
huge_integers = st.integers(min_value=1, max_value=2**300)


@settings(max_examples=300, deadline=None)
@given(x=st.one_of(positive_fractions, positive_floats, huge_integers))
def test_floor_log2_is_exact(x: Fraction | float | int) -> None:
    e = floor_log2(x)
    assert e == brute_floor_log2(Fraction(x))
    assert Fraction(2) ** e <= Fraction(x) < Fraction(2) ** (e + 1)


@pytest.mark.parametrize("k", [-1074, -1022, -60, -1, 0, 1, 52, 53, 54, 1023])
def test_floor_log2_at_and_next_to_powers_of_two(k: int) -> None:
    assert floor_log2(pow2(k)) == k
    assert floor_log2(math.ldexp(1.0, k)) == k
    assert floor_log2(pow2(k) - pow2(k - 200)) == k - 1  # 2**k - tiny: not a float
    assert floor_log2(pow2(k) + pow2(k - 200)) == k
    if k > 0:
        assert floor_log2(2**k) == k
        assert floor_log2(2**k - 1) == k - 1


def test_floor_log2_differs_from_float_log2_above_2_53() -> None:
    big = 2**54 - 1  # float(big) rounds up to 2**54
    assert floor_log2(big) == 53
    assert math.frexp(big)[1] - 1 == 54  # the old float rule: one too many
    assert floor_log2(Fraction(2**-10) - Fraction(1, 10**30)) == -11
    assert math.frexp(float(Fraction(2**-10) - Fraction(1, 10**30)))[1] - 1 == -10


@pytest.mark.parametrize("bad", [0, -1, 0.0, -2.5, math.nan, math.inf, True, "x", None])
def test_floor_log2_refuses_non_positive_or_non_finite(bad: Any) -> None:
    with pytest.raises(InvalidParameterError) as info:
        floor_log2(bad)
    assert info.value.name == "x"


def test_pow2_is_exact() -> None:
    assert pow2(0) == 1 and pow2(3) == 8 and pow2(-3) == Fraction(1, 8)
    assert pow2(-1100) * 2**1100 == 1
    assert isinstance(pow2(5), Fraction)
    with pytest.raises(InvalidParameterError):
        pow2(1.5)  # type: ignore[arg-type]


@settings(max_examples=300, deadline=None)
@given(
    bound=st.one_of(positive_fractions, positive_floats, huge_integers),
    precision=st.integers(min_value=-40, max_value=60),
    coordinates=st.one_of(st.just(1), st.integers(min_value=1, max_value=10**6)),
)
def test_grid_exponent_is_the_largest_power_of_two_below(
    bound: Fraction | float | int, precision: int, coordinates: int
) -> None:
    k = grid_exponent(bound, precision, coordinates=coordinates)
    exact = Fraction(bound)
    # 2**-k <= bound / sqrt(m) 2**-p < 2**-(k-1), compared in squares (exact rationals)
    assert (pow2(-k) / (exact * pow2(-precision))) ** 2 * coordinates <= 1
    assert (pow2(1 - k) / (exact * pow2(-precision))) ** 2 * coordinates > 1
    assert k == brute_grid_exponent(exact, precision, coordinates)


@settings(max_examples=300, deadline=None)
@given(bound=positive_floats, precision=st.integers(min_value=-30, max_value=60))
def test_grid_exponent_equals_the_frexp_rule_on_floats(bound: float, precision: int) -> None:
    """The grids of normal (float) inputs are those of the former frexp rule."""
    assert grid_exponent(bound, precision) == precision - (math.frexp(bound)[1] - 1)


def test_grid_exponent_examples_at_powers_of_two() -> None:
    assert grid_exponent(1.0, 16) == 16
    assert grid_exponent(2.0**-5, 16) == 21  # bound exactly 2**-k
    assert grid_exponent(math.nextafter(2.0**-5, 0.0), 16) == 22
    assert grid_exponent(Fraction(1, 32) - Fraction(1, 10**40), 16) == 22  # float() gives 2**-5
    assert grid_exponent(2**60 - 1, 0) == -59  # float() rounds up to 2**60
    assert grid_exponent(1.0, 16, coordinates=4) == 17
    assert grid_exponent(2.0, 16, coordinates=4) == 16  # 2 / sqrt(4) = 1 exactly
    # sqrt(3) in float64 is below the true root: sqrt_f(3) / sqrt(3) < 1, so one power finer,
    # where the float quotient (exactly 1.0) would have said 16.
    assert Fraction(math.sqrt(3)) ** 2 < 3
    assert grid_exponent(math.sqrt(3), 16, coordinates=3) == 17
    assert math.frexp(math.sqrt(3) / math.sqrt(3))[1] - 1 == 0


@pytest.mark.parametrize(
    ("args", "name"),
    [
        ((0.0, 16), "bound"),
        ((math.inf, 16), "bound"),
        ((math.nan, 16), "bound"),
        ((-1.0, 16), "bound"),
        ((1.0, 1.5), "precision"),
        ((1.0, True), "precision"),
    ],
)
def test_grid_exponent_refuses_bad_arguments(args: tuple[Any, Any], name: str) -> None:
    with pytest.raises(InvalidParameterError) as info:
        grid_exponent(*args)
    assert info.value.name == name


def test_grid_exponent_refuses_bad_coordinates() -> None:
    with pytest.raises(InvalidParameterError) as info:
        grid_exponent(1.0, 16, coordinates=0)
    assert info.value.name == "coordinates"
