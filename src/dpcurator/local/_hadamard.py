r"""Hadamard response (Acharya, Sun and Zhang 2019): ``log2 d`` bits per report, fast decoding.

Let ``K`` be the smallest power of two above ``d`` and ``H`` the ``K x K`` Sylvester-Hadamard
matrix, ``H[r, j] = (-1)^{popcount(r AND j)}``. Value ``v`` is mapped to row ``v + 1`` (row 0,
all ones, is skipped) and to the set ``C_v = {j : H[v + 1, j] = +1}`` of ``K/2`` columns. A device
reports a column ``j``: one of ``C_v`` with probability ``p = e^eps/(e^eps + 1)`` (uniformly
within it), one of the other ``K/2`` columns otherwise. Two distinct rows other than row 0 agree
on exactly half of the columns, so ``|C_v ∩ C_v'| = K/4`` and a report supports ``v'`` with
probability exactly ``1/2`` when the input is ``v != v'``. The server histograms the columns
and applies one fast Walsh-Hadamard transform (``O(n + K log K)``).
"""

from __future__ import annotations

from fractions import Fraction
from typing import ClassVar

import numpy as np
from numpy.typing import NDArray

from dpcurator.accounting import PrivacyEvent, RandomizedResponseEvent
from dpcurator.errors import InvalidParameterError
from dpcurator.local._grr import (
    estimate_from_supports,
    exp_or_inf,
    float_at_least,
    pure_variance,
    round_up_probability,
)
from dpcurator.local._protocol import FrequencyEstimate, FrequencyOracle, check_values
from dpcurator.noise import RandomSource, bernoulli, resolve_source, uniform_integers

__all__ = ["HadamardResponse", "walsh_hadamard_transform"]

_MAX_BITS = 26
"""``K <= 2**26``: the server's histogram has ``K`` counters."""


def _parity(x: NDArray[np.int64]) -> NDArray[np.int64]:
    """Parity of the number of set bits of each entry (entries below ``2**32``)."""
    y = x ^ (x >> 16)
    y ^= y >> 8
    y ^= y >> 4
    y ^= y >> 2
    y ^= y >> 1
    out: NDArray[np.int64] = y & 1
    return out


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
    y = arr.astype(np.int64)
    h = 1
    while h < size:
        blocks = y.reshape(-1, 2, h)
        y = np.stack((blocks[:, 0, :] + blocks[:, 1, :], blocks[:, 0, :] - blocks[:, 1, :]), 1)
        y = y.reshape(size)
        h *= 2
    return y


class HadamardResponse(FrequencyOracle):
    r"""Hadamard response (HR): report a Hadamard column, biased towards the value's row.

    With ``K = 2^ceil(log2(d + 1))`` and ``C_v = {j : H[v + 1, j] = +1}`` (``K/2`` columns), a
    device with value ``v`` reports each ``j`` in ``C_v`` with probability ``2p/K`` and each other
    column with probability ``2(1 - p)/K``, ``p = e^eps/(e^eps + 1)``. For any inputs ``v, v'``
    and any report ``j``

    .. math:: P[j \mid v] \le \frac{2p/K}{2(1-p)/K} P[j \mid v'] = e^\epsilon P[j \mid v'],

    epsilon-LDP (one device changing its value); ``1 - p`` is rounded *up* to a multiple of
    ``2**-52`` (at least as private; :attr:`event` reports the ``p`` used). Sampling: a uniform
    column ``j0`` (exact, :func:`dpcurator.noise.uniform_integers`) and an exact Bernoulli(p)
    ``b``; if ``[j0 in C_v] != b``, flip the lowest set bit of ``v + 1`` in ``j0``, which moves
    ``j0`` across ``C_v`` and its complement one-to-one, so the result is uniform on the side
    that ``b`` chose.

    **Report**: one column, ``log2 K`` bits. **Estimator**: ``C_v`` = number of reports in
    ``C_v`` (read off one Walsh-Hadamard transform of the column histogram); a report supports
    ``v`` with probability ``p`` from ``v`` and exactly ``q = 1/2`` from any other value, so
    ``c_v = (C_v - n/2)/(p - 1/2)`` is unbiased with exact variance

    .. math:: \mathrm{Var}[c_v] = \frac{n}{(2p - 1)^2} - n_v
        = n \frac{(e^\epsilon + 1)^2}{(e^\epsilon - 1)^2} - n_v.

    Parameters
    ----------
    epsilon : float
        Privacy of one report, > 0.
    domain_size : int
        ``2 <= d < 2**26``.

    Attributes
    ----------
    K : int
        Number of columns (a power of two, ``> d``).
    p, q : fractions.Fraction
        Exact probabilities that a report lies in ``C_v`` when the input is ``v`` (``p``), and
        when it is another value (``q = 1/2``).

    References
    ----------
    J. Acharya, Z. Sun, H. Zhang, "Hadamard Response: Estimating Distributions Privately,
    Efficiently, and with Little Communication", AISTATS 2019 (arXiv 1802.04705), Section 3
    (the symmetric scheme, one block). Research note D.

    Examples
    --------
    >>> from dpcurator.local._hadamard import HadamardResponse
    >>> from dpcurator.noise import InsecureSeededSource
    >>> hr = HadamardResponse(epsilon=2.0, domain_size=10)
    >>> hr.K
    16
    >>> est = hr.estimate([2] * 3000 + [9] * 1000, source=InsecureSeededSource(0))
    >>> bool(abs(est.counts[2] - 3000) < 4 * est.std[2])
    True
    """

    name: ClassVar[str] = "hadamard"

    def __init__(self, epsilon: float, domain_size: int) -> None:
        super().__init__(epsilon=epsilon, domain_size=domain_size)
        if self.domain_size >= 2**_MAX_BITS:
            raise InvalidParameterError(
                "domain_size", domain_size, f"must be < 2**{_MAX_BITS} (use OLH for larger)"
            )
        self.K: int = 1 << self.domain_size.bit_length()  # smallest power of two > d
        lie = round_up_probability(1.0 / (exp_or_inf(self.epsilon) + 1.0), Fraction(1, 2), epsilon)
        self.p: Fraction = 1 - lie
        self.q: Fraction = Fraction(1, 2)

    @property
    def event(self) -> PrivacyEvent:
        """Binary randomized response with the ``p`` used.

        Over the four classes of columns ``(j in C_v, j in C_v')`` (``K/4`` columns each) the
        report is, with probability 1/2, uninformative, and otherwise binary randomized
        response with ``p``; so each report is dominated by ``RandomizedResponseEvent(p, 2)``.
        """
        return RandomizedResponseEvent(p_truth=float_at_least(self.p), categories=2)

    def in_support(self, columns: object, values: object) -> NDArray[np.bool_]:
        """Whether each column ``j`` lies in ``C_v`` (``H[v + 1, j] = +1``) of each value ``v``.

        Examples
        --------
        >>> from dpcurator.local._hadamard import HadamardResponse
        >>> hr = HadamardResponse(epsilon=1.0, domain_size=3)  # K = 4, v = 0 is row 1
        >>> hr.in_support([0, 1, 2, 3], [0, 0, 0, 0]).tolist()
        [True, False, True, False]
        """
        cols = check_values(columns, self.K, "columns")
        vals = check_values(values, self.domain_size)
        out: NDArray[np.bool_] = _parity((vals + 1) & cols) == 0
        return out

    def report_probability(self, report: int, value: int) -> Fraction:
        """Exact ``P[j | v]``: ``2p/K`` for ``j`` in ``C_v``, ``2(1 - p)/K`` otherwise.

        Examples
        --------
        >>> from dpcurator.local._hadamard import HadamardResponse
        >>> hr = HadamardResponse(epsilon=1.0, domain_size=5)
        >>> sum(hr.report_probability(j, 3) for j in range(hr.K)) == 1
        True
        """
        inside = bool(self.in_support([int(report)], [int(value)])[0])
        return Fraction(2, self.K) * (self.p if inside else 1 - self.p)

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
        inside = bernoulli(self.p, n, source=src)
        rows = flat + 1
        now_inside = _parity(rows & columns) == 0
        lowest = rows & -rows
        columns ^= np.where(now_inside != inside, lowest, 0)
        return columns

    def support_counts(self, reports: object) -> NDArray[np.int64]:
        """``C_v`` for every ``v``: reports in ``C_v``, from one Walsh-Hadamard transform.

        The transform of the column histogram is ``W[r] = (in C_r) - (not in C_r)``, so
        ``C_v = (n + W[v + 1]) / 2``.

        Examples
        --------
        >>> from dpcurator.local._hadamard import HadamardResponse
        >>> hr = HadamardResponse(epsilon=1.0, domain_size=3)
        >>> hr.support_counts([0, 1, 2, 3]).tolist()  # each C_v holds two of the four columns
        [2, 2, 2]
        """
        cols = check_values(reports, self.K, "reports")
        transform = walsh_hadamard_transform(np.bincount(cols, minlength=self.K))
        out: NDArray[np.int64] = (cols.size + transform[1 : self.domain_size + 1]) // 2
        return out

    def aggregate(self, reports: object) -> FrequencyEstimate:
        """Debias the support counts: ``(C_v - n/2)/(p - 1/2)``.

        Examples
        --------
        >>> from dpcurator.local._hadamard import HadamardResponse
        >>> hr = HadamardResponse(epsilon=1.0, domain_size=3)
        >>> hr.aggregate([1, 1, 2]).n
        3
        """
        supports = self.support_counts(reports)
        n = int(np.asarray(reports).size)
        return estimate_from_supports(supports, n, self.p, self.q, self.variance)

    def variance(self, n: int, counts: NDArray[np.float64] | None = None) -> NDArray[np.float64]:
        """Exact variance ``n/(2p - 1)^2 - n_v`` of each count (``Var*`` without ``counts``).

        Examples
        --------
        >>> import math
        >>> from dpcurator.local._hadamard import HadamardResponse
        >>> hr = HadamardResponse(epsilon=1.0, domain_size=7)
        >>> e = math.e
        >>> math.isclose(hr.variance(10)[0], 10 * (e + 1) ** 2 / (e - 1) ** 2, rel_tol=1e-9)
        True
        """
        return pure_variance(n, counts, self.p, self.q, self.domain_size)
