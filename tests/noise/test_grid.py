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
from dpcurator.noise import InsecureSeededSource, discrete_laplace, from_grid, to_grid


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
