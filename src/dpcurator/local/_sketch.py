r"""Apple's count-mean sketch (CMS) and Hadamard count-mean sketch (HCMS).

Apple Differential Privacy Team, "Learning with Privacy at Scale", Apple Machine Learning Journal,
December 2017 (Apple17): Algorithms 1-2 (CMS client and server), 3-4 (HCMS); research note D;
lecture 004 (deployments of local DP).

Both use ``k`` public hash functions ``h_1..h_k`` into ``[m]``
(:class:`~dpcurator.local._hashing.HashFunctions`). A device with value ``x`` picks a row
``J`` uniformly in ``[k]`` and sends

- **CMS**: ``(ṽ, J)``, where ``v ∈ {-1, +1}^m`` is ``+1`` only at ``h_J(x)`` and each coordinate
  of ``v`` is flipped independently with probability ``r = 1 / (1 + e^{ε/2})``. Two inputs
  change at most two coordinates, each by a likelihood ratio ``(1 - r) / r = e^{ε/2}``:
  ``ε``-LDP.
- **HCMS** (``m`` a power of 2): ``(w̃, J, L)`` with ``L`` uniform in ``[m]`` and
  ``w = H_m[h_J(x), L] ∈ {±1}`` (Sylvester-Hadamard matrix) flipped with probability
  ``r = 1 / (1 + e^ε)``: one bit, ratio ``(1 - r) / r = e^ε``: ``ε``-LDP.

The flip probability is a rational at least the stated one (rounded up to a multiple of
``2**-52``, so at least as private) and every draw is exact (:mod:`dpcurator.noise`); the events
report the epsilon actually achieved, ``2 ln((1-r)/r)`` and ``ln((1-r)/r)``.

Server (Apple17, Algorithms 2 and 4): a ``k × m`` matrix ``M`` with
``E[M[l, u]] = k · #{reports of row l whose value hashes to u}``: CMS adds
``k (c ṽ / 2 + 1/2)`` to row ``J``, ``c = 1/(1 - 2r)``; HCMS adds ``k c w̃`` at ``(J, L)`` and
multiplies by ``H_m`` at the end. The estimate of the count of ``x`` is

.. math::

    \hat n_x = \frac{m}{m - 1}\Big(\frac1k \sum_{l} M[l, h_l(x)] - \frac{n}{m}\Big).

Accuracy (derived here from the protocol, for hash functions drawn fully at random; the
mechanism parts agree with research note D and Apple17's appendix). Let ``α = m/(m-1)``,
``F_2 = Σ_y n_y²`` and ``π_y = (1/k) #{l : h_l(y) = h_l(x)}``. Then ``E[n̂_x] = n_x`` and

.. math::

    \mathrm{Var}[\hat n_x] = \alpha^2\Big[n A - n_x B + (n - n_x) C
        + (F_2 - n_x^2) \frac{(1 - 1/m)}{k m}\Big],

with ``A = (c² - 1)/4``, ``B = 0``, ``C = (1/m)(1 - 1/m)(1 - 1/k)`` for CMS and ``A = c²``,
``B = 1``, ``C = -(1/m² + (1 - 1/m)/(k m))`` for HCMS. The last term is the variance, over the
hash draw, of collisions with other values; with *fixed* hash functions it is a bias instead,
``α Σ_{y≠x} n_y (π_y - 1/m)``, and the variance is
``α²[n A + Σ_y n_y g(π_y)]`` with ``g(π) = π(1 - π)`` (CMS) or ``-π²`` (HCMS)
(:meth:`CountMeanSketch.fixed_hash_moments`). Choose ``m`` well above the number of heavy
values.

Examples
--------
>>> import numpy as np
>>> from dpcurator.noise import InsecureSeededSource
>>> from dpcurator.local._sketch import HadamardCountMeanSketch
>>> hcms = HadamardCountMeanSketch(epsilon=2.0, domain_size=10, num_hashes=16, width=256)
>>> values = np.repeat(np.arange(10), [40000, 20000, 10000, 5000] + [1000] * 6)
>>> est = hcms.estimate(values, source=InsecureSeededSource(3))
>>> bool(abs(est.counts[0] - 40000) < 4 * est.std[0])
True
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
from numpy.typing import NDArray

from dpcurator._validation import check_epsilon, check_integer
from dpcurator.accounting import PrivacyEvent, PureDPEvent
from dpcurator.errors import InvalidParameterError, UnsupportedError
from dpcurator.local._hashing import HashFunctions, fingerprint
from dpcurator.local._protocol import FrequencyEstimate, check_values
from dpcurator.local._rappor import sum_bits_by_group
from dpcurator.noise import RandomSource, bernoulli, resolve_source, uniform_integers

__all__ = [
    "CountMeanSketch",
    "CountMeanSketchReports",
    "HadamardCountMeanSketch",
    "HadamardSketchReports",
    "Sketch",
]

_DENOMINATOR_BITS = 52
_MARGIN = Fraction(2**40 + 1, 2**40)
"""Relative safety margin on the float evaluation of ``1 / (1 + e^x)`` (a few ulps)."""
_CHUNK_CELLS = 1 << 22
_MAX_PAIRS = 1 << 24
"""Largest ``d * d`` block held at once by :meth:`fixed_hash_moments`."""


def flip_probability(exponent: float) -> Fraction:
    """Smallest multiple of ``2**-52`` that is ``>= 1 / (1 + e^exponent)`` (guaranteed).

    Flipping with a larger probability is more private, so the randomiser's likelihood ratio
    ``(1 - r) / r`` is at most ``e^exponent``.

    Examples
    --------
    >>> import math
    >>> from dpcurator.local._sketch import flip_probability
    >>> r = flip_probability(1.0)
    >>> bool(r >= 1 / (1 + math.e)), float(r - 1 / (1 + math.e)) < 1e-12
    (True, True)
    """
    r_float = 0.0 if exponent > 700.0 else 1.0 / (1.0 + math.exp(exponent))
    scale = 2**_DENOMINATOR_BITS
    numerator = max(1, math.ceil(Fraction(r_float) * _MARGIN * scale))
    return Fraction(numerator, scale)


def _log_ratio_up(r: Fraction) -> float:
    """``ln((1 - r) / r)`` rounded up (an event never understates epsilon)."""
    return math.nextafter(math.log((1 - r) / r), math.inf)


# --------------------------------------------------------------------------------------------
# reports and the sketch


@dataclass(frozen=True, slots=True, eq=False)
class CountMeanSketchReports:
    """CMS reports: the noisy ``±1`` vectors (packed, bit 1 for ``+1``) and the rows picked.

    Attributes
    ----------
    bits : numpy.ndarray of uint8
        Shape ``(n, ceil(m / 8))``, ``numpy.packbits(..., axis=1, bitorder="little")``.
    rows : numpy.ndarray of int64
        Shape ``(n,)``: the hash function ``J`` each device used.
    width : int
        ``m``.

    Examples
    --------
    >>> from dpcurator.noise import InsecureSeededSource
    >>> from dpcurator.local._sketch import CountMeanSketch
    >>> cms = CountMeanSketch(epsilon=1.0, num_hashes=4, width=16)
    >>> reports = cms.privatize(["a", "b"], source=InsecureSeededSource(0))
    >>> len(reports), reports.bits.shape, reports.width
    (2, (2, 2), 16)
    """

    bits: NDArray[np.uint8]
    rows: NDArray[np.int64]
    width: int

    def __len__(self) -> int:
        return int(self.rows.size)

    def vectors(self) -> NDArray[np.int8]:
        """Return the reports as ``±1`` vectors, shape ``(n, m)``.

        Examples
        --------
        >>> import numpy as np
        >>> from dpcurator.local._sketch import CountMeanSketchReports
        >>> bits = np.packbits([[1, 0, 0, 1]], axis=1, bitorder="little")
        >>> CountMeanSketchReports(bits, np.array([0]), 4).vectors().tolist()
        [[1, -1, -1, 1]]
        """
        bits = np.unpackbits(self.bits, axis=1, count=self.width, bitorder="little")
        return (2 * bits.astype(np.int8) - 1).astype(np.int8)


@dataclass(frozen=True, slots=True, eq=False)
class HadamardSketchReports:
    """HCMS reports: one noisy bit (1 for ``+1``), the row ``J`` and the column ``L``.

    Attributes
    ----------
    bits : numpy.ndarray of bool
    rows : numpy.ndarray of int64
    columns : numpy.ndarray of int64

    Examples
    --------
    >>> from dpcurator.noise import InsecureSeededSource
    >>> from dpcurator.local._sketch import HadamardCountMeanSketch
    >>> hcms = HadamardCountMeanSketch(epsilon=1.0, num_hashes=4, width=16)
    >>> reports = hcms.privatize(["a", "b", "c"], source=InsecureSeededSource(0))
    >>> len(reports), reports.bits.dtype, bool(reports.columns.max() < 16)
    (3, dtype('bool'), True)
    """

    bits: NDArray[np.bool_]
    rows: NDArray[np.int64]
    columns: NDArray[np.int64]

    def __len__(self) -> int:
        return int(self.rows.size)


@dataclass(frozen=True, slots=True, eq=False)
class Sketch:
    """The server's ``k × m`` sketch matrix ``M`` of ``n`` reports, ready to be queried.

    Attributes
    ----------
    matrix : numpy.ndarray of float64
        ``M``, shape ``(k, m)``.
    n : int
        Number of reports.
    oracle : CountMeanSketch or HadamardCountMeanSketch
        The protocol that built it (its hash functions and constants).

    Examples
    --------
    >>> from dpcurator.noise import InsecureSeededSource
    >>> from dpcurator.local._sketch import CountMeanSketch
    >>> cms = CountMeanSketch(epsilon=2.0, num_hashes=4, width=32)
    >>> sketch = cms.sketch(cms.privatize(["a"] * 100, source=InsecureSeededSource(0)))
    >>> sketch.matrix.shape, sketch.n
    ((4, 32), 100)
    """

    matrix: NDArray[np.float64]
    n: int
    oracle: _SketchProtocol

    def query(self, values: object) -> FrequencyEstimate:
        """Estimate the counts of ``values`` (any values: the domain need not be known).

        The variances leave out the collision term ``(F_2 - n_x²)(1 - 1/m)/(k m)`` (the
        other values' counts are unknown here); :meth:`CountMeanSketch.aggregate` includes it.

        Examples
        --------
        >>> from dpcurator.noise import InsecureSeededSource
        >>> from dpcurator.local._sketch import CountMeanSketch
        >>> cms = CountMeanSketch(epsilon=4.0, num_hashes=8, width=128)
        >>> values = ["tea"] * 3000 + ["coffee"] * 1000
        >>> reports = cms.privatize(values, source=InsecureSeededSource(0))
        >>> est = cms.sketch(reports).query(["tea", "coffee", "water"])
        >>> [bool(abs(c - t) < 4 * s) for c, t, s in zip(est.counts, [3000, 1000, 0], est.std)]
        [True, True, True]
        """
        return self.oracle._query(self, self.oracle._keys(values), None)

    def merge(self, other: Sketch) -> Sketch:
        """Add the sketch of another batch of reports (same protocol object).

        Examples
        --------
        >>> from dpcurator.noise import InsecureSeededSource
        >>> from dpcurator.local._sketch import HadamardCountMeanSketch
        >>> hcms = HadamardCountMeanSketch(epsilon=1.0, domain_size=4, num_hashes=2, width=8)
        >>> src = InsecureSeededSource(0)
        >>> a = hcms.sketch(hcms.privatize([0, 1], source=src))
        >>> a.merge(hcms.sketch(hcms.privatize([2], source=src))).n
        3
        """
        if other.oracle is not self.oracle:
            raise InvalidParameterError(
                "other", "<sketch of another protocol object>", "must come from the same oracle"
            )
        return Sketch(self.matrix + other.matrix, self.n + other.n, self.oracle)


# --------------------------------------------------------------------------------------------
# shared part of the two protocols


class _SketchProtocol(ABC):
    """Parameters, hash functions, estimator and variance shared by CMS and HCMS."""

    name = "sketch"

    def __init__(
        self,
        *,
        epsilon: float,
        domain_size: int | None,
        num_hashes: int,
        width: int,
        hash_seed: int,
    ) -> None:
        self.epsilon = check_epsilon(epsilon)
        self.domain_size = (
            None if domain_size is None else check_integer(domain_size, "domain_size", minimum=2)
        )
        self.num_hashes = check_integer(num_hashes, "num_hashes", minimum=1)
        self.width = check_integer(width, "width", minimum=2)
        if self.width > 2**24:
            raise InvalidParameterError("width", width, "must be <= 2**24")
        self.hash_seed = check_integer(hash_seed, "hash_seed")
        self.hashes = HashFunctions.from_seed(
            self.hash_seed, count=self.num_hashes, num_buckets=self.width
        )
        self.flip_probability = self._flip()
        if self.flip_probability >= Fraction(1, 2):
            raise InvalidParameterError(
                "epsilon", epsilon, "is too small for an exact flip probability (use >= 1e-9)"
            )
        self.debias = 1 / (1 - 2 * self.flip_probability)  # c = 1 / (1 - 2r), exact

    @abstractmethod
    def _flip(self) -> Fraction:
        """Return the rational flip probability ``r``."""

    @property
    @abstractmethod
    def achieved_epsilon(self) -> float:
        """The epsilon of the rational flip probability actually used (``<= epsilon``)."""

    @property
    def event(self) -> PrivacyEvent:
        """The privacy event of one report by one device (pure DP, achieved epsilon)."""
        return PureDPEvent(self.achieved_epsilon)

    # constants of the variance formula (module docstring)
    @property
    @abstractmethod
    def _a(self) -> float: ...

    @property
    @abstractmethod
    def _b(self) -> float: ...

    @property
    @abstractmethod
    def _c(self) -> float: ...

    @staticmethod
    @abstractmethod
    def _g(pi: NDArray[np.float64]) -> NDArray[np.float64]: ...

    @property
    def _collision(self) -> float:
        m = self.width
        return (1 - 1 / m) / (self.num_hashes * m)

    @property
    def _alpha(self) -> float:
        return self.width / (self.width - 1)

    def _keys(self, values: object) -> NDArray[np.uint64]:
        if self.domain_size is None:
            return fingerprint(values)
        return check_values(values, self.domain_size).view(np.uint64)

    @abstractmethod
    def privatize(
        self, values: object, *, source: RandomSource | None = None
    ) -> CountMeanSketchReports | HadamardSketchReports:
        """Randomise each device's value (client side)."""

    @abstractmethod
    def sketch(self, reports: object) -> Sketch:
        """Accumulate reports into the sketch matrix (server side)."""

    def _query(
        self, sk: Sketch, keys: NDArray[np.uint64], second_moment: float | None
    ) -> FrequencyEstimate:
        k, m, n = self.num_hashes, self.width, sk.n
        positions = self.hashes.hash_all(keys)  # (k, M)
        total = sk.matrix[np.arange(k)[:, None], positions].sum(axis=0) / k
        counts = self._alpha * (total - n / m)
        plug = np.clip(counts, 0.0, float(n))
        var = self._alpha**2 * (n * self._a - plug * self._b + (n - plug) * self._c)
        if second_moment is not None:
            var += self._alpha**2 * self._collision * np.clip(second_moment - plug**2, 0.0, None)
        return FrequencyEstimate(counts, np.clip(var, 0.0, None), n)

    def aggregate(self, reports: object) -> FrequencyEstimate:
        """Estimate the count of every domain value (needs ``domain_size``).

        The variances include the hash-collision term, with ``F_2`` estimated by
        ``max(0, Σ n̂_y² - Σ Var*)``.

        Raises
        ------
        UnsupportedError
            Without ``domain_size``: use ``sketch(reports).query(values)``.

        Examples
        --------
        >>> from dpcurator.noise import InsecureSeededSource
        >>> from dpcurator.local._sketch import HadamardCountMeanSketch
        >>> hcms = HadamardCountMeanSketch(epsilon=2.0, domain_size=3, num_hashes=8, width=64)
        >>> est = hcms.aggregate(hcms.privatize([0] * 5000, source=InsecureSeededSource(1)))
        >>> est.counts.shape, bool(abs(est.counts[0] - 5000) < 4 * est.std[0])
        ((3,), True)
        """
        if self.domain_size is None:
            raise UnsupportedError(
                f"{type(self).__name__} without domain_size cannot enumerate its domain; "
                "use sketch(reports).query(values) for the values of interest"
            )
        sk = reports if isinstance(reports, Sketch) else self.sketch(reports)
        keys = np.arange(self.domain_size, dtype=np.uint64)
        first = self._query(sk, keys, None)
        var_star = self._alpha**2 * sk.n * (self._a + self._c)
        f2 = max(0.0, float(first.counts @ first.counts) - self.domain_size * var_star)
        return self._query(sk, keys, f2)

    def estimate(self, values: object, *, source: RandomSource | None = None) -> FrequencyEstimate:
        """Simulate: privatize every value, then aggregate (needs ``domain_size``).

        Examples
        --------
        >>> from dpcurator.noise import InsecureSeededSource
        >>> from dpcurator.local._sketch import CountMeanSketch
        >>> cms = CountMeanSketch(epsilon=2.0, domain_size=4, num_hashes=8, width=64)
        >>> cms.estimate([0, 1, 1, 3], source=InsecureSeededSource(0)).n
        4
        """
        return self.aggregate(self.privatize(values, source=source))

    def variance(self, n: int, counts: NDArray[np.float64] | None = None) -> NDArray[np.float64]:
        """Variance of each count estimate over the mechanism and a random draw of the hashes.

        The formula of the module docstring. Without ``counts``, ``Var* = α²n(A + C)`` (the
        count-dependent terms dropped), one value; with ``counts`` (over the whole domain, so
        that ``F_2`` is known), the exact variance of each value.

        Examples
        --------
        >>> import numpy as np
        >>> from dpcurator.local._sketch import CountMeanSketch
        >>> cms = CountMeanSketch(epsilon=2.0, domain_size=3, num_hashes=4, width=64)
        >>> v = cms.variance(1000, np.array([700.0, 300.0, 0.0]))
        >>> v.shape, bool(v[0] > cms.variance(1000)[0] - 1e-9)
        ((3,), True)
        """
        size = check_integer(n, "n", minimum=1)
        if counts is None:
            return np.atleast_1d(self._alpha**2 * size * (self._a + self._c))
        nx = np.asarray(counts, dtype=np.float64).reshape(-1)
        f2 = float(nx @ nx)
        return self._alpha**2 * (
            size * self._a - nx * self._b + (size - nx) * self._c + (f2 - nx**2) * self._collision
        )

    def fixed_hash_moments(
        self, counts: NDArray[np.float64] | NDArray[np.int64]
    ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """Exact bias and variance of each estimate at *these* hash functions.

        For true counts ``n_y`` over the whole domain: bias ``α Σ_{y≠x} n_y (π_xy - 1/m)`` and
        variance ``α²[n A + Σ_y n_y g(π_xy)]``, with ``π_xy`` the share of the ``k`` functions
        under which ``x`` and ``y`` collide (module docstring). The randomness is the devices'
        rows, columns and flips only.

        Returns
        -------
        tuple of numpy.ndarray
            ``(bias, variance)``, one entry per domain value.

        Examples
        --------
        >>> import numpy as np
        >>> from dpcurator.local._sketch import CountMeanSketch
        >>> cms = CountMeanSketch(epsilon=2.0, domain_size=3, num_hashes=4, width=64)
        >>> bias, var = cms.fixed_hash_moments(np.array([700, 300, 0]))
        >>> bias.shape, bool((var > 0).all())
        ((3,), True)
        """
        if self.domain_size is None:
            raise UnsupportedError("fixed_hash_moments needs a protocol with a domain_size")
        nx = np.asarray(counts, dtype=np.float64).reshape(-1)
        d = self.domain_size
        if nx.size != d:
            raise InvalidParameterError(
                "counts", f"<{nx.size} counts>", f"must hold one count per value ({d})"
            )
        n = float(nx.sum())
        positions = self.hashes.hash_all(np.arange(d, dtype=np.uint64))  # (k, d)
        bias = np.empty(d)
        spread = np.empty(d)
        block = max(1, _MAX_PAIRS // d)
        for start in range(0, d, block):
            stop = min(d, start + block)
            pi = (positions[:, start:stop, None] == positions[:, None, :]).mean(axis=0)
            bias[start:stop] = pi @ nx - nx[start:stop] - (n - nx[start:stop]) / self.width
            spread[start:stop] = self._g(pi) @ nx
        return self._alpha * bias, self._alpha**2 * (n * self._a + spread)

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(epsilon={self.epsilon:g}, domain_size={self.domain_size}, "
            f"num_hashes={self.num_hashes}, width={self.width})"
        )


def _count_cells(
    rows: NDArray[np.int64],
    cols: NDArray[np.int64],
    weights: NDArray[np.float64] | None,
    k: int,
    m: int,
) -> NDArray[np.float64]:
    cells = rows * m + cols
    return np.bincount(cells, weights=weights, minlength=k * m).astype(np.float64).reshape(k, m)


# --------------------------------------------------------------------------------------------
# CMS


class CountMeanSketch(_SketchProtocol):
    r"""Apple's count-mean sketch: ``ε``-LDP ``m``-bit reports (Apple17, Algorithms 1-2).

    Follows the :class:`~dpcurator.local.FrequencyOracle` interface (``privatize``,
    ``aggregate``, ``variance``, ``estimate``, ``event``), and also works without a known
    domain: values are then any strings, bytes or integers (fingerprinted to 64-bit keys), and
    ``sketch(reports).query(values)`` estimates the counts of the values asked for.

    Guarantee: for any two values ``x, x'`` and any report ``(ṽ, j)``,
    ``P[(ṽ, j) | x] <= e^ε P[(ṽ, j) | x']`` with ``ε = 2 ln((1-r)/r)`` (the achieved epsilon,
    at most the requested one); the neighbour relation is one device changing its value.

    Parameters
    ----------
    epsilon : float
        Privacy of one report, > 0.
    domain_size : int or None
        ``d >= 2`` for values in ``{0, ..., d-1}``; ``None`` for hashed values.
    num_hashes : int
        ``k >= 1``.
    width : int
        ``m >= 2`` (sketch columns and report length).
    hash_seed : int
        Seed of the public hash functions.

    Examples
    --------
    >>> import numpy as np
    >>> from dpcurator.noise import InsecureSeededSource
    >>> from dpcurator.local._sketch import CountMeanSketch
    >>> cms = CountMeanSketch(epsilon=4.0, domain_size=8, num_hashes=16, width=64)
    >>> est = cms.estimate(np.repeat(np.arange(8), 1000), source=InsecureSeededSource(1))
    >>> bool((np.abs(est.counts - 1000) < 4 * est.std).all())
    True
    >>> round(cms.event.epsilon, 6) <= 4.0
    True
    """

    name = "cms"

    def __init__(
        self,
        *,
        epsilon: float,
        domain_size: int | None = None,
        num_hashes: int = 64,
        width: int = 1024,
        hash_seed: int = 0,
    ) -> None:
        super().__init__(
            epsilon=epsilon,
            domain_size=domain_size,
            num_hashes=num_hashes,
            width=width,
            hash_seed=hash_seed,
        )

    def _flip(self) -> Fraction:
        return flip_probability(self.epsilon / 2)

    @property
    def achieved_epsilon(self) -> float:
        """``2 ln((1 - r) / r)`` for the rational flip probability ``r`` used.

        Examples
        --------
        >>> from dpcurator.local._sketch import CountMeanSketch
        >>> 2.0 - 1e-9 < CountMeanSketch(epsilon=2.0).achieved_epsilon <= 2.0
        True
        """
        return 2 * _log_ratio_up(self.flip_probability)

    @property
    def _a(self) -> float:
        c = float(self.debias)
        return (c * c - 1) / 4

    @property
    def _b(self) -> float:
        return 0.0

    @property
    def _c(self) -> float:
        m, k = self.width, self.num_hashes
        return (1 / m) * (1 - 1 / m) * (1 - 1 / k)

    @staticmethod
    def _g(pi: NDArray[np.float64]) -> NDArray[np.float64]:
        return pi * (1 - pi)

    def privatize(
        self, values: object, *, source: RandomSource | None = None
    ) -> CountMeanSketchReports:
        """Randomise each device's value into ``(ṽ, J)`` (Apple17, Algorithm 1), vectorised.

        Examples
        --------
        >>> from dpcurator.noise import InsecureSeededSource
        >>> from dpcurator.local._sketch import CountMeanSketch
        >>> cms = CountMeanSketch(epsilon=1.0, num_hashes=4, width=16)
        >>> reports = cms.privatize(["a", "b", "a"], source=InsecureSeededSource(0))
        >>> reports.vectors().shape, reports.rows.shape
        ((3, 16), (3,))
        """
        src = resolve_source(source)
        keys = self._keys(values)
        n, m = keys.size, self.width
        rows = uniform_integers(self.num_hashes, n, source=src)
        positions = self.hashes(keys, rows)
        out = np.empty((n, (m + 7) // 8), dtype=np.uint8)
        chunk = max(1, _CHUNK_CELLS // m)
        for start in range(0, n, chunk):
            stop = min(n, start + chunk)
            bits = bernoulli(self.flip_probability, (stop - start, m), source=src)
            bits[np.arange(stop - start), positions[start:stop]] ^= True  # +1 at h_J(x)
            out[start:stop] = np.packbits(bits, axis=1, bitorder="little")
        return CountMeanSketchReports(out, rows, m)

    def sketch(self, reports: object) -> Sketch:
        """Accumulate ``M[J] += k (c ṽ / 2 + 1/2)`` over the reports (Apple17, Algorithm 2).

        Examples
        --------
        >>> from dpcurator.noise import InsecureSeededSource
        >>> from dpcurator.local._sketch import CountMeanSketch
        >>> cms = CountMeanSketch(epsilon=1.0, num_hashes=4, width=16)
        >>> cms.sketch(cms.privatize(["a"] * 5, source=InsecureSeededSource(0))).matrix.shape
        (4, 16)
        """
        if not isinstance(reports, CountMeanSketchReports) or reports.width != self.width:
            raise InvalidParameterError(
                "reports",
                type(reports).__name__,
                f"must be CountMeanSketchReports of width {self.width} (from privatize)",
            )
        k, m = self.num_hashes, self.width
        rows = reports.rows
        ones = sum_bits_by_group(reports.bits, rows, k, m)
        per_row = np.bincount(rows, minlength=k).astype(np.float64)[:, None]
        c = float(self.debias)
        matrix = k * (c * (ones - per_row / 2) + per_row / 2)
        return Sketch(matrix, len(reports), self)


# --------------------------------------------------------------------------------------------
# HCMS


def hadamard_transform(x: NDArray[np.float64]) -> NDArray[np.float64]:
    """Multiply each row of ``x`` by the Sylvester-Hadamard matrix ``H_m`` (fast, O(m log m)).

    ``H_m[a, b] = (-1)^{popcount(a & b)}``; ``m`` must be a power of 2.

    Examples
    --------
    >>> import numpy as np
    >>> from dpcurator.local._sketch import hadamard_transform
    >>> hadamard_transform(np.array([[1.0, 0.0, 0.0, 0.0], [0.0, 1.0, 0.0, 0.0]])).tolist()
    [[1.0, 1.0, 1.0, 1.0], [1.0, -1.0, 1.0, -1.0]]
    """
    rows, m = x.shape
    if m & (m - 1):
        raise InvalidParameterError("x", f"<{m} columns>", "must have a power-of-2 width")
    y = np.array(x, dtype=np.float64)
    h = 1
    while h < m:
        y = y.reshape(rows, m // (2 * h), 2, h)
        a = y[:, :, 0, :]
        b = y[:, :, 1, :]
        y = np.stack((a + b, a - b), axis=2)
        h *= 2
    return y.reshape(rows, m)


class HadamardCountMeanSketch(_SketchProtocol):
    r"""Apple's Hadamard count-mean sketch: one ``ε``-LDP bit per report (Apple17, Alg. 3-4).

    Same interface as :class:`CountMeanSketch`. Guarantee: for any two values and any report
    ``(w̃, j, l)``, the likelihood ratio is at most ``(1-r)/r = e^ε`` (achieved epsilon); the
    neighbour relation is one device changing its value.

    Parameters
    ----------
    epsilon : float
        Privacy of one report, > 0.
    domain_size : int or None
        ``d >= 2`` for values in ``{0, ..., d-1}``; ``None`` for hashed values.
    num_hashes : int
        ``k >= 1``.
    width : int
        ``m``, a power of 2, ``>= 2``.
    hash_seed : int
        Seed of the public hash functions.

    Examples
    --------
    >>> from dpcurator.local._sketch import HadamardCountMeanSketch
    >>> hcms = HadamardCountMeanSketch(epsilon=1.0, domain_size=100, num_hashes=8, width=64)
    >>> 1.0 - 1e-9 < hcms.event.epsilon <= 1.0
    True
    """

    name = "hcms"

    def __init__(
        self,
        *,
        epsilon: float,
        domain_size: int | None = None,
        num_hashes: int = 64,
        width: int = 1024,
        hash_seed: int = 0,
    ) -> None:
        m = check_integer(width, "width", minimum=2)
        if m & (m - 1):
            raise InvalidParameterError("width", width, "must be a power of 2")
        super().__init__(
            epsilon=epsilon,
            domain_size=domain_size,
            num_hashes=num_hashes,
            width=m,
            hash_seed=hash_seed,
        )

    def _flip(self) -> Fraction:
        return flip_probability(self.epsilon)

    @property
    def achieved_epsilon(self) -> float:
        """``ln((1 - r) / r)`` for the rational flip probability ``r`` used.

        Examples
        --------
        >>> from dpcurator.local._sketch import HadamardCountMeanSketch
        >>> 2.0 - 1e-9 < HadamardCountMeanSketch(epsilon=2.0).achieved_epsilon <= 2.0
        True
        """
        return _log_ratio_up(self.flip_probability)

    @property
    def _a(self) -> float:
        c = float(self.debias)
        return c * c

    @property
    def _b(self) -> float:
        return 1.0

    @property
    def _c(self) -> float:
        m, k = self.width, self.num_hashes
        return -(1 / m**2 + (1 / m) * (1 - 1 / m) / k)

    @staticmethod
    def _g(pi: NDArray[np.float64]) -> NDArray[np.float64]:
        return -(pi * pi)

    def privatize(
        self, values: object, *, source: RandomSource | None = None
    ) -> HadamardSketchReports:
        """Randomise each device's value into ``(w̃, J, L)`` (Apple17, Algorithm 3), vectorised.

        Examples
        --------
        >>> from dpcurator.noise import InsecureSeededSource
        >>> from dpcurator.local._sketch import HadamardCountMeanSketch
        >>> hcms = HadamardCountMeanSketch(epsilon=1.0, num_hashes=4, width=16)
        >>> len(hcms.privatize(["a", "b"], source=InsecureSeededSource(0)))
        2
        """
        src = resolve_source(source)
        keys = self._keys(values)
        n = keys.size
        rows = uniform_integers(self.num_hashes, n, source=src)
        columns = uniform_integers(self.width, n, source=src)
        positions = self.hashes(keys, rows)
        parity = positions & columns  # H[h_J(x), L] = (-1)^popcount(h_J(x) & L)
        for shift in (16, 8, 4, 2, 1):  # m <= 2**24: fold the parity into the lowest bit
            parity ^= parity >> shift
        plus = (parity & 1) == 0
        flips = bernoulli(self.flip_probability, n, source=src)
        return HadamardSketchReports(plus ^ flips, rows, columns)

    def sketch(self, reports: object) -> Sketch:
        """Accumulate ``M_H[J, L] += k c w̃``, then ``M = M_H H_m`` (Apple17, Algorithm 4).

        Examples
        --------
        >>> from dpcurator.noise import InsecureSeededSource
        >>> from dpcurator.local._sketch import HadamardCountMeanSketch
        >>> hcms = HadamardCountMeanSketch(epsilon=1.0, num_hashes=4, width=16)
        >>> hcms.sketch(hcms.privatize(["a"] * 5, source=InsecureSeededSource(0))).n
        5
        """
        if not isinstance(reports, HadamardSketchReports):
            raise InvalidParameterError(
                "reports", type(reports).__name__, "must be HadamardSketchReports (from privatize)"
            )
        k, m = self.num_hashes, self.width
        signs = 2.0 * reports.bits.astype(np.float64) - 1.0
        sums = _count_cells(reports.rows, reports.columns, signs, k, m)
        matrix = hadamard_transform(k * float(self.debias) * sums)
        return Sketch(matrix, len(reports), self)
