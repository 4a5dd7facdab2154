"""Exact Bernoulli(p) batches by block inversion with a lookup table.

Eight output bits are drawn jointly: the pattern ``X`` in ``{0, ..., 255}`` (bit ``i`` of ``X``
is draw ``i``) has the product law ``P(X = x) = p**popcount(x) (1 - p)**(8 - popcount(x))``.
With the exact rational CDF boundaries ``B_0 = 0 < B_1 < ... < B_256 = 1`` (patterns in their
natural order), a uniform ``u`` in ``[0, 1)`` gives ``X = x`` iff ``B_x <= u < B_{x+1}``: this is
inversion of the CDF, exact for an exact uniform ``u`` (Devroye, "Non-Uniform Random Variate
Generation", Springer 1986, Section II.2.1, Theorem 2.1).

``u`` is drawn lazily (Knuth and Yao's lazy-bit idea, as in :mod:`dpcurator.noise._exact`): a
``k``-bit chunk ``V`` (``k = _CHUNK_BITS``, 16 by default) says ``u`` lies in the cell
``[V, V + 1) / 2**k``. A table built exactly from the boundaries maps every cell that lies inside
one pattern's interval to that pattern; a cell with a boundary strictly inside it (at most 255 of
the ``2**k`` cells, so probability at most ``255 / 2**k``) is *ambiguous* and is resolved by
drawing further digits of ``u``: a 64-bit word ``W`` puts the remainder
``r = u 2**k - V`` in ``[W, W + 1) / 2**64`` and decides every comparison with an inner
boundary ``t_j = B_j 2**k - V`` except when ``W == floor(t_j 2**64)`` with ``t_j 2**64`` not an
integer (probability ``2**-64``), which :class:`~dpcurator.noise._exact.LazyUniform` settles
exactly with more words. A boundary exactly on a cell edge leaves the cell unambiguous, so a
dyadic ``p`` with a small denominator (``1/2``, ``3/4``) never needs extra words.

Cost: ``k / 8`` random bits per output bit (2 for ``k = 16``) plus ``64 / 8 * 255 / 2**16``
(about 0.03) for ambiguous cells, against about 4.3 for four-bit lazy comparisons.

``_CHUNK_BITS`` is a module constant on purpose: tests set it to 4 so that most cells are
ambiguous and the exact slow path runs on most draws.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpcurator.errors import InternalError
from dpcurator.noise import _exact
from dpcurator.noise._source import RandomSource

__all__ = ["bernoulli_blocks"]

_CHUNK_BITS = 16
"""Bits of ``u`` per block of 8 draws: 4, 8 or 16 (tests lower it to exercise the slow path)."""

_BLOCK = 8
"""Draws per pattern."""

_PATTERNS = 1 << _BLOCK

_AMBIGUOUS = 0x0202020202020202
"""Table entry of an ambiguous cell: its bytes are not 0/1, so it is never a valid expansion."""

_EXPANSION = np.array(
    [sum(((x >> i) & 1) << (8 * i) for i in range(_BLOCK)) for x in range(_PATTERNS)],
    dtype=np.uint64,
)
"""``_EXPANSION[x]``: the eight bits of ``x`` (least significant first) as the bytes of a word."""


@dataclass(frozen=True)
class _Plan:
    """Precomputed lookup for one ``(p, chunk_bits)``.

    ``table[V]`` is the expansion of the pattern of cell ``V`` or ``_AMBIGUOUS``. For the
    ambiguous cells (the sorted ``cells``, numbered ``c``): ``base[c]`` is the number of
    boundaries at or below the cell's lower edge (the pattern if ``u`` is below every inner
    boundary); row ``s`` of ``thresholds``/``valid`` is the ``s``-th inner boundary of each cell
    as ``floor(t_j 2**64)``; ``inner[c]`` are the exact ``t_j`` (increasing).
    """

    table: NDArray[np.uint64]
    cells: NDArray[np.int64]
    base: NDArray[np.int64]
    thresholds: NDArray[np.uint64]
    valid: NDArray[np.bool_]
    inner: tuple[tuple[Fraction, ...], ...]


@functools.lru_cache(maxsize=8)
def _plan(prob: Fraction, chunk_bits: int) -> _Plan:
    """Build the exact table for ``p`` (``0 < p < 1``) and ``2**chunk_bits`` cells."""
    if not 0 < prob < 1:
        raise InternalError(f"block Bernoulli needs 0 < p < 1; got {prob!r}.")
    a, b = prob.numerator, prob.denominator
    c = b - a
    denominator = b**_BLOCK  # B_j = cumulative[j] / denominator, exactly
    weights = [a ** x.bit_count() * c ** (_BLOCK - x.bit_count()) for x in range(_PATTERNS)]
    cumulative = [0]
    for weight in weights:
        cumulative.append(cumulative[-1] + weight)
    if cumulative[-1] != denominator:
        raise InternalError("block Bernoulli boundaries do not sum to one.")
    cells_count = 1 << chunk_bits
    ceilings = np.empty(_PATTERNS - 1, dtype=np.int64)
    inner_of: dict[int, list[Fraction]] = {}
    for j in range(1, _PATTERNS):
        q, r = divmod(cumulative[j] << chunk_bits, denominator)  # B_j 2**k = q + r / D
        ceilings[j - 1] = q + (1 if r else 0)
        if r:  # strictly inside cell q
            inner_of.setdefault(q, []).append(Fraction(r, denominator))
    # Cell V lies in pattern x = #{j >= 1 : B_j <= V / 2**k} = #{j : ceil(B_j 2**k) <= V}.
    position = np.searchsorted(ceilings, np.arange(cells_count, dtype=np.int64), side="right")
    table = _EXPANSION[position]
    ambiguous = sorted(inner_of)
    cells = np.array(ambiguous, dtype=np.int64)
    table[cells] = np.uint64(_AMBIGUOUS)
    slots = max((len(v) for v in inner_of.values()), default=0)
    thresholds = np.zeros((slots, len(ambiguous)), dtype=np.uint64)
    valid = np.zeros((slots, len(ambiguous)), dtype=np.bool_)
    for i, v in enumerate(ambiguous):
        for s, t in enumerate(inner_of[v]):
            thresholds[s, i] = (t.numerator << 64) // t.denominator
            valid[s, i] = True
    base = position[cells].astype(np.int64)
    inner = tuple(tuple(inner_of[v]) for v in ambiguous)
    table.setflags(write=False)
    return _Plan(table, cells, base, thresholds, valid, inner)


def _chunks(count: int, chunk_bits: int, source: RandomSource) -> NDArray[np.unsignedinteger[Any]]:
    """``count`` uniform ``chunk_bits``-bit integers (as indices into the table)."""
    per_word = 64 // chunk_bits
    words = source.words(-(-count // per_word))
    if chunk_bits == 16:
        return words.view(np.uint16)[:count]
    if chunk_bits == 8:
        return words.view(np.uint8)[:count]
    if chunk_bits == 4:
        octets = words.view(np.uint8)
        nibbles = np.stack([octets & np.uint8(15), octets >> np.uint8(4)], axis=-1)
        return nibbles.reshape(-1)[:count]
    raise InternalError(f"unsupported chunk size {chunk_bits}.")


def _resolve(plan: _Plan, cell_ids: NDArray[np.int64], source: RandomSource) -> NDArray[np.int64]:
    """Exact patterns of draws in ambiguous cells (``cell_ids`` index ``plan.inner``)."""
    words = source.words(cell_ids.size)
    pattern = plan.base[cell_ids].copy()
    undecided = np.zeros(cell_ids.size, dtype=np.bool_)
    for s in range(plan.thresholds.shape[0]):
        threshold = plan.thresholds[s][cell_ids]
        valid = plan.valid[s][cell_ids]
        # r in [W, W + 1) / 2**64: W > floor(t 2**64) means r >= t; W < it means r < t.
        pattern += valid & (words > threshold)
        undecided |= valid & (words == threshold)
    for i in np.flatnonzero(undecided):
        uniform = _exact.LazyUniform(int(words[i]), source)
        cell = int(cell_ids[i])
        count = int(plan.base[cell])
        for t in plan.inner[cell]:  # increasing: stop at the first boundary above r
            if uniform.less(_exact.rational_enclosure(t)):
                break
            count += 1
        pattern[i] = count
    return pattern


def bernoulli_blocks(prob: Fraction, n: int, source: RandomSource) -> NDArray[np.bool_]:
    """Draw ``n`` independent Bernoulli(``prob``) booleans, ``0 < prob < 1``, exactly.

    Parameters
    ----------
    prob : Fraction
        The probability, strictly between 0 and 1.
    n : int
        Number of draws.
    source : RandomSource
        Where the uniform words come from.

    Returns
    -------
    numpy.ndarray of bool, shape ``(n,)``

    Examples
    --------
    >>> from fractions import Fraction
    >>> from dpcurator.noise import InsecureSeededSource
    >>> x = bernoulli_blocks(Fraction(1, 3), 80000, InsecureSeededSource(0))
    >>> x.shape, bool(abs(x.mean() - 1 / 3) < 0.01)
    ((80000,), True)
    """
    chunk_bits = _CHUNK_BITS
    plan = _plan(prob, chunk_bits)
    blocks = -(-n // _BLOCK)
    chunks = _chunks(blocks, chunk_bits, source)
    expanded = np.take(plan.table, chunks)
    if plan.inner:
        where = np.flatnonzero(expanded == np.uint64(_AMBIGUOUS))
        if where.size:
            cell_ids = np.searchsorted(plan.cells, chunks[where]).astype(np.int64)
            expanded[where] = _EXPANSION[_resolve(plan, cell_ids, source)]
    out: NDArray[np.bool_] = expanded.view(np.bool_)[:n]
    return out
