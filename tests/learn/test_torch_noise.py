"""The grid of DP-SGD and DP-FedAvg (src/dpcurator/learn/_torch_noise.py) on the one exact rule."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("torch")

from dpcurator.errors import InvalidParameterError
from dpcurator.learn._torch_noise import grid_bits


def smallest_k(c: Fraction, d: int, precision: int) -> int:
    """Smallest k with c 2**k >= 2**precision sqrt(d), in exact squares (a float guess first)."""

    def enough(k: int) -> bool:
        return (c * Fraction(2) ** k) ** 2 >= Fraction(4) ** precision * d

    k = math.ceil(precision + math.log2(d) / 2 - math.log2(c))
    while not enough(k):
        k += 1
    while enough(k - 1):
        k -= 1
    return k


def brute_grid_bits(clip_norm: float, dimension: int) -> int:
    c = Fraction(clip_norm)
    preferred = smallest_k(c, dimension, 16)
    cap = math.floor(22 - math.log2(c))  # then the largest k with c 2**k <= 2**22, exactly
    while c * Fraction(2) ** cap > 2**22:
        cap -= 1
    while c * Fraction(2) ** (cap + 1) <= 2**22:
        cap += 1
    if preferred <= cap:
        return preferred
    return cap if smallest_k(c, dimension, 10) <= cap else preferred


def old_grid_bits(clip_norm: float, dimension: int) -> int:
    """The former float rule (math.log2, math.sqrt and fix-up loops)."""

    def bits_for(c: float, d: int, precision: int) -> int:
        target = math.ldexp(math.sqrt(d), precision)
        k = math.ceil(math.log2(target / c))
        while math.ldexp(c, k) < target:
            k += 1
        while math.ldexp(c, k - 1) >= target:
            k -= 1
        return k

    preferred = bits_for(clip_norm, dimension, 16)
    cap = math.floor(math.log2(2.0**22 / clip_norm))
    while math.ldexp(clip_norm, cap) > 2.0**22:
        cap -= 1
    while math.ldexp(clip_norm, cap + 1) <= 2.0**22:
        cap += 1
    if preferred <= cap:
        return preferred
    return cap if bits_for(clip_norm, dimension, 10) <= cap else preferred


clip_norms = st.floats(min_value=2.0**-200, max_value=2.0**200)
dimensions = st.integers(min_value=1, max_value=2**40)


@settings(max_examples=300, deadline=None)
@given(clip_norm=clip_norms, dimension=dimensions)
def test_grid_bits_is_the_documented_rule_exactly(clip_norm: float, dimension: int) -> None:
    assert grid_bits(clip_norm, dimension) == brute_grid_bits(clip_norm, dimension)


@settings(max_examples=300, deadline=None)
@given(
    clip_norm=clip_norms,
    root=st.integers(min_value=1, max_value=2**20),
    powers=st.integers(min_value=0, max_value=3),
)
def test_same_grids_as_the_float_rule_where_sqrt_is_exact(
    clip_norm: float, root: int, powers: int
) -> None:
    """For perfect squares (sqrt exact in float64) the former rule gave the same grids."""
    dimension = root * root
    assert grid_bits(clip_norm, dimension) == old_grid_bits(clip_norm, dimension)
    power_of_two_clip = 2.0**powers
    assert grid_bits(power_of_two_clip, dimension) == old_grid_bits(power_of_two_clip, dimension)


def test_rounded_square_root_no_longer_decides_the_grid() -> None:
    """C = sqrt_f(3) lies below sqrt(3): C 2**16 < 2**16 sqrt(3), so the grid must be 2**-17;
    the float rule compared C 2**16 with its own rounded 2**16 sqrt_f(3) and kept 2**-16."""
    c = math.sqrt(3)
    assert Fraction(c) ** 2 < 3
    assert grid_bits(c, 3) == 17
    assert old_grid_bits(c, 3) == 16  # the negative control: the former rule undercounts


def test_documented_examples_and_the_float32_cap() -> None:
    assert grid_bits(1.0, 1) == 16
    assert grid_bits(1.0, 4810) == 22  # capped for float32
    assert grid_bits(2.0**-6, 1) == 22  # C 2**22 = 2**16: exactly the cap
    assert grid_bits(1.0, 2**40) == 36  # too many coordinates to cap: 2**16 sqrt(d)


@pytest.mark.parametrize(("clip", "dimension"), [(0.0, 1), (-1.0, 1), (math.inf, 1), (1.0, 0)])
def test_grid_bits_refuses_bad_parameters(clip: float, dimension: int) -> None:
    with pytest.raises(InvalidParameterError):
        grid_bits(clip, dimension)
