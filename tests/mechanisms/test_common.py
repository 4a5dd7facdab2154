"""The mechanisms' grid choice (src/dpcurator/mechanisms/_common.py) on the one exact rule."""

from __future__ import annotations

import math
from fractions import Fraction

from hypothesis import given, settings
from hypothesis import strategies as st

from dpcurator import noise
from dpcurator.mechanisms import _common, gaussian_mechanism, laplace_mechanism
from dpcurator.mechanisms._common import PRECISION_BITS, grid_bits_for_noise, l1_grid_sensitivity


def old_grid_bits_for_noise(scale: float, per_coordinate: float, precision: int) -> int:
    """The former float rule: frexp of max(min(scale, per_coordinate), scale 2**-20)."""
    bound = max(min(scale, per_coordinate), scale * 2.0**-20)
    return precision - (math.frexp(bound)[1] - 1)


def test_pow2_is_the_noise_layer_function() -> None:
    assert _common.pow2 is noise.pow2
    assert l1_grid_sensitivity(1.5, 3, 1) == math.floor(Fraction(3, 2) * 8) + 1


scales = st.floats(min_value=2.0**-300, max_value=2.0**300)


@settings(max_examples=300, deadline=None)
@given(scale=scales, per_coordinate=scales, precision=st.integers(min_value=0, max_value=30))
def test_same_grids_as_the_float_rule_for_float_bounds(
    scale: float, per_coordinate: float, precision: int
) -> None:
    """With one coordinate (no square root), every float input keeps its former grid."""
    assert grid_bits_for_noise(scale, per_coordinate, precision) == old_grid_bits_for_noise(
        scale, per_coordinate, precision
    )


@settings(max_examples=300, deadline=None)
@given(
    scale=scales,
    sensitivity=scales,
    coordinates=st.integers(min_value=1, max_value=10**6),
    precision=st.integers(min_value=0, max_value=30),
)
def test_grid_is_exactly_min_max_of_the_bounds(
    scale: float, sensitivity: float, coordinates: int, precision: int
) -> None:
    """2**-k is the largest power of two <= max(min(s, D / sqrt(m)), s 2**-20) 2**-p (exact)."""
    k = grid_bits_for_noise(scale, sensitivity, precision, coordinates=coordinates)
    s, d = Fraction(scale), Fraction(sensitivity)

    def at_most_bound(g: Fraction) -> bool:  # g <= max(min(s, d / sqrt(m)), s 2**-20) 2**-p
        g_scaled = g * noise.pow2(precision)
        below_min = g_scaled <= s and (g_scaled**2) * coordinates <= d**2
        return below_min or g_scaled <= s * noise.pow2(-20)

    assert at_most_bound(noise.pow2(-k))
    assert not at_most_bound(noise.pow2(1 - k))


def test_gaussian_grid_takes_the_exact_square_root() -> None:
    """sqrt(3) in float64 lies below the true root, so Delta / sqrt(m) < 1 for Delta = sqrt_f(3),
    m = 3: the grid is one power of two finer than the float quotient (exactly 1.0) gave."""
    sens = math.sqrt(3)
    assert Fraction(sens) ** 2 < 3 and sens / math.sqrt(3) == 1.0
    release = gaussian_mechanism([0.0, 0.0, 0.0], epsilon=1.0, delta=1e-5, sensitivity=sens)
    assert release.error is not None
    assert release.error.unit == 2.0**-13  # GAUSSIAN_PRECISION_BITS = 12, plus one
    assert old_grid_bits_for_noise(100.0, sens / math.sqrt(3), 12) == 12  # the former grid


def test_laplace_grid_is_unchanged_for_a_count() -> None:
    release = laplace_mechanism(3.0, epsilon=0.1, sensitivity=1.0)
    assert release.error is not None
    assert release.error.unit == 2.0**-PRECISION_BITS
