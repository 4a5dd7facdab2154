r"""Local hashing: optimised (OLH) and binary (BLH) local hashing, Wang et al. 2017.

Each device draws its own hash function ``H`` from a universal family, hashes its value into
``[0, g)`` and reports ``(H, y)`` with ``y`` the hashed value perturbed by generalised randomized
response over ``g`` buckets. The server counts, for each value ``v``, the reports whose hash of
``v`` equals their ``y`` (the reports that *support* ``v``), and debiases.

The hash family here is Carter and Wegman's, modulo the Mersenne prime ``P = 2**31 - 1``:

.. math:: H_{a,b}(v) = \left\lfloor \frac{((a v + b) \bmod P)\, g}{2^{31}} \right\rfloor,
    \qquad a \in [1, P),\ b \in [0, P),

so one seed ``s = (a - 1) P + b`` (a uniform integer below ``(P - 1) P < 2**62``, drawn from
:mod:`dpcurator.noise`) names the function. For two distinct values ``v, v' < P`` the pair
``((a v + b) mod P, (a v' + b) mod P)`` is uniform over the ``P (P - 1)`` pairs of *distinct*
residues (the map ``(a, b) -> (a v + b, a v' + b)`` is a bijection onto them), so the collision
probability ``kappa = P[H(v) = H(v')]`` is known exactly (:func:`collision_probability`,
``1/g`` up to ``g / 2**31``) and the estimator below is exactly unbiased, not only up to the
family's imperfection. The hash is public and deterministic: privacy comes only from the
randomized response on ``y`` (and holds for any fixed hash function).

Aggregation costs ``O(n d)`` hash evaluations: for each chunk of devices the residues
``a v + b mod P`` are advanced one value at a time with 32-bit additions, and compared with each
device's bucket interval, so one (device, value) pair costs a handful of vectorised 32-bit
operations.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import ClassVar, NamedTuple

import numpy as np
from numpy.typing import NDArray

from dpcurator._validation import check_integer
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
from dpcurator.mechanisms import randomized_response
from dpcurator.noise import RandomSource, resolve_source, uniform_integers

__all__ = ["LocalHashReports", "OptimizedLocalHashing", "collision_probability"]

PRIME = 2**31 - 1
"""The Mersenne prime of the hash family; domain values must lie below it."""

SEED_COUNT = (PRIME - 1) * PRIME
"""Number of hash functions in the family (seeds are uniform on ``[0, SEED_COUNT)``)."""

_SHIFT = 31
_CHUNK = 1 << 15
"""Devices aggregated at once (a few 128 KiB arrays of 32-bit integers: cache resident)."""


class LocalHashReports(NamedTuple):
    """Reports of local hashing: each device's hash seed and perturbed bucket.

    Attributes
    ----------
    seeds : numpy.ndarray of int64
        The seed ``s = (a - 1) P + b`` of each device's hash function, in ``[0, SEED_COUNT)``.
    values : numpy.ndarray of int64
        The perturbed hashed value ``y`` in ``[0, g)`` of each device.
    """

    seeds: NDArray[np.int64]
    values: NDArray[np.int64]


def collision_probability(g: int, bits: int = _SHIFT) -> Fraction:
    """Exact ``P[H(v) = H(v')]`` for ``v != v'`` over the family with ``P = 2**bits - 1``.

    Bucket ``y`` holds the residues ``z`` in ``[ceil(y 2**bits / g), ceil((y+1) 2**bits / g))``
    below ``P``; the residues of two distinct values are a uniform pair of distinct residues, so
    ``kappa = sum_y c_y (c_y - 1) / (P (P - 1))`` with ``c_y`` the bucket sizes. Over
    ``[0, 2**bits)`` the sizes are ``m = floor(2**bits / g)`` (``g - r`` buckets) and ``m + 1``
    (``r = 2**bits mod g`` buckets); the last bucket loses the residue ``2**bits - 1 = P``.

    Parameters
    ----------
    g : int
        Number of buckets, ``2 <= g < 2**bits``.
    bits : int, default 31
        ``P = 2**bits - 1`` (31 in the protocol; smaller values only serve tests).

    Returns
    -------
    fractions.Fraction

    Examples
    --------
    >>> from dpcurator.local._olh import collision_probability
    >>> kappa = collision_probability(4)
    >>> abs(float(kappa) - 1 / 4) < 1e-9
    True
    """
    buckets = check_integer(g, "g", minimum=2)
    width = check_integer(bits, "bits", minimum=2)
    full = 2**width
    if buckets >= full - 1:
        raise InvalidParameterError("g", g, f"must be < 2**{width} - 1")
    prime = full - 1
    m, r = divmod(full, buckets)
    total = r * (m + 1) * m + (buckets - r) * m * (m - 1)
    last = full - -(-(buckets - 1) * full // buckets)  # size of bucket g-1 over [0, 2**bits)
    total -= 2 * (last - 1)  # the residue 2**bits - 1 is not below P
    return Fraction(total, prime * (prime - 1))


def _split_seeds(seeds: NDArray[np.int64]) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    return seeds // PRIME + 1, seeds % PRIME


class OptimizedLocalHashing(FrequencyOracle):
    r"""Optimised local hashing (OLH); binary local hashing (BLH) with ``g = 2``.

    Each device draws a hash function ``H`` (its seed, uniform, from :mod:`dpcurator.noise`),
    and reports ``(H, y)`` where ``y = H(v)`` with probability ``p = e^eps / (e^eps + g - 1)``
    and each other bucket with probability ``q_g = (1 - p)/(g - 1)`` (generalised randomized
    response over ``[0, g)``, :func:`dpcurator.mechanisms.randomized_response`). For any two
    inputs ``v, v'`` and any report ``(H, y)``

    .. math:: P[(H, y) \mid v] = P[H]\, P[y \mid H(v)] \le P[H]\, \frac{p}{q_g} P[y \mid H(v')]
        = e^\epsilon P[(H, y) \mid v'],

    epsilon-LDP (one device changing its value); ``1 - p`` is rounded *up* to a multiple of
    ``2**-52`` (at least as private; :attr:`event` reports the ``p`` used).

    **Report**: a 62-bit seed and ``y`` (``log2 g`` bits). **Estimator**: ``C_v`` counts the
    reports with ``H(v) = y``; a device holding ``v`` supports ``v`` with probability ``p``, any
    other with ``q = p kappa + q_g (1 - kappa)`` (``kappa``: the exact collision probability of
    the family, about ``1/g``), so ``c_v = (C_v - n q)/(p - q)`` is unbiased, with exact variance

    .. math:: \mathrm{Var}[c_v] = n \frac{q(1 - q)}{(p - q)^2} + n_v \frac{1 - p - q}{p - q},
        \qquad \mathrm{Var}^* \approx n \frac{(e^\epsilon - 1 + g)^2}{(e^\epsilon - 1)^2 (g - 1)},

    minimised by ``g = e^eps + 1`` (then ``4 n e^eps / (e^eps - 1)^2``, as OUE). Decoding costs
    ``O(n d)``.

    Parameters
    ----------
    epsilon : float
        Privacy of one report, > 0.
    domain_size : int
        ``2 <= d < 2**31 - 1``.
    g : int, optional
        Number of hash buckets, ``2 <= g < 2**31 - 1``; default ``round(e^eps + 1)`` (OLH).
        ``g = 2`` is binary local hashing (BLH).

    Attributes
    ----------
    g : int
        Number of buckets.
    p, q : fractions.Fraction
        Exact probabilities that a report supports ``v`` when the input is ``v``, and when it is
        another value.
    collision_probability : fractions.Fraction
        ``kappa``, exact.

    References
    ----------
    T. Wang, J. Blocki, N. Li, S. Jha, "Locally Differentially Private Protocols for Frequency
    Estimation", USENIX Security 2017, Section 4.4 (BLH, OLH) and Theorem 2. J. L. Carter,
    M. N. Wegman, "Universal classes of hash functions", JCSS 1979. Research note D.

    Examples
    --------
    >>> from dpcurator.local._olh import OptimizedLocalHashing
    >>> from dpcurator.noise import InsecureSeededSource
    >>> olh = OptimizedLocalHashing(epsilon=1.0, domain_size=50)
    >>> olh.g
    4
    >>> est = olh.estimate([3] * 4000 + [7] * 1000, source=InsecureSeededSource(0))
    >>> bool(abs(est.counts[3] - 4000) < 4 * est.std[3])
    True
    """

    name: ClassVar[str] = "olh"

    def __init__(self, epsilon: float, domain_size: int, g: int | None = None) -> None:
        super().__init__(epsilon=epsilon, domain_size=domain_size)
        if self.domain_size >= PRIME:
            raise InvalidParameterError("domain_size", domain_size, "must be < 2**31 - 1")
        if g is None:
            e = exp_or_inf(self.epsilon)
            buckets = min(round(e + 1.0), PRIME - 1) if math.isfinite(e) else PRIME - 1
        else:
            buckets = check_integer(g, "g", minimum=2)
            if buckets >= PRIME:
                raise InvalidParameterError("g", g, "must be < 2**31 - 1")
        self.g: int = max(2, buckets)
        lie = round_up_probability(
            (self.g - 1) / (exp_or_inf(self.epsilon) + self.g - 1),
            Fraction(self.g - 1, self.g),
            self.epsilon,
        )
        self.p: Fraction = 1 - lie
        self.q_bucket: Fraction = lie / (self.g - 1)
        self.collision_probability: Fraction = collision_probability(self.g)
        kappa = self.collision_probability
        self.q: Fraction = self.p * kappa + self.q_bucket * (1 - kappa)

    @property
    def event(self) -> PrivacyEvent:
        """Randomized response over ``g`` buckets with the ``p`` used.

        Given the (data-independent) hash, a report is GRR over ``g`` values of ``H(v)``: either
        ``H(v) = H(v')`` (no loss) or the GRR pair, so each report is dominated by
        ``RandomizedResponseEvent(p, g)``.
        """
        return RandomizedResponseEvent(p_truth=float_at_least(self.p), categories=self.g)

    def hash(self, seeds: object, values: object) -> NDArray[np.int64]:
        """Hash each value with the function of the matching seed: ``H_s(v)`` in ``[0, g)``.

        Examples
        --------
        >>> from dpcurator.local._olh import PRIME, OptimizedLocalHashing
        >>> olh = OptimizedLocalHashing(epsilon=1.0, domain_size=10)  # g = 4
        >>> a, b = 987654321, 12345
        >>> seed = (a - 1) * PRIME + b  # H(v) = floor(((a v + b) mod P) g / 2**31)
        >>> olh.hash([seed] * 10, range(10)).tolist()
        [0, 1, 3, 1, 3, 1, 3, 0, 2, 0]
        """
        seed_arr = self._check_seeds(seeds)
        flat = check_values(values, self.domain_size)
        if flat.size != seed_arr.size:
            raise InvalidParameterError(
                "values", f"<{flat.size} values>", f"must match the {seed_arr.size} seeds"
            )
        a, b = _split_seeds(seed_arr)
        residues = (a * flat + b) % PRIME  # a v + b < 2**62 + 2**31: no overflow
        out: NDArray[np.int64] = (residues * self.g) >> _SHIFT
        return out

    @staticmethod
    def _check_seeds(seeds: object) -> NDArray[np.int64]:
        arr = np.asarray(seeds)
        if arr.dtype == np.bool_ or arr.dtype.kind not in "iu" or arr.size == 0:
            raise InvalidParameterError(
                "seeds", f"<array of dtype {arr.dtype}>", "must be a non-empty integer array"
            )
        flat = arr.reshape(-1).astype(np.int64)
        if int(flat.min()) < 0 or int(flat.max()) >= SEED_COUNT:
            raise InvalidParameterError(
                "seeds", f"<seeds in [{flat.min()}, {flat.max()}]>", "must lie in [0, (P-1) P)"
            )
        return flat

    def report_probability(self, report: tuple[int, int], value: int) -> Fraction:
        """Exact ``P[(seed, y) | value] = P[seed] P[y | H_seed(value)]``.

        Examples
        --------
        >>> from fractions import Fraction
        >>> from dpcurator.local._olh import SEED_COUNT, OptimizedLocalHashing
        >>> olh = OptimizedLocalHashing(epsilon=1.0, domain_size=5)
        >>> seed = 987654321
        >>> total = sum(olh.report_probability((seed, y), 2) for y in range(olh.g))
        >>> total == Fraction(1, SEED_COUNT)
        True
        """
        seed, y = int(report[0]), int(report[1])
        if not 0 <= y < self.g:
            raise InvalidParameterError("report", report, f"must have y in [0, {self.g})")
        hashed = int(self.hash([seed], [int(value)])[0])
        return Fraction(1, SEED_COUNT) * (self.p if y == hashed else self.q_bucket)

    def privatize(self, values: object, *, source: RandomSource | None = None) -> LocalHashReports:
        """Draw each device's hash seed, hash its value, perturb the bucket with GRR over ``g``.

        Examples
        --------
        >>> from dpcurator.local._olh import OptimizedLocalHashing
        >>> from dpcurator.noise import InsecureSeededSource
        >>> blh = OptimizedLocalHashing(epsilon=1.0, domain_size=100, g=2)
        >>> reports = blh.privatize([5, 99, 0], source=InsecureSeededSource(0))
        >>> reports.seeds.shape, set(reports.values.tolist()) <= {0, 1}
        ((3,), True)
        """
        flat = check_values(values, self.domain_size)
        src = resolve_source(source)
        seeds = np.asarray(uniform_integers(SEED_COUNT, int(flat.size), source=src))
        hashed = self.hash(seeds, flat)
        perturbed = randomized_response(hashed, p_truth=self.p, categories=self.g, source=src)
        return LocalHashReports(seeds=seeds, values=np.asarray(perturbed.value, dtype=np.int64))

    def _check_reports(self, reports: object) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
        if not isinstance(reports, tuple) or len(reports) != 2:
            raise InvalidParameterError(
                "reports", type(reports).__name__, "must be LocalHashReports (seeds, values)"
            )
        seeds = self._check_seeds(reports[0])
        values = check_values(reports[1], self.g, "reports.values")
        if seeds.size != values.size:
            raise InvalidParameterError(
                "reports", f"<{seeds.size} seeds, {values.size} values>", "must match in length"
            )
        return seeds, values

    def support_counts(self, reports: LocalHashReports) -> NDArray[np.int64]:
        """``C_v``: the number of reports with ``H(v) = y``, for every ``v`` (``O(n d)``).

        Examples
        --------
        >>> from dpcurator.local._olh import OptimizedLocalHashing
        >>> from dpcurator.noise import InsecureSeededSource
        >>> olh = OptimizedLocalHashing(epsilon=3.0, domain_size=6)
        >>> reports = olh.privatize([1, 1, 4], source=InsecureSeededSource(5))
        >>> counts = olh.support_counts(reports)
        >>> counts.shape, bool((counts <= 3).all())
        ((6,), True)
        """
        seeds, values = self._check_reports(reports)
        d, g = self.domain_size, self.g
        supports = np.zeros(d, dtype=np.int64)
        prime = np.uint32(PRIME)
        for start in range(0, seeds.size, _CHUNK):
            a64, b64 = _split_seeds(seeds[start : start + _CHUNK])
            y = values[start : start + _CHUNK]
            low = ((y << _SHIFT) + (g - 1)) // g  # first residue of bucket y
            high = np.minimum((((y + 1) << _SHIFT) + (g - 1)) // g, PRIME)
            a = a64.astype(np.uint32)
            z = b64.astype(np.uint32)  # (a v + b) mod P at v = 0
            lo = low.astype(np.uint32)
            width = (high - low).astype(np.uint32)
            tmp = np.empty_like(z)
            hit = np.empty(z.shape, dtype=np.bool_)
            for v in range(d):
                np.subtract(z, lo, out=tmp)  # wraps: tmp < width iff lo <= z < lo + width
                np.less(tmp, width, out=hit)
                supports[v] += np.count_nonzero(hit)
                np.add(z, a, out=z)  # < 2 P < 2**32
                np.subtract(z, prime, out=tmp)
                np.minimum(z, tmp, out=z)  # z - P wraps above z when z < P
        return supports

    def aggregate(self, reports: object) -> FrequencyEstimate:
        """Count the reports supporting each value and debias them (``O(n d)``, chunked).

        Examples
        --------
        >>> from dpcurator.local._olh import OptimizedLocalHashing
        >>> from dpcurator.noise import InsecureSeededSource
        >>> olh = OptimizedLocalHashing(epsilon=2.0, domain_size=4)
        >>> est = olh.aggregate(olh.privatize([0, 1, 2, 3], source=InsecureSeededSource(1)))
        >>> est.n, est.counts.shape
        (4, (4,))
        """
        seeds, values = self._check_reports(reports)
        n = int(seeds.size)
        supports = self.support_counts(LocalHashReports(seeds, values))
        return estimate_from_supports(supports, n, self.p, self.q, self.variance)

    def variance(self, n: int, counts: NDArray[np.float64] | None = None) -> NDArray[np.float64]:
        """Exact variance of each count for ``n`` reports (``Var*`` without ``counts``).

        Examples
        --------
        >>> import math
        >>> from dpcurator.local._olh import OptimizedLocalHashing
        >>> olh = OptimizedLocalHashing(epsilon=1.0, domain_size=100, g=2)
        >>> e = math.e  # BLH: n (e^eps + 1)^2 / (e^eps - 1)^2
        >>> math.isclose(olh.variance(10)[0], 10 * (e + 1) ** 2 / (e - 1) ** 2, rel_tol=1e-8)
        True
        """
        return pure_variance(n, counts, self.p, self.q, self.domain_size)

    def __repr__(self) -> str:
        return (
            f"OptimizedLocalHashing(epsilon={self.epsilon:g}, domain_size={self.domain_size}, "
            f"g={self.g})"
        )
