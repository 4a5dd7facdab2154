r"""Two-pass weighted least squares on a tree (Hay et al. 2010, generalised): algorithm B6.

Given noisy counts ``y`` with weights ``w`` (inverse noise variances), the consistent
least-squares estimate

.. math:: \hat x = \arg\min_x \sum_v w_v (x_v - y_v)^2 \quad \text{s.t.} \quad
          x_v = \sum_{c \in ch(v)} x_c \; (v \text{ internal}), \quad x_v = f_v \; (v \text{ fixed})

is computed in two linear passes. Up: each subtree's best estimate of its root from the
measurements inside it, ``z_v`` with variance ``V_v`` (leaf: ``z = y, V = 1/w``; internal:
combine ``y_v`` with the children's sum ``S = sum z_c``, variance ``VS = sum V_c``:
``z_v = (w_v y_v + S/VS) / (w_v + 1/VS)``, ``V_v = 1/(w_v + 1/VS)``; a fixed node has
``z = f, V = 0``). Down: the root gets its fixed value or ``z_root``; each child gets
``x_c = z_c + (V_c / VS)(x_v - S)``. A node of weight 0 is unmeasured (``V = inf``): the
discrepancy goes to unmeasured children first, shared equally.

Guarantee (Hay, Rastogi, Miklau, Suciu, "Boosting the Accuracy of Differentially Private
Histograms Through Consistency", PVLDB 3(1), 2010, Theorem 3 for complete trees with equal
variances): the estimate is the minimum-variance linear unbiased estimator, and it is the exact
solution of the weighted least-squares problem above (its Gaussian-elimination on a tree, i.e.
belief propagation; ``hierarchy.md`` (b) B6). It is post-processing: no privacy cost. It is
continuous and may be negative or fractional; it ignores domain bounds other than fixed nodes.

With the bounds, :func:`bounded_least_squares` solves the same problem under
``lo_v <= x_v <= hi_v`` (the relaxed problem of B5) by the primal-dual active-set method: each
pass is one run of the two passes above with the nodes at a bound fixed there.

Examples
--------
Hay's example (``hierarchy.md`` D3): a parent measured at 0, children at 1 and 0.

>>> from dpcurator.hierarchy._tree import Tree
>>> tree = Tree.from_parents([-1, 0, 0])
>>> least_squares(tree, [0.0, 1.0, 0.0]).round(6).tolist()
[0.333333, 0.666667, -0.333333]
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final

import numpy as np
from numpy.typing import ArrayLike, NDArray

from dpcurator.hierarchy._domains import (
    Domains,
    as_float_bounds,
    check_domains,
    feasible_intervals,
    node_values,
    node_weights,
)
from dpcurator.hierarchy._tree import Links, Tree

__all__ = [
    "BoundedEstimate",
    "SubtreeEstimates",
    "bounded_least_squares",
    "descend_least_squares",
    "least_squares",
    "subtree_estimates",
]

MAX_ACTIVE_SET_PASSES: Final = 100
"""Passes of :func:`bounded_least_squares` before it returns unconverged."""


@dataclass(frozen=True)
class SubtreeEstimates:
    """The up pass of B6: each subtree's estimate of its root from the measurements inside it.

    Attributes
    ----------
    estimate : numpy.ndarray of float64
        ``z_v`` (a fixed node: its value).
    variance : numpy.ndarray of float64
        ``V_v`` in ``[0, inf]`` (0: known exactly; inf: nothing measured).
    child_sum : numpy.ndarray of float64
        ``S_v = sum_{c in ch(v)} z_c`` (0 at leaves).
    child_spread : numpy.ndarray of float64
        ``VS_v = sum_{c in ch(v)} V_c`` (0 at leaves).

    Examples
    --------
    >>> from dpcurator.hierarchy._tree import Tree
    >>> up = subtree_estimates(Tree.from_parents([-1, 0, 0]), [0.0, 1.0, 0.0], np.ones(3))
    >>> up.estimate.round(6).tolist(), up.variance.round(6).tolist()
    ([0.333333, 1.0, 0.0], [0.666667, 1.0, 1.0])
    """

    estimate: NDArray[np.float64]
    variance: NDArray[np.float64]
    child_sum: NDArray[np.float64]
    child_spread: NDArray[np.float64]


def subtree_estimates(
    tree: Tree,
    noisy: NDArray[np.float64] | ArrayLike,
    weights: NDArray[np.float64],
    fixed: NDArray[np.bool_] | None = None,
    fixed_values: NDArray[np.int64] | None = None,
) -> SubtreeEstimates:
    """Run the up pass of two-pass least squares (B6).

    Parameters
    ----------
    tree : Tree
        The hierarchy.
    noisy : array_like of float, shape (n_nodes,)
        Noisy counts ``y``.
    weights : numpy.ndarray of float64, shape (n_nodes,)
        ``w >= 0`` (0: unmeasured).
    fixed : numpy.ndarray of bool, optional
        Nodes whose value is known exactly, ``fixed_values`` (both or neither).
    fixed_values : numpy.ndarray of int64, optional
        Their values (read where ``fixed``).

    Returns
    -------
    SubtreeEstimates
    """
    y = np.asarray(noisy, dtype=np.float64)
    n = tree.n_nodes
    pinned = np.zeros(n, dtype=np.bool_) if fixed is None else fixed
    values = np.zeros(n) if fixed_values is None else fixed_values.astype(np.float64)
    return _Measurements(tree, y, weights).pinned(pinned, values)[1]


@dataclass(frozen=True)
class _Measurements:
    """The noisy counts and weights of a tree, for up passes with some nodes pinned.

    ``own_estimate`` and ``own_variance`` start as the leaves' ``(y, 1/w)`` (``(0, inf)``
    unmeasured); each up pass writes the internal nodes' own estimates over them, and their
    children's sums into ``child_sum`` and ``child_spread`` (buffers reused from pass to pass).
    """

    tree: Tree
    noisy: NDArray[np.float64]
    weights: NDArray[np.float64]
    own_estimate: NDArray[np.float64] = field(init=False)
    own_variance: NDArray[np.float64] = field(init=False)
    child_sum: NDArray[np.float64] = field(init=False)
    child_spread: NDArray[np.float64] = field(init=False)

    def __post_init__(self) -> None:
        measured = self.weights > 0
        with np.errstate(divide="ignore"):
            object.__setattr__(self, "own_variance", np.where(measured, 1.0 / self.weights, np.inf))
        object.__setattr__(self, "own_estimate", np.where(measured, self.noisy, 0.0))
        object.__setattr__(self, "child_sum", np.zeros(self.tree.n_nodes))  # 0 at leaves
        object.__setattr__(self, "child_spread", np.zeros(self.tree.n_nodes))

    def pinned(
        self, pinned: NDArray[np.bool_], values: NDArray[np.float64]
    ) -> tuple[SubtreeEstimates, SubtreeEstimates]:
        """Bottom-up, every node's own estimate and the one its parent sees (B6's up pass).

        A node's *own* estimate merges its measurement with its children's as its parent sees
        them; its parent sees its ``values`` entry (variance 0) where ``pinned``, else its own
        estimate. Returns ``(own, seen)``, sharing ``child_sum`` and ``child_spread``.
        """
        own_estimate, own_variance = self.own_estimate, self.own_variance
        child_sum, child_spread = self.child_sum, self.child_spread
        estimate = np.where(pinned, values, own_estimate)  # final at leaves; parents below
        variance = np.where(pinned, 0.0, own_variance)
        for links in reversed(self.tree.links):
            v = links.parents
            total, spread = links.sum(estimate), links.sum(variance)
            child_sum[v], child_spread[v] = total, spread
            w = self.weights[v]
            with np.errstate(divide="ignore", invalid="ignore"):
                precision = w + 1.0 / spread  # 1/inf = 0; 1/0 = inf: children known exactly
                combined = (w * self.noisy[v] + total / spread) / precision
                # Exact children, or nothing measured at all: the estimate is the children's sum.
                own_estimate[v] = np.where((spread == 0) | (precision == 0), total, combined)
                own_variance[v] = np.where(spread == 0, 0.0, 1.0 / precision)
            estimate[v] = np.where(pinned[v], values[v], own_estimate[v])
            variance[v] = np.where(pinned[v], 0.0, own_variance[v])
        return (
            SubtreeEstimates(own_estimate, own_variance, child_sum, child_spread),
            SubtreeEstimates(estimate, variance, child_sum, child_spread),
        )


def least_squares(
    tree: Tree,
    noisy: ArrayLike,
    weights: ArrayLike | None = None,
    doms: Domains | None = None,
) -> NDArray[np.float64]:
    r"""Return the consistent weighted least-squares estimate (B6, Hay et al. generalised).

    .. math:: \hat x = \arg\min_{x \text{ consistent}, \; x_F = f} \sum_v w_v (x_v - y_v)^2

    Exact (up to float rounding) in ``O(n)``: two passes over the levels, vectorised. Fixed
    nodes of ``doms`` (``lower == upper``: the total, invariants) are honoured; other bounds
    are ignored (the estimate may be negative or fractional). See the module docstring for the
    guarantee and its source.

    Parameters
    ----------
    tree : Tree
        The hierarchy.
    noisy : array_like of float, shape (n_nodes,)
        Noisy counts, finite.
    weights : array_like of float, optional
        ``w >= 0`` per node or a scalar (default 1); typically inverse noise variances.
    doms : Domains, optional
        Domains whose fixed nodes are kept; none by default.

    Returns
    -------
    numpy.ndarray of float64, shape (n_nodes,)

    Raises
    ------
    InvalidParameterError
        Naming ``noisy``, ``weights`` or ``doms`` for wrong shapes or values.

    Examples
    --------
    The lectures' example D2 with the total fixed to 10:

    >>> from dpcurator.hierarchy._domains import domains
    >>> from dpcurator.hierarchy._tree import Tree
    >>> tree = Tree.from_parents([-1, 0, 0, 1, 1, 2, 2])
    >>> y = [13, 7, 8, 7, -1, 2, 0]
    >>> (least_squares(tree, y, doms=domains(tree, total=10)) * 3).round(9).tolist()
    [30.0, 16.0, 14.0, 20.0, -4.0, 10.0, 4.0]
    """
    y = node_values(tree, noisy)
    w = node_weights(tree, weights)
    fixed = None if doms is None else doms.fixed()
    if doms is not None:
        check_domains(tree, doms)
    up = subtree_estimates(tree, y, w, fixed, None if doms is None else doms.lower)
    return descend_least_squares(tree, up, float(up.estimate[0]))


def descend_least_squares(tree: Tree, up: SubtreeEstimates, root: float) -> NDArray[np.float64]:
    """Run the down pass of B6 from a root value; return the estimate of every node.

    Examples
    --------
    >>> from dpcurator.hierarchy._tree import Tree
    >>> tree = Tree.from_parents([-1, 0, 0])
    >>> up = subtree_estimates(tree, [0.0, 0.5, 0.5], np.ones(3))
    >>> descend_least_squares(tree, up, 1 / 3).round(6).tolist()
    [0.333333, 0.166667, 0.166667]
    """
    x = np.empty(tree.n_nodes)
    x[0] = root
    for links in tree.links:
        gap = (x[links.parents] - up.child_sum[links.parents])[links.segment]
        shares = _shares(links, up.variance, up.child_spread[links.parents])
        x[links.children] = up.estimate[links.children] + gap * shares
    return x


@dataclass(frozen=True)
class BoundedEstimate:
    """The result of :func:`bounded_least_squares`.

    Attributes
    ----------
    values : numpy.ndarray of float64
        Consistent real values; within the domains' feasible intervals (to ``1e-9`` relative)
        when ``converged``.
    spread : numpy.ndarray of float64
        The unbounded subtree variances ``V_v`` of B6 (``inf``: nothing measured), how freely
        each node absorbs its parent's gap: the rounding's tie-breaker.
    passes : int
        Active-set passes run (each one up and one down pass).
    converged : bool
        Whether the active set stopped changing: then ``values`` is the bounded optimum.
    """

    values: NDArray[np.float64]
    spread: NDArray[np.float64]
    passes: int
    converged: bool


def bounded_least_squares(
    tree: Tree,
    noisy: NDArray[np.float64],
    weights: NDArray[np.float64],
    doms: Domains,
    *,
    max_passes: int = MAX_ACTIVE_SET_PASSES,
) -> BoundedEstimate:
    r"""Return the consistent weighted least-squares estimate within the domains (B5, relaxed).

    .. math:: \min_x \sum_v w_v (x_v - y_v)^2 \quad \text{s.t.} \quad
              x_v = \sum_{c \in ch(v)} x_c, \quad lo_v \le x_v \le hi_v

    with ``[lo, hi]`` the feasible intervals of ``doms`` (fixed nodes: ``lo = hi``). Primal-dual
    active set (Hintermüller, Ito, Kunisch, "The primal-dual active set strategy as a
    semismooth Newton method", SIAM J. Optim. 13(3), 2002): a pass solves the least-squares
    problem with the nodes of the active set fixed at their bounds (B6's two passes, ``O(n)``),
    then computes every node's bound multiplier ``mu_v = 2 w_v (x_v - y_v) + nu_v - nu_{p(v)}``
    from the prices ``nu`` of the consistency equalities (:func:`_prices`). A node joins the set
    when it leaves its interval and stays while its multiplier pushes against its bound; both
    tests are one comparison, of the price ``nu_{p(v)}`` its parent offers with its marginal
    cost at the bound, ``2 (lo_v - z_v) / V_v`` (:func:`_margin`; ``z_v, V_v`` its own subtree
    estimate, constant at the leaves). A repeated active set satisfies the KKT conditions, so
    ``values`` is then the optimum of the convex problem. Each pass is ``O(n)``; the count of
    passes is not bounded by theory, hence ``max_passes``. Where active bounds are redundant
    (a node and its only child both at a bound) the multipliers are not unique and the sets
    may cycle; a repeated set stops the passes too, and the result says ``converged=False``
    (the exact solver only needs a start).

    Parameters
    ----------
    tree : Tree
        The hierarchy.
    noisy, weights : numpy.ndarray of float64, shape (n_nodes,)
        Noisy counts and weights ``>= 0`` (validated by the caller).
    doms : Domains
        The domains.
    max_passes : int, optional
        Passes before returning unconverged (the last pass's consistent values).

    Returns
    -------
    BoundedEstimate

    Examples
    --------
    The lectures' example D2 with the total fixed to 10: least squares gives ``g2 = -4/3``
    (module docstring); within the bounds ``g2 = 0`` and the rest is least squares again.

    >>> from dpcurator.hierarchy._domains import domains
    >>> tree = Tree.from_parents([-1, 0, 0, 1, 1, 2, 2])
    >>> y = np.array([13.0, 7.0, 8.0, 7.0, -1.0, 2.0, 0.0])
    >>> found = bounded_least_squares(tree, y, np.ones(7), domains(tree, total=10))
    >>> (found.values * 7).round(9).tolist(), found.converged
    ([70.0, 40.0, 30.0, 40.0, 0.0, 22.0, 8.0], True)
    """
    low, high = feasible_intervals(tree, doms)
    lower, upper = as_float_bounds(low), as_float_bounds(high)
    free = ~doms.fixed()
    measurements = _Measurements(tree, noisy, weights)
    internal = np.flatnonzero(~tree.is_leaf)
    at_lower = np.zeros(tree.n_nodes, dtype=np.bool_)
    at_upper = np.zeros(tree.n_nodes, dtype=np.bool_)
    converged = False
    seen_sets: set[bytes] = set()
    for passes in range(1, max_passes + 1):
        pinned = ~free | at_lower | at_upper
        own, seen = measurements.pinned(pinned, np.where(at_upper, upper, lower))
        if passes == 1:  # the leaves' margins, 2 w (bound - y), hold for every pass
            spread = seen.variance
            lower_margin, upper_margin = _margin(lower, own), _margin(upper, own)
        else:
            lower_margin[internal] = _margin(lower, own, internal)
            upper_margin[internal] = _margin(upper, own, internal)
        # The price each node's parent offers (above the root: the last node, a leaf, has 0).
        offered = _prices(measurements, seen, pinned)[tree.parent]
        next_lower = (offered < lower_margin) & free
        next_upper = (offered > upper_margin) & free & ~next_lower
        converged = np.array_equal(next_lower, at_lower) and np.array_equal(next_upper, at_upper)
        state = np.packbits(np.concatenate([next_lower, next_upper])).tobytes()
        if converged or state in seen_sets:  # a cycle: see the docstring
            break
        seen_sets.add(state)
        at_lower, at_upper = next_lower, next_upper
    values = descend_least_squares(tree, seen, float(seen.estimate[0]))
    inside = _within(values, lower) and _within(-values, -upper)
    return BoundedEstimate(values, spread, passes, converged=converged and inside)


def _margin(
    bound: NDArray[np.float64],
    own: SubtreeEstimates,
    nodes: NDArray[np.int64] | slice = slice(None),
) -> NDArray[np.float64]:
    """``2 (bound_v - z_v) / V_v`` at ``nodes``: the marginal cost of a subtree at its bound.

    ``z_v, V_v`` are ``v``'s own estimate (its own bound ignored); NaN where undefined (an
    unbounded side with nothing measured), which no price crosses.
    """
    with np.errstate(divide="ignore", invalid="ignore"):
        margin = 2.0 * (bound[nodes] - own.estimate[nodes]) / own.variance[nodes]
    return np.asarray(margin, dtype=np.float64)


def _prices(
    measurements: _Measurements, seen: SubtreeEstimates, pinned: NDArray[np.bool_]
) -> NDArray[np.float64]:
    """Per internal node ``v``, the price ``nu_v`` of one more unit among its children.

    Top-down: ``v`` takes its pinned value, or ``z_v + V_v nu_{p(v)} / 2`` (B6's down pass),
    and ``nu_v = 2 (x_v - S_v) / VS_v``, the common marginal cost of its free children (0 if one
    is unmeasured). Where every child is pinned (``VS_v = 0``) the children give no price and
    ``v``'s own stationarity does: ``nu_v = nu_{p(v)} - 2 w_v (x_v - y_v)`` (``nu = 0`` above
    the root).
    """
    tree, w, y = measurements.tree, measurements.weights, measurements.noisy
    own_estimate, own_variance = measurements.own_estimate, measurements.own_variance
    price = np.zeros(tree.n_nodes)
    for links in tree.links:
        v = links.parents
        above = price[tree.parent[v]] if v[0] else np.zeros(1)
        with np.errstate(invalid="ignore"):  # inf * 0: an unmeasured node takes no price
            moved = own_estimate[v] + own_variance[v] * above / 2.0
        x = np.where(pinned[v] | np.isnan(moved), seen.estimate[v], moved)
        spread = seen.child_spread[v]
        with np.errstate(divide="ignore", invalid="ignore"):
            from_children = np.where(np.isinf(spread), 0.0, 2.0 * (x - seen.child_sum[v]) / spread)
        price[v] = np.where(spread > 0, from_children, above - 2.0 * w[v] * (x - y[v]))
    return price


def _within(values: NDArray[np.float64], lower: NDArray[np.float64]) -> bool:
    """Whether ``values >= lower`` up to ``1e-9`` relative (infinite bounds hold)."""
    return bool(np.all(values >= lower - 1e-9 * np.maximum(1.0, np.abs(lower))))


def _shares(
    links: Links, variance: NDArray[np.float64], spread: NDArray[np.float64]
) -> NDArray[np.float64]:
    """Per child, its share ``V_c / VS`` of the parent's gap (unmeasured children first).

    ``spread`` is ``VS``, per parent, the sum of its children's variances.
    """
    block = variance[links.children]
    if np.all(np.isfinite(spread)):  # every child measured: plain ratios
        with np.errstate(divide="ignore"):
            inverse = np.where(spread > 0, 1.0 / spread, 0.0)
        return block * inverse[links.segment]
    unmeasured = np.isinf(block)
    count = np.add.reduceat(unmeasured.astype(np.int64), links.offsets)[links.segment]
    with np.errstate(invalid="ignore", divide="ignore"):
        ratio = np.where(spread[links.segment] > 0, block / spread[links.segment], 0.0)
        return np.where(count > 0, unmeasured / np.maximum(count, 1), ratio)
