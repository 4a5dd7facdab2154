r"""The exact integer optimum at population scale: warm start, exchanges, certificate (B4).

Problem (``hierarchy.md`` (a)): integers ``x`` on a tree, consistent (``x_v = sum_c x_c``),
within domains ``lo_v <= x_v <= hi_v`` (fixed nodes: ``lo = hi``), minimising
``f(x) = sum_v w_v (x_v - y_v)^2``.

Certificate. As a function of the leaf values, ``f`` is a sum of convex functions of the sums
over a laminar family (the subtrees), hence M-natural-convex (Murota, *Discrete Convex
Analysis*, SIAM 2003, Section 6.3 and Theorem 6.26: local optimality under the moves
``+-chi_i`` and ``chi_i - chi_j`` is global optimality). Moving one unit from leaf ``j`` to leaf
``i`` changes every node on the two paths below their lowest common ancestor, so the best such
move through node ``v`` costs ``min_{c1 != c2} add_{c1} + rem_{c2}``, where ``add_c`` (``rem_c``)
is the cheapest change of adding (removing) a unit somewhere in ``c``'s subtree:

.. math:: add_v = w_v (2 (x_v - y_v) + 1) + \min_{c} add_c, \qquad
          rem_v = w_v (2 (y_v - x_v) + 1) + \min_{c} rem_c

(``+inf`` at a bound). A free root also tries ``add_root`` and ``rem_root``. ``x`` is optimal iff
no move has negative cost, which :func:`is_optimal` checks in ``O(n)``, vectorised by level.

Solver. Start from the least-squares estimate within the bounds
(:func:`~dpcurator.hierarchy._least_squares.bounded_least_squares`, a few active-set passes of
B6; the integer optimum lies within about one unit of it) rounded top-down into a feasible
consistent integer point (:func:`~dpcurator.hierarchy._rounding.descend`). A cheap sufficient
test, the segment minima of ``add`` and ``rem`` alone (no paths), certifies it in most
population-scale cases (:func:`_no_move_can_improve`). Otherwise, in rounds:
at every node, pair its children by increasing ``add`` with its children by increasing ``rem``
and keep the improving pairs whose paths meet no move already picked below (so all picked
moves change disjoint nodes and their gains add up); move each pair ``t`` units along its
paths (``t`` minimises the exact quadratic change along those paths). Only the moved paths and
their ancestors change, so the next round recomputes and searches those alone. When no move
improves, the certificate is recomputed from scratch (the cheap test, then the search only if
it fails); each round lowers ``f``, and after ``MAX_ROUNDS`` rounds the lazy greedy descent
(B3) from the lower bounds takes over (exact but slow). Measured (geometric noise, epsilon 1):
0 rounds on the 3,142-county tree and on its 1e6-node split into tracts, 1 on the 1.5e5-node
count-of-counts tree of NYC flights, where plain least squares puts 72,000 nodes below zero
and its rounding needed 32 rounds.

Comparisons use a relative tolerance of ``1e-12`` of the summed magnitudes of the terms of a
move: exact for integer noise, and optimal to float rounding for real noise (``MAX_COUNT``).

References
----------
F. Fioretto, P. Van Hentenryck, K. Zhu, "Differential Privacy of Hierarchical Census Data: An
Optimization Approach", CP 2019 (the exactness of the greedy dynamic program this certifies).
K. Murota, *Discrete Convex Analysis*, SIAM 2003. ``hierarchy.md`` (b) B4.

Examples
--------
>>> from dpcurator.hierarchy._domains import domains
>>> from dpcurator.hierarchy._tree import Tree
>>> tree = Tree.from_parents([-1, 0, 0, 1, 1, 2, 2])
>>> y = np.array([13.0, 7.0, 8.0, 7.0, -1.0, 2.0, 0.0])
>>> result = exact(tree, y, np.ones(7), domains(tree, total=10))
>>> result.values.tolist(), result.certified
([10, 6, 4, 6, 0, 3, 1], True)
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Final

import numpy as np
from numpy.typing import NDArray

from dpcurator.hierarchy._domains import UNBOUNDED, Domains, feasible_intervals
from dpcurator.hierarchy._greedy import greedy
from dpcurator.hierarchy._least_squares import bounded_least_squares
from dpcurator.hierarchy._rounding import descend, nearest_integers
from dpcurator.hierarchy._tree import (
    Links,
    Tree,
    concatenated_ranges,
    segment_argmin,
    segment_order,
)

__all__ = ["MAX_ROUNDS", "ExactResult", "exact", "is_optimal"]

MAX_ROUNDS: Final = 10_000
"""Exchange rounds before the exact-but-slow greedy fallback takes over."""

WARM_START_PASSES: Final = 8
"""Active-set passes of the warm start's bounded least squares (the exchanges finish the job)."""

RELATIVE_TOLERANCE: Final = 1e-12
"""A move improves iff its cost is below ``-1e-12`` times the summed magnitudes of its terms."""


@dataclass(frozen=True)
class ExactResult:
    """The exact solver's output.

    Attributes
    ----------
    values : numpy.ndarray of int64
        The optimum.
    certified : bool
        Whether the certificate holds (always, unless the fallback failed: a bug).
    rounds : int
        Exchange rounds run after the warm start (0: the warm start was optimal).
    fallback : bool
        Whether the greedy fallback was used.
    """

    values: NDArray[np.int64]
    certified: bool
    rounds: int
    fallback: bool


@dataclass(frozen=True)
class _Paths:
    """Per node, the cheapest path to add (or remove) one unit in its subtree.

    ``cost`` is the one-unit cost along the path: the node's own unit cost plus its cheapest
    child's path cost (``inf`` where some node on it has no room); ``next`` is that child
    (``-1`` at a leaf). The terms of a path (for the step size and the tolerance) are summed
    only for the few paths a move uses, by :meth:`_Exchanges.terms`.
    """

    cost: NDArray[np.float64]
    next: NDArray[np.int64]

    def extend(self, links: Links) -> None:
        """Extend the paths of ``links.parents`` (holding their own costs) to their best child."""
        low, best = segment_argmin(links, self.cost[links.children])
        self.cost[links.parents] += low
        self.next[links.parents] = best


@dataclass(frozen=True)
class _Terms:
    """The terms of some paths: ``t`` units along one cost ``t linear + t^2 quadratic``.

    ``room`` is how many units fit; ``size`` sums the magnitudes of the terms (the tolerance).
    """

    linear: NDArray[np.float64]
    quadratic: NDArray[np.float64]
    room: NDArray[np.int64]
    size: NDArray[np.float64]

    def __add__(self, other: _Terms) -> _Terms:
        """Return the terms of a pair of paths moved together (an exchange)."""
        return _Terms(
            self.linear + other.linear,
            self.quadratic + other.quadratic,
            np.minimum(self.room, other.room),
            self.size + other.size,
        )

    def best_units(self) -> NDArray[np.int64]:
        """``argmin_t t linear + t^2 quadratic`` over integers ``1 <= t <= room``."""
        with np.errstate(divide="ignore", invalid="ignore"):
            vertex = np.where(self.quadratic > 0, -self.linear / (2.0 * self.quadratic), math.inf)
        best = np.floor(np.minimum(vertex, np.float64(2**62)) + 0.5)
        return np.clip(best, 1, self.room).astype(np.int64)


@dataclass(frozen=True)
class _Moves:
    """Chosen improving moves: where each path starts, and the units it takes (signed).

    A path with positive units follows the add paths down to a leaf, a negative one the
    remove paths.
    """

    starts: NDArray[np.int64]
    units: NDArray[np.int64]

    def __len__(self) -> int:
        return int(self.starts.size)


class _Exchanges:
    """Exchange rounds on one problem, with every node's add and remove paths kept current.

    After a round only the nodes on moved paths and their ancestors change, so the next round
    recomputes those (``refresh``) and looks for moves at those parents only: any other parent
    had no improving move and its children did not change. The refreshed paths are those a
    rebuild from scratch would give (same values, same tie-breaks).
    """

    def __init__(
        self,
        tree: Tree,
        x: NDArray[np.int64],
        noisy: NDArray[np.float64],
        weights: NDArray[np.float64],
        doms: Domains,
    ) -> None:
        self.tree = tree
        self.x = x
        self.noisy = noisy
        self.weights = weights
        self.lower = doms.lower
        self.upper = doms.upper
        self.free_root = not bool(doms.fixed()[0])
        n = tree.n_nodes
        self.add = _Paths(np.empty(n), np.empty(n, dtype=np.int64))
        self.remove = _Paths(np.empty(n), np.empty(n, dtype=np.int64))
        self._start(slice(None))
        for links in reversed(tree.links):
            self.add.extend(links)
            self.remove.extend(links)
        self.candidates: list[Links] = list(tree.links)

    def moves(self) -> _Moves:
        """Improving moves that change disjoint sets of nodes, each with its best step.

        Bottom-up, at every candidate node: pair its children by increasing ``add`` with its
        children by increasing ``rem`` (the i-th with the i-th) and keep the improving pairs.
        Since ``add_c + rem_c >= 0`` for every child (convexity), no child is in two improving
        pairs, so the pairs of one node are disjoint. ``hit_*[v]`` records whether the path
        from ``v`` meets a node that a chosen move changes; a pair is chosen only if neither of
        its paths does, so moves at different nodes are disjoint too.
        """
        add, remove = self.add, self.remove
        hit_add = np.zeros(self.tree.n_nodes, dtype=np.bool_)
        hit_remove = np.zeros(self.tree.n_nodes, dtype=np.bool_)
        starts, units = [_none()], [_none()]
        for links in reversed(self.candidates):
            taker, giver = _pairs(links, add, remove, hit_add, hit_remove)
            terms = self.terms(taker, add) + self.terms(giver, remove)
            with np.errstate(invalid="ignore"):
                keep = _improves(add.cost[taker] + remove.cost[giver], terms.size)
            taker, giver, step = taker[keep], giver[keep], terms.best_units()[keep]
            involved = np.concatenate([taker, giver])
            hit_add[involved] = hit_remove[involved] = True
            parents = links.parents
            hit_add[parents] = hit_add[add.next[parents]]
            hit_remove[parents] = hit_remove[remove.next[parents]]
            starts += [taker, giver]
            units += [step, -step]
        if self.free_root:
            root = np.zeros(1, dtype=np.int64)
            for sign, path, hit in ((1, add, hit_add), (-1, remove, hit_remove)):
                below = int(path.next[0])
                terms = self.terms(root, path)
                if _improves(path.cost[:1], terms.size)[0] and (below < 0 or not hit[below]):
                    starts.append(root)
                    units.append(sign * terms.best_units())
                    break
        return _Moves(np.concatenate(starts), np.concatenate(units))

    def apply(self, moves: _Moves) -> None:
        """Shift every move's units down its path (disjoint paths), then refresh the paths."""
        node, units = moves.starts, moves.units
        changed = []
        while node.size:
            self.x[node] += units
            changed.append(node)
            node = np.where(units > 0, self.add.next[node], self.remove.next[node])
            keep = node >= 0
            node, units = node[keep], units[keep]
        self._refresh(np.concatenate(changed))

    def terms(self, starts: NDArray[np.int64], path: _Paths) -> _Terms:
        """Sum the terms of the ``path`` (add or remove) from each of ``starts`` to its leaf."""
        m = starts.size
        total = _Terms(np.zeros(m), np.zeros(m), np.full(m, UNBOUNDED, dtype=np.int64), np.zeros(m))
        index, node = np.arange(m), starts
        while node.size:
            linear, room = self._own(node, path)
            w = self.weights[node]
            total.linear[index] += linear
            total.quadratic[index] += w
            total.room[index] = np.minimum(total.room[index], room)
            total.size[index] += np.abs(linear) + w
            node = path.next[node]
            keep = node >= 0
            index, node = index[keep], node[keep]
        return total

    def _own(
        self, nodes: slice | NDArray[np.int64], path: _Paths
    ) -> tuple[NDArray[np.float64], NDArray[np.int64]]:
        """Return the linear term and the room of one unit added (removed) at ``nodes``."""
        x = self.x[nodes]
        slope = 2.0 * self.weights[nodes] * (x - self.noisy[nodes])
        if path is self.add:
            return slope, self.upper[nodes] - x
        return -slope, x - self.lower[nodes]

    def _start(self, nodes: slice | NDArray[np.int64]) -> None:
        """Set the paths of ``nodes`` to the nodes alone: their own unit costs."""
        w = self.weights[nodes]
        for path in (self.add, self.remove):
            linear, room = self._own(nodes, path)
            path.cost[nodes] = _unit_cost(linear, w, room)
            path.next[nodes] = -1

    def _refresh(self, changed: NDArray[np.int64]) -> None:
        """Recompute the changed nodes and their ancestors, bottom-up; they are the candidates."""
        level = self.tree.level[changed]
        below = _none()
        candidates = []
        for depth in reversed(range(self.tree.n_levels)):
            nodes = np.union1d(changed[level == depth], self.tree.parent[below])
            self._start(nodes)
            internal = nodes[~self.tree.is_leaf[nodes]]
            if internal.size:
                links = self.tree.links[depth].restrict(internal)
                self.add.extend(links)
                self.remove.extend(links)
                candidates.append(links)
            below = nodes
        self.candidates = candidates[::-1]


def exact(
    tree: Tree, noisy: NDArray[np.float64], weights: NDArray[np.float64], doms: Domains
) -> ExactResult:
    """Return the exact integer optimum (B4): warm start, exchange rounds, certificate.

    Parameters
    ----------
    tree : Tree
        The hierarchy.
    noisy, weights : numpy.ndarray of float64, shape (n_nodes,)
        Noisy counts and objective weights ``>= 0`` (validated by the caller).
    doms : Domains
        Feasible domains (validated by the caller).

    Returns
    -------
    ExactResult

    Examples
    --------
    The lectures' example D1 with a free root (ties go to the smallest root value):

    >>> from dpcurator.hierarchy._domains import domains
    >>> tree = Tree.from_parents([-1, 0, 0])
    >>> exact(tree, np.array([2.0, 3.0, 0.0]), np.ones(3), domains(tree, upper=5)).values
    array([2, 2, 0])
    """
    start = _warm_start(tree, noisy, weights, doms)
    if _no_move_can_improve(tree, start, noisy, weights, doms):
        return ExactResult(start, certified=True, rounds=0, fallback=False)
    state = _Exchanges(tree, start, noisy, weights, doms)
    for rounds in range(MAX_ROUNDS):
        moves = state.moves()
        if not len(moves):
            # The certificate, recomputed from scratch rather than trusted to the updates.
            if _certify(tree, state.x, noisy, weights, doms):
                return ExactResult(state.x, certified=True, rounds=rounds, fallback=False)
            break
        state.apply(moves)
    x = greedy(tree, noisy, weights, doms)
    certified = is_optimal(tree, x, noisy, weights, doms)
    return ExactResult(x, certified=certified, rounds=MAX_ROUNDS, fallback=True)


def is_optimal(
    tree: Tree,
    values: NDArray[np.int64],
    noisy: NDArray[np.float64],
    weights: NDArray[np.float64],
    doms: Domains,
) -> bool:
    """Return the certificate: ``values`` is feasible and no single-unit move improves it.

    By M-natural-convexity (module docstring) this holds iff ``values`` minimises the
    objective over the feasible integer points. ``O(n)``, vectorised by level.

    Parameters
    ----------
    tree : Tree
        The hierarchy.
    values : numpy.ndarray of int64, shape (n_nodes,)
        The point to certify.
    noisy, weights : numpy.ndarray of float64, shape (n_nodes,)
        Noisy counts and weights.
    doms : Domains
        The domains.

    Returns
    -------
    bool

    Examples
    --------
    >>> from dpcurator.hierarchy._domains import domains
    >>> tree = Tree.from_parents([-1, 0, 0])
    >>> y, w, doms = np.array([2.0, 3.0, 0.0]), np.ones(3), domains(tree, upper=5)
    >>> is_optimal(tree, np.array([3, 3, 0]), y, w, doms)
    True
    >>> is_optimal(tree, np.array([3, 2, 1]), y, w, doms)
    False
    """
    x = np.array(values, dtype=np.int64)
    if np.any(x < doms.lower) or np.any(x > doms.upper) or tree.consistency_violations(x):
        return False
    return _certify(tree, x, noisy, weights, doms)


# -- the certificate -------------------------------------------------------------------------


def _certify(
    tree: Tree,
    x: NDArray[np.int64],
    noisy: NDArray[np.float64],
    weights: NDArray[np.float64],
    doms: Domains,
) -> bool:
    """Whether no move improves the feasible point ``x``: cheap test first, then the search."""
    if _no_move_can_improve(tree, x, noisy, weights, doms):
        return True
    return not len(_Exchanges(tree, x, noisy, weights, doms).moves())


def _no_move_can_improve(
    tree: Tree,
    x: NDArray[np.int64],
    noisy: NDArray[np.float64],
    weights: NDArray[np.float64],
    doms: Domains,
) -> bool:
    """Test a sufficient condition for optimality on the path costs alone, in ``O(n)``.

    Bottom-up, ``add_v`` and ``rem_v`` (module docstring) with plain segment minima: no path,
    no argmin. If at every internal node ``min_c add_c + min_c rem_c >= 0``, no exchange
    through it can have negative cost, whichever children attain the minima; nor can adding or
    removing at a free root if ``add_root, rem_root >= 0`` (a fixed root has no room: ``inf``).
    ``False`` only means some move might improve: :class:`_Exchanges` decides, with the
    tolerance. The lowest node failing the test has a genuine pair ``c1 != c2`` below it (if
    one child attained both minima, its own children would have failed first, since
    ``add_c + rem_c = 2 w_c + min add + min rem`` one level down), so the test only errs on
    the side of searching.
    """
    slope = 2.0 * weights * (x - noisy)
    add = _unit_cost(slope, weights, doms.upper - x)
    remove = _unit_cost(-slope, weights, x - doms.lower)
    for links in reversed(tree.links):
        best_add, best_remove = links.min(add), links.min(remove)
        if np.any(best_add + best_remove < 0):
            return False
        add[links.parents] += best_add
        remove[links.parents] += best_remove
    return bool(add[0] >= 0 and remove[0] >= 0)


def _unit_cost(
    linear: NDArray[np.float64], quadratic: NDArray[np.float64], room: NDArray[np.int64]
) -> NDArray[np.float64]:
    """Return the cost of one unit along paths: ``linear + quadratic``, ``inf`` if no room."""
    return np.where(room > 0, linear + quadratic, math.inf)


# -- the steps -------------------------------------------------------------------------------


def _warm_start(
    tree: Tree, noisy: NDArray[np.float64], weights: NDArray[np.float64], doms: Domains
) -> NDArray[np.int64]:
    """Bounded least squares, rounded top-down into a feasible consistent integer point."""
    estimate = bounded_least_squares(tree, noisy, weights, doms, max_passes=WARM_START_PASSES)
    low, high = feasible_intervals(tree, doms)
    nearest = -nearest_integers(-estimate.values[:1])[0]  # halves down: the smaller of a tie
    root = int(np.clip(nearest, low[0], high[0]))
    return descend(
        tree, estimate.values, estimate.spread, low=low, high=high, root=root, shift=False
    )


def _pairs(
    links: Links,
    add: _Paths,
    remove: _Paths,
    hit_add: NDArray[np.bool_],
    hit_remove: NDArray[np.bool_],
) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """Per parent, its improving pairs: i-th cheapest taker with i-th cheapest giver.

    Only children that could be in an improving pair are sorted (a taker must beat the best
    giver's ``rem``, a giver the best taker's ``add``), and only those whose path meets no
    chosen move.
    """
    block_add, block_remove = add.cost[links.children], remove.cost[links.children]
    best_add = np.minimum.reduceat(block_add, links.offsets)[links.segment]
    best_remove = np.minimum.reduceat(block_remove, links.offsets)[links.segment]
    with np.errstate(invalid="ignore"):  # inf - inf where a parent has no room at all
        can_take = (block_add + best_remove < 0) & ~hit_add[links.children]
        can_give = (block_remove + best_add < 0) & ~hit_remove[links.children]
    takers = _sorted_by_segment(links, np.flatnonzero(can_take), block_add)
    givers = _sorted_by_segment(links, np.flatnonzero(can_give), block_remove)
    n_parents = links.parents.size
    take_count = np.bincount(links.segment[takers], minlength=n_parents)
    give_count = np.bincount(links.segment[givers], minlength=n_parents)
    pairs = np.minimum(take_count, give_count)
    rank = concatenated_ranges(np.zeros(n_parents, dtype=np.int64), pairs)
    owner = np.repeat(np.arange(n_parents), pairs)
    taker = links.nodes(takers[np.cumsum(take_count)[owner] - take_count[owner] + rank])
    giver = links.nodes(givers[np.cumsum(give_count)[owner] - give_count[owner] + rank])
    with np.errstate(invalid="ignore"):
        negative = add.cost[taker] + remove.cost[giver] < 0
    taker, giver = taker[negative], giver[negative]
    clash = np.isin(taker, giver)  # impossible in exact arithmetic; dropped to be safe
    if np.any(clash):
        clash |= np.isin(giver, taker[clash])
        taker, giver = taker[~clash], giver[~clash]
    return taker, giver


def _sorted_by_segment(
    links: Links, positions: NDArray[np.int64], key: NDArray[np.float64]
) -> NDArray[np.int64]:
    """Child ``positions`` sorted by parent, then by ``key`` (cheapest first)."""
    return positions[segment_order(links.segment[positions], key[positions])]


def _improves(cost: NDArray[np.float64], size: NDArray[np.float64]) -> NDArray[np.bool_]:
    """Whether a move of this cost improves, beyond float rounding of its terms."""
    with np.errstate(invalid="ignore"):
        return np.asarray(cost < -RELATIVE_TOLERANCE * size, dtype=np.bool_)


def _none() -> NDArray[np.int64]:
    return np.zeros(0, dtype=np.int64)
