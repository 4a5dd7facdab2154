"""Exact, vectorised samplers.

Uniform integers, Bernoulli, Bernoulli(exp(-gamma)), discrete Laplace and discrete Gaussian.

Every output is a deterministic function of uniform 64-bit words from a
:class:`~dpcurator.noise.RandomSource`, and every decision is an exact comparison of a lazily
drawn uniform with an exactly defined threshold (see :mod:`dpcurator.noise._exact`): the output
distributions are exactly the stated ones, with no floating-point approximation. Floats are used
only to *guess* (a candidate magnitude) and to decide comparisons that are provably far from the
threshold; everything near a threshold is decided with integers and rationals.

Reference: C. L. Canonne, G. Kamath, T. Steinke, "The Discrete Gaussian for Differential
Privacy", NeurIPS 2020, arXiv 2004.00010 (CKS20), Algorithms 1-3 and Section 5.
"""

from __future__ import annotations

import functools
import math
import numbers
from collections.abc import Callable, Sequence
from fractions import Fraction
from typing import Any, overload

import numpy as np
from numpy.typing import NDArray

from dpcurator._validation import check_integer, check_rational
from dpcurator.errors import InvalidParameterError
from dpcurator.noise import _block, _exact
from dpcurator.noise._source import RandomSource, resolve_source

__all__ = [
    "bernoulli",
    "bernoulli_exp",
    "discrete_gaussian",
    "discrete_laplace",
    "uniform_integers",
]

RationalLike = Fraction | int | float | str | np.integer[Any] | np.floating[Any]
"""An exactly known rational: a Fraction, an int, a float (an exact dyadic) or a string "a/b"."""

Size = int | tuple[int, ...]

_MAX_SCALE = Fraction(2**40)
"""Largest accepted scale or sigma: keeps every magnitude below 2**53 (exact in float64)."""
_MIN_SIGMA = Fraction(1, 2**40)
"""Smallest accepted sigma: keeps 1 / (2 sigma**2) and sigma**2 / t normal float64 numbers."""
_HUGE_EXPONENT = 2.0**1000
_ULP = 2.0**-52
_SEARCH_ROUNDS = 4
"""Vectorised correction rounds of an inversion guess before falling back to the exact path."""
_INVERSION_MAX_SCALE = Fraction(2**12)
"""Discrete Laplace scales up to this use one-word inversion; larger ones a decomposition."""


# --------------------------------------------------------------------------------------------
# argument handling


def _check_size(size: object) -> tuple[int, ...] | None:
    if size is None:
        return None
    if isinstance(size, numbers.Integral):
        return (check_integer(size, "size", minimum=0),)
    if isinstance(size, tuple | list):
        return tuple(check_integer(s, "size", minimum=0) for s in size)
    raise InvalidParameterError(
        "size", size, "must be None, a non-negative int or a tuple of non-negative ints"
    )


def _count(shape: tuple[int, ...] | None) -> int:
    return 1 if shape is None else math.prod(shape)


def _scale_parameter(value: object, name: str, minimum: Fraction | None = None) -> Fraction:
    out = check_rational(value, name, positive=True)
    if out > _MAX_SCALE:
        raise InvalidParameterError(name, value, "must be <= 2**40")
    if minimum is not None and out < minimum:
        raise InvalidParameterError(name, value, "must be >= 2**-40")
    return out


def _float_of(value: Fraction) -> float:
    """``float(value)`` for ``value >= 0``, saturating at 2**1000 (a lower bound of the value)."""
    return float(value) if value < _HUGE_EXPONENT else _HUGE_EXPONENT


# --------------------------------------------------------------------------------------------
# uniform integers


_LANE_LIMIT = 1 << 32
"""Bounds up to ``2**32`` use 32-bit lanes (two per word) and Lemire's multiply-shift."""


def _uniform_below_lanes(high: int, n: int, source: RandomSource) -> NDArray[np.int64]:
    """Draw uniform integers on ``[0, high)`` from 32-bit lanes, exactly.

    Lemire 2019, "Fast random integer generation in an interval", ACM TOMACS. A uniform lane
    ``x`` gives ``m = x * high``; ``m >> 32`` is the draw unless the low half ``m mod 2**32`` is
    below ``t = 2**32 mod high``, in which case the lane is rejected. Each value ``k`` then has
    exactly ``floor(2**32 / high)`` accepted lanes, so the law is exactly uniform; no division on
    the hot path.
    """
    threshold = np.uint64(_LANE_LIMIT % high)
    acceptance = 1.0 - float(threshold) / _LANE_LIMIT
    parts: list[NDArray[np.uint64]] = []
    filled = 0
    while filled < n:
        need = n - filled
        lanes = source.words((int(need / acceptance * 1.02) + 17) // 2).view(np.uint32)
        product = lanes.astype(np.uint64) * np.uint64(high)
        kept = (product >> np.uint64(32))[(product & np.uint64(0xFFFFFFFF)) >= threshold][:need]
        parts.append(kept)
        filled += kept.size
    return np.concatenate(parts).astype(np.int64) if parts else np.empty(0, dtype=np.int64)


def _uniform_below(high: int, n: int, source: RandomSource) -> NDArray[np.int64]:
    if high & (high - 1) == 0:  # a power of two: take the low bits, no rejection
        return (source.words(n) & np.uint64(high - 1)).astype(np.int64)
    if high <= _LANE_LIMIT:
        return _uniform_below_lanes(high, n, source)
    remainder = 2**64 % high
    limit = np.uint64(2**64 - remainder)  # accept R < limit: limit is a multiple of high
    acceptance = (2**64 - remainder) / 2**64
    parts: list[NDArray[np.uint64]] = []
    filled = 0
    while filled < n:
        need = n - filled
        draw = source.words(int(need / acceptance * 1.02) + 16)
        kept = draw[draw < limit][:need]
        parts.append(kept)
        filled += kept.size
    words = np.concatenate(parts) if parts else np.empty(0, dtype=np.uint64)
    return (words % np.uint64(high)).astype(np.int64)


@overload
def uniform_integers(
    high: int | np.integer[Any], size: None = None, *, source: RandomSource | None = None
) -> int: ...
@overload
def uniform_integers(
    high: int | np.integer[Any], size: Size, *, source: RandomSource | None = None
) -> NDArray[np.int64]: ...
def uniform_integers(
    high: int | np.integer[Any], size: Size | None = None, *, source: RandomSource | None = None
) -> int | NDArray[np.int64]:
    r"""Draw integers uniformly from ``{0, 1, ..., high - 1}``, exactly.

    .. math:: P[X = k] = 1 / \mathrm{high}, \quad k \in \{0, \dots, \mathrm{high} - 1\}.

    Words ``R`` are accepted when ``R < 2**64 - (2**64 mod high)`` (a multiple of ``high``) and
    mapped to ``R mod high``: rejection sampling, so the law is exactly uniform (acceptance
    probability at least 1/2). A power of two takes the low bits of one word; bounds up to
    ``2**32`` use two 32-bit lanes per word with Lemire's exact multiply-shift rejection.

    Parameters
    ----------
    high : int
        Exclusive upper bound, ``1 <= high <= 2**63``.
    size : int or tuple of int, optional
        Output shape; ``None`` returns one Python ``int``.
    source : RandomSource, optional
        Defaults to the secure :func:`~dpcurator.noise.default_source`.

    Returns
    -------
    int or numpy.ndarray of int64

    Examples
    --------
    >>> from dpcurator.noise import InsecureSeededSource, uniform_integers
    >>> x = uniform_integers(6, size=1000, source=InsecureSeededSource(1))
    >>> int(x.min()), int(x.max())
    (0, 5)
    >>> isinstance(uniform_integers(10), int)
    True
    """
    high_int = check_integer(high, "high", minimum=1)
    if high_int > 2**63:
        raise InvalidParameterError("high", high, "must be <= 2**63")
    shape = _check_size(size)
    src = resolve_source(source)
    out = _uniform_below(high_int, _count(shape), src)
    if shape is None:
        return int(out[0])
    return out.reshape(shape)


# --------------------------------------------------------------------------------------------
# Bernoulli(p), p rational


@overload
def bernoulli(
    p: RationalLike, size: None = None, *, source: RandomSource | None = None
) -> bool: ...
@overload
def bernoulli(
    p: RationalLike | NDArray[Any], size: Size, *, source: RandomSource | None = None
) -> NDArray[np.bool_]: ...
@overload
def bernoulli(
    p: NDArray[Any], size: Size | None = None, *, source: RandomSource | None = None
) -> NDArray[np.bool_]: ...
def bernoulli(
    p: RationalLike | NDArray[Any],
    size: Size | None = None,
    *,
    source: RandomSource | None = None,
) -> bool | NDArray[np.bool_]:
    r"""Draw Bernoulli(p) booleans for a rational ``p``, exactly.

    .. math:: P[X = \mathrm{True}] = p, \qquad p \in [0, 1] \cap \mathbb{Q}.

    The uniform ``u`` is compared with ``p``: the first word ``R`` decides ``R < floor(p 2**64)``
    (True) or ``R > floor(p 2**64)`` (False) in integers; on equality further words refine ``u``
    against the exact remainder (CKS20, Section 5.1: Bernoulli of a rational from uniform
    integers; here with lazily drawn binary digits, so one word suffices almost always). Large
    batches compare four random bits per draw with the first four of ``p``'s expansion and refine
    only ties (1 in 16), which is equally exact and about 15 times lighter on the entropy source;
    batches of at least 4096 draws invert the exact joint law of eight draws at a time from 16
    random bits with a lookup table (:mod:`dpcurator.noise._block`), about 2 bits per draw.
    ``p`` may also be a float array (one probability per draw, each float its exact dyadic value).

    Parameters
    ----------
    p : Fraction, int, float, str or numpy.ndarray of float
        The probability; floats are taken as their exact dyadic value, strings like ``"1/3"``
        are exact. An array gives one probability per draw.
    size : int or tuple of int, optional
        Output shape; ``None`` returns one Python ``bool`` (or, for an array ``p``, an array of
        its shape).
    source : RandomSource, optional
        Defaults to the secure :func:`~dpcurator.noise.default_source`.

    Returns
    -------
    bool or numpy.ndarray of bool

    Examples
    --------
    >>> from dpcurator.noise import InsecureSeededSource, bernoulli
    >>> x = bernoulli("1/3", size=30000, source=InsecureSeededSource(2))
    >>> bool(abs(x.mean() - 1 / 3) < 0.02)
    True
    >>> bernoulli(1)
    True
    """
    if isinstance(p, np.ndarray):
        if size is not None and tuple(np.shape(p)) != _check_size(size):
            raise InvalidParameterError("size", size, f"must be None or p's shape {p.shape}")
        return _bernoulli_array(p, resolve_source(source))
    prob = check_rational(p, "p", positive=False)
    if not 0 <= prob <= 1:
        raise InvalidParameterError("p", p, "must be in [0, 1]")
    shape = _check_size(size)
    src = resolve_source(source)
    n = _count(shape)
    if prob in (0, 1):
        out = np.full(n, prob == 1, dtype=np.bool_)
    elif n >= _BLOCK_PATH_MIN:
        out = _block.bernoulli_blocks(prob, n, src)
    elif n >= _BYTE_PATH_MIN:
        out = _bernoulli_nibbles(prob, n, src)
    else:
        out = _bernoulli_words(prob, n, src)
    if shape is None:
        return bool(out[0])
    return out.reshape(shape)


_BYTE_PATH_MIN = 64
"""From this many draws on, a scalar Bernoulli reads four random bits per draw, not a word."""

_BLOCK_PATH_MIN = 4096
"""From this many draws on, a scalar Bernoulli inverts blocks of eight draws from 16 random bits
(:mod:`dpcurator.noise._block`; the exact table is built once per ``p`` and cached)."""


def _bernoulli_words(prob: Fraction, n: int, src: RandomSource) -> NDArray[np.bool_]:
    """One 64-bit word per draw: ``R < floor(p 2**64)``, ties refined exactly."""
    prefix = (prob.numerator << 64) // prob.denominator  # floor(p 2**64) < 2**64
    words = src.words(n)
    out: NDArray[np.bool_] = words < np.uint64(prefix)
    for i in np.flatnonzero(words == np.uint64(prefix)):
        out[i] = _exact.slow_less(int(words[i]), _exact.rational_enclosure(prob), src)
    return out


def _bernoulli_nibbles(prob: Fraction, n: int, src: RandomSource) -> NDArray[np.bool_]:
    """Four random bits per draw: the first binary digits of ``u`` against those of ``p``.

    A uniform nibble ``b`` decides ``b < t`` (True) or ``b > t`` (False) with
    ``t = floor(16 p)``; on a tie (probability 1/16) the rest of ``u`` is a fresh uniform and
    the draw is True with the exact conditional probability ``16 p - t`` (drawn the same way).
    So ``P[True] = t/16 + (16 p - t)/16 = p`` exactly, with about 4.3 random bits per draw
    instead of 64 (Knuth and Yao's lazy comparison, four digits at a time).
    """
    scaled = prob * 16
    threshold = np.uint8(math.floor(scaled))  # in [0, 15]
    half = (n + 1) // 2
    packed = src.words((half + 7) // 8).view(np.uint8)
    # The low nibbles serve the first half of the draws, the high nibbles the rest.
    draws = np.concatenate([packed[:half] & np.uint8(15), packed[: n - half] >> np.uint8(4)])
    out: NDArray[np.bool_] = draws < threshold
    ties = np.flatnonzero(draws == threshold)
    remainder = scaled - int(threshold)
    if ties.size and remainder > 0:
        refine = _bernoulli_nibbles if ties.size >= _BYTE_PATH_MIN else _bernoulli_words
        out[ties] = refine(remainder, int(ties.size), src)
    return out


def _bernoulli_array(p: NDArray[Any], src: RandomSource) -> NDArray[np.bool_]:
    """Per-element Bernoulli(p_i) for a float array (each float is an exact dyadic rational).

    ``u = (R + V)/2^64 < p`` iff ``R < floor(p 2^64)``, or ``R == floor(p 2^64)`` and
    ``V < frac(p 2^64)``; ``p 2^64`` is exact in float64 (a power-of-two scaling), so the first
    test is exact, and a tie (probability ``2^-64``) is settled by an exact draw of the rational
    remainder.
    """
    arr = np.asarray(p, dtype=np.float64)
    if not np.all(np.isfinite(arr)) or (arr.size and (arr.min() < 0 or arr.max() > 1)):
        raise InvalidParameterError("p", f"<array of shape {arr.shape}>", "must be in [0, 1]")
    flat = arr.reshape(-1)
    scaled = np.ldexp(flat, 64)
    floor = np.floor(scaled)
    one = flat >= 1.0
    threshold = np.where(one, 0.0, floor).astype(np.uint64)  # floor < 2^64 when p < 1
    words = src.words(flat.size)
    out: NDArray[np.bool_] = (words < threshold) | one
    for i in np.flatnonzero((words == threshold) & (scaled != floor) & ~one):
        remainder = Fraction(float(scaled[i])) - int(floor[i])
        out[i] = _bernoulli_words(remainder, 1, src)[0]
    return out.reshape(arr.shape)


# --------------------------------------------------------------------------------------------
# Bernoulli(exp(-gamma))


def _bernoulli_exp_flat(
    exponent: NDArray[np.float64],
    exponent_error: NDArray[np.float64] | float,
    exact_exponent: Callable[[int], Fraction],
    source: RandomSource,
) -> NDArray[np.bool_]:
    """``u_i < exp(-gamma_i)`` for fresh uniforms; ``exact_exponent(i)`` gives ``gamma_i``."""
    words = source.words(exponent.size)
    lo, hi = _exact.exp_band(exponent, exponent_error)
    less, undecided = _exact.fast_less(_exact.top_bits(words), lo, hi)
    for i in np.flatnonzero(undecided):
        gamma_i = exact_exponent(int(i))
        less[i] = _exact.slow_less(int(words[i]), _exact.exp_neg_enclosure(gamma_i), source)
    return less


@overload
def bernoulli_exp(
    gamma: RationalLike, size: None = None, *, source: RandomSource | None = None
) -> bool: ...
@overload
def bernoulli_exp(
    gamma: RationalLike | NDArray[Any] | Sequence[float],
    size: Size,
    *,
    source: RandomSource | None = None,
) -> NDArray[np.bool_]: ...
@overload
def bernoulli_exp(
    gamma: NDArray[Any] | Sequence[float],
    size: Size | None = None,
    *,
    source: RandomSource | None = None,
) -> NDArray[np.bool_]: ...
def bernoulli_exp(
    gamma: RationalLike | NDArray[Any] | Sequence[float],
    size: Size | None = None,
    *,
    source: RandomSource | None = None,
) -> bool | NDArray[np.bool_]:
    r"""Draw Bernoulli(exp(-gamma)) booleans for rational ``gamma >= 0``, exactly.

    .. math:: P[X = \mathrm{True}] = e^{-\gamma}, \qquad \gamma \ge 0.

    CKS20 (arXiv 2004.00010) Algorithm 1 draws this with a loop of Bernoulli(gamma / k)
    trials; here the same law comes from one exact comparison ``u < exp(-gamma)`` of a lazily
    drawn uniform ``u`` (see :mod:`dpcurator.noise._exact`): a float fast path decides all
    comparisons that are provably at least a relative ``2**-30`` away from the threshold, and
    rational enclosures of ``exp(-gamma)`` decide the rest. The output law is exact; a draw costs
    one 64-bit word except with probability about ``2**-29``.

    Parameters
    ----------
    gamma : rational scalar or array_like of float
        A scalar (Fraction, int, float, or str such as ``"1/3"``), or an array of float64 values
        (each float is taken as the exact rational it represents). Must be finite and ``>= 0``.
    size : int or tuple of int, optional
        Output shape; the result has shape ``broadcast(gamma.shape, size)``. ``None`` with a
        scalar ``gamma`` returns one Python ``bool``.
    source : RandomSource, optional
        Defaults to the secure :func:`~dpcurator.noise.default_source`.

    Returns
    -------
    bool or numpy.ndarray of bool

    Examples
    --------
    >>> import numpy as np
    >>> from dpcurator.noise import InsecureSeededSource, bernoulli_exp
    >>> x = bernoulli_exp(1, size=40000, source=InsecureSeededSource(3))
    >>> bool(abs(x.mean() - np.exp(-1)) < 0.02)
    True
    >>> bernoulli_exp(np.array([0.0, 800.0])).tolist()
    [True, False]
    """
    shape = _check_size(size)
    src = resolve_source(source)
    if isinstance(gamma, np.ndarray | list | tuple):
        values = _gamma_array(gamma)
        try:
            out_shape = values.shape if shape is None else np.broadcast_shapes(values.shape, shape)
        except ValueError:
            raise InvalidParameterError(
                "size", size, f"must broadcast with the shape {values.shape} of gamma"
            ) from None
        flat = np.ascontiguousarray(np.broadcast_to(values, out_shape)).reshape(-1)
        result = _bernoulli_exp_flat(flat, 0.0, lambda i: Fraction(float(flat[i])), src)
        return result.reshape(out_shape)
    exact = check_rational(gamma, "gamma", positive=False)
    if exact < 0:
        raise InvalidParameterError("gamma", gamma, "must be >= 0")
    n = _count(shape)
    x_f = _float_of(exact)
    exponent = np.full(n, x_f)
    result = _bernoulli_exp_flat(exponent, x_f * 2.0 * _ULP, lambda _i: exact, src)
    if shape is None:
        return bool(result[0])
    return result.reshape(shape)


def _gamma_array(gamma: NDArray[Any] | Sequence[float]) -> NDArray[np.float64]:
    arr = np.asarray(gamma)
    if arr.dtype.kind == "b" or arr.dtype.kind not in "iuf":
        raise InvalidParameterError("gamma", gamma, "must be an array of real numbers")
    if arr.dtype.kind in "iu" and arr.size and int(np.max(np.abs(arr))) > 2**53:
        raise InvalidParameterError("gamma", gamma, "must have integer entries <= 2**53")
    values = arr.astype(np.float64)
    if np.isnan(values).any():
        raise InvalidParameterError("gamma", gamma, "must not contain NaN")
    if not np.isfinite(values).all():
        raise InvalidParameterError("gamma", gamma, "must be finite")
    if (values < 0).any():
        raise InvalidParameterError("gamma", gamma, "must be >= 0 everywhere")
    return values


# --------------------------------------------------------------------------------------------
# discrete Laplace


class _Tail:
    """Tail ``T(m) = P(M >= m)`` of a geometric-type law on ``{0, 1, 2, ...}``.

    ``T(0) = 1`` and ``T(m) = c * exp(-m a)`` for ``m >= 1``, with ``a > 0`` rational and
    ``c = 2 / (1 + exp(-a))`` (``two_sided``: the magnitude ``|X|`` of ``X ~ DLap(1 / a)``,
    CKS20 Definition 28) or ``c = 1`` (the one-sided geometric law, ratio ``exp(-a)``).
    """

    __slots__ = ("a_exact", "a_f", "factor", "log_factor", "ratio_f", "two_sided")

    def __init__(self, a: Fraction, *, two_sided: bool) -> None:
        self.a_exact = a
        self.two_sided = two_sided
        self.a_f = _float_of(a)  # relative error 2**-53, or a lower bound if a is huge
        with np.errstate(under="ignore"):
            self.ratio_f = math.exp(-self.a_f)
        # relative error of factor about 2**-51 (covered by the float slack)
        self.factor = 2.0 / (1.0 + self.ratio_f) if two_sided else 1.0
        self.log_factor = math.log(2.0) - math.log1p(self.ratio_f) if two_sided else 0.0

    def enclosure(self, m: int) -> _exact.Enclosure:
        """Exact enclosure of ``T(m)``."""
        if self.two_sided:
            return _exact.dlap_tail_enclosure(m, self.a_exact)
        return _exact.exp_neg_enclosure(m * self.a_exact)

    def band(self, m: NDArray[np.float64]) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """Float band of ``T(m) * 2**53``.

        For ``m = 0`` the formula gives ``c >= 1 = T(0)``; that band still decides correctly:
        "u < T(0)" is always true, and "above" cannot fire since the upper end is at least 1.
        """
        with np.errstate(over="ignore", invalid="ignore"):
            x = m * self.a_f
        # x = fl(m * fl(a)) with m exact: |x - m a| <= x 2**-51 (or x is a lower bound, huge).
        return _exact.exp_band(x, x * 4.0 * _ULP, self.factor)


def _invert_slow(word: int, candidate: int, tail: _Tail, source: RandomSource) -> int:
    """Exact inversion: the ``m`` with ``T(m + 1) <= u < T(m)`` (the slow path).

    ``u < T(m)`` is decreasing in ``m``; starting from the float ``candidate``, gallop to a
    bracket ``u < T(lo)``, ``u >= T(hi)`` and bisect it, each comparison exact (a candidate far
    off, e.g. for a ``u`` below ``2**-64``, costs O(log distance) comparisons).
    """
    u = _exact.LazyUniform(word, source)

    def below(m: int) -> bool:
        return m == 0 or u.less(tail.enclosure(m))

    m = max(candidate, 0)
    step = 1
    if below(m):
        lo, hi = m, m + 1
        while below(hi):
            lo, hi = hi, hi + step
            step *= 2
    else:
        lo, hi = m - 1, m
        while not below(lo):
            lo, hi = max(lo - step, 0), lo
            step *= 2
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if below(mid):
            lo = mid
        else:
            hi = mid
    return lo


def _invert_search(
    words: NDArray[np.uint64],
    top: NDArray[np.float64],
    m: NDArray[np.float64],
    pending: NDArray[np.intp],
    *,
    tail: _Tail,
    source: RandomSource,
) -> None:
    """Fix ``m[pending]`` in place so that ``T(m + 1) <= u < T(m)`` exactly (general path)."""
    slow: list[NDArray[np.intp]] = []
    for _ in range(_SEARCH_ROUNDS):
        if pending.size == 0:
            break
        tp = top[pending]
        mp = m[pending]
        lo0, hi0 = tail.band(mp)
        lo1, hi1 = tail.band(mp + 1.0)
        below_m, und0 = _exact.fast_less(tp, lo0, hi0)
        below_next, und1 = _exact.fast_less(tp, lo1, hi1)
        undecided = und0 | und1
        slow.append(pending[undecided])
        too_big = ~undecided & ~below_m
        too_small = ~undecided & below_next
        m[pending[too_big]] -= 1.0
        m[pending[too_small]] += 1.0
        pending = pending[too_big | too_small]
    slow.append(pending)
    for i in np.concatenate(slow):
        m[i] = _invert_slow(int(words[i]), int(m[i]), tail, source)


def _invert(tail: _Tail, n: int, source: RandomSource) -> NDArray[np.int64]:
    """``n`` draws of ``M = max{m : u < T(m)}`` by exact inversion, one word each.

    Efficient while the relative gap ``1 - exp(-a)`` between consecutive thresholds is much
    larger than the fast-path band; otherwise correct but mostly on the slow path.
    """
    words = source.words(n)
    top = _exact.top_bits(words)
    # Guess: M = ceil((ln c - ln u) / a) - 1, clipped at 0, with u ~ (top + 1/2) / 2**53.
    # Only a guess: every output is verified exactly below.
    guess = np.log(top + 0.5)
    np.subtract(tail.log_factor + 53.0 * math.log(2.0), guess, out=guess)
    guess *= 1.0 / tail.a_f
    m = np.ceil(guess, out=guess)
    m -= 1.0
    np.maximum(m, 0.0, out=m)
    x_next_max = (float(m.max()) + 1.0) * tail.a_f if n else 0.0
    if n and x_next_max < 600.0:
        # Common case, in one sweep: T(m + 1) = T(m) exp(-a). One band margin for the batch
        # bounds the exponent errors (x 2**-51 each, x <= x_next_max) and the error of the
        # float ratio (relative a 2**-52); the products are covered by the float slack.
        rel = _exact.band_margin(8.0 * _ULP * (x_next_max + tail.a_f))
        t = np.multiply(m, -tail.a_f)
        np.exp(t, out=t)
        t *= tail.factor * 2.0**53
        lo0 = t * (1.0 - rel)
        hi1 = t * ((1.0 + rel) * tail.ratio_f)
        ok = (top + 1.0) <= lo0
        ok &= top >= hi1
        pending = np.flatnonzero(~ok)
    else:
        pending = np.arange(n)
    if pending.size:
        _invert_search(words, top, m, pending, tail=tail, source=source)
    return m.astype(np.int64)


def _scaled_exponent(r: NDArray[np.int64], a: Fraction) -> Callable[[int], Fraction]:
    """Return the exact exponent ``r[i] * a`` of element ``i`` (for the slow path)."""

    def exponent(i: int) -> Fraction:
        return int(r[i]) * a

    return exponent


def _truncated_geometric(
    block: int, a: Fraction, n: int, source: RandomSource
) -> NDArray[np.int64]:
    """``n`` draws of ``R`` on ``{0, ..., block - 1}`` with ``P(R = r) ∝ exp(-r a)``.

    Rejection, as in the first step of CKS20 Algorithm 2: ``r`` uniform, accepted with
    probability ``exp(-r a)`` (an exact Bernoulli). Acceptance is at least ``exp(-block a)``.
    """
    a_f = float(a)
    exponent_error = block * a_f * 4.0 * _ULP  # bounds r a_f 4 ulp for every r < block
    parts: list[NDArray[np.int64]] = []
    filled = 0
    # acceptance E[exp(-r a)] = (1 - exp(-block a)) / (block (1 - exp(-a))), a little less
    rate = 0.98 * -math.expm1(-block * a_f) / (block * -math.expm1(-a_f))
    while filled < n:
        need = n - filled
        batch = int(need / rate * 1.03) + 64
        r = _uniform_below(block, batch, source)
        exponent = r.astype(np.float64) * a_f  # r exact below 2**53; relative error 2**-52
        accept = _bernoulli_exp_flat(exponent, exponent_error, _scaled_exponent(r, a), source)
        kept = r[accept][:need]
        parts.append(kept)
        filled += kept.size
        rate = max(float(accept.mean()), 0.05)
    return np.concatenate(parts) if parts else np.empty(0, dtype=np.int64)


@functools.lru_cache(maxsize=1024)
def _dlap_tail(scale: Fraction) -> _Tail:
    """Return the tail of ``|X|`` for ``X ~ DLap(scale)`` (immutable; remembered per scale)."""
    return _Tail(1 / scale, two_sided=True)


def _dlap_magnitudes(scale: Fraction, n: int, source: RandomSource) -> NDArray[np.int64]:
    """Draw ``n`` magnitudes ``M = |X|`` of ``X ~ DLap(scale)``: ``P(M >= m) = 2 p**m / (1 + p)``.

    Up to ``_INVERSION_MAX_SCALE``: exact inversion of one uniform per draw. Above it the gap
    between consecutive thresholds (relative ``1 - p``, about ``1 / scale``) approaches the
    fast-path band, so the magnitude is built as in CKS20 Algorithm 2: a one-sided geometric
    ``G = B Q + R`` with block ``B = ceil(scale)``, ``Q`` geometric with ratio ``p**B`` (exact
    inversion, gaps about ``1 - 1/e``), ``R`` the truncated geometric on ``{0..B-1}``
    (rejection); then a fair sign with ``(negative, 0)`` rejected, so that ``|X|`` has the
    two-sided law. ``G = B Q + R`` holds because ``Q = floor(G / B)`` and ``R = G mod B`` are
    independent with exactly these laws.
    """
    if scale <= _INVERSION_MAX_SCALE:
        return _invert(_dlap_tail(scale), n, source)
    a = 1 / scale
    block = -((-scale.numerator) // scale.denominator)  # ceil(scale)
    block_tail = _Tail(block * a, two_sided=False)
    parts: list[NDArray[np.int64]] = []
    filled = 0
    while filled < n:
        need = n - filled
        batch = need + 16  # rejection probability (1 - p) / 2 < 2**-13
        g = _invert(block_tail, batch, source) * block + _truncated_geometric(
            block, a, batch, source
        )
        negative = _random_signs(batch, source)
        kept = g[~(negative & (g == 0))][:need]
        parts.append(kept)
        filled += kept.size
    return np.concatenate(parts) if parts else np.empty(0, dtype=np.int64)


def _random_signs(n: int, source: RandomSource) -> NDArray[np.bool_]:
    """``n`` independent fair bits, 64 per word."""
    words = source.words((n + 63) // 64)
    bits = np.unpackbits(words.view(np.uint8))[:n]
    return bits.astype(np.bool_)


def _dlap_flat(scale: Fraction, n: int, source: RandomSource) -> NDArray[np.int64]:
    magnitude = _dlap_magnitudes(scale, n, source)
    negative = _random_signs(n, source)
    return np.where(negative, -magnitude, magnitude)


@overload
def discrete_laplace(
    scale: RationalLike, size: None = None, *, source: RandomSource | None = None
) -> int: ...
@overload
def discrete_laplace(
    scale: RationalLike, size: Size, *, source: RandomSource | None = None
) -> NDArray[np.int64]: ...
def discrete_laplace(
    scale: RationalLike, size: Size | None = None, *, source: RandomSource | None = None
) -> int | NDArray[np.int64]:
    r"""Draw from the discrete Laplace distribution on the integers, exactly.

    .. math::

        P[X = x] = \frac{1 - p}{1 + p}\, p^{|x|} \propto e^{-|x| / t},
        \qquad x \in \mathbb{Z},\quad p = e^{-1/t},

    with variance ``2 p / (1 - p)**2``. Adding it to an integer query of sensitivity ``Δ`` with
    ``t = Δ / ε`` gives ε-DP (CKS20, arXiv 2004.00010, Definition 28 and Section 5.2).

    The output law is exact. It follows the structure of CKS20 Algorithm 2 (a magnitude with a
    geometric tail of ratio ``exp(-1/t)``, then a uniform sign). For ``t <= 2**12`` there is no
    rejection loop: the magnitude ``M = |X|`` is drawn from its own law
    ``P(M = 0) = (1 - p) / (1 + p)``, ``P(M >= m) = 2 p**m / (1 + p)`` for ``m >= 1``, by exact
    inversion of one lazily drawn uniform ``u`` (``M = m`` iff ``T(m + 1) <= u < T(m)``, each
    comparison decided exactly, see :mod:`dpcurator.noise._exact`), and the sign is a fair bit:
    one 64-bit word plus one bit per sample, except with probability about ``2**-28``. For
    larger ``t`` consecutive thresholds get too close for one float comparison, and the
    magnitude is built as in CKS20 Algorithm 2: a geometric variable ``B Q + R`` with
    ``B = ceil(t)``, ``Q`` geometric of ratio ``exp(-B/t)`` (exact inversion) and ``R`` on
    ``{0, ..., B - 1}`` with ``P(R = r) ∝ exp(-r/t)`` (uniform proposal accepted with an exact
    Bernoulli(exp(-r/t))), then a sign with ``(-, 0)`` rejected; about 4.5 words per sample.

    Parameters
    ----------
    scale : Fraction, int, float or str
        The scale ``t > 0`` (``t <= 2**40``); floats are exact dyadics, ``"1/3"`` is exact.
    size : int or tuple of int, optional
        Output shape; ``None`` returns one Python ``int``.
    source : RandomSource, optional
        Defaults to the secure :func:`~dpcurator.noise.default_source`.

    Returns
    -------
    int or numpy.ndarray of int64

    Examples
    --------
    >>> from dpcurator.noise import InsecureSeededSource, discrete_laplace
    >>> x = discrete_laplace(10, size=100000, source=InsecureSeededSource(4))
    >>> x.dtype, bool(abs(x.var() / 199.9 - 1) < 0.05)  # variance 2p/(1-p)**2 with p = exp(-1/10)
    (dtype('int64'), True)
    >>> isinstance(discrete_laplace("1/3"), int)
    True
    """
    t = _scale_parameter(scale, "scale")
    shape = _check_size(size)
    src = resolve_source(source)
    out = _dlap_flat(t, _count(shape), src)
    if shape is None:
        return int(out[0])
    return out.reshape(shape)


# --------------------------------------------------------------------------------------------
# discrete Gaussian


def _dgauss_flat(sigma: Fraction, n: int, source: RandomSource) -> NDArray[np.int64]:
    sigma2 = sigma * sigma
    t = Fraction(sigma.numerator // sigma.denominator + 1)  # floor(sigma) + 1
    center = sigma2 / t
    inv_two_sigma2 = 1 / (2 * sigma2)
    c_f = float(center)
    k_f = float(inv_two_sigma2)
    parts: list[NDArray[np.int64]] = []
    filled = 0
    # acceptance for t = floor(sigma) + 1: about 0.52 at sigma = 1/2, 0.73 at 5/2, 0.76 beyond
    rate = 0.5 if sigma < 2 else 0.7
    while filled < n:
        need = n - filled
        batch = int(need / rate * 1.03) + 64
        magnitude = _dlap_magnitudes(t, batch, source)  # |Y| for Y ~ DLap(t); sign comes later
        mag_f = magnitude.astype(np.float64)  # exact: below 2**53
        # gamma = (|Y| - c)^2 k with c = sigma^2 / t and k = 1 / (2 sigma^2), in float64:
        # d_f = fl(|Y| - c_f) is within 2.01 * 2**-52 * s of d, s = |Y| + c (cancellation
        # included), so |d_f^2 - d^2| <= 4.05 * 2**-52 * s^2, and the products add a relative
        # 3 * 2**-52: |gamma_f - gamma| <= 7.2 * 2**-52 k s^2 <= 24 * 2**-52 k max(s)^2.
        s_max = (float(magnitude.max()) if batch else 0.0) + c_f
        gamma_err: NDArray[np.float64] | float = 24.0 * _ULP * k_f * s_max * s_max
        if gamma_err > 2.0**-30:  # small sigma: use the per-sample bound (k s^2 is large)
            gamma_err = np.square(mag_f + c_f) * (24.0 * _ULP * k_f)
        gamma_f = mag_f
        gamma_f -= c_f
        np.square(gamma_f, out=gamma_f)
        gamma_f *= k_f
        words = source.words(batch)
        lo, hi = _exact.exp_band(gamma_f, gamma_err)
        accept, undecided = _exact.fast_less(_exact.top_bits(words), lo, hi)
        for i in np.flatnonzero(undecided):
            gamma_i = (int(magnitude[i]) - center) ** 2 * inv_two_sigma2
            accept[i] = _exact.slow_less(int(words[i]), _exact.exp_neg_enclosure(gamma_i), source)
        kept = magnitude[accept][:need]
        parts.append(kept)
        filled += kept.size
        rate = max(float(accept.mean()), 0.05)
    magnitudes = np.concatenate(parts) if parts else np.empty(0, dtype=np.int64)
    # CKS20 Algorithm 3 accepts on |Y| only; the sign of Y ~ DLap(t) is a fair bit independent
    # of |Y| (given |Y| > 0), so it can be drawn after acceptance.
    negative = _random_signs(n, source)
    return np.where(negative, -magnitudes, magnitudes)


@overload
def discrete_gaussian(
    sigma: RationalLike, size: None = None, *, source: RandomSource | None = None
) -> int: ...
@overload
def discrete_gaussian(
    sigma: RationalLike, size: Size, *, source: RandomSource | None = None
) -> NDArray[np.int64]: ...
def discrete_gaussian(
    sigma: RationalLike, size: Size | None = None, *, source: RandomSource | None = None
) -> int | NDArray[np.int64]:
    r"""Draw from the discrete Gaussian distribution on the integers, exactly.

    .. math::

        P[X = x] = \frac{e^{-x^2 / (2\sigma^2)}}{\sum_{y} e^{-y^2 / (2\sigma^2)}},
        \qquad x \in \mathbb{Z}.

    Adding it to an integer query of L2 sensitivity ``Δ`` gives ``ρ``-zCDP with
    ``ρ = Δ**2 / (2 σ**2)`` (CKS20, arXiv 2004.00010, Theorem 14). Its variance is slightly
    below ``σ**2`` (CKS20, Corollary 9).

    The output law is exact: CKS20 Algorithm 3 with ``t = floor(σ) + 1``: propose
    ``Y ~ DLap(t)`` (:func:`discrete_laplace`) and accept with probability
    ``exp(-(|Y| - σ**2 / t)**2 / (2 σ**2))``, the Bernoulli decided by an exact comparison (the
    exponent is an exact rational, ``σ**2`` being computed as a Fraction; the float fast path
    carries a rigorous error bound, including the cancellation in ``|Y| - σ**2 / t``).
    Proposals run in vectorised batches until ``size`` samples are accepted (acceptance about
    0.75 for ``σ >= 2``).

    Parameters
    ----------
    sigma : Fraction, int, float or str
        The scale ``σ``, ``2**-40 <= σ <= 2**40``; floats are exact dyadics.
    size : int or tuple of int, optional
        Output shape; ``None`` returns one Python ``int``.
    source : RandomSource, optional
        Defaults to the secure :func:`~dpcurator.noise.default_source`.

    Returns
    -------
    int or numpy.ndarray of int64

    Examples
    --------
    >>> from dpcurator.noise import InsecureSeededSource, discrete_gaussian
    >>> x = discrete_gaussian(10, size=100000, source=InsecureSeededSource(5))
    >>> x.dtype, bool(abs(x.std() / 10 - 1) < 0.02)
    (dtype('int64'), True)
    >>> isinstance(discrete_gaussian("3/2"), int)
    True
    """
    s = _scale_parameter(sigma, "sigma", minimum=_MIN_SIGMA)
    shape = _check_size(size)
    src = resolve_source(source)
    out = _dgauss_flat(s, _count(shape), src)
    if shape is None:
        return int(out[0])
    return out.reshape(shape)
