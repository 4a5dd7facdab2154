"""The public grid ``2**-bits * Z`` on which real-valued releases live.

Real values are rounded to the grid *before* noise is added, integer noise is added to the grid
index, and the result is mapped back. The set of possible outputs is then the fixed grid,
whatever the input: this closes the floating-point attacks on textbook Laplace (Mironov, CCS
2012) and the precision attacks on the addition step (Haney et al. 2022, arXiv 2207.13793).
Both maps are exact: scaling by a power of two (:func:`numpy.ldexp`) and rounding to an integer
(:func:`numpy.rint`) are exact float64 operations in the accepted range.

The grid exponent itself is chosen here too, in exact arithmetic, by one rule for every caller
(:func:`grid_exponent`: ``2**-k`` is the largest power of two ``<= bound * 2**-precision``), with
:func:`floor_log2` and :func:`pow2` as its exact building blocks. Each caller (mechanisms,
learning, the curator's plan) brings its own ``precision``; none computes a logarithm in floating
point.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from dpcurator._validation import check_integer, check_rational
from dpcurator.errors import InvalidParameterError

__all__ = ["floor_log2", "from_grid", "grid_exponent", "pow2", "to_grid"]

_MAX_BITS = 960
"""``|bits| <= 960`` keeps ``index * 2**-bits`` a normal float64 for every ``|index| <= 2**53``."""
_CLAMP = 2.0**52
"""Grid indices are clamped to ``[-2**52, 2**52]`` (exact integers in float64 and int64)."""


def pow2(bits: int) -> Fraction:
    """Return ``2**bits`` exactly, as a :class:`~fractions.Fraction` (``bits`` may be negative).

    Examples
    --------
    >>> from dpcurator.noise import pow2
    >>> pow2(-3), pow2(4)
    (Fraction(1, 8), Fraction(16, 1))
    """
    b = check_integer(bits, "bits")
    return Fraction(2**b) if b >= 0 else Fraction(1, 2**-b)


def floor_log2(x: Fraction | int | float) -> int:
    r"""Return :math:`\lfloor \log_2 x \rfloor` exactly, for a finite real ``x > 0``.

    With ``x = n / d`` in lowest terms, ``e = bitlen(n) - bitlen(d)`` satisfies
    ``2**(e-1) < x < 2**(e+1)``; one exact integer comparison (``n < d 2**e``) decides between
    ``e - 1`` and ``e``. No floating-point logarithm is taken, so powers of two and their
    neighbours are never misjudged (``math.log2`` rounds, and ``float(x)`` of a ``Fraction`` or
    of an integer above ``2**53`` can round up to the next power of two).

    Parameters
    ----------
    x : int, float or Fraction
        A finite number > 0 (floats are taken at their exact value).

    Returns
    -------
    int
        The ``e`` with ``2**e <= x < 2**(e+1)``.

    Raises
    ------
    InvalidParameterError
        If ``x`` is not a finite real number > 0.

    Examples
    --------
    >>> from fractions import Fraction
    >>> from dpcurator.noise import floor_log2
    >>> floor_log2(1), floor_log2(0.75), floor_log2(2**54 - 1), floor_log2(Fraction(1, 1024))
    (0, -1, 53, -10)
    """
    q = check_rational(x, "x")
    n, d = q.numerator, q.denominator
    e = n.bit_length() - d.bit_length()
    if (n << -e if e < 0 else n) < (d << e if e > 0 else d):  # x < 2**e
        e -= 1
    return e


def grid_exponent(bound: Fraction | int | float, precision: int, *, coordinates: int = 1) -> int:
    r"""Return the ``k`` with ``2**-k`` the largest power of two ``<= bound / sqrt(m) * 2**-p``.

    .. math:: k = p - \Bigl\lfloor \log_2 \frac{\text{bound}}{\sqrt m} \Bigr\rfloor,
        \qquad\text{the smallest integer with } 2^{-k} \le \frac{\text{bound}}{\sqrt m}
        \, 2^{-p}, \text{ i.e. } \text{bound}\, 2^{k} \ge 2^{p} \sqrt m.

    This is the one rule by which dpcurator picks a public grid ``2**-k Z`` at least
    ``2**precision`` times finer than a public quantity (a noise scale, a sensitivity, a
    clipping norm shared in L2 norm over ``m = coordinates`` coordinates). It is computed
    exactly: ``floor_log2(bound**2 / m) // 2`` for the square root (``floor(y / 2) =
    floor(floor(y) / 2)``), never a floating-point ``log2``, ``frexp`` or ``sqrt``.

    Parameters
    ----------
    bound : int, float or Fraction
        The public quantity, finite and > 0 (floats at their exact value).
    precision : int
        ``p``: how many powers of two finer than ``bound / sqrt(m)`` the grid is (any integer).
    coordinates : int, default 1
        ``m >= 1``: the bound is shared in L2 norm over ``m`` coordinates.

    Returns
    -------
    int

    Raises
    ------
    InvalidParameterError
        If ``bound`` is not finite and > 0, or ``precision``/``coordinates`` are not integers
        (``coordinates >= 1``).

    Examples
    --------
    >>> from dpcurator.noise import grid_exponent
    >>> grid_exponent(1.0, 16), grid_exponent(10.0, 16), grid_exponent(0.5, 16)
    (16, 13, 17)
    >>> grid_exponent(1.0, 16, coordinates=4)  # 1 / sqrt(4) = 2**-1
    17
    """
    b = check_rational(bound, "bound")
    p = check_integer(precision, "precision")
    m = check_integer(coordinates, "coordinates", minimum=1)
    if m == 1:
        return p - floor_log2(b)
    return p - floor_log2(b * b / m) // 2


def _check_bits(bits: object) -> int:
    out = check_integer(bits, "bits")
    if not -_MAX_BITS <= out <= _MAX_BITS:
        raise InvalidParameterError("bits", bits, f"must be in [-{_MAX_BITS}, {_MAX_BITS}]")
    return out


def _real_array(values: ArrayLike, name: str) -> NDArray[np.float64]:
    arr: NDArray[Any] = np.asarray(values)
    if arr.dtype.kind == "b" or arr.dtype.kind not in "iuf":
        raise InvalidParameterError(name, values, "must be an array of real numbers")
    return np.array(arr, dtype=np.float64)  # always a fresh array


def to_grid(values: ArrayLike, bits: int) -> NDArray[np.int64]:
    r"""Return the grid indices ``round(values * 2**bits)``, exactly, ties to even.

    .. math:: k = \operatorname{clamp}_{[-2^{52}, 2^{52}]}\bigl(x \cdot 2^{b}\bigr)
        \text{ rounded to the nearest integer (ties to even)}.

    The clamp and the rounding form a fixed function, 1-Lipschitz in grid units, so rounding
    adds at most ``2**-bits / 2`` to a value and changes a sensitivity (in grid units) by at
    most 1 (Mironov 2012 and the dpcurator design notes: round to a public grid before adding
    noise). Values are converted to float64 first (exact for floats, and for integers up to
    ``2**53``); ``inf`` clamps to the end of the range.

    Parameters
    ----------
    values : array_like of float
        Real values; NaN is refused.
    bits : int
        Grid resolution: the grid is ``2**-bits * Z``, ``|bits| <= 960``.

    Returns
    -------
    numpy.ndarray of int64
        Same shape as ``values``.

    Raises
    ------
    InvalidParameterError
        If ``values`` contains NaN or is not real, or ``bits`` is out of range.

    Examples
    --------
    >>> from dpcurator.noise import to_grid
    >>> to_grid([0.3, 0.5, 1.5, -2.5, 1e300], bits=0).tolist()
    [0, 0, 2, -2, 4503599627370496]
    >>> to_grid([0.3], bits=10).tolist()  # round(0.3 * 1024) = round(307.2)
    [307]
    """
    b = _check_bits(bits)
    arr = _real_array(values, "values")
    if np.isnan(arr).any():
        raise InvalidParameterError("values", values, "must not contain NaN")
    with np.errstate(over="ignore", under="ignore"):
        np.ldexp(arr, b, out=arr)  # arr is a fresh float64 array (also when 0-d)
    np.clip(arr, -_CLAMP, _CLAMP, out=arr)
    np.rint(arr, out=arr)
    return arr.astype(np.int64)


def from_grid(indices: ArrayLike, bits: int) -> NDArray[np.float64]:
    r"""Return ``indices * 2**-bits`` as float64, exactly.

    .. math:: x = k \cdot 2^{-b}.

    Every output lies on the grid ``2**-bits * Z`` whatever the index, so a noisy index maps to
    a value whose representation reveals nothing beyond the index.

    Parameters
    ----------
    indices : array_like of int
        Grid indices with ``|indices| <= 2**53`` (exact in float64).
    bits : int
        Grid resolution, ``|bits| <= 960``.

    Returns
    -------
    numpy.ndarray of float64

    Examples
    --------
    >>> from dpcurator.noise import from_grid, to_grid
    >>> from_grid([307, -3], bits=10).tolist()
    [0.2998046875, -0.0029296875]
    >>> to_grid(from_grid([307, -3], bits=10), bits=10).tolist()
    [307, -3]
    """
    b = _check_bits(bits)
    arr: NDArray[Any] = np.asarray(indices)
    if arr.dtype.kind not in "iu" and (
        arr.dtype.kind != "f" or not np.all(np.isfinite(arr)) or np.any(arr != np.rint(arr))
    ):
        raise InvalidParameterError("indices", indices, "must be an array of integers")
    if arr.size and bool(np.any((arr > 2**53) | (arr < -(2**53)))):
        raise InvalidParameterError("indices", indices, "must satisfy |indices| <= 2**53")
    out = arr.astype(np.float64)
    np.ldexp(out, -b, out=out)
    return out
