"""Exact comparison of a lazily drawn uniform with an exactly known real threshold.

Every sampler in :mod:`dpcurator.noise` decides its outputs through one primitive: "is the
uniform ``u`` below the threshold ``T``?", where ``T`` is an exactly defined real (a rational,
``exp(-gamma)`` for a rational ``gamma``, or a closed form built from those).

The uniform ``u`` in ``[0, 1)`` is represented lazily by its binary digits: a first 64-bit word
``R`` says ``u`` lies in ``[R, R + 1) / 2**64``; each further word refines the interval by 64
bits. Only as many words are drawn as the comparison needs, so the answer is the exact answer
for a real uniform ``u`` (Knuth and Yao's lazy-bit idea; see also Canonne, Kamath and Steinke,
"The Discrete Gaussian for Differential Privacy", NeurIPS 2020, arXiv 2004.00010, Section 5).

Two paths decide a comparison:

* **Fast path (vectorised).** ``T`` is computed in float64 together with a rigorous band
  ``t_lo <= T <= t_hi``: the relative half-width is ``_BAND`` (``2**-30``) plus the propagated
  float error of the exponent plus ``2**-40`` for the float64 ``exp`` (a few ulps, i.e.
  ``< 2**-50``) and the products (``2**-53`` each). With ``top = floor(R / 2**11)`` (exact in
  float64, ``u`` lies in ``[top, top + 1) / 2**53``) the answer is "u < T" when
  ``top + 1 <= t_lo * 2**53`` and "u >= T" when ``top >= t_hi * 2**53``: comparisons of exact
  float values (scaling by a power of two is exact). Thresholds below ``2**-1000`` (where
  float64 loses relative precision) get the band ``[0, 2**-1000]``, so a tiny ``u`` is never
  decided there.
* **Slow path (exact).** Anything left in the band (probability about ``2**-29`` per
  comparison) is decided with integer enclosures ``lo <= T * 2**W <= hi`` of width at most a
  few units, tightened together with the binary expansion of ``u``: enclosures of ``exp(-x)``
  come from range reduction (``exp(-x) = exp(-x / 2**s) ** (2**s)``) and a Taylor series in
  fixed-point integer arithmetic with a proven error bound (:func:`exp_neg_bounds`).

``_BAND`` is a module constant on purpose: tests set it to something huge (``2**-5``) so that
the slow path runs on a large fraction of draws, and check that the distributions stay exact.
"""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction

import numpy as np
from numpy.typing import ArrayLike, NDArray

from dpcurator.errors import InternalError
from dpcurator.noise._source import RandomSource

__all__ = [
    "Enclosure",
    "LazyUniform",
    "band_margin",
    "dlap_tail_bounds",
    "dlap_tail_enclosure",
    "exp_band",
    "exp_neg_bounds",
    "exp_neg_enclosure",
    "fast_less",
    "rational_bounds",
    "rational_enclosure",
    "slow_less",
    "top_bits",
]

_BAND = 2.0**-30
"""Relative half-width of the fast-path band (tests widen it to exercise the slow path)."""

_FLOAT_SLACK = 2.0**-40
"""Covers float64 ``exp`` (a few ulps) and the rounding of the few products around it."""

_UNDERFLOW_EXPONENT = 700.0
"""Above this exponent a threshold is below ``2 * exp(-699) < 2**-1000``: band ``[0, 2**-1000]``."""

_GUARD = 16
"""Extra bits of threshold precision beyond the bits of ``u`` drawn so far."""

Enclosure = Callable[[int], tuple[int, int]]
"""``enclosure(W) -> (lo, hi)`` with ``lo <= T * 2**W <= hi`` (integers, ``hi - lo`` small)."""


def _ceil_shift(value: int, shift: int) -> int:
    """Return ``ceil(value / 2**shift)`` for ``shift >= 0``."""
    return -((-value) >> shift)


def _taylor_exp_neg(z: int, precision: int) -> tuple[int, int]:
    """Enclose ``exp(-z / 2**precision) * 2**precision`` for ``0 <= z <= 2**(precision - 1)``.

    Terms ``a_j = y**j / j!`` (``y = z / 2**precision <= 1/2``) are computed in fixed point as
    ``t_j = floor(t_{j-1} * y / j)``. Their errors ``e_j = a_j - t_j`` (in units ``2**-precision``)
    satisfy ``0 <= e_j < e_{j-1} * y / j + 1 <= e_{j-1} / 2 + 1``, hence ``e_j < 2``. The loop
    stops at the first ``t_j = 0``; the alternating tail after it is at most
    ``a_{j+1} <= a_j < 2`` (terms decrease since ``y < 1``). Total error ``< 2 j + 2``.
    """
    one = 1 << precision
    term = one
    total = one
    j = 0
    while term:
        j += 1
        term = (term * z >> precision) // j
        total = total - term if j & 1 else total + term
    bound = 2 * j + 3
    return total - bound, total + bound


def exp_neg_bounds(x: Fraction, bits: int) -> tuple[int, int]:
    """Return integers ``lo <= exp(-x) * 2**bits <= hi``, ``hi - lo <= 3``, for rational ``x >= 0``.

    Method: if ``x >= 0.7 * bits`` then ``exp(-x) <= 2**(-1.0099 bits)`` and ``(0, 1)`` encloses
    it. Otherwise choose ``s`` with ``y = x / 2**s <= 1/2``, enclose ``y`` by dyadic rationals at
    ``P = bits + G`` bits, enclose ``exp(-y)`` by :func:`_taylor_exp_neg` (``exp`` is decreasing:
    the lower bound comes from the upper ``y`` and vice versa), and square ``s`` times with
    directed rounding (squaring is increasing on non-negative numbers, so the enclosure stays
    valid). A relative error ``r`` becomes ``2**s r`` after the squarings, and each squaring adds
    one unit; the guard ``G`` absorbs both.

    Parameters
    ----------
    x : Fraction
        The exponent, ``x >= 0``.
    bits : int
        Absolute precision: the result is in units of ``2**-bits``.

    Returns
    -------
    tuple of int

    Examples
    --------
    >>> from fractions import Fraction
    >>> lo, hi = exp_neg_bounds(Fraction(1), 60)
    >>> lo / 2**60 <= 0.36787944117144233 <= hi / 2**60
    True
    """
    if x < 0:
        raise InternalError(f"exp_neg_bounds needs x >= 0; got {x!r}.")
    if x == 0:
        return 1 << bits, 1 << bits
    if x >= Fraction(7 * bits, 10):
        return 0, 1
    ceil_x = -((-x.numerator) // x.denominator)
    s = ceil_x.bit_length() + 1  # x / 2**s < 1/2
    guard = s + 2 * (bits + 64).bit_length() + 8
    precision = bits + guard
    scaled_num = x.numerator << precision
    scaled_den = x.denominator << s
    y_lo, remainder = divmod(scaled_num, scaled_den)
    y_hi = y_lo + (1 if remainder else 0)
    lo, _ = _taylor_exp_neg(y_hi, precision)
    _, hi = _taylor_exp_neg(y_lo, precision)
    lo = max(lo, 0)
    for _ in range(s):
        lo = (lo * lo) >> precision
        hi = _ceil_shift(hi * hi, precision)
    return lo >> guard, _ceil_shift(hi, guard)


def rational_bounds(p: Fraction, bits: int) -> tuple[int, int]:
    """Return ``(floor(p * 2**bits), ceil(p * 2**bits))`` exactly.

    Examples
    --------
    >>> from fractions import Fraction
    >>> rational_bounds(Fraction(1, 3), 4)
    (5, 6)
    """
    q, r = divmod(p.numerator << bits, p.denominator)
    return q, q + (1 if r else 0)


def dlap_tail_bounds(m: int, inv_scale: Fraction, bits: int) -> tuple[int, int]:
    """Enclose ``T(m) * 2**bits``, the two-sided discrete Laplace tail ``P(|X| >= m)``.

    ``T(0) = 1`` and ``T(m) = 2 exp(-m / t) / (1 + exp(-1 / t))`` for ``m >= 1``
    (``inv_scale = 1 / t``), from the pmf ``P(X = x) = (1 - p) / (1 + p) * p**|x|``,
    ``p = exp(-1 / t)`` (CKS20, Definition 28). The map is increasing in ``exp(-m / t)`` and
    decreasing in ``exp(-1 / t)``, so enclosures of both give one of ``T(m)``.

    Examples
    --------
    >>> from fractions import Fraction
    >>> lo, hi = dlap_tail_bounds(1, Fraction(1), 40)
    >>> lo / 2**40 <= 2 * 0.36787944117144233 / 1.36787944117144233 <= hi / 2**40
    True
    """
    if m == 0:
        return 1 << bits, 1 << bits
    work = bits + 4
    a_lo, a_hi = exp_neg_bounds(m * inv_scale, work)
    b_lo, b_hi = exp_neg_bounds(inv_scale, work)
    one = 1 << work
    lo = (a_lo << (bits + 1)) // (one + b_hi)
    hi = -((-(a_hi << (bits + 1))) // (one + b_lo))
    return lo, hi


def exp_neg_enclosure(x: Fraction) -> Enclosure:
    """Return the :data:`Enclosure` of ``exp(-x)`` (see :func:`exp_neg_bounds`).

    Examples
    --------
    >>> from fractions import Fraction
    >>> exp_neg_enclosure(Fraction(0))(3)
    (8, 8)
    """

    def enclosure(bits: int) -> tuple[int, int]:
        return exp_neg_bounds(x, bits)

    return enclosure


def rational_enclosure(p: Fraction) -> Enclosure:
    """Return the :data:`Enclosure` of the rational ``p`` (see :func:`rational_bounds`).

    Examples
    --------
    >>> from fractions import Fraction
    >>> rational_enclosure(Fraction(1, 4))(4)
    (4, 4)
    """

    def enclosure(bits: int) -> tuple[int, int]:
        return rational_bounds(p, bits)

    return enclosure


def dlap_tail_enclosure(m: int, inv_scale: Fraction) -> Enclosure:
    """Return the :data:`Enclosure` of ``P(|X| >= m)`` (see :func:`dlap_tail_bounds`).

    Examples
    --------
    >>> from fractions import Fraction
    >>> dlap_tail_enclosure(0, Fraction(1))(2)
    (4, 4)
    """

    def enclosure(bits: int) -> tuple[int, int]:
        return dlap_tail_bounds(m, inv_scale, bits)

    return enclosure


class LazyUniform:
    """A uniform ``u`` in ``[0, 1)`` known by its first ``64 k`` binary digits, extended on demand.

    Parameters
    ----------
    first_word : int
        The first 64 digits, ``u`` in ``[first_word, first_word + 1) / 2**64``.
    source : RandomSource
        Where further words come from.

    Examples
    --------
    >>> from fractions import Fraction
    >>> from dpcurator.noise import InsecureSeededSource
    >>> u = LazyUniform(2**63, InsecureSeededSource(0))  # u in [1/2, 1/2 + 2**-64)
    >>> u.less(rational_enclosure(Fraction(1, 3)))
    False
    """

    __slots__ = ("_bits", "_prefix", "_source")

    def __init__(self, first_word: int, source: RandomSource) -> None:
        self._prefix = int(first_word)
        self._bits = 64
        self._source = source

    @property
    def bits(self) -> int:
        """How many binary digits of ``u`` have been drawn."""
        return self._bits

    def less(self, enclosure: Enclosure) -> bool:
        """Return exactly whether ``u < T``, drawing more digits of ``u`` while undecided."""
        while True:
            bits = self._bits + _GUARD
            lo, hi = enclosure(bits)
            low_end = self._prefix << _GUARD
            if low_end + (1 << _GUARD) <= lo:
                return True
            if low_end >= hi:
                return False
            self._prefix = (self._prefix << 64) | int(self._source.words(1)[0])
            self._bits += 64


def slow_less(word: int, enclosure: Enclosure, source: RandomSource) -> bool:
    """Decide ``u < T`` exactly for ``u`` whose first word is ``word`` (the slow path).

    Examples
    --------
    >>> from fractions import Fraction
    >>> from dpcurator.noise import InsecureSeededSource
    >>> slow_less(0, exp_neg_enclosure(Fraction(10)), InsecureSeededSource(1))
    True
    """
    return LazyUniform(word, source).less(enclosure)


def top_bits(words: NDArray[np.uint64]) -> NDArray[np.float64]:
    """Return ``floor(R / 2**11)`` as float64 (exact: below ``2**53``) for each word ``R``.

    The fast path works with these 53 leading bits: ``u`` lies in ``[top, top + 1) / 2**53``.

    Examples
    --------
    >>> import numpy as np
    >>> top_bits(np.array([2**64 - 1, 2**11], dtype=np.uint64)).tolist()
    [9007199254740991.0, 1.0]
    """
    return np.right_shift(words, np.uint64(11)).astype(np.float64)


def band_margin(exponent_error: float) -> float:
    """Relative half-width of a fast-path band for an exponent known to ``exponent_error``.

    ``_BAND`` plus ``2 * exponent_error`` (``exp(e) - 1 <= 2 e`` for ``e <= 1``) plus
    ``_FLOAT_SLACK`` (float64 ``exp`` within a few ulps, and a few rounded products).
    """
    return _BAND + _FLOAT_SLACK + 2.0 * exponent_error


def exp_band(
    exponent: NDArray[np.float64], exponent_error: ArrayLike, factor: float = 1.0
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Rigorous band ``lo <= T * 2**53 <= hi`` for ``T = c * exp(-x)``.

    Parameters
    ----------
    exponent : numpy.ndarray of float64
        Approximations ``x_f >= 0`` of the exponents ``x``.
    exponent_error : float or array_like
        Bounds ``|x - x_f| <= exponent_error``; must be ``<= 2**-20`` for the fast path, larger
        or NaN inputs give the empty fast path ``[0, inf]``. Where ``x_f`` is large enough to
        underflow, only the one-sided ``x >= x_f - exponent_error`` is used, so a saturated
        ``x_f`` (a lower bound of a huge exponent) is safe.
    factor : float
        Float64 approximation of the constant ``c`` in ``[0, 2]``, correct to a relative
        ``2**-50`` (covered by ``_FLOAT_SLACK``).

    Returns
    -------
    tuple of numpy.ndarray
        ``(lo, hi)`` in units of ``2**-53``, for :func:`fast_less`.

    Examples
    --------
    >>> import numpy as np
    >>> lo, hi = exp_band(np.array([1.0]), 0.0)
    >>> bool(lo[0] / 2**53 < np.exp(-1.0) < hi[0] / 2**53)
    True
    """
    x = np.asarray(exponent, dtype=np.float64)
    err = np.asarray(exponent_error, dtype=np.float64)
    with np.errstate(under="ignore", over="ignore", invalid="ignore"):
        t = np.negative(x)
        np.exp(t, out=t)
        t *= factor * 2.0**53
        rel = _BAND + _FLOAT_SLACK + 2.0 * err  # = band_margin(err), elementwise
        lo = t * (1.0 - rel)
        hi = t * (1.0 + rel)
        if x.size == 0 or (float(x.max()) < _UNDERFLOW_EXPONENT and float(err.max()) <= 2.0**-20):
            return lo, hi
        unusable = np.isnan(x) | ~(err <= 2.0**-20)
        lo = np.where(unusable, 0.0, lo)
        hi = np.where(unusable, np.inf, hi)
        # Underflow: x_f >= 700 with err <= 1, or x_f >= 1000 with err <= x_f / 4, give
        # x >= 699, so T <= 2 exp(-699) < 2**-1000: band [0, 2**-1000].
        tiny = ((x >= _UNDERFLOW_EXPONENT) & (err <= 1.0)) | ((x >= 1000.0) & (err <= 0.25 * x))
        lo = np.where(tiny, 0.0, lo)
        hi = np.where(tiny, 2.0 ** (53 - 1000), hi)
    return lo, hi


def fast_less(
    top: NDArray[np.float64], lo: NDArray[np.float64] | float, hi: NDArray[np.float64] | float
) -> tuple[NDArray[np.bool_], NDArray[np.bool_]]:
    """Vectorised fast path of ``u < T`` given ``lo <= T * 2**53 <= hi``.

    ``u`` lies in ``[top, top + 1) / 2**53`` (``top`` from :func:`top_bits`, an exact integer
    below ``2**53`` in float64). ``top + 1 <= lo`` implies ``u < (top + 1) / 2**53 <= T``, and
    ``top >= hi`` implies ``u >= T``: exact float comparisons of exact values. A band that
    reaches 1 or more never says "above", one at 0 never says "below".

    Returns
    -------
    tuple of numpy.ndarray of bool
        ``(is_less, undecided)``: where ``undecided`` is True the caller must use the slow path;
        elsewhere ``is_less`` is the exact answer.

    Examples
    --------
    >>> import numpy as np
    >>> top = top_bits(np.array([0, 2**63, 2**64 - 1], dtype=np.uint64))
    >>> less, undecided = fast_less(top, 0.25 * 2**53, 0.25 * 2**53)
    >>> less.tolist(), undecided.tolist()
    ([True, False, False], [False, False, False])
    """
    is_less = (top + 1.0) <= lo
    undecided = ~(is_less | (top >= hi))  # a NaN band is undecided, never "above"
    return is_less, undecided
