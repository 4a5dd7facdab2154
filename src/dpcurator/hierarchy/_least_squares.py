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

Examples
--------
Hay's example (``hierarchy.md`` D3): a parent measured at 0, children at 1 and 0.

>>> from dpcurator.hierarchy._tree import Tree
>>> tree = Tree.from_parents([-1, 0, 0])
>>> least_squares(tree, [0.0, 1.0, 0.0]).round(6).tolist()
[0.333333, 0.666667, -0.333333]
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from dpcurator.hierarchy._domains import Domains, check_domains, node_values, node_weights
from dpcurator.hierarchy._tree import Links, Tree

__all__ = ["SubtreeEstimates", "descend_least_squares", "least_squares", "subtree_estimates"]


@dataclass(frozen=True)
class SubtreeEstimates:
    """The up pass of B6: each subtree's estimate of its root from the measurements inside it.

    Attributes
    ----------
    estimate : numpy.ndarray of float64
        ``z_v``.
    variance : numpy.ndarray of float64
        ``V_v`` in ``[0, inf]`` (0: known exactly; inf: nothing measured).
    child_sum : numpy.ndarray of float64
        ``S_v = sum_{c in ch(v)} z_c`` (0 at leaves).

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
    is_fixed = np.zeros(n, dtype=np.bool_) if fixed is None else fixed
    values = np.zeros(n) if fixed_values is None else fixed_values.astype(np.float64)
    with np.errstate(divide="ignore"):
        variance = np.where(weights > 0, 1.0 / weights, np.inf)
    estimate = np.where(weights > 0, y, 0.0)
    estimate[is_fixed] = values[is_fixed]
    variance[is_fixed] = 0.0
    child_sum = np.zeros(n)
    for links in reversed(tree.links):
        v = links.parents[~is_fixed[links.parents]]  # a fixed node is known: skip its merge
        total = links.sum(estimate)
        spread = links.sum(variance)
        child_sum[links.parents] = total
        keep = ~is_fixed[links.parents]
        total, spread = total[keep], spread[keep]
        w = weights[v]
        with np.errstate(divide="ignore", invalid="ignore"):
            precision = w + 1.0 / spread  # 1/inf = 0; 1/0 = inf: children known exactly
            combined = (w * y[v] + total / spread) / precision
            # Exact children, or nothing measured at all: the estimate is the children's sum.
            estimate[v] = np.where((spread == 0) | (precision == 0), total, combined)
            variance[v] = np.where(spread == 0, 0.0, 1.0 / precision)
    return SubtreeEstimates(estimate, variance, child_sum)


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
        x[links.children] = up.estimate[links.children] + gap * _shares(links, up.variance)
    return x


def _shares(links: Links, variance: NDArray[np.float64]) -> NDArray[np.float64]:
    """Per child, its share ``V_c / sum V`` of the parent's gap (unmeasured children first)."""
    block = variance[links.children]
    spread = links.sum(variance)[links.segment]
    unmeasured = np.isinf(block)
    count = np.add.reduceat(unmeasured.astype(np.int64), links.offsets)[links.segment]
    with np.errstate(invalid="ignore", divide="ignore"):
        ratio = np.where(spread > 0, block / spread, 0.0)
        return np.where(count > 0, unmeasured / np.maximum(count, 1), ratio)
