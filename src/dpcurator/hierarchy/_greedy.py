r"""Lazy greedy descent (B3): the exact integer optimum, one unit at a time.

Every node keeps its marginal, the cost of one more unit in its subtree placed greedily,

.. math:: m_v = w_v (2 (x_v - y_v) + 1) + \min_{c \in ch(v)} m_c

(``+inf`` at the upper bound; leaves: the first term only). Start with every leaf at its lower
bound and every internal node at its children's sum, raised to its own lower bound by pushing
units into its subtree; then push units from the root (to the fixed total, or while
``m_root < 0`` for a free root). A unit walks from where it is pushed to a leaf, always to the
child of smallest marginal (ties: lowest index), and the marginals on its path are updated
bottom-up with one heap per node (lazy deletion).

This is the lectures' dynamic program (B2) run incrementally: pushing units to the cheapest
child is exactly the greedy infimal convolution of the children's convex cost tables, so the
result is an exact optimum (Fioretto, Van Hentenryck, Zhu, "Differential Privacy of
Hierarchical Census Data: An Optimization Approach", CP 2019, the convexity of the cost tables;
``hierarchy.md`` (b) B3). Time ``O(U * depth * log k)`` for ``U`` pushed units: plain Python, an
oracle for tests and the exact solver's last-resort fallback, not for national totals.

Examples
--------
>>> from dpcurator.hierarchy._domains import domains
>>> from dpcurator.hierarchy._tree import Tree
>>> tree = Tree.from_parents([-1, 0, 0, 1, 1, 2, 2])
>>> y = np.array([13.0, 7.0, 8.0, 7.0, -1.0, 2.0, 0.0])
>>> greedy(tree, y, np.ones(7), domains(tree)).tolist()
[13, 7, 6, 7, 0, 4, 2]
"""

from __future__ import annotations

import heapq
import math

import numpy as np
from numpy.typing import NDArray

from dpcurator.errors import InternalError
from dpcurator.hierarchy._domains import Domains, check_domains
from dpcurator.hierarchy._tree import Tree

__all__ = ["greedy"]


def greedy(
    tree: Tree, noisy: NDArray[np.float64], weights: NDArray[np.float64], doms: Domains
) -> NDArray[np.int64]:
    """Return an exact integer optimum by lazy greedy descent from the lower bounds (B3).

    Parameters
    ----------
    tree : Tree
        The hierarchy.
    noisy, weights : numpy.ndarray of float64, shape (n_nodes,)
        Noisy counts and objective weights ``>= 0``.
    doms : Domains
        Feasible domains; finite lower bounds (the start).

    Returns
    -------
    numpy.ndarray of int64
        Consistent, within ``doms``, minimising ``sum w (x - y)^2``; for a free root the
        smallest optimal root value.

    Examples
    --------
    >>> from dpcurator.hierarchy._domains import domains
    >>> tree = Tree.from_parents([-1, 0, 0])
    >>> greedy(tree, np.array([2.0, 3.0, 0.0]), np.ones(3), domains(tree, total=3)).tolist()
    [3, 3, 0]
    """
    check_domains(tree, doms)
    return _Descent(tree, noisy, weights, doms).solve()


class _Descent:
    """The state of B3: values, marginals and one lazy heap of child marginals per node."""

    def __init__(
        self, tree: Tree, noisy: NDArray[np.float64], weights: NDArray[np.float64], doms: Domains
    ) -> None:
        self.parent = tree.parent.tolist()
        self.start = tree.child_start.tolist()
        self.stop = tree.child_stop.tolist()
        self.y = noisy.tolist()
        self.w = weights.tolist()
        self.lo = doms.lower.tolist()
        self.hi = doms.upper.tolist()
        n = tree.n_nodes
        self.x = [0] * n
        self.m = [math.inf] * n
        self.version = [0] * n
        self.heap: list[list[tuple[float, int, int]]] = [[] for _ in range(n)]

    def solve(self) -> NDArray[np.int64]:
        """Build the start bottom-up, then push units from the root while they pay."""
        for v in reversed(range(len(self.x))):  # children first: their heap entries exist
            if self.start[v] == self.stop[v]:
                self.x[v] = self.lo[v]
            else:
                self.x[v] = sum(self.x[self.start[v] : self.stop[v]])
            self._update(v)
            while self.x[v] < self.lo[v]:
                self._push(v)
        while self.m[0] < 0:  # a fixed root has no room left: m = inf
            self._push(0)
        return np.asarray(self.x, dtype=np.int64)

    def _best_child(self, v: int) -> tuple[float, int]:
        """Return the child of smallest marginal (lowest index on ties), dropping stale entries."""
        heap = self.heap[v]
        while heap and heap[0][2] != self.version[heap[0][1]]:
            heapq.heappop(heap)
        return (heap[0][0], heap[0][1]) if heap else (math.inf, -1)

    def _update(self, v: int) -> None:
        """Recompute ``m_v`` and tell the parent's heap."""
        own = (
            self.w[v] * (2.0 * (self.x[v] - self.y[v]) + 1.0)
            if self.x[v] < self.hi[v]
            else math.inf
        )
        below = self._best_child(v)[0] if self.start[v] < self.stop[v] else 0.0
        self.m[v] = own + below
        self.version[v] += 1
        p = self.parent[v]
        if p >= 0:
            heapq.heappush(self.heap[p], (self.m[v], v, self.version[v]))

    def _push(self, v: int) -> None:
        """Add one unit at ``v`` and carry it down to a leaf along the cheapest children."""
        if self.m[v] == math.inf:
            raise InternalError("greedy descent: no room for a unit the domains promised")
        path = [v]
        while self.start[path[-1]] < self.stop[path[-1]]:
            path.append(self._best_child(path[-1])[1])
        for u in path:
            self.x[u] += 1
        for u in reversed(path):
            self._update(u)
