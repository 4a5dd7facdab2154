r"""Rounding baselines and the top-down integer descent they share with the exact solver.

* :func:`relaxed` (B5, the lectures' ``r`` variants): the continuous problem with the domains as
  bounds, solved as a QP (:func:`~dpcurator.hierarchy._qp.relaxed_tree_qp`), then every value
  rounded to its nearest integer on its own. Rounding breaks the constraints (``#CV > 0``): the
  violations are reported by the caller, not repaired.
* :func:`topdown` (B7, "TopDown-lite", after the 2020 US Census TopDown algorithm): from the
  root down, parent by parent, the children's noisy values are shifted by weighted least squares
  to sum to the (integer) parent within their domains, then rounded by largest remainder.
  Consistent, integral and within the domains by construction; not optimal.
* :func:`descend`: the top-down pass itself, for any per-child targets and spreads. With the
  two-pass least-squares subtree estimates as targets it is the warm start of the exact solver.

All are post-processing of the noisy counts: no privacy cost.

References
----------
J. M. Abowd et al., "The 2020 Census Disclosure Avoidance System TopDown Algorithm", Harvard Data
Science Review, 2022 (the L2 then L1 passes, one parent at a time). F. Fioretto, P. Van
Hentenryck, K. Zhu, "Differential Privacy of Hierarchical Census Data: An Optimization
Approach", CP 2019 (the relaxed baseline). ``hierarchy.md`` (b) B5 and B7.

Examples
--------
>>> from dpcurator.hierarchy._domains import domains
>>> from dpcurator.hierarchy._tree import Tree
>>> tree = Tree.from_parents([-1, 0, 0, 1, 1, 2, 2])
>>> y = np.array([13.0, 7.0, 8.0, 7.0, -1.0, 2.0, 0.0])
>>> topdown(tree, y, np.ones(7), domains(tree, total=10)).tolist()
[10, 5, 5, 5, 0, 4, 1]
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Final, TypeVar

import numpy as np
from numpy.typing import NDArray

from dpcurator.errors import InternalError
from dpcurator.hierarchy._domains import Domains, as_float_bounds, feasible_intervals
from dpcurator.hierarchy._qp import relaxed_tree_qp
from dpcurator.hierarchy._tree import Links, Tree, segment_order

__all__ = ["descend", "nearest_integers", "relaxed", "topdown"]

SNAP: Final = 1e-6
"""Continuous solutions are snapped to this grid before rounding (solver noise, not signal)."""

_MAX_SHIFT_ITERATIONS: Final = 200

_Number = TypeVar("_Number", np.int64, np.float64)


def nearest_integers(values: NDArray[np.float64]) -> NDArray[np.int64]:
    """Round each value to its nearest integer, halves up, after snapping to ``SNAP``.

    >>> nearest_integers(np.array([2.5, -0.5, 4.4999999999, 1.2])).tolist()
    [3, 0, 5, 1]
    """
    return np.floor(np.round(values / SNAP) * SNAP + 0.5).astype(np.int64)


def relaxed(
    tree: Tree, noisy: NDArray[np.float64], weights: NDArray[np.float64], doms: Domains
) -> NDArray[np.int64]:
    """Return the relaxed baseline: the bounded continuous optimum, rounded value by value.

    Parameters
    ----------
    tree : Tree
        The hierarchy.
    noisy, weights : numpy.ndarray of float64, shape (n_nodes,)
        Noisy counts and objective weights (``> 0``: the QP needs them positive).
    doms : Domains
        Bounds and fixed nodes, passed to the QP as bounds.

    Returns
    -------
    numpy.ndarray of int64
        Possibly inconsistent, possibly outside the domains (see :func:`nearest_integers`).

    Examples
    --------
    >>> from dpcurator.hierarchy._domains import domains
    >>> tree = Tree.from_parents([-1, 0, 0, 1, 1, 2, 2])
    >>> y = np.array([13.0, 7.0, 8.0, 7.0, -1.0, 2.0, 0.0])
    >>> relaxed(tree, y, np.ones(7), domains(tree, lower=None, total=10)).tolist()
    [10, 5, 5, 7, -1, 3, 1]
    """
    return nearest_integers(relaxed_tree_qp(tree, noisy, weights, doms))


def topdown(
    tree: Tree, noisy: NDArray[np.float64], weights: NDArray[np.float64], doms: Domains
) -> NDArray[np.int64]:
    r"""Return TopDown-lite (B7): parent by parent, least squares then largest remainder.

    The root takes its invariant, or its noisy value rounded into its feasible interval. Then,
    for every parent with integer value ``X``, its children take
    ``clip(y_c + lambda / w_c, lo_c, hi_c)`` with ``lambda`` such that they sum to ``X`` (the
    weighted least-squares fit of the children's own noisy values, bounded), rounded down,
    and the parent's remaining units go to the children with the largest weighted remainders.
    The bounds are the feasible intervals of
    :func:`~dpcurator.hierarchy._domains.feasible_intervals`, so every descent succeeds.
    Zero-weight children absorb the parent's remainder first.

    Parameters
    ----------
    tree : Tree
        The hierarchy.
    noisy, weights : numpy.ndarray of float64, shape (n_nodes,)
        Noisy counts and weights ``>= 0``.
    doms : Domains
        Bounds and fixed nodes.

    Returns
    -------
    numpy.ndarray of int64
        Consistent and within ``doms``.

    Examples
    --------
    >>> from dpcurator.hierarchy._domains import domains
    >>> tree = Tree.from_parents([-1, 0, 0])
    >>> topdown(tree, np.array([10.0, 7.0, 4.4]), np.ones(3), domains(tree)).tolist()
    [10, 6, 4]
    """
    low, high = feasible_intervals(tree, doms)
    with np.errstate(divide="ignore"):
        spread = np.where(weights > 0, 1.0 / weights, np.inf)
    root = int(np.clip(nearest_integers(noisy[:1])[0], low[0], high[0]))
    return descend(tree, noisy, spread, low=low, high=high, root=root)


def descend(
    tree: Tree,
    target: NDArray[np.float64],
    spread: NDArray[np.float64],
    *,
    low: NDArray[np.int64],
    high: NDArray[np.int64],
    root: int,
    shift: bool = True,
) -> NDArray[np.int64]:
    r"""Fill the tree top-down with integers: bounded least-squares shift, then rounding.

    For each parent ``p`` (integer value ``X``), its children get
    ``x_c = clip(t_c + \lambda_p s_c, lo_c, hi_c)`` with ``sum_c x_c = X`` (the projection of
    the targets onto the parent's sum in the metric ``1/s``), then integers: ``floor(x_c)``, and
    the parent's remaining units one at a time to the children with the largest
    ``(2 frac_c - 1) / s_c`` (largest remainder when spreads are equal), within the bounds.
    Targets that are already consistent and within the bounds (a bounded least-squares
    estimate) need no shift: ``shift=False`` rounds them directly, the units a parent's
    rounding adds or removes going by the same rule.

    Parameters
    ----------
    tree : Tree
        The hierarchy.
    target : numpy.ndarray of float64, shape (n_nodes,)
        ``t``: what each node should be near.
    spread : numpy.ndarray of float64, shape (n_nodes,)
        ``s >= 0`` (``inf`` allowed): how freely each node absorbs its parent's gap.
    low, high : numpy.ndarray of int64, shape (n_nodes,)
        Feasible intervals (every value of a parent's interval splits into children's
        intervals), with :data:`~dpcurator.hierarchy._domains.UNBOUNDED` sentinels.
    root : int
        The root's value, inside its interval.
    shift : bool, default True
        Whether to shift the targets to each parent's integer value before rounding.

    Returns
    -------
    numpy.ndarray of int64
        Consistent and within ``[low, high]`` (either way).

    Examples
    --------
    >>> tree = Tree.from_parents([-1, 0, 0, 0])
    >>> low, high = np.zeros(4, dtype=np.int64), np.full(4, 9, dtype=np.int64)
    >>> descend(tree, np.array([0, 1.6, 1.6, 0.2]), np.ones(4), low=low, high=high, root=4)
    array([4, 2, 2, 0])
    >>> descend(tree, np.array([4, 1.6, 1.6, 0.8]), np.ones(4), low=low, high=high, root=4,
    ...         shift=False)
    array([4, 2, 1, 1])
    """
    finite_spread = spread[np.isfinite(spread)]
    absorbing = 1e9 * max(1.0, float(finite_spread.max()) if finite_spread.size else 1.0)
    s = np.where(np.isinf(spread), absorbing, spread)
    lo = as_float_bounds(low)
    hi = as_float_bounds(high)
    x = np.zeros(tree.n_nodes, dtype=np.int64)
    x[0] = root
    for links in tree.links:
        c = links.children
        block = _Children(links, target[c], s[c], lo[c], hi[c], low[c], high[c])
        totals = x[links.parents]
        if shift:
            continuous = _bounded_shift(block, totals.astype(np.float64))
        else:
            continuous = np.clip(block.target, block.lo, block.hi)
        x[c] = _round_to_totals(block, continuous, totals)
    return x


# -- the per-parent steps ------------------------------------------------------------------


@dataclass(frozen=True)
class _Children:
    """One level's children with what the descent needs of them."""

    links: Links
    target: NDArray[np.float64]
    spread: NDArray[np.float64]
    lo: NDArray[np.float64]
    hi: NDArray[np.float64]
    low: NDArray[np.int64]
    high: NDArray[np.int64]

    def sum(self, values: NDArray[_Number]) -> NDArray[_Number]:
        """Per parent, the sum of ``values`` (one per child)."""
        return np.add.reduceat(values, self.links.offsets)


def _bounded_shift(block: _Children, totals: NDArray[np.float64]) -> NDArray[np.float64]:
    """Per parent, ``clip(t + lambda s, lo, hi)`` over its children, summing to its total.

    Safeguarded Newton on the piecewise-linear, non-decreasing ``lambda -> sum``: a Newton step
    on the current slope, a jump to the next breakpoint where the slope is 0, bisection when
    a step leaves the bracket. Parents stop once within ``1e-9`` (relative) of their total.
    """
    t, s, seg = block.target, block.spread, block.links.segment
    slope_all = block.sum(s)
    with np.errstate(invalid="ignore", divide="ignore"):
        lam = np.where(slope_all > 0, (totals - block.sum(t)) / slope_all, 0.0)
    bracket_lo = np.full(lam.size, -math.inf)
    bracket_hi = np.full(lam.size, math.inf)
    tolerance = 1e-9 * np.maximum(1.0, np.abs(totals))
    # One buffer each for the child-sized arrays of every iteration: fewer fresh allocations.
    raw, x, free_spread = np.empty_like(t), np.empty_like(t), np.empty_like(t)
    for _ in range(_MAX_SHIFT_ITERATIONS):
        np.take(lam, seg, out=raw)
        raw *= s
        raw += t  # t + lambda s
        np.clip(raw, block.lo, block.hi, out=x)
        gap = block.sum(x) - totals
        active = np.flatnonzero(np.abs(gap) > tolerance)
        if active.size == 0:
            return x
        np.multiply(s, (raw > block.lo) & (raw < block.hi), out=free_spread)
        slope = block.sum(free_spread)[active]
        g = gap[active]
        bracket_hi[active] = np.where(g > 0, lam[active], bracket_hi[active])
        bracket_lo[active] = np.where(g < 0, lam[active], bracket_lo[active])
        with np.errstate(divide="ignore", invalid="ignore"):
            step = np.where(slope > 0, lam[active] - g / slope, 0.0)
        flat = slope == 0
        if np.any(flat):
            step[flat] = _next_breakpoint(block, lam, gap)[active][flat]
        low_end, high_end = bracket_lo[active], bracket_hi[active]
        outside = ~((step > low_end) & (step < high_end))
        bounded = np.isfinite(low_end) & np.isfinite(high_end)
        lam[active] = np.where(outside & bounded, 0.5 * (low_end + high_end), step)
    return np.clip(t + lam[seg] * s, block.lo, block.hi)  # within float noise of the totals


def _next_breakpoint(
    block: _Children, lam: NDArray[np.float64], gap: NDArray[np.float64]
) -> NDArray[np.float64]:
    """Per parent, the nearest ``lambda`` where a child leaves its bound, towards the total."""
    t, s, offsets = block.target, block.spread, block.links.offsets
    here = lam[block.links.segment]
    up = (gap < 0)[block.links.segment]
    with np.errstate(divide="ignore", invalid="ignore"):
        enter = np.where(up, (block.lo - t) / s, (block.hi - t) / s)  # the child starts to move
    ahead = np.where(up, enter > here, enter < here) & (s > 0) & np.isfinite(enter)
    nearest_up = np.minimum.reduceat(np.where(ahead & up, enter, math.inf), offsets)
    nearest_down = np.maximum.reduceat(np.where(ahead & ~up, enter, -math.inf), offsets)
    return np.where(gap < 0, nearest_up, nearest_down)


def _round_to_totals(
    block: _Children, continuous: NDArray[np.float64], totals: NDArray[np.int64]
) -> NDArray[np.int64]:
    """Integers near ``continuous``, within the bounds, summing to each parent's total."""
    seg = block.links.segment
    base = np.clip(np.floor(continuous), block.low, block.high).astype(np.int64)
    demand = totals - block.sum(base)
    adding = (demand > 0)[seg]
    need = np.abs(demand)
    room = np.where(adding, block.high - base, base - block.low)
    # The marginal cost of the next unit up (down) under the child's quadratic proxy
    # (x - t)^2 / s: taking the cheapest first is largest remainder when the proxies are equal.
    step = np.where(adding, 1.0, -1.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        marginal = (2.0 * step * (base - block.target) + 1.0) / block.spread
    priority = np.nan_to_num(-marginal, nan=0.0, posinf=math.inf, neginf=-math.inf)
    given = _allocate(block, priority, np.minimum(room, 1), need)
    rest = need - block.sum(given)
    if np.any(rest > 0):  # only when the continuous step stopped short, or bounds bind
        given += _allocate(block, priority, room - given, rest)
    out = base + np.where(adding, given, -given)
    if np.any(block.sum(out) != totals):
        raise InternalError("top-down rounding could not meet a parent's total")
    return out


def _allocate(
    block: _Children,
    priority: NDArray[np.float64],
    capacity: NDArray[np.int64],
    demand: NDArray[np.int64],
) -> NDArray[np.int64]:
    """Per parent, hand out ``demand`` units to children by priority, up to their capacity."""
    seg = block.links.segment
    capacity = np.minimum(capacity, demand[seg])  # keeps the running sums small
    given = np.zeros_like(capacity)
    open_ = np.flatnonzero(capacity > 0)  # only these can take units: sort just them
    parent = seg[open_]  # also the parents of the sorted children: the sort keeps parents
    order = open_[segment_order(parent, -priority[open_])]
    room = capacity[order]
    before = np.cumsum(room) - room  # units offered to earlier children, across parents
    position = np.arange(order.size)
    first = np.maximum.accumulate(np.where(parent != np.roll(parent, 1), position, 0))
    given[order] = np.clip(demand[parent] - (before - before[first]), 0, room)
    return given
