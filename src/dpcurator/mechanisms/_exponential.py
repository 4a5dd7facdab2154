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

import math
from collections.abc import Sequence
from fractions import Fraction
from typing import Any, TypeVar

import numpy as np
from numpy.typing import NDArray

from dpcurator._validation import check_epsilon, check_integer, check_positive, check_probability
from dpcurator.accounting import PureDPEvent
from dpcurator.errors import InvalidParameterError
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

__all__ = ["exponential_mechanism", "report_noisy_max", "selection_error_bound"]

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
        gaps = self.gaps[indices]
        c = self.coefficient
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
