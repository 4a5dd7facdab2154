"""Literal scalar implementations of CKS20 Algorithms 1-3 (the reference for the fast samplers).

C. L. Canonne, G. Kamath, T. Steinke, "The Discrete Gaussian for Differential Privacy",
NeurIPS 2020, arXiv 2004.00010, Section 5. Every step uses exact integers and
:class:`~fractions.Fraction`; the only randomness is exact uniform integers drawn by rejection
from 64-bit words of a :class:`~dpcurator.noise.RandomSource`. These functions are slow (pure
Python, one sample at a time) and private: the tests check that the vectorised samplers in
:mod:`dpcurator.noise._samplers` have the same distributions.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from dpcurator.noise._source import RandomSource

__all__ = [
    "WordStream",
    "bernoulli_exp_ref",
    "bernoulli_rational_ref",
    "discrete_gaussian_ref",
    "discrete_laplace_ref",
    "uniform_below_ref",
]


class WordStream:
    """Hands out the words of a source one at a time, reading them in chunks of 1024.

    Examples
    --------
    >>> from dpcurator.noise import InsecureSeededSource
    >>> stream = WordStream(InsecureSeededSource(0))
    >>> 0 <= stream.next_word() < 2**64
    True
    """

    __slots__ = ("_chunk", "_position", "_source")

    def __init__(self, source: RandomSource) -> None:
        self._source = source
        self._chunk: list[int] = []
        self._position = 0

    def next_word(self) -> int:
        """Return the next uniform word in ``[0, 2**64)`` as a Python int."""
        if self._position == len(self._chunk):
            self._chunk = [int(w) for w in self._source.words(1024).astype(np.uint64)]
            self._position = 0
        word = self._chunk[self._position]
        self._position += 1
        return word


def uniform_below_ref(b: int, stream: WordStream) -> int:
    """Exact uniform integer in ``{0, ..., b - 1}`` by rejection of ``bit_length(b - 1)`` bits.

    Examples
    --------
    >>> from dpcurator.noise import InsecureSeededSource
    >>> 0 <= uniform_below_ref(10**30, WordStream(InsecureSeededSource(1))) < 10**30
    True
    """
    if b < 1:
        raise ValueError(f"b must be >= 1; got {b}.")
    k = (b - 1).bit_length()
    n_words = (k + 63) // 64
    while True:
        v = 0
        for _ in range(n_words):
            v = (v << 64) | stream.next_word()
        v >>= 64 * n_words - k
        if v < b:
            return v


def bernoulli_rational_ref(p: Fraction, stream: WordStream) -> bool:
    """Bernoulli(p) for a rational ``p = a / b`` in ``[0, 1]``.

    Returns ``U < a`` with ``U`` uniform on ``{0, ..., b - 1}`` (CKS20, Section 5.1).

    Examples
    --------
    >>> from fractions import Fraction
    >>> from dpcurator.noise import InsecureSeededSource
    >>> bernoulli_rational_ref(Fraction(1), WordStream(InsecureSeededSource(1)))
    True
    """
    return uniform_below_ref(p.denominator, stream) < p.numerator


def bernoulli_exp_ref(gamma: Fraction, stream: WordStream) -> bool:
    """Bernoulli(exp(-gamma)) for rational ``gamma >= 0``: CKS20 Algorithm 1.

    For ``gamma <= 1``: ``K = 1``; while Bernoulli(gamma / K) succeeds, ``K += 1``; return
    whether ``K`` is odd (then ``P[K odd] = exp(-gamma)``). For ``gamma > 1``: ``floor(gamma)``
    independent Bernoulli(exp(-1)) trials must all succeed, then one Bernoulli(exp(-(gamma -
    floor(gamma)))).

    Examples
    --------
    >>> from fractions import Fraction
    >>> from dpcurator.noise import InsecureSeededSource
    >>> bernoulli_exp_ref(Fraction(0), WordStream(InsecureSeededSource(1)))
    True
    """
    if gamma < 0:
        raise ValueError(f"gamma must be >= 0; got {gamma}.")
    if gamma <= 1:
        k = 1
        while bernoulli_rational_ref(gamma / k, stream):
            k += 1
        return k % 2 == 1
    whole = gamma.numerator // gamma.denominator
    for _ in range(whole):
        if not bernoulli_exp_ref(Fraction(1), stream):
            return False
    return bernoulli_exp_ref(gamma - whole, stream)


def discrete_laplace_ref(scale: Fraction, stream: WordStream) -> int:
    """One draw of the discrete Laplace law ``P[x] ∝ exp(-|x| / scale)``: CKS20 Algorithm 2.

    With ``scale = t / s`` in lowest terms: draw ``U`` uniform on ``{0..t-1}`` and restart unless
    Bernoulli(exp(-U / t)); ``V`` = number of successes of Bernoulli(exp(-1)) before the first
    failure; ``X = U + t V``; ``Y = floor(X / s)``; ``B`` a fair bit; restart if ``B = 1`` and
    ``Y = 0``; return ``(1 - 2B) Y``.

    Examples
    --------
    >>> from fractions import Fraction
    >>> from dpcurator.noise import InsecureSeededSource
    >>> isinstance(discrete_laplace_ref(Fraction(3, 2), WordStream(InsecureSeededSource(1))), int)
    True
    """
    t, s = scale.numerator, scale.denominator
    while True:
        u = uniform_below_ref(t, stream)
        if not bernoulli_exp_ref(Fraction(u, t), stream):
            continue
        v = 0
        while bernoulli_exp_ref(Fraction(1), stream):
            v += 1
        y = (u + t * v) // s
        negative = bernoulli_rational_ref(Fraction(1, 2), stream)
        if negative and y == 0:
            continue
        return -y if negative else y


def discrete_gaussian_ref(sigma: Fraction, stream: WordStream) -> int:
    """One draw of the discrete Gaussian ``P[x] ∝ exp(-x**2 / (2 sigma**2))``: CKS20 Algorithm 3.

    ``t = floor(sigma) + 1``; repeat: ``Y ~ DLap(t)`` (Algorithm 2), accept with probability
    ``exp(-(|Y| - sigma**2 / t)**2 / (2 sigma**2))`` (Algorithm 1).

    Examples
    --------
    >>> from fractions import Fraction
    >>> from dpcurator.noise import InsecureSeededSource
    >>> isinstance(discrete_gaussian_ref(Fraction(2), WordStream(InsecureSeededSource(1))), int)
    True
    """
    sigma2 = sigma * sigma
    t = sigma.numerator // sigma.denominator + 1
    while True:
        y = discrete_laplace_ref(Fraction(t), stream)
        gamma = (abs(y) - sigma2 / t) ** 2 / (2 * sigma2)
        if bernoulli_exp_ref(gamma, stream):
            return y
