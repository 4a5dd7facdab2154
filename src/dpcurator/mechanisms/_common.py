"""Helpers shared by the mechanisms: the public grid, exact scales, input conversion.

Nothing here looks at private data except to convert it; every choice (grid width, noise scale)
is a function of the public parameters (epsilon, delta, sensitivity, the number of coordinates)
only, so that the set of possible outputs never depends on the data (Mironov 2012; research note
``security_attacks_ldp.md`` A.3). Grid exponents come from the one exact rule of
:func:`dpcurator.noise.grid_exponent` (with :data:`PRECISION_BITS` or a mechanism's own
precision); :func:`pow2` is re-exported from :mod:`dpcurator.noise` for the mechanisms.
"""

from __future__ import annotations

import functools
import math
from fractions import Fraction
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpcurator._validation import check_integer
from dpcurator.errors import InternalError, InvalidParameterError
from dpcurator.noise import from_grid, grid_exponent, pow2, to_grid

__all__ = [
    "MAX_NOISE_UNITS",
    "PRECISION_BITS",
    "add_noise_on_grid",
    "as_float_array",
    "as_int_array",
    "check_changed_coordinates",
    "check_grid_bits",
    "check_scale_range",
    "grid_bits_for_noise",
    "l1_grid_sensitivity",
    "l2_grid_sensitivity",
    "pow2",
    "scale_at_least",
    "unpack_float",
    "unpack_int",
]

PRECISION_BITS = 16
"""The grid is at least ``2**PRECISION_BITS`` times finer than the noise scale and than the
sensitivity per changed coordinate. Rounding to it then inflates the sensitivity by a relative
``2**-16`` at most, and the grid still spans ``+-2**52`` units, i.e. at least ``2**35`` noise
scales (the clamp of :func:`dpcurator.noise.to_grid`)."""


MAX_NOISE_UNITS = 2.0**38
"""Largest noise parameter in grid units a mechanism asks for (the samplers accept ``2**40``)."""


def grid_bits_for_noise(
    scale: Fraction | float,
    per_coordinate: Fraction | float,
    precision: int = PRECISION_BITS,
    *,
    coordinates: int = 1,
) -> int:
    """Grid for a noise parameter ``scale`` and a sensitivity per coordinate (both public).

    The sensitivity per coordinate is ``per_coordinate / sqrt(coordinates)`` (an L2 sensitivity
    shared over ``coordinates`` coordinates; pass ``coordinates=1`` for an L1 share already
    divided). The grid is ``2**precision`` times finer than the smaller of the scale and that
    sensitivity (so rounding costs a relative ``2**-precision`` of sensitivity at most), but
    never finer than ``scale * 2**-(precision + 20)`` (so the noise stays within the exact
    samplers' range; for very many coordinates this caps the grid and the rounding then costs
    more). Computed exactly with :func:`dpcurator.noise.grid_exponent`, which is decreasing in its
    bound, so the ``min`` and ``max`` of the bounds become a ``max`` and ``min`` of exponents:
    no quotient, square root or logarithm is rounded.

    Examples
    --------
    >>> grid_bits_for_noise(10.0, 1.0)  # a count at epsilon 0.1: grid 2**-16
    16
    >>> grid_bits_for_noise(10.0, 1.0, coordinates=4)  # 1 / sqrt(4): one power of two finer
    17
    """
    finer = max(
        grid_exponent(scale, precision),
        grid_exponent(per_coordinate, precision, coordinates=coordinates),
    )
    return min(finer, grid_exponent(scale, precision + 20))


def check_scale_range(epsilon: float, sensitivity: float) -> None:
    """Refuse parameters whose grid would leave the exactly representable float64 range.

    With both in ``[2**-400, 2**400]`` every derived grid ``2**-k`` has ``|k| <= 960`` (the
    range of :func:`dpcurator.noise.to_grid`) and every coefficient stays a normal float.
    """
    for name, value in (("epsilon", epsilon), ("sensitivity", sensitivity)):
        if not 2.0**-400 <= value <= 2.0**400:
            raise InvalidParameterError(name, value, "must be in [2**-400, 2**400]")


def check_grid_bits(value: object) -> int:
    """Validate a caller-given ``grid_bits`` (the grid is ``2**-grid_bits``)."""
    bits = check_integer(value, "grid_bits")
    if not -960 <= bits <= 960:
        raise InvalidParameterError("grid_bits", value, "must be in [-960, 960]")
    return bits


def check_changed_coordinates(value: object, size: int) -> int:
    """Validate ``changed_coordinates`` (default: every coordinate may change)."""
    if value is None:
        return max(size, 1)
    changed = check_integer(value, "changed_coordinates", minimum=1)
    if changed > max(size, 1):
        raise InvalidParameterError(
            "changed_coordinates", value, f"must be <= the number of coordinates ({size})"
        )
    return changed


def l1_grid_sensitivity(sensitivity: float, bits: int, changed: int) -> int:
    """L1 sensitivity in grid units after rounding to ``2**-bits``: ``floor(Delta 2**k) + m``.

    Rounding moves each coordinate by at most half a unit, so each of the ``m`` coordinates that
    can change moves by at most one unit more than before rounding; the integer result then
    allows taking the floor of the scaled sensitivity.
    """
    return math.floor(Fraction(sensitivity) * pow2(bits)) + changed


def l2_grid_sensitivity(sensitivity: float, bits: int, changed: int) -> int:
    """L2 sensitivity in grid units after rounding, as an integer upper bound.

    The change of the rounded vector is the change of the scaled vector plus the difference of
    the rounding errors, a vector with at most ``m`` non-zero entries, each in ``(-1, 1)``: its
    L2 norm is below ``Delta 2**k + sqrt(m)`` (triangle inequality). For ``m = 1`` the change is
    an integer of magnitude at most ``Delta 2**k + 1``, hence at most ``floor(Delta 2**k) + 1``;
    otherwise the ceiling of the bound is returned (exact rational arithmetic for
    ``Delta 2**k``; ``isqrt`` for ``sqrt(m)``).
    """
    if changed == 1:
        return l1_grid_sensitivity(sensitivity, bits, 1)
    root = math.isqrt(changed)
    root_up = root if root * root == changed else root + 1
    return math.ceil(Fraction(sensitivity) * pow2(bits)) + root_up


@functools.lru_cache(maxsize=4096)  # a pure function of public parameters, asked per release
def scale_at_least(numerator: int | float, epsilon: float) -> float:
    """Smallest float ``t >= numerator / epsilon`` whose ratio ``numerator / t`` is ``<= epsilon``.

    The check is done both exactly (as rationals) and in float64, so that an event built from
    ``t`` reports an epsilon that is never above the requested one, even after rounding.

    Examples
    --------
    >>> scale_at_least(1, 0.1)
    10.0
    """
    exact_eps = Fraction(epsilon)
    exact_num = Fraction(numerator)
    t = numerator / epsilon
    for _ in range(64):
        if exact_num / Fraction(t) <= exact_eps and numerator / t <= epsilon:
            return t
        t = math.nextafter(t, math.inf)
    raise InternalError(  # pragma: no cover
        f"no float scale found for {numerator!r} / {epsilon!r}."
    )


def _summary(array: NDArray[Any]) -> str:
    # Never echo private values into an error message: describe the array instead.
    return f"<array of shape {array.shape} and dtype {array.dtype}>"


def as_float_array(value: object, name: str = "value") -> tuple[NDArray[np.float64], bool]:
    """Convert a real statistic (scalar or array) to float64; return it and whether it was scalar.

    Raises :class:`InvalidParameterError` for non-numeric input, NaN or infinity (the message
    describes the array and does not print its private values).
    """
    if isinstance(value, bool | np.bool_):
        raise InvalidParameterError(name, value, "must be a real number or an array of them")
    try:
        array = np.asarray(value)
    except (TypeError, ValueError):
        raise InvalidParameterError(name, type(value).__name__, "must be array-like") from None
    if array.dtype.kind not in "iuf":
        raise InvalidParameterError(name, _summary(array), "must hold real numbers")
    out = array.astype(np.float64)
    if not np.isfinite(out).all():
        raise InvalidParameterError(name, _summary(array), "must be finite (no NaN or infinity)")
    return out, array.ndim == 0


def as_int_array(value: object, name: str = "value") -> tuple[NDArray[np.int64], bool]:
    """Convert an integer statistic (scalar or array) to int64; return it and whether it was scalar.

    Only integer types are accepted (Python ``int``, numpy integer arrays): a float array is
    refused rather than silently rounded.
    """
    if isinstance(value, bool | np.bool_):
        raise InvalidParameterError(name, value, "must be an integer or an array of integers")
    try:
        array = np.asarray(value)
    except (TypeError, ValueError, OverflowError):
        raise InvalidParameterError(name, type(value).__name__, "must be array-like") from None
    if array.size == 0 and array.dtype.kind == "f":  # an empty list
        array = array.astype(np.int64)
    if array.dtype.kind not in "iu":
        raise InvalidParameterError(name, _summary(array), "must hold integers")
    if array.dtype.kind == "u" and array.size and int(array.max()) > 2**62:
        raise InvalidParameterError(name, _summary(array), "must be below 2**62 in magnitude")
    out = array.astype(np.int64)
    if out.size and bool(((out > 2**62) | (out < -(2**62))).any()):
        raise InvalidParameterError(name, _summary(array), "must be below 2**62 in magnitude")
    return out, array.ndim == 0


def unpack_float(values: NDArray[np.float64], scalar: bool) -> Any:
    """Return a Python float for scalar input, the array otherwise."""
    return float(values.reshape(())) if scalar else values


def unpack_int(values: NDArray[np.int64], scalar: bool) -> Any:
    """Return a Python int for scalar input, the array otherwise."""
    return int(values.reshape(())) if scalar else values


def add_noise_on_grid(
    values: NDArray[np.float64], noise: NDArray[np.int64], bits: int
) -> NDArray[np.float64]:
    """Return ``from_grid(to_grid(values) + noise)``: round to the grid, add, map back exactly."""
    flat = values.reshape(-1)
    indices = np.asarray(to_grid(flat, bits), dtype=np.int64) + noise.reshape(-1)
    out: NDArray[np.float64] = np.asarray(from_grid(indices, bits), dtype=np.float64)
    return out.reshape(values.shape)
