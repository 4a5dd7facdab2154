r"""Hadamard response (Acharya, Sun and Zhang 2019): about ``log2 d`` bits a report, fast decoding.

The general scheme with ``B`` blocks (paper, Section 4, the low-privacy regime): value ``v`` lies
in block ``t = v mod B`` at row ``r = v // B + 1`` of that block's ``b x b`` Sylvester-Hadamard
matrix ``H_b[r, j] = (-1)^{popcount(r AND j)}`` (``b`` the smallest power of two above
``ceil(d / B)``; row 0, all ones, is skipped). The ``K = B b`` columns are numbered
``t b + j``; ``C_v`` is the set of the ``b/2`` columns of block ``t`` with ``H_b[r, j] = +1``.
A device reports a column: with probability ``alpha`` a uniform one of the ``K``, otherwise a
uniform one of ``C_v``. So every column of ``C_v`` has probability ``alpha/K + 2(1 - alpha)/b``
and every other one ``alpha/K``, a ratio ``e^eps`` for ``alpha = 2B/(2B - 1 + e^eps)``.

``B = 1`` is the one-block scheme of the paper's Section 3 (``C_v`` has ``K/2`` columns, each of
probability ``2e^eps/(K(1 + e^eps))``), best for ``eps`` up to about 1.34; for larger ``eps``
blocks make ``C_v`` a smaller part of the output space, and the variance falls from
``n (e^eps + 1)^2/(e^eps - 1)^2`` (about ``n``) to about ``8n/(e^eps - 1)`` at
``B ~ (e^eps - 1)/2``. The server histograms the columns and applies one fast Walsh-Hadamard
transform per block (``O(n + K log b)``).
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import ClassVar

import numpy as np
from numpy.typing import NDArray

from dpcurator._validation import check_integer
from dpcurator.accounting import PrivacyEvent, RandomizedResponseEvent
from dpcurator.errors import InvalidParameterError
from dpcurator.local._grr import (
    check_counts,
    check_n,
    exp_or_inf,
    float_at_least,
    round_up_probability,
)
from dpcurator.local._protocol import FrequencyEstimate, FrequencyOracle, check_values
from dpcurator.noise import RandomSource, bernoulli, resolve_source, uniform_integers

__all__ = ["HadamardResponse", "hadamard_blocks", "walsh_hadamard_transform"]

_MAX_BITS = 26
"""``d < 2**26``: the server's histogram has ``K <= 4d`` counters."""


def _parity(x: NDArray[np.int64]) -> NDArray[np.int64]:
    """Parity of the number of set bits of each entry (entries below ``2**32``)."""
    y = x ^ (x >> 16)
    y ^= y >> 8
    y ^= y >> 4
    y ^= y >> 2
    y ^= y >> 1
    out: NDArray[np.int64] = y & 1
    return out


def _transform_rows(y: NDArray[np.int64]) -> NDArray[np.int64]:
    """Walsh-Hadamard transform of each row of a ``(B, b)`` int64 array, ``b`` a power of two."""
    rows, size = y.shape
    h = 1
    while h < size:
        pairs = y.reshape(rows, -1, 2, h)
        y = np.stack(
            (pairs[:, :, 0, :] + pairs[:, :, 1, :], pairs[:, :, 0, :] - pairs[:, :, 1, :]), 2
        )
        y = y.reshape(rows, size)
        h *= 2
    return y


def walsh_hadamard_transform(x: object) -> NDArray[np.int64]:
    """Fast Walsh-Hadamard transform ``W[r] = sum_j x[j] (-1)^{popcount(r AND j)}``, exactly.

    Sylvester ordering, integer arithmetic, ``O(K log K)`` for ``K = len(x)`` a power of two.

    Parameters
    ----------
    x : array_like of int
        Length a power of two.

    Returns
    -------
    numpy.ndarray of int64

    Examples
    --------
    >>> from dpcurator.local._hadamard import walsh_hadamard_transform
    >>> walsh_hadamard_transform([1, 0, 0, 0]).tolist()  # column 0 of H: all ones
    [1, 1, 1, 1]
    >>> walsh_hadamard_transform([0, 1, 0, 0]).tolist()  # column 1: (-1)^(r AND 1)
    [1, -1, 1, -1]
    """
    arr = np.asarray(x)
    if arr.ndim != 1 or arr.dtype.kind not in "iub" or arr.size == 0:
        raise InvalidParameterError("x", f"<array of shape {arr.shape}>", "must be 1-D integers")
    size = int(arr.size)
    if size & (size - 1):
        raise InvalidParameterError("x", f"<array of length {size}>", "must have length 2**k")
    return _transform_rows(arr.astype(np.int64).reshape(1, size)).reshape(size)


def _relative_variance(blocks: int, e: float) -> float:
    """``(2B - 1 + e^eps)^2 / (B (e^eps - 1)^2)``: ``Var*`` per report of ``B`` blocks."""
    return (2.0 * blocks - 1.0 + e) ** 2 / (blocks * (e - 1.0) ** 2)


def hadamard_blocks(epsilon: float, domain_size: int) -> int:
    r"""Return the number of blocks ``B`` minimising the Hadamard response's ``Var*``.

    ``Var* = n (2B - 1 + e^eps)^2 / (B (e^eps - 1)^2)`` (see :class:`HadamardResponse`) is
    convex in ``B`` with its real minimum at ``B = (e^eps - 1)/2``; the integer minimiser in
    ``[1, d]`` is returned (the smaller one on a tie). ``B = 1`` (the one-block scheme) up to
    ``e^eps = 1 + 2 sqrt(2)``, i.e. ``eps <= 1.342``; Acharya, Sun and Zhang (2019, Section 4)
    take ``B`` of the order of ``e^eps`` (pure-LDP: ``2^floor(log2 min(e^eps, 2d))``), which has up
    to about 9/8 of this variance.

    Parameters
    ----------
    epsilon : float
        Privacy of one report, > 0.
    domain_size : int
        ``d >= 2``.

    Returns
    -------
    int

    Examples
    --------
    >>> from dpcurator.local._hadamard import hadamard_blocks
    >>> hadamard_blocks(1.0, 1000), hadamard_blocks(4.0, 1000), hadamard_blocks(4.0, 10)
    (1, 27, 10)
    """
    probe = HadamardResponse(epsilon, domain_size, blocks=1)  # validates both arguments
    return _best_blocks(exp_or_inf(probe.epsilon), probe.domain_size)


def _best_blocks(e: float, d: int) -> int:
    if not math.isfinite(e):
        return d
    centre = (e - 1.0) / 2.0
    candidates = {1, d, min(d, max(1, math.floor(centre))), min(d, max(1, math.ceil(centre)))}
    return min(sorted(candidates), key=lambda b: _relative_variance(b, e))


class HadamardResponse(FrequencyOracle):
    r"""Hadamard response (HR): report a Hadamard column, biased towards the value's row.

    With ``B`` blocks of ``b`` columns (``b`` the smallest power of two ``> ceil(d/B)``,
    ``K = B b`` columns), value ``v`` owns the set ``C_v`` of the ``b/2`` columns ``t b + j`` of
    its block ``t = v mod B`` with ``H_b[v // B + 1, j] = +1``. A device reports each column of
    ``C_v`` with probability ``alpha/K + 2(1 - alpha)/b`` and each other column with
    ``alpha/K``, where ``alpha = 2B/(2B - 1 + e^eps)``. For any inputs ``v, v'`` and report ``j``

    .. math:: P[j \mid v] \le \Bigl(1 + \frac{2B(1 - \alpha)}{\alpha}\Bigr) P[j \mid v']
        = e^\epsilon P[j \mid v'],

    epsilon-LDP (one device changing its value); ``alpha`` is rounded *up* to a multiple of
    ``2**-52`` (at least as private; :attr:`event` reports the epsilon achieved). ``B = 1`` is the
    paper's one-block scheme (Section 3: ``C_v`` = ``K/2`` columns of probability
    ``2e^eps/(K(1 + e^eps))``); ``B > 1`` its general scheme (Section 4). Sampling: a uniform
    column ``j0`` (exact, :func:`dpcurator.noise.uniform_integers`) is kept with probability
    ``alpha`` (exact Bernoulli); otherwise it is moved to block ``t`` (same position) and, if it
    is not in ``C_v``, its bit at the lowest set bit of the row is flipped, which maps the
    block's columns two-to-one onto ``C_v`` uniformly.

    **Report**: one column, ``ceil(log2 K)`` bits. **Estimator**: a report in column ``t b + j``
    contributes ``H_b[r, j]`` to every value ``(t, r)`` of its block, and 0 to the others; its
    mean is ``1 - alpha`` from ``v`` and 0 from any other value, so with ``W_t`` the transform of
    block ``t``'s histogram, ``c_v = W_t[r] / (1 - alpha)`` is unbiased. Its exact variance, with
    ``m_t`` the number of devices in ``v``'s block, is

    .. math:: \mathrm{Var}[c_v] = \frac{n \alpha / B + m_t (1 - \alpha)}{(1 - \alpha)^2} - n_v,

    and ``Var* = n/(B (1 - alpha)^2) = n (2B - 1 + e^eps)^2/(B (e^eps - 1)^2)`` (blocks of equal
    mass ``m_t = n/B``, ``n_v`` dropped) is also the exact average over the domain of
    ``Var[c_v] + n_v`` whenever ``B`` divides ``d``. For ``B = 1`` it is the exact
    ``n (e^eps + 1)^2/(e^eps - 1)^2 - n_v``. With ``blocks=None``, ``B`` minimises ``Var*``
    (:func:`hadamard_blocks`): ``B = 1`` for ``eps <= 1.342``, about ``(e^eps - 1)/2`` above,
    where ``Var*`` is about ``8n/(e^eps - 1)``. The price: a block holding most of the data has
    up to ``(1 + (1 - alpha) B/alpha)`` times ``Var*``.

    Parameters
    ----------
    epsilon : float
        Privacy of one report, > 0.
    domain_size : int
        ``2 <= d < 2**26``.
    blocks : int, optional
        ``1 <= B <= d``; ``None`` (default) chooses the ``B`` of least ``Var*``.

    Attributes
    ----------
    blocks, block_size, K : int
        ``B``, ``b`` (a power of two ``> ceil(d/B)``) and ``K = B b`` columns.
    alpha : fractions.Fraction
        Exact probability of the uniform part.
    p, q : fractions.Fraction
        Exact probabilities that a report lies in ``C_v`` when the input is ``v`` (``p``), and
        when it is another value of the same block (``q``; ``1/2`` for ``B = 1``). From a value
        of another block it is ``alpha/(2B)``.

    References
    ----------
    J. Acharya, Z. Sun, H. Zhang, "Hadamard Response: Estimating Distributions Privately,
    Efficiently, and with Little Communication", AISTATS 2019 (arXiv 1802.04705), Sections 3
    (one block) and 4 (general scheme). Research note D.

    Examples
    --------
    >>> from dpcurator.local._hadamard import HadamardResponse
    >>> from dpcurator.noise import InsecureSeededSource
    >>> hr = HadamardResponse(epsilon=2.0, domain_size=10)
    >>> hr.blocks, hr.block_size, hr.K  # e^2 = 7.4: three blocks of four values
    (3, 8, 24)
    >>> est = hr.estimate([2] * 3000 + [9] * 1000, source=InsecureSeededSource(0))
    >>> bool(abs(est.counts[2] - 3000) < 4 * est.std[2])
    True
    >>> HadamardResponse(epsilon=2.0, domain_size=10, blocks=1).K
    16
    """

    name: ClassVar[str] = "hadamard"

    def __init__(self, epsilon: float, domain_size: int, blocks: int | None = None) -> None:
        super().__init__(epsilon=epsilon, domain_size=domain_size)
        d = self.domain_size
        if d >= 2**_MAX_BITS:
            raise InvalidParameterError(
                "domain_size", domain_size, f"must be < 2**{_MAX_BITS} (use OLH for larger)"
            )
        e = exp_or_inf(self.epsilon)
        if blocks is None:
            self.blocks: int = _best_blocks(e, d)
        else:
            self.blocks = check_integer(blocks, "blocks", minimum=1)
            if self.blocks > d:
                raise InvalidParameterError("blocks", blocks, f"must be <= domain_size = {d}")
        per_block = -(-d // self.blocks)
        self.block_size: int = 1 << per_block.bit_length()  # smallest power of two > per_block
        self.K: int = self.blocks * self.block_size
        two_b = 2 * self.blocks
        self.alpha: Fraction = round_up_probability(two_b / (two_b - 1.0 + e), Fraction(1), epsilon)
        self.p: Fraction = 1 - self.alpha * Fraction(two_b - 1, two_b)
        self.q: Fraction = self.alpha / two_b + (1 - self.alpha) / 2

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(epsilon={self.epsilon:g}, domain_size={self.domain_size}, "
            f"blocks={self.blocks})"
        )

    @property
    def event(self) -> PrivacyEvent:
        """``2B``-ary randomized response with truth probability ``p``.

        Between inputs of different blocks the privacy-loss distribution is exactly that of
        ``RandomizedResponseEvent(p, 2B)`` (ratio ``e^eps`` on ``C_v``, ``e^-eps`` on
        ``C_v'``, 1 elsewhere); between inputs of one block it is that one mixed with no loss
        (half of ``C_v`` is in ``C_v'``), so each report is dominated by that event, whose
        epsilon ``ln(p (2B - 1)/(1 - p))`` is the achieved maximal likelihood ratio.
        """
        return RandomizedResponseEvent(p_truth=float_at_least(self.p), categories=2 * self.blocks)

    def _locate(self, values: NDArray[np.int64]) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
        """Block and row of each value."""
        return values % self.blocks, values // self.blocks + 1

    def in_support(self, columns: object, values: object) -> NDArray[np.bool_]:
        """Whether each column lies in ``C_v`` of each value ``v``.

        Examples
        --------
        >>> from dpcurator.local._hadamard import HadamardResponse
        >>> hr = HadamardResponse(epsilon=1.0, domain_size=3)  # K = 4, v = 0 is row 1
        >>> hr.in_support([0, 1, 2, 3], [0, 0, 0, 0]).tolist()
        [True, False, True, False]
        >>> hr = HadamardResponse(epsilon=1.0, domain_size=3, blocks=2)  # two blocks of 4
        >>> hr.in_support([0, 1, 2, 4, 5, 6], [1] * 6).tolist()  # v = 1: block 1, row 1
        [False, False, False, True, False, True]
        """
        cols = check_values(columns, self.K, "columns")
        vals = check_values(values, self.domain_size)
        block, row = self._locate(vals)
        same = cols // self.block_size == block
        out: NDArray[np.bool_] = same & (_parity(row & (cols % self.block_size)) == 0)
        return out

    def report_probability(self, report: int, value: int) -> Fraction:
        """Exact ``P[j | v]``: ``alpha/K + 2(1 - alpha)/b`` for ``j`` in ``C_v``, else ``alpha/K``.

        Examples
        --------
        >>> from dpcurator.local._hadamard import HadamardResponse
        >>> hr = HadamardResponse(epsilon=3.0, domain_size=5)
        >>> sum(hr.report_probability(j, 3) for j in range(hr.K)) == 1
        True
        """
        inside = bool(self.in_support([int(report)], [int(value)])[0])
        base = self.alpha / self.K
        return base + (1 - self.alpha) * Fraction(2, self.block_size) if inside else base

    def privatize(self, values: object, *, source: RandomSource | None = None) -> NDArray[np.int64]:
        """Randomise each device's value into one column in ``[0, K)``.

        Examples
        --------
        >>> from dpcurator.local._hadamard import HadamardResponse
        >>> from dpcurator.noise import InsecureSeededSource
        >>> hr = HadamardResponse(epsilon=1.0, domain_size=100)
        >>> columns = hr.privatize([0, 50, 99], source=InsecureSeededSource(0))
        >>> columns.shape, bool((columns < 128).all())
        ((3,), True)
        """
        flat = check_values(values, self.domain_size)
        src = resolve_source(source)
        n = int(flat.size)
        columns = np.asarray(uniform_integers(self.K, n, source=src), dtype=np.int64)
        keep = np.asarray(bernoulli(self.alpha, n, source=src), dtype=np.bool_)
        block, row = self._locate(flat)
        position = columns & (self.block_size - 1)
        position ^= np.where(_parity(row & position) == 0, 0, row & -row)  # now in C_v
        return np.where(keep, columns, block * self.block_size + position)

    def _transforms(self, reports: object) -> tuple[NDArray[np.int64], int]:
        """Per-block Walsh-Hadamard transforms ``W[t, r]`` of the column histogram, and ``n``."""
        cols = check_values(reports, self.K, "reports")
        histogram = np.bincount(cols, minlength=self.K).reshape(self.blocks, self.block_size)
        return _transform_rows(histogram), int(cols.size)

    def support_counts(self, reports: object) -> NDArray[np.int64]:
        """Count the reports in ``C_v`` of every ``v`` (one Walsh-Hadamard transform per block).

        The transform of block ``t``'s histogram is ``W_t[r] = (in C_v) - (in block t, not in
        C_v)`` and ``W_t[0]`` the block's total, so the count is ``(W_t[0] + W_t[r]) / 2``.

        Examples
        --------
        >>> from dpcurator.local._hadamard import HadamardResponse
        >>> hr = HadamardResponse(epsilon=1.0, domain_size=3)
        >>> hr.support_counts([0, 1, 2, 3]).tolist()  # each C_v holds two of the four columns
        [2, 2, 2]
        """
        transform, _ = self._transforms(reports)
        block, row = self._locate(np.arange(self.domain_size, dtype=np.int64))
        out: NDArray[np.int64] = (transform[block, 0] + transform[block, row]) // 2
        return out

    def aggregate(self, reports: object) -> FrequencyEstimate:
        """Debias the block transforms: ``c_v = W_t[r] / (1 - alpha)``.

        For ``B = 1`` this is ``(C_v - n/2)/(p - 1/2)``, ``C_v`` the reports in ``C_v``.

        Examples
        --------
        >>> from dpcurator.local._hadamard import HadamardResponse
        >>> hr = HadamardResponse(epsilon=1.0, domain_size=3)
        >>> hr.aggregate([1, 1, 2]).n
        3
        """
        transform, n = self._transforms(reports)
        block, row = self._locate(np.arange(self.domain_size, dtype=np.int64))
        counts = transform[block, row].astype(np.float64) / float(1 - self.alpha)
        variances = self.variance(n, np.clip(counts, 0.0, n))
        return FrequencyEstimate(counts=counts, variances=variances, n=n)

    def variance(self, n: int, counts: NDArray[np.float64] | None = None) -> NDArray[np.float64]:
        """Exact ``(n alpha/B + m_t (1 - alpha))/(1 - alpha)^2 - n_v``; ``n/(B (1 - alpha)^2)``.

        With ``counts``, ``m_t`` is the total count of ``v``'s block (``n`` for ``B = 1``);
        without, ``Var*`` (blocks of equal mass ``n/B``, ``n_v`` dropped; exact for ``B = 1`` up
        to ``- n_v``).

        Examples
        --------
        >>> import math
        >>> from dpcurator.local._hadamard import HadamardResponse
        >>> hr = HadamardResponse(epsilon=1.0, domain_size=7)
        >>> e = math.e
        >>> math.isclose(hr.variance(10)[0], 10 * (e + 1) ** 2 / (e - 1) ** 2, rel_tol=1e-9)
        True
        """
        size = check_n(n)
        gain = float(1 - self.alpha)
        blocks = self.blocks
        if counts is None:
            return np.full(self.domain_size, size / (blocks * gain**2), dtype=np.float64)
        c = check_counts(counts, self.domain_size)
        block, _ = self._locate(np.arange(self.domain_size, dtype=np.int64))
        if blocks == 1:  # every device is in the one block, whatever the counts
            mass = np.full(self.domain_size, float(size))
        else:
            mass = np.bincount(block, weights=c, minlength=blocks)[block]
        out = (size * float(self.alpha) / blocks + mass * gain) / gain**2 - c
        return np.maximum(out, 0.0)
