"""The hierarchy as a rooted tree in breadth-first order, with per-level segment reductions.

Every solver of the hierarchy package walks the tree level by level with numpy: in
breadth-first order the nodes of one level are contiguous, and so are the children of each node,
so "for every node of level ``l``, reduce over its children" is one ``np.add.reduceat`` (or
``np.minimum.reduceat``) over the slice of level ``l + 1``. :class:`Links` holds what such a
reduction needs for one level; :func:`segment_argmin` finds each node's best child.

Examples
--------
>>> tree = Tree.from_paths([("IL", "Cook"), ("IL", "Lake"), ("WI", "Dane")])
>>> tree.n_nodes, tree.n_levels, tree.labels[3]
(6, 3, ('IL', 'Cook'))
>>> tree.aggregate([5, 2, 4]).tolist()
[11, 7, 4, 5, 2, 4]
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import TYPE_CHECKING, Any, Final, TypeVar

import numpy as np
from numpy.typing import ArrayLike, NDArray

from dpcurator.errors import InvalidParameterError

if TYPE_CHECKING:
    import pandas

__all__ = [
    "Label",
    "Links",
    "Tree",
    "concatenated_ranges",
    "segment_argmin",
    "segment_order",
]

Label = tuple[Hashable, ...]
"""A node's path from the root: ``()`` for the root, ``("IL",)``, ``("IL", "Cook")`` ..."""

FLOAT_TOLERANCE: Final = 1e-9
"""Float values count as equal when ``|a - b| <= 1e-9 * max(1, |a|)`` (relative for big counts)."""

_Number = TypeVar("_Number", np.int64, np.float64)


def _read_only(array: NDArray[_Number]) -> NDArray[_Number]:
    array.setflags(write=False)
    return array


@dataclass(frozen=True, eq=False)
class Links:
    """How the internal nodes of one level reach their children (all in the next level).

    Attributes
    ----------
    parents : numpy.ndarray of int64
        The internal nodes of the level, in node order.
    children : slice or numpy.ndarray of int64
        The children of ``parents``, in order: the next level's slice of node indices, or (for
        a :meth:`restrict`-ed subset of parents) their indices.
    offsets : numpy.ndarray of int64
        Where each parent's children start inside ``children`` (the ``reduceat`` indices).
    segment : numpy.ndarray of int64
        For each child, the position of its parent in ``parents`` (to broadcast back).

    Examples
    --------
    >>> links = Tree.from_parents([-1, 0, 0, 1, 1, 2]).links[1]
    >>> links.parents.tolist(), links.children, links.offsets.tolist(), links.segment.tolist()
    ([1, 2], slice(3, 6, None), [0, 2], [0, 0, 1])
    """

    parents: NDArray[np.int64]
    children: slice | NDArray[np.int64]
    offsets: NDArray[np.int64]
    segment: NDArray[np.int64]

    def nodes(self, positions: NDArray[np.int64]) -> NDArray[np.int64]:
        """Return the node indices of the children at ``positions`` in ``children``.

        >>> Tree.from_parents([-1, 0, 0]).links[0].nodes(np.array([1])).tolist()
        [2]
        """
        if isinstance(self.children, slice):
            return positions + int(self.children.start)
        return np.asarray(self.children[positions], dtype=np.int64)

    def restrict(self, parents: NDArray[np.int64]) -> Links:
        """Return the links of a sorted subset of ``self.parents`` and of their children only.

        >>> links = Tree.from_parents([-1, 0, 0, 1, 1, 2]).links[1].restrict(np.array([2]))
        >>> links.children.tolist(), links.offsets.tolist()
        ([5], [0])
        """
        position = np.searchsorted(self.parents, parents)
        ends = np.append(self.offsets, self.segment.size)
        size = ends[position + 1] - ends[position]
        first = self.nodes(self.offsets[position])
        return Links(
            parents,
            concatenated_ranges(first, size),
            np.cumsum(size) - size,
            np.repeat(np.arange(parents.size, dtype=np.int64), size),
        )

    def sum(self, values: NDArray[_Number]) -> NDArray[_Number]:
        """Per parent, the sum of ``values`` over its children (``values`` in node order).

        >>> Tree.from_parents([-1, 0, 0]).links[0].sum(np.array([0, 2, 3])).tolist()
        [5]
        """
        return np.add.reduceat(values[self.children], self.offsets)

    def min(self, values: NDArray[np.float64]) -> NDArray[np.float64]:
        """Per parent, the minimum of ``values`` over its children.

        >>> Tree.from_parents([-1, 0, 0]).links[0].min(np.array([0.0, 2.0, -3.0])).tolist()
        [-3.0]
        """
        return np.minimum.reduceat(values[self.children], self.offsets)


def segment_argmin(
    links: Links, block: NDArray[np.float64]
) -> tuple[NDArray[np.float64], NDArray[np.int64]]:
    """Per parent of ``links``: the smallest child value and the first child that attains it.

    Parameters
    ----------
    links : Links
        One level's parent-children structure.
    block : numpy.ndarray of float64
        One value per child, i.e. over ``links.children`` (``inf`` allowed; no NaN).

    Returns
    -------
    tuple of numpy.ndarray
        ``(minimum, argmin)``: float64 minima and the int64 node index of the first child
        attaining each (the lowest index on ties).

    Examples
    --------
    >>> links = Tree.from_parents([-1, 0, 0, 0]).links[0]
    >>> low, arg = segment_argmin(links, np.array([4.0, 1.0, 1.0]))
    >>> low.tolist(), arg.tolist()
    ([1.0], [2])
    """
    low = np.minimum.reduceat(block, links.offsets)
    position = np.arange(block.size, dtype=np.int64)
    candidates = np.where(block == low[links.segment], position, block.size)
    first = np.minimum.reduceat(candidates, links.offsets)
    return low, links.nodes(first)


def segment_order(segment: NDArray[np.int64], key: NDArray[np.float64]) -> NDArray[np.int64]:
    """Sort positions by segment, then by ``key``, then by position: a fast stable lexsort.

    Equal to ``np.lexsort((key, segment))`` for a non-decreasing ``segment`` (children listed
    parent by parent), but built from two unstable sorts, several times faster than the two
    stable passes of ``lexsort`` on floats: the dense rank of each key (equal keys share a
    rank, so the first sort's tie order does not matter), then one ``argsort`` of the unique
    integers ``(segment, rank, position within the segment)``.

    Parameters
    ----------
    segment : numpy.ndarray of int64
        Non-decreasing group ids (e.g. ``links.segment`` or a subset of it).
    key : numpy.ndarray of float64
        The sort key within a group; no NaN (infinities are fine).

    Returns
    -------
    numpy.ndarray of int64
        The positions ``0 .. key.size - 1`` in sorted order.

    Examples
    --------
    >>> segment_order(np.array([0, 0, 0, 1, 1]), np.array([2.0, 1.0, 2.0, 0.5, -1.0])).tolist()
    [1, 0, 2, 4, 3]
    """
    m = key.size
    if m == 0:
        return np.zeros(0, dtype=np.int64)
    by_key = np.argsort(key)
    ordered = key[by_key]
    rank = np.empty(m, dtype=np.int64)
    rank[by_key[0]] = 0
    rank[by_key[1:]] = np.cumsum(ordered[1:] != ordered[:-1])
    position = np.arange(m, dtype=np.int64)
    new_group = np.empty(m, dtype=np.bool_)
    new_group[0] = True
    np.not_equal(segment[1:], segment[:-1], out=new_group[1:])
    group = np.cumsum(new_group) - 1
    within = position - np.maximum.accumulate(np.where(new_group, position, 0))
    groups, ranks, width = int(group[-1]) + 1, int(rank.max()) + 1, int(within.max()) + 1
    if groups * ranks * width >= 2**63:  # the packed key would overflow: sort stably
        return np.lexsort((key, segment)).astype(np.int64)
    return np.argsort((group * ranks + rank) * width + within).astype(np.int64)


class Tree:
    """A rooted tree stored in breadth-first order.

    Node 0 is the root; ``parent[v] < v`` for ``v > 0``; the children of each node are
    contiguous, and nodes of one level are contiguous (``level_slices``). Immutable (arrays are
    read-only). Build one with :meth:`from_parents`, :meth:`from_paths` or :meth:`from_frame`.

    Attributes
    ----------
    parent : numpy.ndarray of int64
        ``parent[0] == -1``.
    level : numpy.ndarray of int64
        Depth of each node, root 0.
    child_start, child_stop : numpy.ndarray of int64
        The children of ``v`` are ``child_start[v]:child_stop[v]`` (empty at leaves).
    order : numpy.ndarray of int64
        For each node, its index in the input of :meth:`from_parents` (``arange`` otherwise).
    is_leaf : numpy.ndarray of bool
        Whether the node has no children.
    level_slices : tuple of slice
        The node indices of each level.
    links : tuple of Links
        For each level but the last, its internal nodes and their children.

    Examples
    --------
    >>> tree = Tree.from_parents([-1, 0, 0, 1, 1])
    >>> tree.child_start.tolist(), tree.child_stop.tolist()
    ([1, 3, 5, 5, 5], [3, 5, 5, 5, 5])
    >>> tree.labels
    ((), (1,), (2,), (1, 3), (1, 4))
    """

    __slots__ = (
        "_index",
        "_labels",
        "child_start",
        "child_stop",
        "is_leaf",
        "level",
        "level_slices",
        "links",
        "order",
        "parent",
    )

    parent: NDArray[np.int64]
    level: NDArray[np.int64]
    child_start: NDArray[np.int64]
    child_stop: NDArray[np.int64]
    order: NDArray[np.int64]
    is_leaf: NDArray[np.bool_]
    level_slices: tuple[slice, ...]
    links: tuple[Links, ...]
    _labels: tuple[Label, ...] | None
    _index: dict[Label, int] | None

    def __init__(
        self,
        parent: NDArray[np.int64],
        order: NDArray[np.int64],
        labels: tuple[Label, ...] | None,
    ) -> None:
        """Wrap a parent array already in breadth-first order (use the ``from_*`` builders)."""
        n = parent.size
        if (
            n == 0
            or parent[0] != -1
            or np.any(np.diff(parent[1:]) < 0)
            or np.any(parent[1:] >= np.arange(1, n))
        ):
            raise InvalidParameterError(
                "parent", parent, "must be in breadth-first order (use Tree.from_parents)"
            )
        counts = np.bincount(parent[1:], minlength=n).astype(np.int64)
        stop = np.cumsum(counts) + 1
        start = stop - counts
        slices = [slice(0, 1)]
        while (following := int(stop[slices[-1].stop - 1])) > slices[-1].stop:
            slices.append(slice(slices[-1].stop, following))
        level = np.repeat(
            np.arange(len(slices), dtype=np.int64), [s.stop - s.start for s in slices]
        )
        links = []
        for here, below in pairwise(slices):
            internal = np.flatnonzero(counts[here] > 0).astype(np.int64) + here.start
            offsets = start[internal] - below.start
            segment = np.repeat(np.arange(internal.size, dtype=np.int64), counts[internal])
            links.append(
                Links(_read_only(internal), below, _read_only(offsets), _read_only(segment))
            )
        object.__setattr__(self, "parent", _read_only(parent))
        object.__setattr__(self, "order", _read_only(order))
        object.__setattr__(self, "level", _read_only(level))
        object.__setattr__(self, "child_start", _read_only(start))
        object.__setattr__(self, "child_stop", _read_only(stop))
        object.__setattr__(self, "is_leaf", _read_only(counts == 0))
        object.__setattr__(self, "level_slices", tuple(slices))
        object.__setattr__(self, "links", tuple(links))
        object.__setattr__(self, "_labels", labels)
        object.__setattr__(self, "_index", None)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"Tree is immutable; cannot set {name!r}.")

    def __repr__(self) -> str:
        leaves = int(np.count_nonzero(self.is_leaf))
        return f"Tree(n_nodes={self.n_nodes}, n_levels={self.n_levels}, n_leaves={leaves})"

    # -- builders --------------------------------------------------------------------------

    @classmethod
    def from_parents(cls, parent: ArrayLike, labels: Sequence[Label] | None = None) -> Tree:
        """Build a tree from any parent array with one root (``-1``); renumber it breadth-first.

        Children keep their input order; ``tree.order[v]`` is the input index of node ``v``, so
        input values map to nodes with ``values[tree.order]``.

        Parameters
        ----------
        parent : array_like of int, shape (n,)
            ``parent[i]`` is the input index of node ``i``'s parent, ``-1`` for the root.
        labels : sequence of tuple, optional
            Each node's path from the root, in input order (distinct). By default the path of
            input indices below the root: ``()``, ``(i,)``, ``(i, j)`` ...

        Returns
        -------
        Tree

        Raises
        ------
        InvalidParameterError
            Naming ``parent`` if it is not a 1-D integer array with exactly one root whose
            entries all lead to the root (no cycle, no index out of range); naming ``labels``
            if they are not one distinct tuple per node.

        Examples
        --------
        >>> tree = Tree.from_parents([2, -1, 1, 1])
        >>> tree.parent.tolist(), tree.order.tolist()
        ([-1, 0, 0, 1], [1, 2, 3, 0])
        """
        raw = _integer_vector(parent, "parent")
        n = raw.size
        roots = np.flatnonzero(raw == -1)
        if roots.size != 1 or np.any((raw < -1) | (raw >= n)):
            raise InvalidParameterError(
                "parent", parent, "must hold node indices in [0, n) and exactly one root (-1)"
            )
        root = int(roots[0])
        if root == 0 and np.all(np.diff(raw[1:]) >= 0) and np.all(raw[1:] < np.arange(1, n)):
            order = np.arange(n, dtype=np.int64)  # already breadth-first
        else:
            order = _breadth_first_order(raw, root)
            if order.size != n:
                raise InvalidParameterError(
                    "parent", parent, "must form a tree (some nodes lie on a cycle)"
                )
        rank = np.empty(n, dtype=np.int64)
        rank[order] = np.arange(n, dtype=np.int64)
        renumbered = np.where(raw[order] < 0, -1, rank[np.maximum(raw[order], 0)])
        given = None if labels is None else _check_labels(labels, n)
        return cls(renumbered, order, None if given is None else tuple(given[i] for i in order))

    @classmethod
    def from_paths(cls, paths: Iterable[Label]) -> Tree:
        """Build a tree from leaf paths; every prefix becomes a node, children sorted by label.

        Parameters
        ----------
        paths : iterable of tuple
            Leaf paths, all of the same length >= 1 (e.g. ``("IL", "Cook")``); duplicates are
            ignored. The labels of one level must be mutually comparable (for sorting).

        Returns
        -------
        Tree
            Root label ``()``; the leaves are the given paths.

        Raises
        ------
        InvalidParameterError
            Naming ``paths`` if it is empty, mixes lengths, or holds labels that cannot be
            sorted.

        Examples
        --------
        >>> tree = Tree.from_paths([("WI", "Dane"), ("IL", "Lake"), ("IL", "Cook")])
        >>> tree.labels
        ((), ('IL',), ('WI',), ('IL', 'Cook'), ('IL', 'Lake'), ('WI', 'Dane'))
        """
        distinct = {tuple(path) for path in paths}
        depths = {len(path) for path in distinct}
        if not distinct or len(depths) != 1 or 0 in depths:
            raise InvalidParameterError(
                "paths", sorted(depths), "must be non-empty leaf paths all of one length >= 1"
            )
        try:
            leaves = sorted(distinct)
        except TypeError:
            raise InvalidParameterError(
                "paths", _sample(distinct), "must hold labels that sort within a level"
            ) from None
        depth = depths.pop()
        labels: list[Label] = [()]
        parents: list[int] = [-1]
        previous_level: dict[Label, int] = {(): 0}
        for d in range(1, depth + 1):
            current: dict[Label, int] = {}
            for leaf in leaves:
                prefix = leaf[:d]
                if prefix not in current:
                    current[prefix] = len(labels)
                    labels.append(prefix)
                    parents.append(previous_level[prefix[:-1]])
            previous_level = current
        n = len(labels)
        return cls(np.asarray(parents, dtype=np.int64), np.arange(n, dtype=np.int64), tuple(labels))

    @classmethod
    def from_frame(cls, frame: pandas.DataFrame, columns: Sequence[str]) -> Tree:
        """Build the tree of the distinct paths of ``columns`` in a table (one level per column).

        Parameters
        ----------
        frame : pandas.DataFrame
            The table, e.g. one row per person or per county.
        columns : sequence of str
            The hierarchy's columns from the top, e.g. ``["state", "county"]``.

        Returns
        -------
        Tree
            As :meth:`from_paths` on the distinct rows of ``frame[columns]``.

        Raises
        ------
        InvalidParameterError
            Naming ``columns`` if it is empty or names a missing column, or ``frame`` if those
            columns hold missing values.

        Examples
        --------
        >>> import pandas as pd
        >>> frame = pd.DataFrame({"state": ["IL", "IL", "WI"], "county": ["Cook", "Lake", "Dane"]})
        >>> Tree.from_frame(frame, ["state", "county"]).n_nodes
        6
        """
        names = list(columns)
        missing = [name for name in names if name not in frame.columns]
        if not names or missing:
            raise InvalidParameterError("columns", columns, "must name columns of frame")
        table = frame[names].drop_duplicates()
        if bool(table.isna().to_numpy().any()):
            raise InvalidParameterError("frame", names, "must have no missing values in columns")
        return cls.from_paths(table.itertuples(index=False, name=None))

    # -- shape -----------------------------------------------------------------------------

    @property
    def n_nodes(self) -> int:
        """Number of nodes."""
        return int(self.parent.size)

    @property
    def n_levels(self) -> int:
        """Number of levels (the root's level counts: a root with leaves has 2)."""
        return len(self.level_slices)

    @property
    def labels(self) -> tuple[Label, ...]:
        """Each node's path from the root (``()`` for the root)."""
        if self._labels is None:
            built: list[Label] = [()]
            order = self.order.tolist()
            for v, p in enumerate(self.parent.tolist()[1:], start=1):
                built.append((*built[p], order[v]))
            object.__setattr__(self, "_labels", tuple(built))
        assert self._labels is not None
        return self._labels

    def index(self, label: Label) -> int:
        """Return the node whose path from the root is ``label``.

        Raises
        ------
        InvalidParameterError
            Naming ``label`` if no node has it.

        Examples
        --------
        >>> Tree.from_paths([("IL", "Cook"), ("WI", "Dane")]).index(("WI", "Dane"))
        4
        """
        if self._index is None:
            object.__setattr__(self, "_index", {lab: v for v, lab in enumerate(self.labels)})
        assert self._index is not None
        try:
            return self._index[tuple(label)]
        except (KeyError, TypeError):
            raise InvalidParameterError("label", label, "must be the path of a node") from None

    # -- sums ------------------------------------------------------------------------------

    def aggregate(self, leaf_values: ArrayLike) -> NDArray[np.int64] | NDArray[np.float64]:
        """Sum leaf values up the tree: every node gets the exact sum of its leaves.

        Parameters
        ----------
        leaf_values : array_like of int or float, shape (n_leaves,)
            One value per leaf, leaves in node order (``np.flatnonzero(tree.is_leaf)``).

        Returns
        -------
        numpy.ndarray of int64 (integer input) or float64, shape (n_nodes,)

        Examples
        --------
        >>> Tree.from_parents([-1, 0, 0, 1, 1]).aggregate([1, 2, 3]).tolist()
        [6, 5, 1, 2, 3]
        """
        leaves = np.flatnonzero(self.is_leaf)
        values = _numeric_vector(leaf_values, "leaf_values", leaves.size)
        out = np.zeros(self.n_nodes, dtype=values.dtype)
        out[leaves] = values
        for links in reversed(self.links):
            out[links.parents] = links.sum(out)
        return out

    def child_sums(self, values: ArrayLike) -> NDArray[np.int64] | NDArray[np.float64]:
        """Per node, the sum of its children's values (0 at leaves).

        Examples
        --------
        >>> Tree.from_parents([-1, 0, 0]).child_sums([9, 4, 4]).tolist()
        [8, 0, 0]
        """
        x = _numeric_vector(values, "values", self.n_nodes)
        out = np.zeros_like(x)
        for links in self.links:
            out[links.parents] = links.sum(x)
        return out

    def inconsistent(self, values: ArrayLike) -> NDArray[np.bool_]:
        """Per node, whether it differs from the sum of its children (``False`` at leaves).

        Integers compare exactly; floats within ``1e-9 * max(1, |value|)``.

        Examples
        --------
        >>> Tree.from_parents([-1, 0, 0]).inconsistent([9, 4, 4]).tolist()
        [True, False, False]
        """
        x = _numeric_vector(values, "values", self.n_nodes)
        sums = self.child_sums(x)
        if x.dtype == np.int64:
            differs = x != sums
        else:
            differs = np.abs(x - sums) > FLOAT_TOLERANCE * np.maximum(1.0, np.abs(x))
        return np.asarray(differs & ~self.is_leaf, dtype=np.bool_)

    def consistency_violations(self, values: ArrayLike) -> int:
        """Count the internal nodes that differ from the sum of their children.

        Examples
        --------
        >>> Tree.from_parents([-1, 0, 0, 1, 1]).consistency_violations([6, 5, 1, 2, 2])
        1
        """
        return int(np.count_nonzero(self.inconsistent(values)))


# -- helpers -------------------------------------------------------------------------------


def _sample(paths: Iterable[Label]) -> list[Label]:
    """Return a few of the paths, for error messages."""
    return [path for _, path in zip(range(3), paths, strict=False)]


def _integer_vector(value: ArrayLike, name: str) -> NDArray[np.int64]:
    array = np.asarray(value)
    if array.ndim != 1 or array.size == 0 or array.dtype.kind not in "iu":
        raise InvalidParameterError(name, value, "must be a non-empty 1-D array of integers")
    return array.astype(np.int64)


def _numeric_vector(value: ArrayLike, name: str, size: int) -> NDArray[Any]:
    """Return ``value`` as int64 (integer input) or float64, checking its shape."""
    array = np.asarray(value)
    if array.shape != (size,) or array.dtype.kind not in "iuf":
        raise InvalidParameterError(name, value, f"must be a numeric array of shape ({size},)")
    if array.dtype.kind == "f":
        return array.astype(np.float64)
    return array.astype(np.int64)


def _check_labels(labels: Sequence[Label], n: int) -> list[Label]:
    given = [tuple(label) for label in labels]
    if len(given) != n or len(set(given)) != n:
        raise InvalidParameterError("labels", labels, f"must be {n} distinct tuples, one per node")
    return given


def concatenated_ranges(starts: NDArray[np.int64], lengths: NDArray[np.int64]) -> NDArray[np.int64]:
    """``concatenate([arange(s, s + k) for s, k in zip(starts, lengths)])``, vectorised."""
    total = int(lengths.sum())
    shift = np.repeat(starts - (np.cumsum(lengths) - lengths), lengths)
    return shift + np.arange(total, dtype=np.int64)


def _breadth_first_order(parent: NDArray[np.int64], root: int) -> NDArray[np.int64]:
    """Input indices in breadth-first order from ``root``, children in input order.

    Nodes that cannot be reached (they lie on a cycle) are left out.
    """
    n = parent.size
    by_parent = np.argsort(parent, kind="stable")[1:]  # the root (-1) sorts first
    counts = np.bincount(parent[by_parent], minlength=n).astype(np.int64)
    first = np.cumsum(counts) - counts
    frontier = np.array([root], dtype=np.int64)
    levels = [frontier]
    while frontier.size:
        frontier = by_parent[concatenated_ranges(first[frontier], counts[frontier])]
        levels.append(frontier)
    return np.concatenate(levels)
