r"""Count-of-counts releases: how many groups of each size every region has.

A region ``r`` of a hierarchy holds groups of individuals (households of people, aircraft with
their trips); ``n^r_s`` is the number of its groups of size ``s``. The release is the histogram
``H^r = (n^r_1, ..., n^r_S)`` of every region, with a public maximal size ``S`` (larger groups
are counted at ``S``: the histograms are *capped*) and the public number of groups ``G``
(Kuo et al. 2018; Fioretto, Van Hentenryck and Zhu 2021; ``hierarchy.md`` (a) and (e)).

Neighbour relation: one individual is added to or removed from one group; the set of groups is
public, so a group changes size by one and ``G`` is an invariant (a group never appears or
vanishes). In every region that holds the group, ``H^r`` loses one at one size and gains one at
the next (L1 distance 2, or 0 when both sizes are capped at ``S``), and the *cumulative*
histogram ``Hc^r_s = sum_{t <= s} n^r_t`` changes by one in a single cell (L1 distance 1). The
group lies in one region per level, so a level's vector has L1 sensitivity ``Delta = 2``
(``"histogram"``) or ``Delta = 1`` (``"cumulative"``), and ``L`` levels at ``epsilon / L`` each
get geometric noise of scale ``lambda = Delta L / epsilon`` (the lectures' ``2L/epsilon``).

Post-processing (no privacy cost) makes the release consistent (``H^r = sum_{c in ch(r)} H^c``
in every size), non-negative, integral, with ``sum_s H^root_s = G``:

- ``"histogram"`` route: the noisy ``H`` directly;
- ``"cumulative"`` route: the noisy ``Hc`` of each region is made non-decreasing by
  pool-adjacent-violators (:func:`isotonic_regression`; Hay et al. 2010's estimator for sorted
  sequences), clipped to ``[0, G]`` and differenced back into a histogram;

then both are solved as one scalar tree (:class:`CellTree`: a virtual root fixed to ``G``, whose
children are the cells ``(root, s)``, and below each ``(r, s)`` the cells ``(c, s)``) by
:func:`~dpcurator.hierarchy._postprocess.postprocess` (``"exact"``: the integer optimum, ``dp``
in the lectures' table; ``"relaxed"``: continuous QP then rounding, ``r``).

Examples
--------
>>> import pandas as pd
>>> from dpcurator.noise import InsecureSeededSource
>>> people = pd.DataFrame({"state": ["IL", "IL", "IL", "WI", "WI"],
...                        "household": [1, 1, 2, 3, 3]})
>>> counts = CountOfCounts.from_groups(people, ["state"], "household", max_size=3)
>>> counts.histograms.tolist()  # root, IL, WI: groups of sizes 1, 2, 3
[[1, 2, 0], [1, 1, 0], [0, 1, 0]]
>>> noisy = add_count_of_counts_noise(counts, epsilon=1.0, encoding="cumulative",
...                                   source=InsecureSeededSource(0))
>>> estimate = postprocess_count_of_counts(noisy, method="exact")
>>> int(estimate.histograms[0].sum()), estimate.solution.violations.total
(3, 0)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

from dpcurator._validation import check_epsilon, check_integer
from dpcurator.errors import InvalidParameterError
from dpcurator.hierarchy._metrics import earth_movers_distance
from dpcurator.hierarchy._noise import NoisyLevels, add_level_noise
from dpcurator.hierarchy._postprocess import Solution, postprocess
from dpcurator.hierarchy._tree import Tree
from dpcurator.noise import RandomSource

if TYPE_CHECKING:
    import pandas

__all__ = [
    "ENCODINGS",
    "CellTree",
    "CountOfCounts",
    "CountOfCountsEstimate",
    "Encoding",
    "LevelDistance",
    "NoisyCountOfCounts",
    "add_count_of_counts_noise",
    "encode",
    "encoding_sensitivity",
    "histograms_from_cumulative",
    "isotonic_regression",
    "level_distances",
    "postprocess_count_of_counts",
]

Encoding = Literal["histogram", "cumulative"]
ENCODINGS: Final[tuple[Encoding, ...]] = ("histogram", "cumulative")
"""How a region's count-of-counts is measured: ``H`` (Delta 2) or cumulative ``Hc`` (Delta 1)."""

_SENSITIVITY: Final[dict[Encoding, int]] = {"histogram": 2, "cumulative": 1}


# -- the data ----------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class CountOfCounts:
    """The true count-of-counts histograms of every region of a hierarchy.

    Attributes
    ----------
    tree : Tree
        The regions.
    histograms : numpy.ndarray of int64, shape (tree.n_nodes, max_size)
        ``histograms[r, s - 1]`` = number of groups of size ``s`` in region ``r``; groups
        larger than ``max_size`` are counted at ``max_size``. Non-negative and consistent
        (checked); read-only.

    Examples
    --------
    >>> tree = Tree.from_paths([("a",), ("b",)])
    >>> counts = CountOfCounts.from_leaf_sizes(tree, [[1, 1, 2], [5]], max_size=3)
    >>> counts.histograms.tolist(), counts.groups, counts.cumulative[0].tolist()
    ([[2, 1, 1], [2, 1, 0], [0, 0, 1]], 4, [2, 3, 4])
    """

    tree: Tree
    histograms: NDArray[np.int64]

    def __post_init__(self) -> None:
        histograms = np.array(self.histograms, dtype=np.int64)
        if histograms.ndim != 2 or histograms.shape[0] != self.tree.n_nodes or not histograms.size:
            raise InvalidParameterError(
                "histograms", histograms.shape, f"must have shape ({self.tree.n_nodes}, S >= 1)"
            )
        inconsistent = any(self.tree.consistency_violations(column) for column in histograms.T)
        if np.any(histograms < 0) or inconsistent:
            raise InvalidParameterError(
                "histograms", "<histograms>", "must be non-negative and consistent in every size"
            )
        histograms.setflags(write=False)
        object.__setattr__(self, "histograms", histograms)

    @property
    def max_size(self) -> int:
        """The public maximal group size ``S``."""
        return int(self.histograms.shape[1])

    @property
    def groups(self) -> int:
        """The public number of groups ``G`` (the root's total)."""
        return int(self.histograms[0].sum())

    @property
    def cumulative(self) -> NDArray[np.int64]:
        """``Hc``: per region, the number of groups of size at most ``s``."""
        return encode(self.histograms, "cumulative")

    @classmethod
    def from_leaf_sizes(
        cls, tree: Tree, sizes: Sequence[ArrayLike], *, max_size: int
    ) -> CountOfCounts:
        """Build the histograms from the sizes of the groups of every leaf region.

        Parameters
        ----------
        tree : Tree
            The regions.
        sizes : sequence of array_like of int
            One entry per leaf (leaves in node order): the sizes (>= 1) of its groups.
        max_size : int
            The public maximal size ``S`` >= 1; larger groups are counted at ``S``.

        Returns
        -------
        CountOfCounts

        Raises
        ------
        InvalidParameterError
            If there is not one entry per leaf or a size is not an integer >= 1.
        """
        leaves = int(np.count_nonzero(tree.is_leaf))
        if len(sizes) != leaves:
            raise InvalidParameterError(
                "sizes", len(sizes), f"must give one entry per leaf ({leaves})"
            )
        arrays = [np.asarray(leaf, dtype=np.int64).reshape(-1) for leaf in sizes]
        lengths = np.array([a.size for a in arrays], dtype=np.int64)
        flat = np.concatenate(arrays) if arrays else np.zeros(0, dtype=np.int64)
        return cls._from_groups(tree, np.repeat(np.arange(leaves), lengths), flat, max_size)

    @classmethod
    def from_groups(
        cls, frame: pandas.DataFrame, regions: Sequence[str], group: str, *, max_size: int
    ) -> CountOfCounts:
        """Build the histograms from a table of individuals: one row per individual.

        A group is a pair (leaf region, value of ``group``); its size is its number of rows.
        For example flights (rows) grouped by aircraft (``tailnum``) within each
        month > origin > destination cell: "trips per vehicle".

        Parameters
        ----------
        frame : pandas.DataFrame
            The individuals, without missing values in ``regions`` and ``group``.
        regions : sequence of str
            The hierarchy's columns from the top (e.g. ``["month", "origin", "dest"]``).
        group : str
            The column that identifies a group within a leaf region.
        max_size : int
            The public maximal size ``S``; larger groups are counted at ``S``.

        Returns
        -------
        CountOfCounts

        Raises
        ------
        InvalidParameterError
            Naming ``group`` if it is not a column of ``frame`` or has missing values, and as
            :meth:`Tree.from_frame` for ``regions``.
        """
        if group not in frame.columns or bool(frame[group].isna().any()):
            raise InvalidParameterError(
                "group", group, "must be a column of frame without missing values"
            )
        tree = Tree.from_frame(frame, regions)
        sizes = frame.groupby([*regions, group], sort=False).size()
        paths = zip(*(sizes.index.get_level_values(name) for name in regions), strict=True)
        leaf_of = _leaf_positions(tree)
        leaf = np.fromiter((leaf_of[path] for path in paths), dtype=np.int64, count=len(sizes))
        return cls._from_groups(tree, leaf, sizes.to_numpy(dtype=np.int64), max_size)

    @classmethod
    def _from_groups(
        cls, tree: Tree, leaf: NDArray[np.int64], size: NDArray[np.int64], max_size: int
    ) -> CountOfCounts:
        cap = check_integer(max_size, "max_size", minimum=1)
        if np.any(size < 1):
            raise InvalidParameterError("sizes", int(size.min()), "must be >= 1 for every group")
        leaves = np.flatnonzero(tree.is_leaf)
        cells = np.bincount(
            leaf * cap + np.minimum(size, cap) - 1, minlength=leaves.size * cap
        ).reshape(leaves.size, cap)
        columns = [np.asarray(tree.aggregate(cells[:, s]), dtype=np.int64) for s in range(cap)]
        return cls(tree, np.column_stack(columns))


def _leaf_positions(tree: Tree) -> dict[object, int]:
    """Map each leaf's label (its path) to its position among the leaves."""
    leaves = np.flatnonzero(tree.is_leaf)
    labels = tree.labels
    return {labels[v]: i for i, v in enumerate(leaves.tolist())}


# -- encodings and monotone fitting ------------------------------------------------------------


def encoding_sensitivity(encoding: str) -> int:
    """Return the L1 sensitivity of one level's vector under the count-of-counts neighbours.

    One individual moves one group one size up or down: ``H`` changes in two cells (2),
    ``Hc`` in one (1), in the one region of the level that holds the group (module docstring).

    Examples
    --------
    >>> encoding_sensitivity("histogram"), encoding_sensitivity("cumulative")
    (2, 1)
    """
    return _SENSITIVITY[_check_encoding(encoding)]


def encode(histograms: ArrayLike, encoding: str) -> NDArray[np.int64]:
    """Return the histograms (``"histogram"``) or their running sums over sizes (``"cumulative"``).

    Parameters
    ----------
    histograms : array_like of int, shape (regions, S)
        ``H``, one row per region.
    encoding : {"histogram", "cumulative"}

    Returns
    -------
    numpy.ndarray of int64, shape (regions, S)

    Examples
    --------
    >>> encode([[2, 0, 1]], "cumulative").tolist()
    [[2, 2, 3]]
    """
    values = np.asarray(histograms, dtype=np.int64)
    return np.cumsum(values, axis=1) if _check_encoding(encoding) == "cumulative" else values.copy()


def isotonic_regression(values: ArrayLike, weights: ArrayLike | None = None) -> NDArray[np.float64]:
    r"""Fit each row with the closest non-decreasing sequence (pool-adjacent-violators).

    .. math:: \hat z = \arg\min_{z_1 \le z_2 \le \dots \le z_S} \sum_s w_s (z_s - y_s)^2,

    computed exactly by pool-adjacent-violators (Ayer et al. 1955; Barlow et al. 1972): scan
    left to right, pooling adjacent blocks into their weighted mean while they decrease. All
    rows advance together, one column at a time, so the cost is ``O(S)`` numpy steps plus one
    per pooling round. Used on noisy cumulative histograms (Hay, Rastogi, Miklau and Suciu,
    PVLDB 2010, Section 4: the minimum-L2 estimate of a sorted sequence). Post-processing.

    Parameters
    ----------
    values : array_like of float, shape (S,) or (rows, S)
        The sequences, finite.
    weights : array_like of float, same shape (or broadcastable), optional
        Positive weights (default 1).

    Returns
    -------
    numpy.ndarray of float64, the shape of ``values``
        The fitted non-decreasing sequences.

    Examples
    --------
    >>> isotonic_regression([1.0, 3.0, 2.0, 4.0]).tolist()
    [1.0, 2.5, 2.5, 4.0]
    >>> isotonic_regression([[3.0, 1.0], [0.0, 5.0]]).tolist()
    [[2.0, 2.0], [0.0, 5.0]]
    """
    y = np.asarray(values, dtype=np.float64)
    if y.ndim not in (1, 2) or y.size == 0 or not np.all(np.isfinite(y)):
        raise InvalidParameterError("values", values, "must be a finite non-empty 1-D or 2-D array")
    rows = np.atleast_2d(y)
    w = np.broadcast_to(np.asarray(1.0 if weights is None else weights, dtype=np.float64), y.shape)
    w = np.atleast_2d(w)
    if not np.all(np.isfinite(w) & (w > 0)):
        raise InvalidParameterError("weights", weights, "must be finite and > 0")
    n_rows, size = rows.shape
    mean = np.zeros((n_rows, size))
    mass = np.zeros((n_rows, size))
    length = np.zeros((n_rows, size), dtype=np.int64)
    top = np.zeros(n_rows, dtype=np.int64)  # blocks on each row's stack
    everyone = np.arange(n_rows)
    for j in range(size):
        mean[everyone, top], mass[everyone, top], length[everyone, top] = rows[:, j], w[:, j], 1
        top += 1
        while True:
            r = np.flatnonzero(top >= 2)
            r = r[mean[r, top[r] - 2] > mean[r, top[r] - 1]]
            if r.size == 0:
                break
            below, above = top[r] - 2, top[r] - 1
            pooled = mass[r, below] + mass[r, above]
            mean[r, below] = (
                mean[r, below] * mass[r, below] + mean[r, above] * mass[r, above]
            ) / pooled
            mass[r, below] = pooled
            length[r, below] += length[r, above]
            top[r] -= 1
    used = np.arange(size) < top[:, None]
    fitted = np.repeat(mean[used], length[used]).reshape(n_rows, size)
    return fitted.reshape(y.shape)


def histograms_from_cumulative(cumulative: ArrayLike, groups: int) -> NDArray[np.float64]:
    """Turn noisy cumulative histograms into histograms: PAV, clip to ``[0, G]``, differences.

    The result is non-negative and each row sums to at most ``G`` (Kuo et al. 2018's ``Hc``
    method, first step). Post-processing.

    Parameters
    ----------
    cumulative : array_like of float, shape (regions, S)
        Noisy ``Hc``.
    groups : int
        The public number of groups ``G``.

    Returns
    -------
    numpy.ndarray of float64, shape (regions, S)

    Examples
    --------
    >>> histograms_from_cumulative([[2.0, 1.0, 9.0]], groups=5).tolist()
    [[1.5, 0.0, 3.5]]
    """
    total = check_integer(groups, "groups", minimum=0)
    fitted = np.clip(isotonic_regression(np.atleast_2d(cumulative)), 0.0, float(total))
    return np.diff(fitted, axis=1, prepend=0.0)


# -- the reduction to one scalar tree ----------------------------------------------------------


@dataclass(frozen=True, eq=False)
class CellTree:
    """The count-of-counts problem as one scalar tree (``hierarchy.md`` (a), "Reduction").

    Node 0 is a virtual root (the public number of groups ``G``); its children are the cells
    ``(root, s)``, ``s = 1..S``; below each ``(r, s)`` hang the ``(c, s)`` for ``c in ch(r)``.
    Consistency of the scalar tree is consistency of the histograms in every size, plus
    ``sum_s H^root_s = G`` when the virtual root is fixed.

    Attributes
    ----------
    regions : Tree
        The region tree.
    max_size : int
        ``S``.
    tree : Tree
        The scalar tree, ``1 + regions.n_nodes * S`` nodes.
    cell : numpy.ndarray of int64
        For each node of ``tree``, the flat index ``r * S + s - 1`` of its cell (``-1`` at the
        virtual root).

    Examples
    --------
    >>> cells = CellTree.build(Tree.from_paths([("a",), ("b",)]), max_size=2)
    >>> cells.tree.n_nodes, cells.tree.n_levels
    (7, 3)
    >>> flat = cells.flatten([[3, 1], [1, 1], [2, 0]], total=4)
    >>> cells.tree.consistency_violations(flat), cells.unflatten(flat).astype(int).tolist()
    (0, [[3, 1], [1, 1], [2, 0]])
    """

    regions: Tree
    max_size: int
    tree: Tree
    cell: NDArray[np.int64]

    @classmethod
    def build(cls, regions: Tree, *, max_size: int) -> CellTree:
        """Build the scalar tree of a region tree and a maximal size ``S``."""
        size = check_integer(max_size, "max_size", minimum=1)
        sizes = np.arange(size, dtype=np.int64)
        # Input numbering: 0 the virtual root, 1 + r * S + s the cell (r, s + 1).
        parent_region = np.asarray(regions.parent, dtype=np.int64)[:, None]
        parent = np.where(parent_region < 0, 0, 1 + parent_region * size + sizes)
        tree = Tree.from_parents(np.concatenate([[-1], parent.reshape(-1)]))
        return cls(regions, size, tree, tree.order - 1)

    def flatten(self, histograms: ArrayLike, *, total: float) -> NDArray[np.float64]:
        """Lay histograms of shape ``(regions, S)`` out on the scalar tree, the root = ``total``."""
        values = np.asarray(histograms, dtype=np.float64).reshape(-1)
        expected = self.regions.n_nodes * self.max_size
        if values.size != expected:
            raise InvalidParameterError(
                "histograms",
                values.size,
                f"must have shape ({self.regions.n_nodes}, {self.max_size})",
            )
        return np.concatenate([[float(total)], values])[self.cell + 1]

    def unflatten(self, values: ArrayLike) -> NDArray[np.float64]:
        """Read the histograms (shape ``(regions, S)``) back from scalar-tree values."""
        flat = np.asarray(values)
        out = np.empty(self.regions.n_nodes * self.max_size, dtype=flat.dtype)
        out[self.cell[1:]] = flat[1:]
        return out.reshape(self.regions.n_nodes, self.max_size)


# -- noise and post-processing -----------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class NoisyCountOfCounts:
    """The noisy measurement of a count-of-counts hierarchy, before post-processing.

    Attributes
    ----------
    regions : Tree
        The region tree.
    encoding : {"histogram", "cumulative"}
        What was measured.
    values : numpy.ndarray of int64, shape (regions.n_nodes, S)
        The noisy ``H`` or ``Hc`` of every region.
    groups : int
        The public number of groups ``G``.
    noise : NoisyLevels
        The noise of each level: scales, variances and privacy events (``noise.epsilon`` is
        the total by basic composition).
    """

    regions: Tree
    encoding: Encoding
    values: NDArray[np.int64]
    groups: int
    noise: NoisyLevels

    def histograms(self) -> NDArray[np.float64]:
        """Return the noisy histograms: ``values`` itself, or the cumulative route's estimate."""
        if self.encoding == "cumulative":
            return histograms_from_cumulative(self.values, self.groups)
        return self.values.astype(np.float64)

    def cell_weights(self) -> NDArray[np.float64]:
        """Return, per region and size, the inverse variance of its level's noise."""
        inverse = np.array([1.0 / level.variance for level in self.noise.levels])
        per_region = inverse[np.asarray(self.regions.level)]
        return np.repeat(per_region[:, None], self.values.shape[1], axis=1)


def add_count_of_counts_noise(
    counts: CountOfCounts,
    *,
    epsilon: float,
    encoding: str,
    level_weights: Sequence[float] | None = None,
    source: RandomSource | None = None,
) -> NoisyCountOfCounts:
    r"""Measure every region's ``H`` or ``Hc`` with geometric noise: epsilon-DP.

    .. math:: \tilde v^{(l)} = v^{(l)} + Z^{(l)}, \quad Z^{(l)}_i \sim \mathrm{DLap}(\Delta /
              \epsilon_l), \quad \sum_l \epsilon_l = \epsilon,

    where ``v^(l)`` concatenates the vectors (``H`` or ``Hc``) of the regions of level ``l``
    and ``Delta`` is :func:`encoding_sensitivity`. The release is epsilon-DP under the
    count-of-counts neighbours (one individual added to or removed from a group; module
    docstring) by the geometric mechanism per level and basic composition over levels
    (Ghosh, Roughgarden and Sundararajan 2009; Dwork and Roth 2014, Theorem 3.16). With equal
    shares, ``lambda = 2L/epsilon`` for ``H`` (lecture 003, "A Differentially Private
    Optimization Approach") and ``L/epsilon`` for ``Hc`` (Kuo et al. 2018).

    Parameters
    ----------
    counts : CountOfCounts
        The true histograms.
    epsilon : float
        Total privacy budget, > 0.
    encoding : {"histogram", "cumulative"}
        Measure ``H`` (Delta 2) or ``Hc`` (Delta 1).
    level_weights : sequence of float, optional
        Split of ``epsilon`` over the levels, root first (default equal).
    source : RandomSource, optional
        Randomness; secure by default (``InsecureSeededSource(seed)`` for simulations).

    Returns
    -------
    NoisyCountOfCounts

    Examples
    --------
    >>> from dpcurator.noise import InsecureSeededSource
    >>> counts = CountOfCounts.from_leaf_sizes(Tree.from_paths([("a",), ("b",)]),
    ...                                        [[1, 2], [2]], max_size=2)
    >>> noisy = add_count_of_counts_noise(counts, epsilon=1.0, encoding="histogram",
    ...                                   source=InsecureSeededSource(0))
    >>> [level.scale for level in noisy.noise.levels], noisy.noise.epsilon  # 2L/eps, L = 2
    ([4.0, 4.0], 1.0)
    """
    name = _check_encoding(encoding)
    budget = check_epsilon(epsilon)
    encoded = encode(counts.histograms, name)
    tree = counts.tree
    noise = add_level_noise(
        [encoded[part] for part in tree.level_slices],
        mechanism="geometric",
        budget=budget,
        weights=level_weights,
        sensitivity=_SENSITIVITY[name],
        source=source,
    )
    return NoisyCountOfCounts(tree, name, np.concatenate(noise.values), counts.groups, noise)


@dataclass(frozen=True, eq=False)
class CountOfCountsEstimate:
    """Post-processed count-of-counts histograms.

    Attributes
    ----------
    histograms : numpy.ndarray, shape (regions, S)
        int64 for the integer methods, float64 for ``"least_squares"``.
    solution : Solution
        The scalar-tree solution: method, objective and constraint violations (the ``#CV`` of
        the lectures' table is ``solution.violations.total``).
    """

    histograms: NDArray[np.int64] | NDArray[np.float64]
    solution: Solution


def postprocess_count_of_counts(
    noisy: NoisyCountOfCounts, *, method: str = "exact"
) -> CountOfCountsEstimate:
    r"""Make noisy count-of-counts consistent, non-negative and integral, with total ``G``.

    Solves, on the :class:`CellTree`,

    .. math:: \min \sum_{r,s} w_r (\hat n^r_s - \tilde n^r_s)^2 \quad \text{s.t.} \quad
              \hat n^r_s = \sum_{c \in ch(r)} \hat n^c_s,\; \sum_s \hat n^{root}_s = G,\;
              0 \le \hat n^r_s \le G,

    integral for the integer methods (lecture 003, problem (H1)-(H4); Fioretto, Van
    Hentenryck and Zhu 2021), where ``tilde n`` are :meth:`NoisyCountOfCounts.histograms` and
    ``w_r`` the inverse noise variance of the region's level. Post-processing: no privacy cost.

    Parameters
    ----------
    noisy : NoisyCountOfCounts
        The measurement.
    method : str, default "exact"
        One of :data:`~dpcurator.hierarchy._postprocess.METHODS`: ``"exact"`` (``dp``),
        ``"relaxed"`` (``r``: its violations are reported, not repaired), ``"least_squares"``,
        ...

    Returns
    -------
    CountOfCountsEstimate

    Examples
    --------
    >>> from dpcurator.noise import InsecureSeededSource
    >>> counts = CountOfCounts.from_leaf_sizes(Tree.from_paths([("a",), ("b",)]),
    ...                                        [[1, 2, 2], [1]], max_size=2)
    >>> noisy = add_count_of_counts_noise(counts, epsilon=2.0, encoding="cumulative",
    ...                                   source=InsecureSeededSource(3))
    >>> estimate = postprocess_count_of_counts(noisy)
    >>> estimate.histograms.sum(axis=1).tolist()[0], estimate.solution.violations.total
    (4, 0)
    """
    cells = CellTree.build(noisy.regions, max_size=noisy.values.shape[1])
    weights = cells.flatten(noisy.cell_weights(), total=0.0)  # the virtual root is fixed
    solution = postprocess(
        cells.tree,
        cells.flatten(noisy.histograms(), total=noisy.groups),
        weights=weights,
        lower=0,
        upper=noisy.groups,
        total=noisy.groups,
        method=method,
    )
    return CountOfCountsEstimate(cells.unflatten(solution.values), solution)


# -- errors per level --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class LevelDistance:
    """Mean distance between true and estimated histograms over the regions of one level.

    Attributes
    ----------
    level : int
        Depth (root 0).
    regions : int
        Number of regions in the level.
    emd : float
        Mean earth mover's distance (Kuo et al. 2018; :func:`earth_movers_distance`).
    l1 : float
        Mean L1 distance ``sum_s |hat n_s - n_s|``.
    """

    level: int
    regions: int
    emd: float
    l1: float


def level_distances(tree: Tree, truth: ArrayLike, estimate: ArrayLike) -> tuple[LevelDistance, ...]:
    """Mean EMD and L1 distance between true and estimated histograms, level by level.

    Parameters
    ----------
    tree : Tree
        The regions.
    truth, estimate : array_like, shape (tree.n_nodes, S)
        Histograms over sizes ``1..S`` (size 0 is implicit: groups missing from one histogram
        are compared with empty groups, as in Kuo et al.'s metric). ``estimate`` must be
        non-negative.

    Returns
    -------
    tuple of LevelDistance
        One per level, root first.

    Examples
    --------
    >>> tree = Tree.from_paths([("a",), ("b",)])
    >>> truth = [[2, 1], [1, 1], [1, 0]]
    >>> [(d.emd, d.l1) for d in level_distances(tree, truth, [[3, 0], [2, 0], [1, 0]])]
    [(1.0, 2.0), (0.5, 1.0)]
    """
    true_rows = np.asarray(truth, dtype=np.float64)
    est_rows = np.asarray(estimate, dtype=np.float64)
    if true_rows.shape != est_rows.shape or true_rows.shape[:1] != (tree.n_nodes,):
        raise InvalidParameterError(
            "estimate",
            est_rows.shape,
            f"must have the shape of truth, {true_rows.shape}, one row per region",
        )
    emd = np.array(
        [
            earth_movers_distance(np.append(0.0, t), np.append(0.0, e))
            for t, e in zip(true_rows, est_rows, strict=True)
        ]
    )
    l1 = np.abs(est_rows - true_rows).sum(axis=1)
    return tuple(
        LevelDistance(
            level, part.stop - part.start, float(emd[part].mean()), float(l1[part].mean())
        )
        for level, part in enumerate(tree.level_slices)
    )


def _check_encoding(encoding: object) -> Encoding:
    for name in ENCODINGS:
        if encoding == name:
            return name
    raise InvalidParameterError("encoding", encoding, f"must be one of {', '.join(ENCODINGS)}")
