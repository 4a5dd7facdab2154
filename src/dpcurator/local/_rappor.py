r"""RAPPOR: Bloom filters with permanent and instantaneous randomized response.

Ú. Erlingsson, V. Pihur, A. Korolova, "RAPPOR: Randomized Aggregatable Privacy-Preserving
Ordinal Response", CCS 2014 (EPK14); research note D; lecture 004 (deployments of local DP).

Client, for a value ``v`` of a device in cohort ``j`` (EPK14, Section 3):

1. Bloom filter ``B`` of ``k`` bits: the bits ``h_{j,1}(v), ..., h_{j,h}(v)`` are set, with ``h``
   public hash functions specific to the cohort.
2. Permanent randomized response (PRR), drawn once per device and value and memoised:
   ``B'_i = 1`` w.p. ``f/2``, ``0`` w.p. ``f/2``, ``B_i`` w.p. ``1 - f``.
3. Instantaneous randomized response (IRR), fresh for every report:
   ``S_i = 1`` w.p. ``q`` if ``B'_i = 1`` and w.p. ``p`` if ``B'_i = 0``.

Privacy (EPK14, Theorems 1 and 2). Two values' Bloom filters differ in at most ``2h`` bits, so

.. math::

    \varepsilon_\infty = 2h \ln\frac{1 - f/2}{f/2}
    \qquad\text{(PRR: all reports about one value, however many)},

    \varepsilon_1 = h \ln\frac{q^*(1 - p^*)}{p^*(1 - q^*)},\quad
    q^* = \tfrac12 f(p + q) + (1 - f) q,\quad p^* = \tfrac12 f(p + q) + (1 - f) p
    \qquad\text{(one report)},

where ``q* = P[S_i = 1 | B_i = 1]`` and ``p* = P[S_i = 1 | B_i = 0]``. Local DP: the neighbour
relation is one device changing its value. Every draw is an exact Bernoulli of the rational
``f, p, q`` (:func:`dpcurator.noise.bernoulli`).

Server (EPK14, Section 4; research note D). For cohort ``j`` with ``N_j`` reports and ``c_ij`` of
them setting bit ``i``, ``t_ij = (c_ij - p* N_j) / (q* - p*)`` is an unbiased estimate of the
number of devices of cohort ``j`` whose Bloom filter sets bit ``i`` (``q* - p* = (1-f)(q-p)``).
Candidates are decoded by regression of ``t`` on the design matrix ``X`` (rows ``(j, i)``,
columns candidates, ``X = 1`` where the candidate's Bloom filter in cohort ``j`` sets bit ``i``):
non-negative least squares selects candidates, least squares on the selected columns gives
counts and standard errors, and candidates significant at the Bonferroni level ``alpha / M``
(``M`` candidates) are reported.

Examples
--------
>>> import math
>>> from dpcurator.local._rappor import Rappor
>>> rappor = Rappor(num_bits=16, num_hashes=2, num_cohorts=4, f=0.5, p=0.5, q=0.75)
>>> round(rappor.permanent_epsilon, 2), round(rappor.report_epsilon, 2)  # lecture 004 / EPK14
(4.39, 1.07)
>>> math.isclose(rappor.permanent_epsilon, 4 * math.log(3))
True
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
from numpy.typing import NDArray
from scipy.optimize import nnls
from scipy.special import ndtr

from dpcurator._validation import check_integer, check_probability, check_rational
from dpcurator.accounting import PrivacyEvent, PureDPEvent
from dpcurator.errors import InvalidParameterError
from dpcurator.local._hashing import HashFunctions, fingerprint
from dpcurator.local._protocol import FrequencyEstimate
from dpcurator.noise import RandomSource, bernoulli, resolve_source

__all__ = ["Rappor", "RapporDecoding", "RapporReports", "RapporSummary", "sum_bits_by_group"]

_CHUNK_CELLS = 1 << 22
"""Reports are processed in chunks of about this many bits (bounded memory)."""
_HALF = Fraction(1, 2)


# --------------------------------------------------------------------------------------------
# data carried between client and server


@dataclass(frozen=True, slots=True, eq=False)
class RapporReports:
    """Reports of ``n`` devices: ``k`` bits each (packed) and each device's cohort.

    Attributes
    ----------
    bits : numpy.ndarray of uint8
        Shape ``(n, ceil(k / 8))``: the report bits packed with
        ``numpy.packbits(..., axis=1, bitorder="little")``.
    cohorts : numpy.ndarray of int64
        Shape ``(n,)``: the cohort of each report (public).
    num_bits : int
        ``k``.

    Examples
    --------
    >>> from dpcurator.noise import InsecureSeededSource
    >>> from dpcurator.local._rappor import Rappor
    >>> reports = Rappor(num_bits=12).privatize(["a", "b"], source=InsecureSeededSource(0))
    >>> len(reports), reports.bits.shape, reports.unpacked().shape
    (2, (2, 2), (2, 12))
    """

    bits: NDArray[np.uint8]
    cohorts: NDArray[np.int64]
    num_bits: int

    def __len__(self) -> int:
        return int(self.cohorts.size)

    def unpacked(self) -> NDArray[np.bool_]:
        """Return the report bits as a boolean array of shape ``(n, k)``.

        Examples
        --------
        >>> import numpy as np
        >>> from dpcurator.local._rappor import RapporReports
        >>> bits = np.packbits([[1, 0, 1]], axis=1, bitorder="little")
        >>> RapporReports(bits, np.array([0]), 3).unpacked().tolist()
        [[True, False, True]]
        """
        out = np.unpackbits(self.bits, axis=1, count=self.num_bits, bitorder="little")
        return out.astype(np.bool_)


@dataclass(frozen=True, slots=True, eq=False)
class RapporSummary:
    """The server's sufficient statistics: per cohort, how many reports set each bit.

    Attributes
    ----------
    bit_counts : numpy.ndarray of int64
        ``c_ij``, shape ``(m, k)``.
    reports_per_cohort : numpy.ndarray of int64
        ``N_j``, shape ``(m,)``.

    Examples
    --------
    >>> import numpy as np
    >>> from dpcurator.local._rappor import RapporSummary
    >>> RapporSummary(np.zeros((2, 4), dtype=np.int64), np.array([3, 4])).n
    7
    """

    bit_counts: NDArray[np.int64]
    reports_per_cohort: NDArray[np.int64]

    @property
    def n(self) -> int:
        """Total number of reports.

        Examples
        --------
        >>> import numpy as np
        >>> from dpcurator.local._rappor import RapporSummary
        >>> RapporSummary(np.zeros((1, 4), dtype=np.int64), np.array([5])).n
        5
        """
        return int(self.reports_per_cohort.sum())

    def merge(self, other: RapporSummary) -> RapporSummary:
        """Add another summary of the same configuration (reports collected in batches).

        Examples
        --------
        >>> import numpy as np
        >>> from dpcurator.local._rappor import RapporSummary
        >>> a = RapporSummary(np.ones((2, 3), dtype=np.int64), np.array([1, 1]))
        >>> a.merge(a).n
        4
        """
        if other.bit_counts.shape != self.bit_counts.shape:
            raise InvalidParameterError(
                "other",
                f"<summary of shape {other.bit_counts.shape}>",
                f"must have the shape {self.bit_counts.shape}",
            )
        return RapporSummary(
            self.bit_counts + other.bit_counts, self.reports_per_cohort + other.reports_per_cohort
        )


@dataclass(frozen=True, slots=True, eq=False)
class RapporDecoding:
    """Counts of candidate values decoded from RAPPOR reports.

    Attributes
    ----------
    candidates : tuple
        The candidate values, in the order of every array below.
    estimate : FrequencyEstimate
        Estimated counts over the candidates: least-squares counts for the selected candidates,
        ``0`` with variance ``nan`` (not estimated) for the others. Variances are from the
        known noise of the reports, inflated by the regression's residual dispersion when it
        exceeds 1 (candidates missing from the list show up as misfit).
    selected : numpy.ndarray of bool
        Candidates kept by non-negative least squares (all when ``select=False``).
    significant : numpy.ndarray of bool
        Selected candidates whose count is significantly above 0 at the Bonferroni level
        ``alpha / M``.
    p_values : numpy.ndarray of float
        One-sided p-values of ``count > 0`` (``1`` for candidates not selected).
    dispersion : float
        Weighted residual sum of squares per degree of freedom (about 1 when the model fits).
    alpha : float
        The family-wise significance level.

    Examples
    --------
    >>> from dpcurator.noise import InsecureSeededSource
    >>> from dpcurator.local._rappor import Rappor
    >>> rappor = Rappor(num_bits=16, num_hashes=2, num_cohorts=8, f=0.25, p=0.25, q=0.75)
    >>> result = rappor.decode(rappor.privatize([7] * 9000, source=InsecureSeededSource(2)), [7, 8])
    >>> result.candidates, result.significant.tolist()
    ((7, 8), [True, False])
    """

    candidates: tuple[object, ...]
    estimate: FrequencyEstimate
    selected: NDArray[np.bool_]
    significant: NDArray[np.bool_]
    p_values: NDArray[np.float64]
    dispersion: float
    alpha: float

    def detected(self) -> list[tuple[object, float, float]]:
        """Return ``(candidate, count, standard error)`` of significant candidates, largest first.

        Examples
        --------
        >>> import numpy as np
        >>> from dpcurator.local._protocol import FrequencyEstimate
        >>> from dpcurator.local._rappor import RapporDecoding
        >>> est = FrequencyEstimate(np.array([5.0, 9.0]), np.array([1.0, 4.0]), 20)
        >>> flags = np.array([True, True])
        >>> RapporDecoding(("a", "b"), est, flags, flags, np.zeros(2), 1.0, 0.05).detected()
        [('b', 9.0, 2.0), ('a', 5.0, 1.0)]
        """
        idx = np.flatnonzero(self.significant)
        order = idx[np.argsort(-self.estimate.counts[idx], kind="stable")]
        std = self.estimate.std
        return [(self.candidates[i], float(self.estimate.counts[i]), float(std[i])) for i in order]


# --------------------------------------------------------------------------------------------
# helpers


def _check_fraction(value: object, name: str) -> Fraction:
    out = check_rational(value, name, positive=False)
    if not 0 <= out <= 1:
        raise InvalidParameterError(name, value, "must be in [0, 1]")
    return out


def _draw(prob: Fraction, mask: NDArray[np.bool_], source: RandomSource) -> NDArray[np.bool_]:
    """Bernoulli(prob) at the True entries of ``mask``, False elsewhere (exact)."""
    out = np.zeros(mask.shape, dtype=np.bool_)
    count = int(np.count_nonzero(mask))
    if count:
        out[mask] = bernoulli(prob, count, source=source)
    return out


def _randomize(
    bits: NDArray[np.bool_], p_one: Fraction, p_zero: Fraction, source: RandomSource
) -> NDArray[np.bool_]:
    """Each bit independently: 1 w.p. ``p_one`` if it is set, w.p. ``p_zero`` otherwise."""
    return _draw(p_one, bits, source) | _draw(p_zero, ~bits, source)


def sum_bits_by_group(
    packed: NDArray[np.uint8], groups: NDArray[np.int64], num_groups: int, num_bits: int
) -> NDArray[np.int64]:
    """Count, for each group, the rows that set each bit: shape ``(num_groups, num_bits)``.

    ``packed`` holds one row of ``num_bits`` bits per report (``numpy.packbits(...,
    bitorder="little")``); rows are processed in chunks, sorted by group and summed with
    ``numpy.add.reduceat``.

    Examples
    --------
    >>> import numpy as np
    >>> from dpcurator.local._rappor import sum_bits_by_group
    >>> rows = np.packbits([[1, 0, 1], [1, 1, 0], [0, 0, 1]], axis=1, bitorder="little")
    >>> sum_bits_by_group(rows, np.array([1, 0, 1]), 2, 3).tolist()
    [[1, 1, 0], [1, 0, 2]]
    """
    out = np.zeros((num_groups, num_bits), dtype=np.int64)
    chunk = max(1, _CHUNK_CELLS // num_bits)
    for start in range(0, groups.size, chunk):
        stop = min(groups.size, start + chunk)
        order = np.argsort(groups[start:stop], kind="stable")
        sorted_groups = groups[start:stop][order]
        starts = np.flatnonzero(np.r_[True, sorted_groups[1:] != sorted_groups[:-1]])
        bits = np.unpackbits(packed[start:stop][order], axis=1, count=num_bits, bitorder="little")
        out[sorted_groups[starts]] += np.add.reduceat(bits, starts, axis=0, dtype=np.int64)
    return out


def _pair_keys(devices: NDArray[np.int64], keys: NDArray[np.uint64]) -> NDArray[np.void]:
    """One 16-byte key per (device, value) pair, sortable and comparable."""
    pairs = np.empty(devices.size, dtype=[("device", ">i8"), ("value", ">u8")])
    pairs["device"] = devices
    pairs["value"] = keys
    return pairs.view("V16").reshape(-1)


# --------------------------------------------------------------------------------------------
# the protocol


class Rappor:
    r"""RAPPOR's client (Bloom filter, PRR, IRR) and server (bit counts, regression decoding).

    Local DP for one device changing its value: one report is ``report_epsilon``-DP, and all
    reports about one value together are ``permanent_epsilon``-DP (EPK14, Theorems 1-2; see the
    module docstring). Simulated devices are named by integer ids: a device's cohort is
    ``id mod m`` (public, independent of the value), and its PRR for a value is drawn on its
    first report of that value and reused for every later report (memoised in this object,
    as a real device keeps it in its own storage).

    Parameters
    ----------
    num_bits : int
        ``k``, the Bloom filter size (``>= 1``).
    num_hashes : int
        ``h``, hash functions per cohort (``1 <= h <= k``).
    num_cohorts : int
        ``m`` (``>= 1``).
    f : float, Fraction or str
        PRR noise, ``0 < f < 1``; ``"1/2"`` style strings are exact.
    p, q : float, Fraction or str
        IRR probabilities of reporting 1 for a PRR bit 0 and 1, ``0 <= p < q <= 1``.
    hash_seed : int
        Seed of the public Bloom hash functions (server and clients must agree).

    Examples
    --------
    >>> import numpy as np
    >>> from dpcurator.noise import InsecureSeededSource
    >>> from dpcurator.local._rappor import Rappor
    >>> rappor = Rappor(num_bits=32, num_hashes=2, num_cohorts=8, f=0.5, p=0.5, q=0.75)
    >>> truth = ["a"] * 60000 + ["b"] * 30000 + ["c"] * 10000
    >>> reports = rappor.privatize(truth, source=InsecureSeededSource(1))
    >>> result = rappor.decode(reports, ["a", "b", "c", "d", "e"])
    >>> [value for value, _, _ in result.detected()]  # "d" and "e" are absent
    ['a', 'b', 'c']
    >>> bool(abs(result.estimate.counts[0] - 60000) < 4 * result.estimate.std[0])
    True
    """

    name = "rappor"

    def __init__(
        self,
        *,
        num_bits: int = 128,
        num_hashes: int = 2,
        num_cohorts: int = 64,
        f: float | Fraction | str = 0.5,
        p: float | Fraction | str = 0.5,
        q: float | Fraction | str = 0.75,
        hash_seed: int = 0,
    ) -> None:
        self.num_bits = check_integer(num_bits, "num_bits", minimum=1)
        self.num_hashes = check_integer(num_hashes, "num_hashes", minimum=1)
        if self.num_hashes > self.num_bits:
            raise InvalidParameterError(
                "num_hashes", num_hashes, f"must be <= num_bits = {self.num_bits}"
            )
        self.num_cohorts = check_integer(num_cohorts, "num_cohorts", minimum=1)
        f_exact = _check_fraction(f, "f")
        if not 0 < f_exact < 1:
            raise InvalidParameterError("f", f, "must be in (0, 1)")
        p_exact = _check_fraction(p, "p")
        q_exact = _check_fraction(q, "q")
        if not p_exact < q_exact:
            raise InvalidParameterError("q", q, f"must be > p = {p}")
        self.hash_seed = check_integer(hash_seed, "hash_seed")
        self.f_exact, self.p_exact, self.q_exact = f_exact, p_exact, q_exact
        mix = f_exact * (p_exact + q_exact) / 2
        self.q_star_exact = mix + (1 - f_exact) * q_exact
        self.p_star_exact = mix + (1 - f_exact) * p_exact
        self.hashes = HashFunctions.from_seed(
            self.hash_seed, count=self.num_cohorts * self.num_hashes, num_buckets=self.num_bits
        )
        self._memo_keys: NDArray[np.void] = np.empty(0, dtype="V16")
        self._memo_prr = np.empty((0, (self.num_bits + 7) // 8), dtype=np.uint8)

    # ---------------------------------------------------------------- parameters and privacy

    @property
    def f(self) -> float:
        """PRR noise ``f``.

        Examples
        --------
        >>> from dpcurator.local._rappor import Rappor
        >>> Rappor(f="1/4").f, Rappor(f="1/4").f_exact
        (0.25, Fraction(1, 4))
        """
        return float(self.f_exact)

    @property
    def p(self) -> float:
        """IRR probability of a 1 for a PRR bit 0.

        Examples
        --------
        >>> from dpcurator.local._rappor import Rappor
        >>> Rappor(p=0.5, q=0.75).p
        0.5
        """
        return float(self.p_exact)

    @property
    def q(self) -> float:
        """IRR probability of a 1 for a PRR bit 1.

        Examples
        --------
        >>> from dpcurator.local._rappor import Rappor
        >>> Rappor(p=0.5, q=0.75).q
        0.75
        """
        return float(self.q_exact)

    @property
    def q_star(self) -> float:
        """``q* = P[S_i = 1 | B_i = 1] = f(p+q)/2 + (1-f) q`` (EPK14, Section 3.1).

        Examples
        --------
        >>> from dpcurator.local._rappor import Rappor
        >>> Rappor(f=0.5, p=0.5, q=0.75).q_star  # 11/16
        0.6875
        """
        return float(self.q_star_exact)

    @property
    def p_star(self) -> float:
        """``p* = P[S_i = 1 | B_i = 0] = f(p+q)/2 + (1-f) p`` (EPK14, Section 3.1).

        Examples
        --------
        >>> from dpcurator.local._rappor import Rappor
        >>> Rappor(f=0.5, p=0.5, q=0.75).p_star  # 9/16
        0.5625
        """
        return float(self.p_star_exact)

    @property
    def permanent_epsilon(self) -> float:
        r"""``2h ln((1 - f/2) / (f/2))``: all reports about one value (EPK14, Theorem 1).

        Examples
        --------
        >>> from dpcurator.local._rappor import Rappor
        >>> round(Rappor(num_hashes=2, f=0.5).permanent_epsilon, 4)  # 4 ln 3
        4.3944
        """
        half = self.f_exact / 2
        return 2 * self.num_hashes * math.log((1 - half) / half)

    @property
    def report_epsilon(self) -> float:
        r"""``h ln(q*(1 - p*) / (p*(1 - q*)))``: one report (EPK14, Theorem 2).

        Examples
        --------
        >>> from dpcurator.local._rappor import Rappor
        >>> round(Rappor(num_hashes=2, f=0.5, p=0.5, q=0.75).report_epsilon, 4)
        1.0743
        """
        qs, ps = self.q_star_exact, self.p_star_exact
        return self.num_hashes * math.log(qs * (1 - ps) / (ps * (1 - qs)))

    @property
    def event(self) -> PrivacyEvent:
        """The privacy event of one report of one device (pure ``report_epsilon``-DP).

        Examples
        --------
        >>> from dpcurator.local._rappor import Rappor
        >>> round(Rappor(num_hashes=2, f=0.5, p=0.5, q=0.75).event.epsilon, 2)
        1.07
        """
        return PureDPEvent(self.report_epsilon)

    @property
    def permanent_event(self) -> PrivacyEvent:
        """The event of all reports of one device about one value (``permanent_epsilon``).

        Examples
        --------
        >>> from dpcurator.local._rappor import Rappor
        >>> round(Rappor(num_hashes=2, f=0.5).permanent_event.epsilon, 2)
        4.39
        """
        return PureDPEvent(self.permanent_epsilon)

    def longitudinal_event(self, num_reports: int, num_values: int = 1) -> PrivacyEvent:
        """Privacy of a device that sent ``num_reports`` reports about ``num_values`` values.

        Reports about one value are post-processing of its PRR, so they cost at most
        ``permanent_epsilon`` together, and each costs ``report_epsilon`` (basic composition);
        distinct values have independent PRRs and compose:
        ``min(num_reports * report_epsilon, num_values * permanent_epsilon)``.

        Parameters
        ----------
        num_reports : int
            ``>= 1``.
        num_values : int
            Distinct values reported, ``1 <= num_values <= num_reports``.

        Returns
        -------
        PureDPEvent

        Examples
        --------
        >>> from dpcurator.local._rappor import Rappor
        >>> rappor = Rappor(num_hashes=2, f=0.5, p=0.5, q=0.75)
        >>> round(rappor.longitudinal_event(2).epsilon, 3)  # 2 reports: 2 x 1.074
        2.149
        >>> round(rappor.longitudinal_event(1000).epsilon, 3)  # capped by the PRR: 4 ln 3
        4.394
        """
        reports = check_integer(num_reports, "num_reports", minimum=1)
        values = check_integer(num_values, "num_values", minimum=1)
        if values > reports:
            raise InvalidParameterError(
                "num_values", num_values, f"must be <= num_reports = {reports}"
            )
        return PureDPEvent(min(reports * self.report_epsilon, values * self.permanent_epsilon))

    # ---------------------------------------------------------------- client

    def bloom_filters(self, values: object, cohorts: object) -> NDArray[np.bool_]:
        """Bloom filters of ``values`` in ``cohorts`` (broadcast), shape ``(n, k)``.

        Bit ``h_{j,l}(v)`` is set for ``l = 1..h``, with the public hash functions of cohort
        ``j`` (:class:`~dpcurator.local._hashing.HashFunctions`, seeded by ``hash_seed``).

        Examples
        --------
        >>> from dpcurator.local._rappor import Rappor
        >>> rappor = Rappor(num_bits=8, num_hashes=2, num_cohorts=2)
        >>> b = rappor.bloom_filters(["x", "x"], [0, 1])
        >>> b.shape, bool(1 <= b.sum(axis=1).min() and b.sum(axis=1).max() <= 2)
        ((2, 8), True)
        """
        keys = fingerprint(values)
        cohort_arr = self._check_cohorts(cohorts)
        keys, cohort_arr = np.broadcast_arrays(keys, cohort_arr)
        return self._bloom(keys.reshape(-1), cohort_arr.reshape(-1))

    def _check_cohorts(self, cohorts: object) -> NDArray[np.int64]:
        arr = np.atleast_1d(np.asarray(cohorts))
        if arr.dtype == np.bool_ or arr.dtype.kind not in "iu":
            raise InvalidParameterError(
                "cohorts", f"<array of dtype {arr.dtype}>", "must be integers"
            )
        out = arr.astype(np.int64).reshape(-1)
        if out.size and (int(out.min()) < 0 or int(out.max()) >= self.num_cohorts):
            raise InvalidParameterError(
                "cohorts",
                f"<cohorts in [{int(out.min())}, {int(out.max())}]>",
                f"must lie in [0, {self.num_cohorts})",
            )
        return out

    def _bloom(self, keys: NDArray[np.uint64], cohorts: NDArray[np.int64]) -> NDArray[np.bool_]:
        h = self.num_hashes
        which = cohorts[:, None] * h + np.arange(h)[None, :]
        positions = self.hashes(keys[:, None], which)  # (n, h)
        out = np.zeros((keys.size, self.num_bits), dtype=np.bool_)
        out[np.arange(keys.size)[:, None], positions] = True
        return out

    def privatize(
        self,
        values: object,
        *,
        devices: object = None,
        source: RandomSource | None = None,
    ) -> RapporReports:
        """Randomise each device's value into a ``k``-bit report (client side, vectorised).

        Parameters
        ----------
        values : array_like of str, bytes or int
            One value per report.
        devices : array_like of int, optional
            The reporting device of each value (ids ``>= 0``). A device's PRR for a value is
            drawn on first use and reused for all its later reports of that value, across calls.
            ``None``: every report comes from a new device that reports once (its PRR is used
            once, so PRR and IRR are drawn together as one Bernoulli of ``q*`` or ``p*`` per
            bit, and nothing is memoised); cohorts are then ``0, 1, ..., m-1`` in turn.
        source : RandomSource, optional
            Randomness (secure by default); ``InsecureSeededSource(seed)`` for simulations.

        Returns
        -------
        RapporReports

        Examples
        --------
        >>> from dpcurator.noise import InsecureSeededSource
        >>> from dpcurator.local._rappor import Rappor
        >>> rappor = Rappor(num_bits=8, num_hashes=2, num_cohorts=2, f=0.5, p=0.0, q=1.0)
        >>> src = InsecureSeededSource(0)
        >>> first = rappor.privatize(["x"], devices=[7], source=src)
        >>> again = rappor.privatize(["x"], devices=[7], source=src)  # p=0, q=1: report = PRR
        >>> bool((first.bits == again.bits).all())
        True
        """
        src = resolve_source(source)
        keys = fingerprint(values)
        n = keys.size
        nbytes = (self.num_bits + 7) // 8
        out = np.empty((n, nbytes), dtype=np.uint8)
        chunk = max(1, _CHUNK_CELLS // self.num_bits)
        if devices is None:
            cohorts = np.arange(n, dtype=np.int64) % self.num_cohorts
            for start in range(0, n, chunk):
                stop = min(n, start + chunk)
                bloom = self._bloom(keys[start:stop], cohorts[start:stop])
                report = _randomize(bloom, self.q_star_exact, self.p_star_exact, src)
                out[start:stop] = np.packbits(report, axis=1, bitorder="little")
            return RapporReports(out, cohorts, self.num_bits)
        device_arr = self._check_devices(devices, n)
        cohorts = device_arr % self.num_cohorts
        for start in range(0, n, chunk):
            stop = min(n, start + chunk)
            prr = self._permanent(device_arr[start:stop], keys[start:stop], src)
            report = _randomize(prr, self.q_exact, self.p_exact, src)
            out[start:stop] = np.packbits(report, axis=1, bitorder="little")
        return RapporReports(out, cohorts, self.num_bits)

    @staticmethod
    def _check_devices(devices: object, n: int) -> NDArray[np.int64]:
        arr = np.asarray(devices)
        if arr.dtype == np.bool_ or arr.dtype.kind not in "iu":
            raise InvalidParameterError(
                "devices", f"<array of dtype {arr.dtype}>", "must be integer device ids"
            )
        flat = arr.astype(np.int64).reshape(-1)
        if flat.size != n:
            raise InvalidParameterError(
                "devices", f"<{flat.size} ids>", f"must hold one id per value ({n})"
            )
        if flat.size and int(flat.min()) < 0:
            raise InvalidParameterError("devices", int(flat.min()), "must be ids >= 0")
        return flat

    def _permanent(
        self, devices: NDArray[np.int64], keys: NDArray[np.uint64], source: RandomSource
    ) -> NDArray[np.bool_]:
        """Return the memoised PRR of each (device, value) pair, drawing the missing ones."""
        pairs = _pair_keys(devices, keys)
        unique, first, inverse = np.unique(pairs, return_index=True, return_inverse=True)
        memo = self._memo_keys
        pos = np.searchsorted(memo, unique)
        found = np.zeros(unique.size, dtype=np.bool_)
        inside = pos < memo.size
        found[inside] = memo[pos[inside]] == unique[inside]
        nbytes = self._memo_prr.shape[1]
        rows = np.empty((unique.size, nbytes), dtype=np.uint8)
        rows[found] = self._memo_prr[pos[found]]
        new = np.flatnonzero(~found)
        if new.size:
            idx = first[new]
            bloom = self._bloom(keys[idx], devices[idx] % self.num_cohorts)
            # B'_i = 1 w.p. f/2, 0 w.p. f/2, B_i w.p. 1 - f: a fair bit where Bernoulli(f) fires
            noisy = bernoulli(self.f_exact, bloom.shape, source=source)
            fair = bernoulli(_HALF, bloom.shape, source=source)
            prr = np.where(noisy, fair, bloom)
            rows[new] = np.packbits(prr, axis=1, bitorder="little")
            keys_all = np.concatenate([memo, unique[new]])
            order = np.argsort(keys_all, kind="stable")
            self._memo_keys = keys_all[order]
            self._memo_prr = np.concatenate([self._memo_prr, rows[new]])[order]
        packed = rows[inverse.reshape(-1)]
        out = np.unpackbits(packed, axis=1, count=self.num_bits, bitorder="little")
        return out.astype(np.bool_)

    @property
    def memoised(self) -> int:
        """Number of (device, value) pairs whose PRR is stored.

        Examples
        --------
        >>> from dpcurator.noise import InsecureSeededSource
        >>> from dpcurator.local._rappor import Rappor
        >>> rappor = Rappor(num_bits=8)
        >>> _ = rappor.privatize(["a", "b", "a"], devices=[1, 1, 1], source=InsecureSeededSource(0))
        >>> rappor.memoised
        2
        """
        return int(self._memo_keys.size)

    def forget(self) -> None:
        """Drop every memoised PRR (a new population of devices).

        Examples
        --------
        >>> from dpcurator.noise import InsecureSeededSource
        >>> from dpcurator.local._rappor import Rappor
        >>> rappor = Rappor(num_bits=8)
        >>> _ = rappor.privatize(["a"], devices=[1], source=InsecureSeededSource(0))
        >>> rappor.forget()
        >>> rappor.memoised
        0
        """
        self._memo_keys = np.empty(0, dtype="V16")
        self._memo_prr = np.empty((0, (self.num_bits + 7) // 8), dtype=np.uint8)

    # ---------------------------------------------------------------- server

    def summarize(self, reports: RapporReports) -> RapporSummary:
        """Count, per cohort, the reports that set each bit (the server's sufficient statistic).

        Examples
        --------
        >>> from dpcurator.noise import InsecureSeededSource
        >>> from dpcurator.local._rappor import Rappor
        >>> rappor = Rappor(num_bits=8, num_hashes=2, num_cohorts=2)
        >>> summary = rappor.summarize(rappor.privatize(["a"] * 10, source=InsecureSeededSource(0)))
        >>> summary.bit_counts.shape, summary.reports_per_cohort.tolist()
        ((2, 8), [5, 5])
        """
        if not isinstance(reports, RapporReports):
            raise InvalidParameterError(
                "reports", type(reports).__name__, "must be RapporReports (from privatize)"
            )
        if reports.num_bits != self.num_bits:
            raise InvalidParameterError(
                "reports",
                f"<reports of {reports.num_bits} bits>",
                f"must have num_bits = {self.num_bits}",
            )
        k, m = self.num_bits, self.num_cohorts
        cohorts = self._check_cohorts(reports.cohorts) if len(reports) else reports.cohorts
        counts = sum_bits_by_group(reports.bits, cohorts, m, k)
        per_cohort = np.bincount(cohorts, minlength=m).astype(np.int64)
        return RapporSummary(counts, per_cohort)

    def estimate_bits(
        self, summary: RapporSummary | RapporReports
    ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        r"""Unbiased per-cohort bit counts ``t_ij`` and their variances (EPK14, Section 4).

        .. math::

            \hat t_{ij} = \frac{c_{ij} - p^* N_j}{q^* - p^*}, \qquad
            \mathrm{Var}[\hat t_{ij}] = \frac{t_{ij} q^*(1 - q^*) + (N_j - t_{ij}) p^*(1 - p^*)}
            {(q^* - p^*)^2},

        exact for one report per device (the bits are independent Bernoulli draws given the
        Bloom filters), with ``t_ij`` replaced by ``clip(t̂_ij, 0, N_j)``.

        Returns
        -------
        tuple of numpy.ndarray
            ``(t, variance)``, each of shape ``(m, k)``.

        Examples
        --------
        >>> import numpy as np
        >>> from dpcurator.local._rappor import Rappor, RapporSummary
        >>> rappor = Rappor(num_bits=1, num_hashes=1, num_cohorts=1, f=0.5, p=0.5, q=0.75)
        >>> t, var = rappor.estimate_bits(RapporSummary(np.array([[5625]]), np.array([10000])))
        >>> float(t[0, 0])  # c = p* N: no device sets the bit
        0.0
        """
        summ = summary if isinstance(summary, RapporSummary) else self.summarize(summary)
        if summ.bit_counts.shape != (self.num_cohorts, self.num_bits):
            raise InvalidParameterError(
                "summary",
                f"<summary of shape {summ.bit_counts.shape}>",
                f"must have shape ({self.num_cohorts}, {self.num_bits})",
            )
        qs, ps = self.q_star, self.p_star
        big_n = summ.reports_per_cohort.astype(np.float64)[:, None]
        t = (summ.bit_counts - ps * big_n) / (qs - ps)
        t_clip = np.clip(t, 0.0, big_n)
        var = (t_clip * qs * (1 - qs) + (big_n - t_clip) * ps * (1 - ps)) / (qs - ps) ** 2
        return t, var

    def design_matrix(
        self, candidates: Sequence[object] | NDArray[np.generic]
    ) -> NDArray[np.float64]:
        """Return the 0/1 design matrix ``X`` of the candidates, shape ``(m k, M)``.

        Row ``j k + i``, column ``c`` is 1 when candidate ``c``'s Bloom filter in cohort ``j``
        sets bit ``i`` (EPK14, Section 4).

        Examples
        --------
        >>> from dpcurator.local._rappor import Rappor
        >>> X = Rappor(num_bits=8, num_hashes=2, num_cohorts=3).design_matrix(["a", "b"])
        >>> X.shape, bool((X.reshape(3, 8, 2).sum(axis=1) <= 2).all())
        ((24, 2), True)
        """
        keys = fingerprint(candidates)
        m, k, h = self.num_cohorts, self.num_bits, self.num_hashes
        positions = self.hashes.hash_all(keys).reshape(m, h, keys.size)
        design = np.zeros((m, k, keys.size), dtype=np.float64)
        jj = np.arange(m)[:, None, None]
        cc = np.arange(keys.size)[None, None, :]
        design[jj, positions, cc] = 1.0
        return design.reshape(m * k, keys.size)

    def decode(
        self,
        reports: RapporSummary | RapporReports,
        candidates: Sequence[object] | NDArray[np.generic],
        *,
        alpha: float = 0.05,
        select: bool = True,
    ) -> RapporDecoding:
        r"""Estimate how many devices hold each candidate value (EPK14, Section 4).

        Regression of the unbiased bit counts ``t`` (:meth:`estimate_bits`) on the design matrix
        (:meth:`design_matrix`), each cohort's rows scaled by its share ``N_j / N`` of the
        reports so that the coefficients are population counts, and every row weighted by
        the inverse of its variance:

        1. selection: non-negative least squares (``scipy.optimize.nnls``); candidates with a
           positive coefficient are selected (all of them with ``select=False``);
        2. weighted least squares on the selected columns: counts ``β = (XᵀWX)⁻¹XᵀWt`` with
           covariance ``φ (XᵀWX)⁻¹``, where ``φ = max(1, RSS_W / (rows - selected))`` absorbs
           misfit (values missing from the candidate list);
        3. significance: one-sided ``p = 1 - Φ(β / se)``; a candidate is significant when
           ``p < alpha / M`` (Bonferroni over the ``M`` candidates).

        The standard errors assume one report per device (decode one collection period at a
        time) and cohorts independent of the values.

        Parameters
        ----------
        reports : RapporSummary or RapporReports
            The collected reports or their summary.
        candidates : sequence of str, bytes or int
            Distinct candidate values.
        alpha : float
            Family-wise significance level, in ``(0, 1)``.
        select : bool
            Whether to select candidates by NNLS first.

        Returns
        -------
        RapporDecoding

        Examples
        --------
        >>> from dpcurator.noise import InsecureSeededSource
        >>> from dpcurator.local._rappor import Rappor
        >>> rappor = Rappor(num_bits=16, num_hashes=2, num_cohorts=8, f=0.25, p=0.25, q=0.75)
        >>> reports = rappor.privatize([1] * 20000 + [2] * 5000, source=InsecureSeededSource(0))
        >>> result = rappor.decode(reports, [1, 2, 3])
        >>> result.significant.tolist()
        [True, True, False]
        """
        lvl = check_probability(alpha, "alpha", open_left=True, open_right=True)
        summ = reports if isinstance(reports, RapporSummary) else self.summarize(reports)
        cands = tuple(np.asarray(candidates, dtype=object).reshape(-1).tolist())
        keys = fingerprint(candidates)
        if np.unique(keys).size != keys.size:
            raise InvalidParameterError(
                "candidates", f"<{keys.size} candidates>", "must be distinct values"
            )
        size = keys.size
        n = summ.n
        if n == 0:
            raise InvalidParameterError("reports", "<no reports>", "must hold at least one report")
        t, var = self.estimate_bits(summ)
        share = summ.reports_per_cohort / n
        design = self.design_matrix(candidates) * np.repeat(share, self.num_bits)[:, None]
        keep_rows = np.repeat(summ.reports_per_cohort > 0, self.num_bits)
        weight = 1.0 / np.sqrt(var.reshape(-1)[keep_rows])
        a_mat = design[keep_rows] * weight[:, None]
        y = t.reshape(-1)[keep_rows] * weight
        if select:
            beta_nn, _ = nnls(a_mat, y)
            selected = beta_nn > 0
        else:
            selected = np.ones(size, dtype=np.bool_)
        counts = np.zeros(size)
        variances = np.full(size, np.nan)
        p_values = np.ones(size)
        dispersion = 1.0
        if selected.any():
            a_sel = a_mat[:, selected]
            beta, *_ = np.linalg.lstsq(a_sel, y, rcond=None)
            residual = y - a_sel @ beta
            dof = a_sel.shape[0] - a_sel.shape[1]
            if dof > 0:
                dispersion = float(residual @ residual) / dof
            cov = np.linalg.pinv(a_sel.T @ a_sel) * max(1.0, dispersion)
            se = np.sqrt(np.clip(np.diag(cov), 0.0, None))
            counts[selected] = beta
            variances[selected] = se**2
            with np.errstate(divide="ignore", invalid="ignore"):
                z = np.where(se > 0, beta / se, np.where(beta > 0, np.inf, -np.inf))
            p_values[selected] = ndtr(-z)
        significant = selected & (p_values < lvl / size)
        return RapporDecoding(
            candidates=cands,
            estimate=FrequencyEstimate(counts, variances, n),
            selected=selected,
            significant=significant,
            p_values=p_values,
            dispersion=dispersion,
            alpha=lvl,
        )

    def __repr__(self) -> str:
        return (
            f"Rappor(num_bits={self.num_bits}, num_hashes={self.num_hashes}, "
            f"num_cohorts={self.num_cohorts}, f={self.f_exact}, p={self.p_exact}, "
            f"q={self.q_exact})"
        )
