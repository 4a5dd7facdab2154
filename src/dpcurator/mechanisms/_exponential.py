"""Private selection: the exponential mechanism and report-noisy-max (as permute-and-flip).

Both are sampled exactly. Utilities are rounded to a public grid ``2**-k`` (``k`` from the
sensitivity only; the rounding is charged in the sensitivity), so every selection probability
is ``exp(-c n)`` for an integer gap ``n`` and a dyadic coefficient ``c <= epsilon / (2 Delta_k)``
with 21 significant bits. Bernoulli(``exp(-c n)``) is then drawn exactly by
:func:`dpcurator.noise.bernoulli_exp` (as the product of two draws, ``exp(-c n_lo)`` and
``exp(-c 2**32 n_hi)``, whose exponents are exact float64 numbers). No float ``exp`` or ``log``
decides an output (research note E.4: Gumbel-max with float noise leaks like float Laplace).

Examples
--------
>>> from dpcurator.noise import InsecureSeededSource
>>> release = exponential_mechanism(["red", "green", "blue"], [10.0, 3.0, 9.0], epsilon=1.0,
...                                 sensitivity=1.0, source=InsecureSeededSource(0))
>>> release.value in ("red", "green", "blue"), release.event
(True, PureDPEvent(epsilon=1.0))
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from fractions import Fraction
from typing import Any, TypeVar

import numpy as np
from numpy.typing import NDArray

from dpcurator._validation import check_epsilon, check_integer, check_positive, check_probability
from dpcurator.accounting import PureDPEvent
from dpcurator.errors import InternalError, InvalidParameterError
from dpcurator.mechanisms._common import (
    PRECISION_BITS,
    as_float_array,
    check_scale_range,
    l1_grid_sensitivity,
)
from dpcurator.mechanisms._release import Release
from dpcurator.noise import (
    RandomSource,
    bernoulli_exp,
    floor_log2,
    grid_exponent,
    pow2,
    resolve_source,
    to_grid,
    uniform_integers,
)

__all__ = [
    "exponential_mechanism",
    "exponential_mechanism_runs",
    "report_noisy_max",
    "selection_error_bound",
]

T = TypeVar("T")

_COEFFICIENT_BITS = 21
"""Significant bits of the coefficient ``c``: ``c * n`` is exact in float64 for ``n < 2**32``."""

_LOW_BITS = 32
_LOW_MASK = (1 << _LOW_BITS) - 1


class _Selection:
    """Exact selection weights ``exp(-c * gaps)`` derived from public parameters and utilities."""

    __slots__ = ("coefficient", "gaps")

    def __init__(
        self, utilities: object, *, epsilon: float, sensitivity: float, halve: bool, name: str
    ) -> None:
        values, _ = as_float_array(utilities, name)
        if values.ndim != 1 or values.size == 0:
            raise InvalidParameterError(
                name, f"<array of shape {values.shape}>", "must be a non-empty 1-D sequence"
            )
        bits = grid_exponent(sensitivity, PRECISION_BITS)
        units = np.asarray(to_grid(values.reshape(-1), bits), dtype=np.int64)
        # Rounding moves each utility by < 1 unit more: integer sensitivity floor(D 2^k) + 1.
        sensitivity_units = l1_grid_sensitivity(sensitivity, bits, 1)
        denominator = 2 * sensitivity_units if halve else sensitivity_units
        self.coefficient = _dyadic_floor(Fraction(epsilon) / denominator)
        self.gaps: NDArray[np.int64] = units.max() - units  # in [0, 2**53]

    def accept(self, indices: NDArray[np.int64], source: RandomSource) -> NDArray[np.bool_]:
        """Independent Bernoulli(``exp(-c * gaps[indices])``) draws, exactly."""
        return _bernoulli_gaps(self.gaps[indices], self.coefficient, source)


def _bernoulli_gaps(
    gaps: NDArray[np.int64], coefficient: float, source: RandomSource
) -> NDArray[np.bool_]:
    """Independent Bernoulli(``exp(-c * gaps)``), exactly (``0 <= gaps < 2**53``, ``c`` dyadic).

    ``c`` has :data:`_COEFFICIENT_BITS` significant bits, so ``c * n`` is an exact float for
    ``n < 2**32``: the gap is split into its low 32 bits and the rest, two exact exponents.
    """
    c = coefficient
    low = (gaps & _LOW_MASK).astype(np.float64) * c  # exact: 21 + 32 bits
    out = np.asarray(bernoulli_exp(low, source=source), dtype=np.bool_)
    high = gaps >> _LOW_BITS
    rows = np.flatnonzero(high)
    if rows.size:
        gamma = high[rows].astype(np.float64) * math.ldexp(c, _LOW_BITS)  # exact: 21 + 21
        out[rows] &= np.asarray(bernoulli_exp(gamma, source=source), dtype=np.bool_)
    return out


def _dyadic_floor(x: Fraction) -> float:
    """Largest float with ``_COEFFICIENT_BITS`` significant bits that is ``<= x`` (``x > 0``)."""
    exponent = floor_log2(x)
    shift = _COEFFICIENT_BITS - 1 - exponent
    mantissa = math.floor(x * pow2(shift))
    return math.ldexp(mantissa, -shift)


def _check_common(epsilon: float, sensitivity: float) -> tuple[float, float]:
    eps, sens = check_epsilon(epsilon), check_positive(sensitivity, "sensitivity")
    check_scale_range(eps, sens)
    return eps, sens


def _check_size(size: int) -> int:
    return check_integer(size, "size", minimum=0)


def _exponential_indices(
    utilities: object,
    *,
    epsilon: float,
    sensitivity: float,
    monotonic: bool,
    size: int,
    source: RandomSource | None,
) -> NDArray[np.int64]:
    """``size`` independent draws of the exponential mechanism's index (rejection sampling).

    Proposals are uniform over the candidates and accepted with probability ``exp(-c gap)``;
    accepted proposals are i.i.d. with ``P[r] ∝ exp(-c gap_r) ∝ exp(c U_r)``. Used by
    :func:`exponential_mechanism` with ``size=1`` and by the privacy audits.
    """
    eps, sens = _check_common(epsilon, sensitivity)
    n = _check_size(size)
    selection = _Selection(
        utilities, epsilon=eps, sensitivity=sens, halve=not monotonic, name="utilities"
    )
    src = resolve_source(source)
    candidates = int(selection.gaps.size)
    with np.errstate(under="ignore"):
        # A float estimate of the acceptance rate, only to size the batches.
        rate = max(float(np.exp(-selection.coefficient * selection.gaps).mean()), 1 / candidates)
    out = np.empty(n, dtype=np.int64)
    filled = 0
    while filled < n:
        need = n - filled
        batch = min(int(need / rate * 1.1) + 16, 2**22)
        proposals = np.asarray(uniform_integers(candidates, batch, source=src), dtype=np.int64)
        kept = proposals[selection.accept(proposals, src)][:need]
        out[filled : filled + kept.size] = kept
        filled += int(kept.size)
    return out


_RUN_COEFFICIENTS = (2.0**-40, 2.0**-2)
"""Coefficients ``c`` for which :func:`_runs_indices` may propose runs: the shifts
``ceil(ln(length) / c) + 1 <= 2**45`` stay far inside int64, and the second stage's exponent is
at most ``2c + 2**-40 <= 1`` (Canonne, Kamath and Steinke 2020, Algorithm 1 for ``gamma <= 1``)."""


def _check_lengths(lengths: object, count: int) -> NDArray[np.int64]:
    """Check the runs' lengths: positive integers, one per utility, at most ``2**62`` in all."""
    values = np.asarray(lengths)
    if values.shape != (count,) or not (
        np.issubdtype(values.dtype, np.integer) or values.dtype == object
    ):
        raise InvalidParameterError(
            "lengths", f"<array of shape {values.shape}>", f"must be {count} integers"
        )
    if values.dtype == np.int64 and count * int(values.max()) <= 2**62:
        low, total = int(values.min()), int(values.sum())  # no overflow: at most 2**62
        exact = values
    else:
        integers = [int(v) for v in values.tolist()]
        low, total = min(integers), sum(integers)
        exact = np.array(integers if low >= 1 and total <= 2**62 else [], dtype=np.int64)
    if low < 1 or total > 2**62:
        raise InvalidParameterError(
            "lengths", f"<min {low}, sum {total}>", "must be >= 1 and sum to <= 2**62"
        )
    return exact


@functools.lru_cache(maxsize=4096)
def _log_bounds(value: int, bits: int) -> tuple[Fraction, Fraction]:
    """Rationals ``lo <= ln(value) <= hi`` with ``hi - lo <= 2**-bits`` (an integer ``value >= 1``).

    ``ln(m 2**e) = e ln 2 + ln m`` with ``m`` in ``[1, 2)`` and ``ln y = 2 atanh((y-1)/(y+1))``
    (``ln 2 = 2 atanh(1/3)``), each series cut where its tail is below ``2**-bits / (e + 1)``.

    >>> lo, hi = _log_bounds(10, 64)
    >>> float(lo) <= math.log(10) <= float(hi), hi - lo <= Fraction(1, 2**64)
    (True, True)
    """
    if value == 1:
        return Fraction(0), Fraction(0)
    e = value.bit_length() - 1
    target = bits + e.bit_length() + 2  # e + 1 <= 2**bit_length(e): the widths add up to 2**-bits
    lo2, hi2 = _atanh_bounds(Fraction(1, 3), target)
    mantissa = Fraction(value, 1 << e)
    lom, him = _atanh_bounds((mantissa - 1) / (mantissa + 1), target)
    return e * lo2 + lom, e * hi2 + him


def _atanh_bounds(z: Fraction, bits: int) -> tuple[Fraction, Fraction]:
    """Bound ``2 atanh(z) = sum_j 2 z**(2j+1) / (2j+1)`` (``0 <= z <= 1/3``) within ``2**-bits``.

    The partial sums are lower bounds (positive terms); the tail after ``k`` terms is at most
    ``2 z**(2k+1) / ((2k+1)(1 - z**2))`` (a geometric series of ratio ``z**2``).
    """
    total, power, square, k = Fraction(0), z, z * z, 0
    limit = Fraction(1, 1 << bits)
    while True:
        total += 2 * power / (2 * k + 1)
        power *= square
        k += 1
        tail = 2 * power / ((2 * k + 1) * (1 - square))
        if tail <= limit:
            return total, total + tail


def _uniform_below(k: int, length: int, exponent: Fraction, source: RandomSource) -> bool:
    """Bernoulli(``(exponent - ln(length)) / k``): whether ``k U + ln(length) < exponent``.

    ``U`` is uniform on ``[0, 1)``, drawn 62 bits at a time until the comparison is decided by
    the rational bounds of ``ln(length)`` (refined as needed): exact, and one round but with
    probability about ``2**-60``.
    """
    numerator, bits, precision = 0, 0, 64
    while True:
        numerator = (numerator << 62) | int(uniform_integers(1 << 62, source=source))
        bits += 62
        lo, hi = _log_bounds(length, precision)
        if k * Fraction(numerator + 1, 1 << bits) + hi <= exponent:
            return True
        if k * Fraction(numerator, 1 << bits) + lo >= exponent:
            return False
        precision += 62


def _bernoulli_length_exp(length: int, exponent: Fraction, source: RandomSource) -> bool:
    """Bernoulli(``length * exp(-exponent)``), exactly, for ``0 <= exponent - ln(length) <= 1``.

    Canonne, Kamath and Steinke 2020, Algorithm 1, with ``gamma = exponent - ln(length)``:
    ``K = 1``; while Bernoulli(``gamma / K``) succeeds, ``K += 1``; succeed iff ``K`` is odd.
    """
    if length == 1 and exponent == 0:
        return True
    lo, hi = _log_bounds(length, 64)
    if not hi <= exponent <= lo + 1:
        raise InternalError(f"run of {length} points: exponent {float(exponent)} out of range")
    k = 1
    while _uniform_below(k, length, exponent, source):
        k += 1
    return k % 2 == 1


def _runs_indices(
    lengths: object,
    utilities: object,
    *,
    epsilon: float,
    sensitivity: float,
    monotonic: bool,
    size: int,
    source: RandomSource | None,
    proposal: str = "auto",
) -> NDArray[np.int64]:
    """``size`` independent draws of the exponential mechanism over points given in runs.

    Run ``r`` holds ``lengths[r]`` consecutive points of utility ``utilities[r]``; the result is
    a point's index in ``[0, sum(lengths))``, with ``P[p] ∝ exp(-c gap_r)`` for ``p`` in run
    ``r``. One of two exact rejection samplers, whichever a float estimate of their acceptance
    rates prefers (the estimate decides only the speed, never the law):

    * points: a uniform point (``uniform_integers(total)``, mapped to its run by
      ``searchsorted``), accepted with probability ``exp(-c gap_r)``. Acceptance rate
      ``Z / total`` with ``Z = sum_r lengths_r exp(-c gap_r) >= 1``.
    * runs (``2**-40 <= c <= 1/4``): a uniform run, accepted with ``exp(-c (gap_r - s_r))``
      (shifted to a minimum of 0) and then with ``lengths_r exp(-c s_r)``, where
      ``s_r = ceil(ln(lengths_r) / c) + 1`` (0 for one point) makes that second probability at
      least ``exp(-2c - 2**-40) >= exp(-1/2)`` and at most 1; the product is proportional to
      ``lengths_r exp(-c gap_r)``, and the point is then uniform within the run. Acceptance
      rate at least ``exp(-1/2) / R`` for ``R`` runs, whatever the lengths.

    ``proposal`` (``"points"`` or ``"runs"``) forces one, for the tests of both laws.
    """
    eps, sens = _check_common(epsilon, sensitivity)
    n = _check_size(size)
    count = int(np.size(np.asarray(utilities)))
    runs = _check_lengths(lengths, count)
    selection = _Selection(
        utilities, epsilon=eps, sensitivity=sens, halve=not monotonic, name="utilities"
    )
    src = resolve_source(source)
    c, gaps = selection.coefficient, selection.gaps
    with np.errstate(under="ignore", over="ignore"):
        point_rate = float((runs * np.exp(-c * gaps)).sum() / runs.sum())
    shifts = shifted = None
    run_rate = 0.0
    if _RUN_COEFFICIENTS[0] <= c <= _RUN_COEFFICIENTS[1] and proposal != "points":
        logs = np.log(runs.astype(np.float64))
        shifts = np.where(runs > 1, np.ceil(logs / c) + 1, 0).astype(np.int64)
        shifted = gaps - shifts
        shifted -= shifted.min()
        with np.errstate(under="ignore"):
            run_rate = float(np.exp(-c * shifted).mean()) * math.exp(-0.5)
        if int(shifted.max()) >= 2**53 or (run_rate <= point_rate and proposal != "runs"):
            shifts = shifted = None
    starts = np.concatenate([[0], np.cumsum(runs)[:-1]]).astype(np.int64)
    out = np.empty(n, dtype=np.int64)
    filled = 0
    if shifts is None or shifted is None:
        total = int(runs.sum())
        rate = max(point_rate, 1 / total)
        while filled < n:
            need = n - filled
            batch = min(int(need / rate * 1.1) + 16, 2**22)
            proposals = np.asarray(uniform_integers(total, batch, source=src), dtype=np.int64)
            run = np.searchsorted(starts, proposals, side="right") - 1
            kept = proposals[_bernoulli_gaps(gaps[run], c, src)][:need]
            out[filled : filled + kept.size] = kept
            filled += int(kept.size)
        return out
    coefficient = Fraction(c)
    rate = max(run_rate, 1 / count)
    while filled < n:
        batch = min(int((n - filled) / rate * 1.1) + 16, 2**22)
        proposals = np.asarray(uniform_integers(count, batch, source=src), dtype=np.int64)
        for r in proposals[_bernoulli_gaps(shifted[proposals], c, src)].tolist():
            length = int(runs[r])
            if _bernoulli_length_exp(length, coefficient * int(shifts[r]), src):
                out[filled] = int(starts[r]) + int(uniform_integers(length, source=src))
                filled += 1
                if filled == n:
                    break
    return out


def _permute_and_flip_indices(
    scores: object,
    *,
    epsilon: float,
    sensitivity: float,
    monotonic: bool,
    size: int,
    source: RandomSource | None,
) -> NDArray[np.int64]:
    """``size`` independent draws of permute-and-flip's index.

    Permute-and-flip visits the candidates in a uniformly random order and stops at the first
    whose coin ``Bernoulli(exp(-c gap_r))`` comes up heads. The coins do not depend on the
    order, so this equals: flip every coin, then pick uniformly among the heads (the first head
    of a uniform permutation is uniform over the heads). The best candidates have ``gap = 0``
    and always come up heads.
    """
    eps, sens = _check_common(epsilon, sensitivity)
    n = _check_size(size)
    selection = _Selection(
        scores, epsilon=eps, sensitivity=sens, halve=not monotonic, name="scores"
    )
    src = resolve_source(source)
    candidates = int(selection.gaps.size)
    out = np.empty(n, dtype=np.int64)
    rows_per_batch = max(1, 2**22 // candidates)
    for start in range(0, n, rows_per_batch):
        rows = min(rows_per_batch, n - start)
        index = np.tile(np.arange(candidates, dtype=np.int64), rows)
        heads = selection.accept(index, src).reshape(rows, candidates)
        counts = heads.sum(axis=1)
        chosen = np.empty(rows, dtype=np.int64)
        for count in np.unique(counts):
            which = np.flatnonzero(counts == count)
            j = np.asarray(uniform_integers(int(count), int(which.size), source=src))
            running = np.cumsum(heads[which], axis=1)
            chosen[which] = np.argmax(running > j[:, None], axis=1)
        out[start : start + rows] = chosen
    return out


def exponential_mechanism(
    candidates: Sequence[T],
    utilities: Sequence[float] | NDArray[Any],
    *,
    epsilon: float,
    sensitivity: float,
    monotonic: bool = False,
    source: RandomSource | None = None,
) -> Release[T]:
    r"""Choose a candidate with probability growing exponentially in its utility.

    .. math:: P[M(D) = r] \propto \exp\left(\frac{\epsilon\, u(D, r)}{2 \Delta u}\right)
              \quad\left(\exp\left(\frac{\epsilon\, u(D, r)}{\Delta u}\right)
              \text{ if monotonic}\right),

    is epsilon-DP when ``|u(D, r) - u(D', r)| <= Delta u`` for all ``r`` and neighbours
    ``D, D'`` (McSherry and Talwar 2007; lecture 003, exponential mechanism; lecture 004 with a
    loss ``L = -u``), for whichever neighbour relation ``Delta u`` was computed.
    ``monotonic=True`` is valid when, for every pair of neighbours, all utilities move in the
    same direction (counts under add/remove; Dwork and Roth 2014, Section 3.4). Utility
    (Dwork and Roth 2014, Theorem 3.11): with ``OPT = max_r u(D, r)``,

    .. math:: P\left[u(D, M(D)) \le OPT - \frac{2\Delta u}{\epsilon}(\ln|R| + t)\right]
              \le e^{-t}

    (``Delta u / epsilon`` when monotonic); :func:`selection_error_bound` computes it for this
    implementation. Exact sampling: utilities on the grid ``2**-k <= Delta 2**-16`` (sensitivity
    ``floor(Delta 2^k) + 1`` units), a dyadic coefficient at most ``epsilon / (2 Delta_k)``, and
    rejection from a uniform proposal with acceptance ``exp(-c (U* - U_r))`` drawn by
    :func:`~dpcurator.noise.bernoulli_exp`.

    Parameters
    ----------
    candidates : sequence
        The possible outputs ``R`` (public), non-empty.
    utilities : array_like of float
        ``u(D, r)`` for each candidate, finite, same length (values beyond ``2**35 Delta u``
        from 0 saturate on the grid, which keeps the guarantee).
    epsilon : float
        > 0.
    sensitivity : float
        ``Delta u``, > 0.
    monotonic : bool, default False
    source : RandomSource, optional

    Returns
    -------
    Release
        ``value``: the chosen candidate; ``event``: ``PureDPEvent(epsilon)``; ``error``: None.

    Examples
    --------
    >>> from dpcurator.noise import InsecureSeededSource
    >>> votes = {"Rust": 40, "Python": 55, "Go": 20}  # a count per option: monotonic
    >>> release = exponential_mechanism(list(votes), list(votes.values()), epsilon=0.5,
    ...                                 sensitivity=1, monotonic=True,
    ...                                 source=InsecureSeededSource(0))
    >>> release.value in votes
    True
    """
    if isinstance(candidates, str) or not isinstance(candidates, Sequence | np.ndarray):
        raise InvalidParameterError(
            "candidates", type(candidates).__name__, "must be a sequence of candidates"
        )
    count = len(candidates)
    if count == 0:
        raise InvalidParameterError("candidates", "<empty sequence>", "must not be empty")
    if np.shape(utilities) != (count,):
        raise InvalidParameterError(
            "utilities",
            f"<shape {np.shape(utilities)}>",
            f"must have one utility per candidate ({count})",
        )
    index = _exponential_indices(
        utilities,
        epsilon=epsilon,
        sensitivity=sensitivity,
        monotonic=bool(monotonic),
        size=1,
        source=source,
    )
    return Release(candidates[int(index[0])], PureDPEvent(epsilon=check_epsilon(epsilon)))


def exponential_mechanism_runs(
    lengths: Sequence[int] | NDArray[np.integer[Any]],
    utilities: Sequence[float] | NDArray[Any],
    *,
    epsilon: float,
    sensitivity: float,
    monotonic: bool = False,
    source: RandomSource | None = None,
) -> Release[int]:
    r"""Choose a point among many whose utilities are shared by runs of consecutive points.

    The candidates are ``sum(lengths)`` points ``0, 1, ...``; run ``r`` is the next
    ``lengths[r]`` of them, each of utility ``utilities[r]``. The chosen point has

    .. math:: P[M(D) = p] \propto \exp\left(\frac{\epsilon\, u(D, r(p))}{2 \Delta u}\right),
              \quad\text{so}\quad P[\text{run } r] \propto \ell_r
              \exp\left(\frac{\epsilon\, u_r}{2 \Delta u}\right)

    (``epsilon u / Delta u`` if ``monotonic``): exactly :func:`exponential_mechanism` over the
    points, with the same epsilon-DP guarantee (McSherry and Talwar 2007) when every point's
    utility has sensitivity ``Delta u``, and the same utility bound with ``|R| = sum(lengths)``.
    The work is per run, never per point. With the points a fine public grid of an interval
    and the runs the stretches between consecutive data values, this is the discrete form of
    Smith's quantile mechanism (Smith 2011, "Privacy-preserving statistical estimation with
    optimal convergence rates", STOC: the exponential mechanism over the intervals between
    sorted data, each weighted by its length).

    Exact sampling as in :func:`exponential_mechanism` (utilities on the grid, a dyadic
    coefficient ``c``, exact Bernoulli(``exp(-c n)``)), by rejection from one of two proposals:
    a uniform point, accepted with ``exp(-c gap)`` (acceptance rate ``Z / sum(lengths)``,
    ``Z = sum_r lengths_r exp(-c gap_r) >= 1``), or, when ``2**-40 <= c <= 1/4``, a uniform
    run, accepted with ``exp(-c (gap_r - s_r))`` and then with ``lengths_r exp(-c s_r)``
    (Canonne, Kamath and Steinke 2020, Algorithm 1, with ``ln(lengths_r)`` bounded by exact
    rationals) for a public shift ``s_r ~ ln(lengths_r) / c`` (acceptance rate at least
    ``exp(-1/2) / R`` for ``R`` runs). A float estimate of the two rates picks one; it decides
    the speed only (the running time, like any rejection sampler's, depends on the data).
    Proposals come in batches of at most ``2**22``; the expected number of proposals is about
    the smaller of ``sum(lengths) / Z`` and ``e**0.5 R`` where ``2**-40 <= c <= 1/4`` (so at
    most about ``1.65 R``: CPS wages, 39,196 non-empty buckets, take a few milliseconds), and
    ``sum(lengths) / Z <= sum(lengths)`` otherwise.

    Parameters
    ----------
    lengths : array_like of int
        ``lengths[r] >= 1`` points in run ``r``, at most ``2**62`` in all.
    utilities : array_like of float
        ``u_r`` for each run, finite, same length.
    epsilon : float
        > 0.
    sensitivity : float
        ``Delta u``, > 0: the most any point's utility changes between neighbours.
    monotonic : bool, default False
    source : RandomSource, optional

    Returns
    -------
    Release
        ``value``: the chosen point's index (int); ``event``: ``PureDPEvent(epsilon)``;
        ``error``: None.

    Examples
    --------
    >>> from dpcurator.noise import InsecureSeededSource
    >>> # 1,000,001 points; the 10 points of the middle run are the best.
    >>> release = exponential_mechanism_runs([500_000, 10, 499_991], [-40.0, 0.0, -40.0],
    ...                                      epsilon=1.0, sensitivity=1.0,
    ...                                      source=InsecureSeededSource(0))
    >>> 0 <= release.value < 1_000_001, release.event
    (True, PureDPEvent(epsilon=1.0))
    """
    count = int(np.size(utilities))
    if np.shape(utilities) != (count,) or count == 0:
        raise InvalidParameterError(
            "utilities", f"<shape {np.shape(utilities)}>", "must be a non-empty 1-D sequence"
        )
    index = _runs_indices(
        lengths,
        utilities,
        epsilon=epsilon,
        sensitivity=sensitivity,
        monotonic=bool(monotonic),
        size=1,
        source=source,
    )
    return Release(int(index[0]), PureDPEvent(epsilon=check_epsilon(epsilon)))


def report_noisy_max(
    scores: Sequence[float] | NDArray[Any],
    *,
    epsilon: float,
    sensitivity: float = 1.0,
    monotonic: bool = True,
    source: RandomSource | None = None,
) -> Release[int]:
    r"""Index of the (noisily) largest score, by permute-and-flip.

    Permute-and-flip (McKenna and Sheldon 2020, Algorithm 1 and Theorem 1): visit the
    candidates in a random order and return ``r`` with probability
    ``exp(epsilon (s_r - s*) / (2 Delta))`` (``exp(epsilon (s_r - s*) / Delta)`` when
    ``monotonic``, i.e. all scores move in the same direction between neighbours, like counts
    under add/remove); ``s* = max_r s_r``. It is exactly report-noisy-max with one-sided
    exponential noise ``Exp(2 Delta / epsilon)`` (``Exp(Delta/epsilon)`` monotonic) added to each
    score, releasing only the argmax (Ding, Kifer et al. 2021, "The permute-and-flip mechanism is
    identical to report-noisy-max with exponential noise"), and epsilon-DP. Its expected score
    is never below the exponential mechanism's (McKenna and Sheldon 2020, Theorem 2), and the
    same tail bound holds: a candidate ``a`` below the best wins only if its noise exceeds ``a``,
    so ``P[s_M <= s* - (2 Delta/epsilon)(ln|R| + t)] <= e^{-t}`` (:func:`selection_error_bound`).
    Only the index is released, never the noisy maximum (releasing it would cost more).

    Parameters
    ----------
    scores : array_like of float
        One finite score per candidate (e.g. counts), non-empty.
    epsilon : float
        > 0.
    sensitivity : float, default 1.0
        ``Delta``, the most any one score changes between neighbours.
    monotonic : bool, default True
        Whether all scores move in the same direction between neighbours (counts under
        add/remove). Set False otherwise (e.g. replace-one, or scores that trade off).
    source : RandomSource, optional

    Returns
    -------
    Release
        ``value``: the index (int); ``event``: ``PureDPEvent(epsilon)``; ``error``: None.

    Examples
    --------
    >>> from dpcurator.noise import InsecureSeededSource
    >>> release = report_noisy_max([120, 80, 119], epsilon=1.0, source=InsecureSeededSource(0))
    >>> release.value in (0, 1, 2), release.event
    (True, PureDPEvent(epsilon=1.0))
    """
    index = _permute_and_flip_indices(
        scores,
        epsilon=epsilon,
        sensitivity=sensitivity,
        monotonic=bool(monotonic),
        size=1,
        source=source,
    )
    return Release(int(index[0]), PureDPEvent(epsilon=check_epsilon(epsilon)))


def selection_error_bound(
    candidates: int,
    *,
    epsilon: float,
    sensitivity: float,
    beta: float,
    monotonic: bool = False,
) -> float:
    r"""Return the utility gap ``a`` with ``P[u(D, M(D)) <= OPT - a] <= beta`` (selection).

    For the exponential mechanism and for report-noisy-max / permute-and-flip,

    .. math:: a = \frac{2 \Delta}{\epsilon}\left(\ln |R| + \ln \frac{1}{\beta}\right)
              \quad (\Delta/\epsilon \text{ if monotonic})

    (McSherry and Talwar 2007; Dwork and Roth 2014, Theorem 3.11; research note E.4), inflated
    for this implementation by a relative ``2**-15`` (grid sensitivity and the 21-bit
    coefficient) plus ``2**-15 Delta`` (rounding of the utilities to the grid).

    Parameters
    ----------
    candidates : int
        ``|R|``, >= 1.
    epsilon : float
    sensitivity : float
    beta : float
        In (0, 1).
    monotonic : bool, default False

    Returns
    -------
    float

    Examples
    --------
    >>> round(selection_error_bound(100, epsilon=1.0, sensitivity=1.0, beta=0.05), 2)
    15.2
    """
    count = check_integer(candidates, "candidates", minimum=1)
    eps, sens = _check_common(epsilon, sensitivity)
    b = check_probability(beta, "beta", open_left=True, open_right=True)
    factor = 1.0 if monotonic else 2.0
    ideal = factor * sens / eps * (math.log(count) + math.log(1.0 / b))
    slack = 2.0 ** (1 - PRECISION_BITS)
    return ideal * (1.0 + slack) + slack * sens
