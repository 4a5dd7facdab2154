"""Unary encodings: symmetric (basic one-time RAPPOR) and optimised (OUE).

A device one-hot encodes its value into ``d`` bits and flips each bit independently: the bit of
its value is reported as 1 with probability ``p``, every other bit with probability ``q``.
Randomness: every bit is an exact Bernoulli of a rational probability, drawn one random byte per
bit from :mod:`dpcurator.noise` (see :func:`dpcurator.noise.bernoulli`). Reports are
``(n, d)`` boolean matrices, optionally bit-packed (``d / 8`` bytes per device); simulations of
many devices stream in chunks (:meth:`UnaryEncoding.estimate`) and never hold all reports.
"""

from __future__ import annotations

from collections.abc import Iterator
from fractions import Fraction
from typing import ClassVar

import numpy as np
from numpy.typing import NDArray

from dpcurator.accounting import PrivacyEvent, PureDPEvent
from dpcurator.errors import InvalidParameterError
from dpcurator.local._grr import (
    achieved_epsilon,
    estimate_from_supports,
    exp_or_inf,
    pure_variance,
    round_up_probability,
)
from dpcurator.local._protocol import FrequencyEstimate, FrequencyOracle, check_values
from dpcurator.noise import RandomSource, bernoulli, resolve_source

__all__ = ["OptimizedUnaryEncoding", "SymmetricUnaryEncoding", "UnaryEncoding"]

_CHUNK_BITS = 1 << 22
"""Bits handled at once (about 4 MiB of booleans plus 4 MiB of random bytes)."""
_MAX_ROWS = 2**16 - 1
"""Rows per chunk, so that 16-bit column sums cannot overflow."""


def _bit_column_sums(bits: NDArray[np.bool_]) -> NDArray[np.int64]:
    """Column sums of a boolean block of at most ``_MAX_ROWS`` rows (16-bit accumulation)."""
    out: NDArray[np.int64] = np.add.reduce(bits.view(np.uint8), axis=0, dtype=np.uint16).astype(
        np.int64
    )
    return out


class UnaryEncoding(FrequencyOracle):
    r"""Base class of the unary encodings: one-hot bits, each flipped independently.

    The bit of the device's value is 1 with probability ``p``, every other bit with
    probability ``q < p``. Two inputs ``v, v'`` differ in two bits, so for any report ``y``

    .. math::

        \frac{P[y \mid v]}{P[y \mid v']} \le \frac{p (1 - q)}{(1 - p) q} = e^\epsilon

    (epsilon-LDP, one device changing its value; the bound is attained by ``y_v = 1,
    y_{v'} = 0``). **Estimator**: ``c_v = (C_v - n q)/(p - q)`` with ``C_v`` the number of
    reports whose bit ``v`` is set; unbiased, with exact variance
    ``n q (1 - q)/(p - q)^2 + n_v (1 - p - q)/(p - q)`` (Wang et al. 2017, Theorem 2).
    Subclasses set ``p`` and ``q`` (exact rationals).

    Attributes
    ----------
    p, q : fractions.Fraction
        Probabilities that bit ``v`` is set when the input is ``v``, and when it is not.
    """

    name: ClassVar[str] = "unary"

    def __init__(self, epsilon: float, domain_size: int) -> None:
        super().__init__(epsilon=epsilon, domain_size=domain_size)
        p, q = self._probabilities(self.epsilon)
        self.p: Fraction = p
        self.q: Fraction = q

    @staticmethod
    def _probabilities(epsilon: float) -> tuple[Fraction, Fraction]:
        """``(p, q)`` for a validated epsilon."""
        raise NotImplementedError

    @property
    def event(self) -> PrivacyEvent:
        """Pure DP with the epsilon the rounded ``p, q`` achieve, ``ln(p(1-q)/((1-p)q))``."""
        ratio = self.p * (1 - self.q) / ((1 - self.p) * self.q)
        return PureDPEvent(achieved_epsilon(ratio, self.epsilon))

    def report_probability(self, report: object, value: int) -> Fraction:
        """Exact ``P[report | value]`` for a report of ``d`` bits (a product of ``d`` factors).

        Examples
        --------
        >>> from dpcurator.local._unary import OptimizedUnaryEncoding
        >>> oue = OptimizedUnaryEncoding(epsilon=1.0, domain_size=2)
        >>> total = sum(oue.report_probability([a, b], 0) for a in (0, 1) for b in (0, 1))
        >>> total == 1
        True
        """
        bits = np.asarray(report).reshape(-1)
        if bits.size != self.domain_size:
            raise InvalidParameterError(
                "report", report, f"must hold domain_size = {self.domain_size} bits"
            )
        out = Fraction(1)
        for position, bit in enumerate(bits.tolist()):
            prob = self.p if position == int(value) else self.q
            out *= prob if bit else 1 - prob
        return out

    # -- client --------------------------------------------------------------------------------

    def _chunks(self, n: int) -> Iterator[slice]:
        rows = max(1, min(_MAX_ROWS, _CHUNK_BITS // self.domain_size))
        for start in range(0, n, rows):
            yield slice(start, min(n, start + rows))

    def _privatize_block(
        self, values: NDArray[np.int64], source: RandomSource
    ) -> NDArray[np.bool_]:
        rows, d = int(values.size), self.domain_size
        bits = bernoulli(self.q, rows * d, source=source).reshape(rows, d)
        bits[np.arange(rows), values] = bernoulli(self.p, rows, source=source)
        return bits

    def privatize(self, values: object, *, source: RandomSource | None = None) -> NDArray[np.bool_]:
        """Randomise each device's value into ``d`` bits; returns an ``(n, d)`` bool matrix.

        For many devices over a large domain prefer :meth:`privatize_packed` (8 times smaller)
        or :meth:`estimate` (streams, holds no reports).

        Examples
        --------
        >>> from dpcurator.local._unary import OptimizedUnaryEncoding
        >>> from dpcurator.noise import InsecureSeededSource
        >>> oue = OptimizedUnaryEncoding(epsilon=1.0, domain_size=5)
        >>> oue.privatize([0, 3], source=InsecureSeededSource(0)).shape
        (2, 5)
        """
        flat = check_values(values, self.domain_size)
        src = resolve_source(source)
        out = np.empty((flat.size, self.domain_size), dtype=np.bool_)
        for rows in self._chunks(int(flat.size)):
            out[rows] = self._privatize_block(flat[rows], src)
        return out

    def privatize_packed(
        self, values: object, *, source: RandomSource | None = None
    ) -> NDArray[np.uint8]:
        """Like :meth:`privatize`, bit-packed: ``(n, ceil(d / 8))`` bytes (``numpy.packbits``).

        Examples
        --------
        >>> from dpcurator.local._unary import SymmetricUnaryEncoding
        >>> from dpcurator.noise import InsecureSeededSource
        >>> sue = SymmetricUnaryEncoding(epsilon=1.0, domain_size=20)
        >>> sue.privatize_packed([4, 19, 0], source=InsecureSeededSource(0)).shape
        (3, 3)
        """
        flat = check_values(values, self.domain_size)
        src = resolve_source(source)
        out = np.empty((flat.size, (self.domain_size + 7) // 8), dtype=np.uint8)
        for rows in self._chunks(int(flat.size)):
            out[rows] = np.packbits(self._privatize_block(flat[rows], src), axis=1)
        return out

    # -- server --------------------------------------------------------------------------------

    def _column_sums(self, reports: object) -> tuple[NDArray[np.int64], int]:
        d = self.domain_size
        arr = np.asarray(reports)
        packed_width = (d + 7) // 8
        if arr.ndim != 2 or arr.shape[0] == 0:
            raise InvalidParameterError(
                "reports", f"<array of shape {arr.shape}>", "must be a non-empty 2-D array"
            )
        sums = np.zeros(d, dtype=np.int64)
        if arr.shape[1] == d and (arr.dtype == np.bool_ or arr.dtype.kind in "iu"):
            if arr.dtype != np.bool_ and bool(((arr != 0) & (arr != 1)).any()):
                raise InvalidParameterError(
                    "reports", f"<array of dtype {arr.dtype}>", "must hold 0/1 bits"
                )
            for rows in self._chunks(arr.shape[0]):
                block = arr[rows]
                if block.dtype == np.bool_:
                    sums += _bit_column_sums(np.ascontiguousarray(block))
                else:
                    sums += block.sum(axis=0, dtype=np.int64)
        elif arr.shape[1] == packed_width and arr.dtype == np.uint8:
            for rows in self._chunks(arr.shape[0]):
                sums += np.unpackbits(arr[rows], axis=1, count=d).sum(axis=0, dtype=np.int64)
        else:
            raise InvalidParameterError(
                "reports",
                f"<array of shape {arr.shape} and dtype {arr.dtype}>",
                f"must be (n, {d}) bits or (n, {packed_width}) uint8 packed bits",
            )
        return sums, int(arr.shape[0])

    def aggregate(self, reports: object) -> FrequencyEstimate:
        """Count the set bits of each position and debias them.

        ``reports`` is the ``(n, d)`` bit matrix of :meth:`privatize` (bools or 0/1 integers) or
        the ``(n, ceil(d/8))`` uint8 matrix of :meth:`privatize_packed`.

        Examples
        --------
        >>> import numpy as np
        >>> from dpcurator.local._unary import OptimizedUnaryEncoding
        >>> oue = OptimizedUnaryEncoding(epsilon=1.0, domain_size=3)
        >>> oue.aggregate(np.array([[1, 0, 0], [1, 1, 0]])).n
        2
        """
        sums, n = self._column_sums(reports)
        return estimate_from_supports(sums, n, self.p, self.q, self.variance)

    def estimate(self, values: object, *, source: RandomSource | None = None) -> FrequencyEstimate:
        """Simulate devices chunk by chunk: privatise, count, discard; memory O(d) per device chunk.

        Simulating ``10**6`` devices over ``d = 1000`` holds about 4 MiB of bits at a time.

        Examples
        --------
        >>> from dpcurator.local._unary import OptimizedUnaryEncoding
        >>> from dpcurator.noise import InsecureSeededSource
        >>> oue = OptimizedUnaryEncoding(epsilon=2.0, domain_size=100)
        >>> est = oue.estimate([7] * 5000, source=InsecureSeededSource(0))
        >>> bool(abs(est.counts[7] - 5000) < 4 * est.std[7])
        True
        """
        flat = check_values(values, self.domain_size)
        src = resolve_source(source)
        sums = np.zeros(self.domain_size, dtype=np.int64)
        for rows in self._chunks(int(flat.size)):
            sums += _bit_column_sums(self._privatize_block(flat[rows], src))
        return estimate_from_supports(sums, int(flat.size), self.p, self.q, self.variance)

    def variance(self, n: int, counts: NDArray[np.float64] | None = None) -> NDArray[np.float64]:
        """Exact variance of each count for ``n`` reports (``Var*`` without ``counts``).

        Examples
        --------
        >>> import math
        >>> from dpcurator.local._unary import OptimizedUnaryEncoding
        >>> oue = OptimizedUnaryEncoding(epsilon=1.0, domain_size=4)
        >>> e = math.e
        >>> math.isclose(oue.variance(100)[0], 100 * 4 * e / (e - 1) ** 2, rel_tol=1e-9)
        True
        """
        return pure_variance(n, counts, self.p, self.q, self.domain_size)


class SymmetricUnaryEncoding(UnaryEncoding):
    r"""Symmetric unary encoding (SUE), the basic one-time RAPPOR.

    Each bit of the one-hot encoding is kept with probability ``p = e^{eps/2}/(e^{eps/2} + 1)``
    and flipped otherwise, so ``q = 1 - p`` and

    .. math:: \frac{P[y \mid v]}{P[y \mid v']} \le \frac{p(1-q)}{(1-p)q}
        = \left(\frac{p}{1-p}\right)^2 = e^\epsilon.

    ``1 - p`` is rounded *up* to a multiple of ``2**-52`` (at least as private). **Report**:
    ``d`` bits. **Estimator** ``(C_v - n q)/(p - q)``; since ``1 - p - q = 0`` its variance does
    not depend on the data: exactly ``Var = n e^{eps/2} / (e^{eps/2} - 1)^2``.

    Parameters
    ----------
    epsilon : float
        Privacy of one report, > 0.
    domain_size : int
        ``d >= 2``.

    References
    ----------
    Ú. Erlingsson, V. Pihur, A. Korolova, "RAPPOR: Randomized Aggregatable Privacy-Preserving
    Ordinal Response", CCS 2014 (basic one-time RAPPOR); T. Wang, J. Blocki, N. Li, S. Jha,
    USENIX Security 2017, Section 4.2 (SUE) and Theorem 2. Research note D.

    Examples
    --------
    >>> from dpcurator.local._unary import SymmetricUnaryEncoding
    >>> from dpcurator.noise import InsecureSeededSource
    >>> sue = SymmetricUnaryEncoding(epsilon=2.0, domain_size=6)
    >>> est = sue.estimate([0] * 800 + [5] * 200, source=InsecureSeededSource(3))
    >>> bool(abs(est.counts[5] - 200) < 4 * est.std[5]), sue.p + sue.q == 1
    (True, True)
    """

    name: ClassVar[str] = "sue"

    @staticmethod
    def _probabilities(epsilon: float) -> tuple[Fraction, Fraction]:
        flip = round_up_probability(
            1.0 / (exp_or_inf(epsilon / 2.0) + 1.0), Fraction(1, 2), epsilon
        )
        return 1 - flip, flip


class OptimizedUnaryEncoding(UnaryEncoding):
    r"""Optimised unary encoding (OUE, Wang et al. 2017).

    The bit of the device's value is set with probability ``p = 1/2``, every other bit with
    ``q = 1 / (e^eps + 1)``:

    .. math:: \frac{P[y \mid v]}{P[y \mid v']} \le \frac{p(1-q)}{(1-p)q} = \frac{1-q}{q}
        = e^\epsilon.

    ``q`` is rounded *up* to a multiple of ``2**-52`` (at least as private). **Report**: ``d``
    bits. **Estimator** ``(C_v - n q)/(p - q)``, unbiased, with exact variance

    .. math:: \mathrm{Var}[c_v] = n \frac{4 e^\epsilon}{(e^\epsilon - 1)^2} + n_v,

    the minimum of ``Var*`` over unary encodings; OUE and OLH are the best pure protocols when
    ``d >= 3 e^eps + 2``.

    Parameters
    ----------
    epsilon : float
        Privacy of one report, > 0.
    domain_size : int
        ``d >= 2``.

    References
    ----------
    T. Wang, J. Blocki, N. Li, S. Jha, "Locally Differentially Private Protocols for Frequency
    Estimation", USENIX Security 2017, Section 4.3 (OUE) and Theorem 2. Research note D.

    Examples
    --------
    >>> from dpcurator.local._unary import OptimizedUnaryEncoding
    >>> from dpcurator.noise import InsecureSeededSource
    >>> oue = OptimizedUnaryEncoding(epsilon=1.0, domain_size=8)
    >>> est = oue.estimate([1] * 3000 + [2] * 1000, source=InsecureSeededSource(4))
    >>> bool(abs(est.counts[1] - 3000) < 4 * est.std[1]), oue.p
    (True, Fraction(1, 2))
    """

    name: ClassVar[str] = "oue"

    @staticmethod
    def _probabilities(epsilon: float) -> tuple[Fraction, Fraction]:
        q = round_up_probability(1.0 / (exp_or_inf(epsilon) + 1.0), Fraction(1, 2), epsilon)
        return Fraction(1, 2), q
