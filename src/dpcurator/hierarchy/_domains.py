"""Integer domains of the post-processed counts, and the checks of the solvers' inputs.

A node's domain is an integer interval ``[lower_v, upper_v]`` (``hierarchy.md`` (a), constraint
3): non-negativity by default, a public total or any fixed node as ``lower == upper``, and an
optional faithfulness window ``[ceil(y_v - a), floor(y_v + a)]`` around the noisy value. Whether
the domains and the consistency equalities can all hold is decided exactly, bottom-up: the
values a subtree's root can take form an interval (a sum of integer intervals intersected with
one), so the constraints are feasible iff no such interval is empty.

Numerics: counts, bounds and noisy values must lie within ``MAX_COUNT = 2**40`` in absolute
value. The solvers compare cost increments ``w (2 (x - y) + 1)`` in float64; below ``2**40``
these carry at least 12 bits of the noisy values' fractions, which keeps the comparisons exact
for integer noise and within ``1e-12`` relative for real noise.

Examples
--------
>>> from dpcurator.hierarchy._tree import Tree
>>> tree = Tree.from_parents([-1, 0, 0])
>>> doms = domains(tree, [10.0, 3.2, 8.9], total=10, window=2)
>>> doms.lower.tolist(), doms.upper.tolist()
([10, 2, 7], [10, 5, 10])
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

import numpy as np
from numpy.typing import ArrayLike, NDArray

from dpcurator._validation import check_integer
from dpcurator.errors import InfeasibleConstraintsError, InvalidParameterError
from dpcurator.hierarchy._tree import Label, Tree

__all__ = [
    "MAX_COUNT",
    "UNBOUNDED",
    "Domains",
    "InfeasibleConstraintsError",
    "Invariants",
    "as_float_bounds",
    "check_domains",
    "domains",
    "feasible_intervals",
    "node_values",
    "node_weights",
]

UNBOUNDED: Final = 2**62
"""The "no bound" sentinel of integer domains: ``upper = UNBOUNDED``, ``lower = -UNBOUNDED``."""

Invariants = Mapping[int, int] | Mapping[Label, int] | Mapping[int | Label, int]
"""Fixed nodes ``{node index or label: value}`` (any of the three key types)."""

MAX_COUNT: Final = 2**40
"""The largest absolute count, bound or noisy value the solvers accept (see the module notes)."""


@dataclass(frozen=True)
class Domains:
    """An integer interval per node; a fixed node (an invariant) has ``lower == upper``.

    Attributes
    ----------
    lower, upper : numpy.ndarray of int64, shape (n_nodes,)
        Inclusive bounds (read-only); ``-UNBOUNDED`` / ``UNBOUNDED`` for none.

    Examples
    --------
    >>> doms = Domains(np.array([3, 0]), np.array([3, UNBOUNDED]))
    >>> doms.fixed().tolist()
    [True, False]
    """

    lower: NDArray[np.int64]
    upper: NDArray[np.int64]
    _feasible: tuple[Tree, NDArray[np.int64], NDArray[np.int64]] | None = field(
        default=None, init=False, repr=False, compare=False
    )
    """The last :func:`feasible_intervals` of these domains, and the tree they were taken on."""

    def __post_init__(self) -> None:
        lower = np.array(self.lower, dtype=np.int64)
        upper = np.array(self.upper, dtype=np.int64)
        if lower.ndim != 1 or lower.shape != upper.shape:
            raise InvalidParameterError(
                "upper", upper.shape, f"must have the shape of lower, {lower.shape}"
            )
        lower.setflags(write=False)
        upper.setflags(write=False)
        object.__setattr__(self, "lower", lower)
        object.__setattr__(self, "upper", upper)

    def fixed(self) -> NDArray[np.bool_]:
        """Return, per node, whether its value is fixed (``lower == upper``)."""
        return np.asarray(self.lower == self.upper, dtype=np.bool_)


def domains(
    tree: Tree,
    noisy: ArrayLike | None = None,
    *,
    lower: ArrayLike | None = 0,
    upper: ArrayLike | None = None,
    total: int | None = None,
    fixed: Invariants | None = None,
    window: ArrayLike | None = None,
) -> Domains:
    """Build and check the integer domains of a hierarchy's post-processed counts.

    Parameters
    ----------
    tree : Tree
        The hierarchy.
    noisy : array_like of float, shape (n_nodes,), optional
        Noisy counts in node order; needed for ``window``.
    lower, upper : int or array_like of int, optional
        Bounds, scalar or one per node; default ``0`` and none. ``None`` or an infinity means
        no bound. Finite bounds must lie within ``MAX_COUNT``.
    total : int, optional
        The root's public value (an invariant).
    fixed : mapping, optional
        Further invariants ``{node index or label: value}``.
    window : float or array_like of float, optional
        Faithfulness window ``a >= 0``: non-fixed nodes are also kept in
        ``[ceil(noisy - a), floor(noisy + a)]``.

    Returns
    -------
    Domains

    Raises
    ------
    InvalidParameterError
        Naming the argument for a wrong shape, a non-integer bound, a NaN, a negative window or
        a window without ``noisy``.
    InfeasibleConstraintsError
        If no consistent integer point satisfies all the constraints (e.g. clashing windows).

    Examples
    --------
    >>> from dpcurator.hierarchy._tree import Tree
    >>> tree = Tree.from_paths([("IL", "Cook"), ("IL", "Lake")])
    >>> domains(tree, fixed={("IL",): 7}).lower.tolist()
    [0, 7, 0, 0]
    """
    n = tree.n_nodes
    base_lo = _bounds(lower, n, "lower", missing=-UNBOUNDED)
    base_hi = _bounds(upper, n, "upper", missing=UNBOUNDED)
    lo, hi = base_lo.copy(), base_hi.copy()
    if window is not None:
        if noisy is None:
            raise InvalidParameterError("noisy", None, "must be given with window")
        y = node_values(tree, noisy)
        a = _node_floats(window, n, "window")
        if np.any(a < 0):
            raise InvalidParameterError("window", window, "must be >= 0")
        lo = np.maximum(lo, np.ceil(y - a).astype(np.int64))
        hi = np.minimum(hi, np.floor(y + a).astype(np.int64))
    invariants: dict[int | Label, int] = {key: value for key, value in (fixed or {}).items()}
    if total is not None:
        invariants[0] = total
    for key, value in invariants.items():
        name = "total" if key == 0 and total is not None else f"fixed[{key!r}]"
        node = _node(tree, key)
        count = check_integer(value, name)
        if abs(count) > MAX_COUNT:
            raise InvalidParameterError(name, value, f"must be within +-2**40 ({MAX_COUNT})")
        if not base_lo[node] <= count <= base_hi[node]:
            raise InfeasibleConstraintsError(
                f"{name} = {count} lies outside the bounds of node {_describe(tree, node)}."
            )
        lo[node] = hi[node] = count
    doms = Domains(lo, hi)
    feasible_intervals(tree, doms)
    return doms


def feasible_intervals(tree: Tree, doms: Domains) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """Return, per node, the interval of values it takes in some feasible point.

    Bottom-up, a subtree can reach ``[max(lo_v, sum smin_c), min(hi_v, sum smax_c)]``; top-down,
    a child is further limited by its parent's interval minus what its siblings can reach.

    Parameters
    ----------
    tree : Tree
        The hierarchy.
    doms : Domains
        The domains, one per node.

    Returns
    -------
    tuple of numpy.ndarray of int64
        ``(low, high)``, with the :data:`UNBOUNDED` sentinels where nothing bounds a node;
        read-only, computed once per domains and tree (:func:`domains` already did) and
        without the two passes for plain non-negativity below the root.

    Raises
    ------
    InfeasibleConstraintsError
        Naming the first node whose interval is empty.

    Examples
    --------
    >>> from dpcurator.hierarchy._tree import Tree
    >>> tree = Tree.from_parents([-1, 0, 0])
    >>> low, high = feasible_intervals(tree, domains(tree, total=5))
    >>> low.tolist(), high.tolist()
    ([5, 0, 0], [5, 5, 5])
    """
    check_domains(tree, doms)
    cached = doms._feasible
    if cached is not None and cached[0] is tree:
        return cached[1], cached[2]
    low, high = _plain_intervals(doms) or _propagated_intervals(tree, doms)
    low.setflags(write=False)
    high.setflags(write=False)
    object.__setattr__(doms, "_feasible", (tree, low, high))  # both are immutable
    return low, high


def _plain_intervals(doms: Domains) -> tuple[NDArray[np.int64], NDArray[np.int64]] | None:
    """Return the intervals of plain non-negativity below a root ``[lo, hi]``, else ``None``.

    With ``lower = 0`` and no upper bound at every node but the root, and ``0 <= lo <= hi``
    there, the two passes of :func:`_propagated_intervals` give ``lower`` itself and ``hi``
    everywhere: a subtree reaches any sum ``>= 0`` and its siblings can all be 0.
    """
    lower, upper = doms.lower, doms.upper
    if not (
        0 <= lower[0] <= upper[0] and not np.any(lower[1:]) and bool(np.all(upper[1:] == UNBOUNDED))
    ):
        return None
    return lower.copy(), np.full(lower.size, upper[0], dtype=np.int64)


def _propagated_intervals(tree: Tree, doms: Domains) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """Run the two passes of :func:`feasible_intervals`, for any domains."""
    low = as_float_bounds(doms.lower)
    high = as_float_bounds(doms.upper)
    for links in reversed(tree.links):
        with np.errstate(invalid="ignore"):  # inf - inf cannot occur: bounds are one-sided
            low[links.parents] = np.maximum(low[links.parents], links.sum(low))
            high[links.parents] = np.minimum(high[links.parents], links.sum(high))
    _check_nonempty(tree, low, high)
    for links in tree.links:
        parent = links.parents[links.segment]
        with np.errstate(invalid="ignore"):  # inf - inf: an unbounded sibling, no limit
            sibling_low = links.sum(low)[links.segment] - low[links.children]
            sibling_high = links.sum(high)[links.segment] - high[links.children]
            cap = np.nan_to_num(high[parent] - sibling_low, nan=math.inf)
            floor = np.nan_to_num(low[parent] - sibling_high, nan=-math.inf)
        low[links.children] = np.maximum(low[links.children], floor)
        high[links.children] = np.minimum(high[links.children], cap)
    if np.any(low > MAX_COUNT):
        raise InfeasibleConstraintsError(
            f"the lower bounds force node {_describe(tree, int(np.argmax(low)))} above "
            f"2**40 ({MAX_COUNT}), the largest supported count."
        )
    return _as_integer(low), _as_integer(high)


def check_domains(tree: Tree, doms: Domains) -> None:
    """Raise :class:`InvalidParameterError` naming ``doms`` unless it has one interval per node.

    >>> from dpcurator.hierarchy._tree import Tree
    >>> check_domains(Tree.from_parents([-1, 0]), Domains(np.zeros(2), np.ones(2)))
    """
    if not isinstance(doms, Domains) or doms.lower.shape != (tree.n_nodes,):
        raise InvalidParameterError("doms", doms, f"must be Domains of {tree.n_nodes} nodes")


def node_values(tree: Tree, values: ArrayLike, name: str = "noisy") -> NDArray[np.float64]:
    """Return per-node values as float64, checking shape, finiteness and the ``2**40`` limit.

    Raises
    ------
    InvalidParameterError
        Naming ``name``.

    Examples
    --------
    >>> from dpcurator.hierarchy._tree import Tree
    >>> node_values(Tree.from_parents([-1, 0]), [3, -1]).tolist()
    [3.0, -1.0]
    """
    y = _node_floats(values, tree.n_nodes, name, broadcast=False)
    if np.any(np.abs(y) > MAX_COUNT):
        raise InvalidParameterError(name, values, f"must lie within +-2**40 ({MAX_COUNT})")
    return y


def node_weights(tree: Tree, weights: ArrayLike | None) -> NDArray[np.float64]:
    """Return objective weights per node: ``None`` means 1; finite and ``>= 0``.

    Raises
    ------
    InvalidParameterError
        Naming ``weights``.

    Examples
    --------
    >>> from dpcurator.hierarchy._tree import Tree
    >>> node_weights(Tree.from_parents([-1, 0]), 2).tolist()
    [2.0, 2.0]
    """
    if weights is None:
        return np.ones(tree.n_nodes)
    w = _node_floats(weights, tree.n_nodes, "weights")
    if np.any(w < 0):
        raise InvalidParameterError("weights", weights, "must be >= 0")
    return w


# -- helpers -------------------------------------------------------------------------------


def _node_floats(
    value: ArrayLike, n: int, name: str, *, broadcast: bool = True
) -> NDArray[np.float64]:
    try:
        array = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise InvalidParameterError(name, value, "must be numbers") from None
    if broadcast and array.ndim == 0:
        array = np.full(n, float(array))
    if array.shape != (n,):
        raise InvalidParameterError(name, value, f"must have shape ({n},), one per node")
    if not np.all(np.isfinite(array)):
        raise InvalidParameterError(name, value, "must be finite (no NaN or infinity)")
    return array


def _bounds(value: ArrayLike | None, n: int, name: str, *, missing: int) -> NDArray[np.int64]:
    """Integer bounds per node; ``None`` and infinities become the ``UNBOUNDED`` sentinel.

    A scalar is checked once, then broadcast.
    """
    if value is None:
        return np.full(n, missing, dtype=np.int64)
    try:
        array = np.asarray(value, dtype=np.float64)
        np.broadcast_to(array, (n,))
    except (TypeError, ValueError):
        raise InvalidParameterError(
            name, value, f"must be an integer or integers of shape ({n},)"
        ) from None
    finite = np.isfinite(array)
    if np.any(np.isnan(array)) or np.any(array[finite] != np.round(array[finite])):
        raise InvalidParameterError(name, value, "must be integers (or None / inf for no bound)")
    if np.any(np.abs(array[finite]) > MAX_COUNT):
        raise InvalidParameterError(name, value, f"must lie within +-2**40 ({MAX_COUNT})")
    bounds = np.where(finite, array, np.sign(array) * UNBOUNDED).astype(np.int64)
    return np.broadcast_to(bounds, (n,)).copy()


def _node(tree: Tree, key: int | Label) -> int:
    if isinstance(key, tuple):
        return tree.index(key)
    node = check_integer(key, "fixed", minimum=0)
    if node >= tree.n_nodes:
        raise InvalidParameterError("fixed", key, f"must name nodes in [0, {tree.n_nodes})")
    return node


def as_float_bounds(bound: NDArray[np.int64]) -> NDArray[np.float64]:
    """Return integer bounds as floats, the :data:`UNBOUNDED` sentinels as infinities.

    >>> as_float_bounds(np.array([3, UNBOUNDED, -UNBOUNDED])).tolist()
    [3.0, inf, -inf]
    """
    out = bound.astype(np.float64)
    out[bound >= UNBOUNDED] = math.inf
    out[bound <= -UNBOUNDED] = -math.inf
    return out


def _as_integer(bound: NDArray[np.float64]) -> NDArray[np.int64]:
    clipped = np.clip(bound, -UNBOUNDED, UNBOUNDED)
    clipped[clipped > MAX_COUNT] = UNBOUNDED  # looser than reachable sums beyond the limit
    clipped[clipped < -MAX_COUNT] = -UNBOUNDED
    return clipped.astype(np.int64)


def _check_nonempty(tree: Tree, low: NDArray[np.float64], high: NDArray[np.float64]) -> None:
    empty = np.flatnonzero(low > high)
    if empty.size:
        node = int(empty[-1])  # the deepest clash explains the others
        raise InfeasibleConstraintsError(
            f"the constraints cannot all hold: node {_describe(tree, node)} would need a value "
            f"in [{_show(low[node])}, {_show(high[node])}] (its own domain and the sums its "
            "children can reach), which is empty; widen the window or the bounds, or check the "
            "invariants."
        )


def _describe(tree: Tree, node: int) -> str:
    return f"{node} {tree.labels[node]!r}"


def _show(value: float) -> str:
    return str(int(value)) if math.isfinite(value) else ("inf" if value > 0 else "-inf")
