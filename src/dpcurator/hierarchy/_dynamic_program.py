r"""The lectures' dynamic program over convex cost tables (B2): the reference exact solver.

Bottom-up, every node ``v`` gets a cost table over its feasible values ``u``:

.. math:: \tau_v(u) = w_v (u - y_v)^2 + \phi_v(u), \qquad
          \phi_v(u) = \min \Big\{ \sum_{c \in ch(v)} \tau_c(x_c) :
                      \sum_c x_c = u,\; x_c \in D_c \Big\}

(``phi = 0`` at leaves). Every ``tau_c`` is discrete convex, so ``phi_v`` (their infimal
convolution) is built greedily: start every child at its lowest value and hand out units one at
a time to the child with the smallest next increment; ``phi_v`` is then convex too, and so is
``tau_v`` (induction). Top-down, the root takes its fixed value or the smallest minimiser of
``tau_root``, and every node re-runs the greedy on its children's tables for its value (ties:
lowest child index), which fixes the children's values.

Guarantee: an exact minimiser of ``sum_v w_v (x_v - y_v)^2`` over consistent integer points in
the domains (Fioretto, Van Hentenryck, Zhu, "Differential Privacy of Hierarchical Census Data:
An Optimization Approach", CP 2019, the dynamic program and the convexity of its cost tables;
lecture 003, "A Dynamic Programming Solution"; ``hierarchy.md`` (b) B2). Time
``O(sum_v |D_v| log k_v)`` and memory ``O(sum_v |D_v|)``: pseudo-polynomial, so this is the
test oracle; it refuses domains of more than ``MAX_TABLE_CELLS`` values in total.

Examples
--------
The lectures' example D1 (domain 0..5, free root):

>>> from dpcurator.hierarchy._domains import domains
>>> from dpcurator.hierarchy._tree import Tree
>>> tree = Tree.from_parents([-1, 0, 0])
>>> y, w, doms = np.array([2.0, 3.0, 0.0]), np.ones(3), domains(tree, upper=5)
>>> [table.tau.tolist() for table in cost_tables(tree, y, w, doms)]
[[13.0, 5.0, 1.0, 1.0, 5.0, 11.0], [9.0, 4.0, 1.0, 0.0, 1.0, 4.0], [0.0, 1.0, 4.0, 9.0, 16.0, 25.0]]
>>> dynamic_program(tree, y, w, doms).tolist()
[2, 2, 0]
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

import numpy as np
from numpy.typing import NDArray

from dpcurator.errors import UnsupportedError
from dpcurator.hierarchy._domains import MAX_COUNT, Domains, feasible_intervals
from dpcurator.hierarchy._tree import Tree

__all__ = ["MAX_TABLE_CELLS", "CostTable", "cost_tables", "dynamic_program"]

MAX_TABLE_CELLS: Final = 2_000_000
"""The most table entries (summed over nodes) the dynamic program agrees to build."""


@dataclass(frozen=True)
class CostTable:
    """One node's cost table over its feasible values ``start, start + 1, ...``.

    Attributes
    ----------
    start : int
        The smallest feasible value.
    tau : numpy.ndarray of float64
        ``tau_v(start + i)``: the least cost of the subtree with ``x_v = start + i``.
    phi : numpy.ndarray of float64
        ``phi_v(start + i)``: the least cost of the children's subtrees summing to it.
    """

    start: int
    tau: NDArray[np.float64]
    phi: NDArray[np.float64]


def cost_tables(
    tree: Tree, noisy: NDArray[np.float64], weights: NDArray[np.float64], doms: Domains
) -> tuple[CostTable, ...]:
    """Return the cost table of every node (bottom-up phase of B2).

    Parameters
    ----------
    tree : Tree
        The hierarchy.
    noisy, weights : numpy.ndarray of float64, shape (n_nodes,)
        Noisy counts and objective weights ``>= 0``.
    doms : Domains
        Feasible domains; every node's feasible interval must be finite.

    Returns
    -------
    tuple of CostTable
        One per node, in node order.

    Raises
    ------
    UnsupportedError
        If a feasible interval is unbounded or the tables would exceed ``MAX_TABLE_CELLS``.
    """
    low, high = feasible_intervals(tree, doms)
    sizes = high - low + 1
    if np.any(high > MAX_COUNT) or np.any(low < -MAX_COUNT) or sizes.sum() > MAX_TABLE_CELLS:
        raise UnsupportedError(
            f"the dynamic program needs finite domains of at most {MAX_TABLE_CELLS} values in "
            f"total (these have {_describe_size(sizes, high, low)}); bound them with upper=, "
            "total= or window=, or use method='exact', which is exact at any size."
        )
    tables: list[CostTable | None] = [None] * tree.n_nodes
    for v in reversed(range(tree.n_nodes)):
        start, stop = int(low[v]), int(high[v])
        values = np.arange(start, stop + 1, dtype=np.float64)
        children = _children(tree, v, tables)
        phi = np.zeros(values.size) if not children else _phi(children, start, stop)
        tau = weights[v] * (values - noisy[v]) ** 2 + phi
        tables[v] = CostTable(start, tau, phi)
    return tuple(table for table in tables if table is not None)


def dynamic_program(
    tree: Tree, noisy: NDArray[np.float64], weights: NDArray[np.float64], doms: Domains
) -> NDArray[np.int64]:
    """Return an exact integer optimum by the lectures' dynamic program (B2).

    Parameters
    ----------
    tree : Tree
        The hierarchy.
    noisy, weights : numpy.ndarray of float64, shape (n_nodes,)
        Noisy counts and objective weights ``>= 0``.
    doms : Domains
        Feasible, finite domains (see :func:`cost_tables`).

    Returns
    -------
    numpy.ndarray of int64
        Consistent, within ``doms``, optimal; the free root takes its smallest optimal value.

    Raises
    ------
    UnsupportedError
        If the tables would be too large (see :func:`cost_tables`).

    Examples
    --------
    >>> from dpcurator.hierarchy._domains import domains
    >>> tree = Tree.from_parents([-1, 0, 0])
    >>> y, w = np.array([2.0, 3.0, 0.0]), np.ones(3)
    >>> dynamic_program(tree, y, w, domains(tree, upper=5, total=3)).tolist()
    [3, 3, 0]
    """
    tables = cost_tables(tree, noisy, weights, doms)
    x = np.zeros(tree.n_nodes, dtype=np.int64)
    x[0] = tables[0].start + int(np.argmin(tables[0].tau))
    for v in range(tree.n_nodes):
        children = [tables[c] for c in range(tree.child_start[v], tree.child_stop[v])]
        if children:
            chosen, _ = _greedy_split(children, int(x[v]))
            x[tree.child_start[v] : tree.child_stop[v]] = chosen
    return x


def _children(tree: Tree, v: int, tables: Sequence[CostTable | None]) -> list[CostTable]:
    found = [tables[c] for c in range(tree.child_start[v], tree.child_stop[v])]
    return [table for table in found if table is not None]


def _phi(children: Sequence[CostTable], start: int, stop: int) -> NDArray[np.float64]:
    """``phi(u)`` for ``u`` in ``start..stop``: the greedy infimal convolution of the tables."""
    _, phi_from_base = _greedy_split(children, stop)
    base = sum(child.start for child in children)
    return phi_from_base[start - base :]


def _greedy_split(
    children: Sequence[CostTable], value: int
) -> tuple[list[int], NDArray[np.float64]]:
    """Split ``value`` among the children greedily; also return ``phi`` from their base sum.

    Every child starts at its lowest value; each further unit goes to the child whose table
    rises least (ties: the lowest child index). ``phi[i]`` is the cost at base sum ``+ i``.
    """
    at = [0] * len(children)
    heap = [
        (float(child.tau[1] - child.tau[0]), i)
        for i, child in enumerate(children)
        if child.tau.size > 1
    ]
    heapq.heapify(heap)
    base = sum(child.start for child in children)
    phi = [sum(float(child.tau[0]) for child in children)]
    for _ in range(value - base):
        increment, i = heapq.heappop(heap)
        phi.append(phi[-1] + increment)
        at[i] += 1
        table = children[i].tau
        if at[i] + 1 < table.size:
            heapq.heappush(heap, (float(table[at[i] + 1] - table[at[i]]), i))
    return [child.start + k for child, k in zip(children, at, strict=True)], np.asarray(phi)


def _describe_size(
    sizes: NDArray[np.int64], high: NDArray[np.int64], low: NDArray[np.int64]
) -> str:
    if np.any(high > MAX_COUNT) or np.any(low < -MAX_COUNT):
        return "an unbounded domain"
    return f"{int(sizes.sum())} values"
