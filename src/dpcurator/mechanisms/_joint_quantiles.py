r"""Several quantiles of one column released jointly by one exponential mechanism (JointExp).

Gillenwater, Joseph and Kulesza 2021 ("Differentially Private Quantiles", ICML, Section 3,
"JointExp") release ``m`` quantiles at once: one exponential mechanism over the sorted
``m``-tuples of outputs whose utility counts, for each gap between consecutive outputs, how far
the number of data values in it is from what the levels ask. One charge of epsilon pays for all
``m``, instead of ``epsilon / m`` for each of ``m`` separate mechanisms, and the outputs come
out sorted.

Here the outputs are points of a public grid, given in *runs* of consecutive points that share
a rank (the number of data values below them), as in
:func:`~dpcurator.mechanisms.exponential_mechanism_runs`; the law is sampled by dynamic
programming over the runs, in log space, and every draw is exact given its log-weights (see
:func:`joint_quantile_mechanism`).

Examples
--------
>>> from dpcurator.noise import InsecureSeededSource
>>> # 10 data values spread over 101 grid points 0..100: value i*10 + 5 for i = 0..9.
>>> lengths = [6] + [10] * 9 + [5]  # runs of points between consecutive values
>>> ranks = list(range(11))  # run r has r values below it
>>> release = joint_quantile_mechanism(lengths, ranks, [0.25, 0.5, 0.75], epsilon=2.0,
...                                    sensitivity=joint_quantile_sensitivity([0.25, 0.5, 0.75]),
...                                    source=InsecureSeededSource(0))
>>> points = release.value
>>> len(points), list(points) == sorted(points), release.event
(3, True, PureDPEvent(epsilon=2.0))
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from fractions import Fraction
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpcurator._validation import check_epsilon, check_positive, check_probability, floor_float
from dpcurator.accounting import PureDPEvent
from dpcurator.errors import InvalidParameterError
from dpcurator.mechanisms._common import PRECISION_BITS, check_scale_range
from dpcurator.mechanisms._exponential import _bernoulli_gaps, _runs_indices
from dpcurator.mechanisms._release import Release
from dpcurator.noise import RandomSource, grid_exponent, resolve_source, uniform_integers

__all__ = [
    "joint_quantile_error_bound",
    "joint_quantile_mechanism",
    "joint_quantile_sensitivity",
]

FloatArray = NDArray[np.float64]

_FRACTION_BITS = 32
"""The fractional part of a log-weight gap is rounded to ``2**-32`` nats (exact Bernoulli)."""

MAX_LEVELS = 64
"""The most quantiles released jointly (the dynamic programme holds ``m (m + 1) / 2`` rows)."""


def _check_levels(levels: object) -> tuple[float, ...]:
    values = np.asarray(levels, dtype=np.float64).reshape(-1)
    if values.size == 0 or values.size > MAX_LEVELS:
        raise InvalidParameterError(
            "levels", f"<{values.size} levels>", f"must hold 1 to {MAX_LEVELS} quantile levels"
        )
    out = tuple(check_probability(float(q), "levels") for q in values)
    if any(b <= a for a, b in itertools.pairwise(out)):
        raise InvalidParameterError("levels", out, "must be strictly increasing")
    return out


def _widths(levels: Sequence[float]) -> list[Fraction]:
    """Return the exact gap widths ``q_j - q_{j-1}`` (``q_0 = 0``, ``q_{m+1} = 1``)."""
    ends = [Fraction(0), *(Fraction(q) for q in levels), Fraction(1)]
    return [b - a for a, b in itertools.pairwise(ends)]


def joint_quantile_sensitivity(levels: Sequence[float], rows: int = 1) -> float:
    r"""Return the sensitivity of the joint utility under add/remove of ``rows`` rows.

    The utility of sorted outputs ``o_1 <= ... <= o_m`` is
    ``u(o) = -(1/2) sum_{j=1}^{m+1} |c_j(o) - (q_j - q_{j-1}) n|``, ``c_j`` the data values
    between ``o_{j-1}`` and ``o_j`` (``o_0 = -inf``, ``o_{m+1} = +inf``). Adding one value moves
    the count of its own gap by 1 and every target by ``-d_j = -(q_j - q_{j-1})``, so ``u``
    moves by at most ``(1 - d_k) / 2 + sum_{j != k} d_j / 2 = 1 - d_k``:

    .. math:: \Delta u = \text{rows} \cdot \Bigl(1 - \min_{1 \le j \le m+1} (q_j - q_{j-1})
              \Bigr),

    which for one level is Smith's ``max(q, 1 - q)`` per row (the utility is then
    ``-|rank(o) - q n|``). Rounded up to a float.

    >>> joint_quantile_sensitivity([0.25, 0.5, 0.75]), joint_quantile_sensitivity([0.5], rows=3)
    (0.75, 1.5)
    """
    qs = _check_levels(levels)
    if isinstance(rows, bool) or not isinstance(rows, int) or rows < 1:
        raise InvalidParameterError("rows", rows, "must be an integer >= 1")
    exact = rows * (1 - min(_widths(qs)))
    out = float(exact)
    return out if Fraction(out) >= exact else math.nextafter(out, math.inf)


def joint_quantile_error_bound(
    points: int, levels: int, *, epsilon: float, sensitivity: float, beta: float
) -> float:
    r"""Return ``a`` such that every released quantile's rank error exceeds ``e* + a`` w.p. <= beta.

    The mechanism's utility is ``u = -(1/2) TV(e)``, the half total variation of the rank
    errors ``e_j = rank(o_j) - q_j n`` padded with ``e_0 = e_{m+1} = 0``, so every
    ``|e_j| <= -u``. The exponential mechanism's utility bound (McSherry and Talwar 2007; Dwork
    and Roth 2014, Theorem 3.11) over the ``C(P + m - 1, m) <= P**m`` sorted tuples of ``P``
    points gives, with probability at least ``1 - beta``, for every ``j`` at once,

    .. math:: |e_j| \le -\mathrm{OPT} + \frac{2\Delta}{\epsilon}
              \left(\ln \binom{P + m - 1}{m} + \ln \frac{1}{\beta}\right), \qquad
              -\mathrm{OPT} \le e^* = \sum_j \min_o |\mathrm{rank}(o) - q_j n|

    (``e*``: the best points' rank errors, each chosen alone, form a sorted tuple). The bound
    is returned for ``e* = 0`` (the rank error of the best tuple is added by the caller).

    >>> round(joint_quantile_error_bound(1025, 3, epsilon=1.0, sensitivity=0.75, beta=0.05), 2)
    33.01
    """
    count = int(points)
    m = int(levels)
    if count < 1 or m < 1:
        raise InvalidParameterError("points", points, "and levels must be >= 1")
    eps = check_epsilon(epsilon)
    sens = check_positive(sensitivity, "sensitivity")
    b = check_probability(beta, "beta", open_left=True, open_right=True)
    log_tuples = math.lgamma(count + m) - math.lgamma(m + 1) - math.lgamma(count)
    ideal = 2.0 * sens / eps * (log_tuples + math.log(1.0 / b))
    slack = 2.0 ** (1 - PRECISION_BITS)
    return ideal * (1.0 + slack) + slack * sens


# -- exact draws from log-weights --------------------------------------------------------------
def _categorical(log_weights: FloatArray, source: RandomSource) -> int:
    """Draw ``i`` with probability ``exp(w_i) / sum exp(w)`` (``-inf``: never), exactly.

    Each gap ``g_i = max(w) - w_i`` is split into its integer part ``b_i`` and a fraction
    rounded to ``2**-32``. A stratum ``b`` is drawn with probability proportional to
    ``n_b e**-b`` (``n_b`` gaps with that integer part) by
    :func:`~dpcurator.mechanisms._exponential._runs_indices` with coefficient exactly 1 per
    stratum (its utilities ``-b`` lie on its grid, and ``epsilon = 2 + 2**(1 - k)`` makes its
    dyadic coefficient exactly ``2**-k`` per grid unit), a uniform member of it is proposed and
    kept with probability ``exp(-(g_i - b_i))`` (:func:`_bernoulli_gaps`, at least ``e**-1``):
    the kept member has probability proportional to ``exp(-g_i)``. No float ``exp`` decides it.
    """
    finite = np.flatnonzero(np.isfinite(log_weights))
    gaps = float(log_weights[finite].max()) - log_weights[finite]
    strata = np.minimum(np.floor(gaps), 2.0**34).astype(np.int64)
    fractions = np.rint((gaps - np.floor(gaps)) * 2.0**_FRACTION_BITS).astype(np.int64)
    order = np.argsort(strata, kind="stable")
    levels, counts = np.unique(strata[order], return_counts=True)
    bits = grid_exponent(1.0, PRECISION_BITS)
    epsilon = 2.0 + math.ldexp(1.0, 1 - bits)
    while True:
        point = int(
            _runs_indices(
                counts,
                -levels.astype(np.float64),
                epsilon=epsilon,
                sensitivity=1.0,
                monotonic=False,
                size=1,
                source=source,
            )[0]
        )
        member = int(order[point])
        keep = _bernoulli_gaps(fractions[[member]], 2.0**-_FRACTION_BITS, source)
        if bool(keep[0]):
            return int(finite[member])


def _multiset(length: int, size: int, source: RandomSource) -> list[int]:
    """Return a uniform multiset of ``size`` points of ``0 .. length - 1``, sorted (stars and bars).

    A uniform ``size``-subset ``s_1 < ... < s_size`` of ``length + size - 1`` slots (distinct
    uniform draws) maps one to one onto the multisets by ``s_i - (i - 1)``.
    """
    chosen: set[int] = set()
    while len(chosen) < size:
        chosen.add(int(uniform_integers(length + size - 1, source=source)))
    return [s - i for i, s in enumerate(sorted(chosen))]


# -- the dynamic programme ---------------------------------------------------------------------
def _prefix_lse(values: FloatArray) -> FloatArray:
    return np.logaddexp.accumulate(values) if values.size else values


def _range_lse(values: FloatArray, low: NDArray[np.int64], high: NDArray[np.int64]) -> FloatArray:
    """``log sum exp(values[low_i:high_i])`` for each ``i`` (``-inf`` if empty), by a segment tree.

    No subtraction of sums: each range is a union of ``O(log n)`` disjoint tree nodes.
    """
    size = 1
    while size < max(values.size, 1):
        size *= 2
    tree = np.full(2 * size, -np.inf)
    tree[size : size + values.size] = values
    width = size
    while width > 1:  # the nodes of each level at once, from the leaves up
        width //= 2
        tree[width : 2 * width] = np.logaddexp(
            tree[2 * width : 4 * width : 2], tree[2 * width + 1 : 4 * width : 2]
        )
    out = np.full(low.size, -np.inf)
    lo = low.astype(np.int64) + size
    hi = high.astype(np.int64) + size
    with np.errstate(invalid="ignore"):
        while True:
            active = lo < hi
            if not active.any():
                break
            left = active & (lo % 2 == 1)
            out[left] = np.logaddexp(out[left], tree[lo[left]])
            lo[left] += 1
            right = active & (hi % 2 == 1)
            hi[right] -= 1
            out[right] = np.logaddexp(out[right], tree[hi[right]])
            lo //= 2
            hi //= 2
    return out


def _forward(
    logl: FloatArray,
    ranks: FloatArray,
    targets: Sequence[float],
    lengths: NDArray[np.int64],
    half: float,
) -> list[FloatArray]:
    """Return the forward messages ``alpha[j]``, of shape ``(j + 1, R)``.

    ``alpha[j][k, r]``: the log-weight of outputs ``1 .. j + 1`` with output ``j + 1`` the
    ``(k + 1)``-th in run ``r``, all utility terms up to gap ``j + 1`` included.
    """
    m = len(targets) - 1
    count = ranks.size
    first = logl - half * np.abs(ranks - targets[0])
    alpha = [first.reshape(1, count)]
    runs = np.arange(count, dtype=np.int64)
    for j in range(1, m):
        previous = alpha[-1]
        total = np.logaddexp.reduce(previous, axis=0) if previous.shape[0] > 1 else previous[0]
        t = targets[j]
        # Earlier runs r' with rank(r') <= rank(r) - t: |rank(r) - rank(r') - t| = (...) - t.
        split = np.searchsorted(ranks, ranks - t, side="right")  # r' < split
        split = np.minimum(split, runs)
        below = _prefix_lse(total + half * ranks)
        far = np.where(split > 0, below[np.maximum(split - 1, 0)], -np.inf)
        far = far - half * (ranks - t)
        near = _range_lse(total - half * ranks, split, runs) + half * (ranks - t)
        fresh = logl + np.logaddexp(far, near)
        rows = [fresh]
        for k in range(1, j + 1):  # one more output in the same run: (l + k) / (k + 1)
            factor = np.log((lengths + k).astype(np.float64) / (k + 1))
            rows.append(previous[k - 1] + factor - half * t)
        alpha.append(np.vstack(rows))
    return alpha


def joint_quantile_mechanism(
    lengths: Sequence[int] | NDArray[np.integer[Any]],
    ranks: Sequence[int] | NDArray[np.integer[Any]],
    levels: Sequence[float],
    *,
    epsilon: float,
    sensitivity: float,
    total: int | None = None,
    source: RandomSource | None = None,
) -> Release[tuple[int, ...]]:
    r"""Release the quantiles at ``levels`` of one data set jointly (JointExp on a grid).

    The candidates are the sorted ``m``-tuples ``o_1 <= ... <= o_m`` of ``P = sum(lengths)``
    points ``0, 1, ...``; run ``r`` is the next ``lengths[r]`` points, each with ``ranks[r]``
    data values below it (non-decreasing, the last at most ``total = n``). With
    ``rank(o_0) = 0``, ``rank(o_{m+1}) = n``, ``q_0 = 0`` and ``q_{m+1} = 1``,

    .. math:: u(o) = -\frac12 \sum_{j=1}^{m+1} \bigl|\mathrm{rank}(o_j) - \mathrm{rank}(o_{j-1})
              - (q_j - q_{j-1})\, n\bigr|, \qquad
              P[M(D) = o] \propto \exp\left(\frac{\epsilon\, u(D, o)}{2 \Delta u}\right),

    the exponential mechanism (McSherry and Talwar 2007) over a public finite set of tuples: it
    is epsilon-DP whenever ``|u(D, o) - u(D', o)| <= Delta u`` for all ``o`` and neighbours
    ``D, D'`` — under add/remove of one row ``Delta u = 1 - min_j (q_j - q_{j-1})``, of a unit
    of at most ``c`` rows ``c`` times that (:func:`joint_quantile_sensitivity`). This is the
    JointExp mechanism of Gillenwater, Joseph and Kulesza 2021 ("Differentially Private
    Quantiles", Section 3; their utility is ``2u``, with sensitivity 2 under replace-one) on the
    grid's points instead of the reals: a run of ``l`` points holding ``k`` outputs offers
    ``C(l + k - 1, k)`` sorted placements (their ``l**k / k!`` volume). For one level it is
    Smith's mechanism (:func:`~dpcurator.mechanisms.exponential_mechanism_runs` with utility
    ``-|rank - q n|``). Utility: see :func:`joint_quantile_error_bound`.

    Sampling. Forward messages over (output ``j``, its run, how many outputs share the run) are
    computed in float64 log space, ``O(m^2 R + m R log R)`` for ``R`` runs (ranges of earlier
    runs by a segment tree of log-sum-exps, never by subtracting sums); the tuple is then drawn
    backwards, output ``m`` first, each step a categorical draw that is exact given its
    log-weights (rounded to ``2**-32`` nats; :func:`_categorical`, from ``dpcurator.noise``
    bits only), and the points within each run uniformly among its sorted placements. The
    messages themselves carry float64 rounding (relative ``~1e-15`` per operation), which moves
    each output's log-probability by far less than ``2**-20``; it is not charged.

    Parameters
    ----------
    lengths : array_like of int
        ``lengths[r] >= 1``, at most ``2**62`` points in all.
    ranks : array_like of int
        Data values below run ``r``'s points: non-decreasing, in ``[0, total]``.
    levels : sequence of float
        Strictly increasing levels in ``[0, 1]``, at most :data:`MAX_LEVELS`.
    epsilon : float
        > 0: the whole charge, for all levels.
    sensitivity : float
        ``Delta u`` > 0 (:func:`joint_quantile_sensitivity`).
    total : int, optional
        ``n``, the number of data values (default: ``ranks[-1]``, right when the last run lies
        above every value).
    source : RandomSource, optional

    Returns
    -------
    Release
        ``value``: the chosen points' indices, one per level, sorted; ``event``:
        ``PureDPEvent(epsilon)``; ``error``: None.

    Examples
    --------
    >>> from dpcurator.noise import InsecureSeededSource
    >>> release = joint_quantile_mechanism([3, 1, 1, 3], [0, 1, 2, 3], [0.1, 0.9],
    ...                                    epsilon=1.0, sensitivity=0.9,
    ...                                    source=InsecureSeededSource(1))
    >>> low, high = release.value
    >>> 0 <= low <= high < 8
    True
    """
    eps = check_epsilon(epsilon)
    sens = check_positive(sensitivity, "sensitivity")
    check_scale_range(eps, sens)
    qs = _check_levels(levels)
    runs, rank = _check_runs(lengths, ranks, total)
    n = int(rank[-1]) if total is None else int(total)
    src = resolve_source(source)
    targets = [float(w * n) for w in _widths(qs)]
    # exp(eps u / (2 Delta)) with u = -(1/2) sum |...|: the coefficient rounded down exactly
    half = floor_float(Fraction(eps) / (4 * Fraction(sens)))
    ranks_f = rank.astype(np.float64)
    logl = np.log(runs.astype(np.float64))
    alpha = _forward(logl, ranks_f, targets, runs, half)
    m = len(qs)
    last = alpha[-1] - half * np.abs(n - ranks_f - targets[m])
    flat = _categorical(last.reshape(-1), src)
    k, r = divmod(flat, ranks_f.size)
    chosen = [0] * m
    j = m - 1
    while True:
        chosen[j] = r
        if j == 0:
            break
        if k > 0:  # output j shares run r with output j - 1
            k -= 1
        else:
            previous = alpha[j - 1][:, :r] - half * np.abs(ranks_f[r] - ranks_f[:r] - targets[j])
            flat = _categorical(previous.reshape(-1), src)
            k, r = divmod(flat, r)
        j -= 1
    starts = np.concatenate([[0], np.cumsum(runs)[:-1]])
    points: list[int] = []
    for run in sorted(set(chosen)):
        size = chosen.count(run)
        offsets = _multiset(int(runs[run]), size, src)
        points += [int(starts[run]) + o for o in offsets]
    return Release(tuple(points), PureDPEvent(epsilon=eps))


def _check_runs(
    lengths: object, ranks: object, total: int | None
) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    runs = np.asarray(lengths)
    rank = np.asarray(ranks)
    if runs.ndim != 1 or runs.size == 0 or rank.shape != runs.shape:
        raise InvalidParameterError(
            "lengths", f"<shape {runs.shape}>", "and ranks must be non-empty, of equal length"
        )
    for name, values in (("lengths", runs), ("ranks", rank)):
        if not np.issubdtype(values.dtype, np.integer):
            raise InvalidParameterError(name, f"<dtype {values.dtype}>", "must be integers")
    runs = runs.astype(np.int64)
    rank = rank.astype(np.int64)
    if int(runs.min()) < 1 or sum(int(v) for v in runs) > 2**62:
        raise InvalidParameterError("lengths", "<lengths>", "must be >= 1 and sum to <= 2**62")
    top = int(rank[-1]) if total is None else int(total)
    if int(rank.min()) < 0 or np.any(np.diff(rank) < 0) or int(rank[-1]) > top or top > 2**53:
        raise InvalidParameterError(
            "ranks", "<ranks>", "must be non-decreasing, >= 0 and at most total (<= 2**53)"
        )
    return runs, rank
