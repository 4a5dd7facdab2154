"""Error metrics of a hierarchical release: error per level, and the earth mover's distance.

The data steward measures how far a released hierarchy is from the truth level by level (the
lectures' table reports one error per level), and, for count-of-counts histograms, with Kuo et
al.'s earth mover's distance. Both compare a release with the confidential truth: publish them
only as the noise model's expected error, never as measured on the real data.

Examples
--------
>>> import numpy as np
>>> from dpcurator.hierarchy._tree import Tree
>>> tree = Tree.from_paths([("a",), ("b",)])
>>> [e.rmse for e in level_errors(tree, np.array([4.0, 1.0, 2.0]), np.array([3, 1, 2]))]
[1.0, 0.0]
>>> earth_movers_distance([0, 2, 1], [0, 1, 2])
1.0
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import ArrayLike, NDArray

from dpcurator.errors import InvalidParameterError

if TYPE_CHECKING:
    from dpcurator.hierarchy._tree import Tree

__all__ = ["LevelError", "earth_movers_distance", "level_errors"]


@dataclass(frozen=True, slots=True)
class LevelError:
    """The error of an estimate against the truth over the nodes of one level of a tree.

    Attributes
    ----------
    level : int
        Depth of the level (the root is level 0).
    nodes : int
        Number of nodes in the level.
    mean_abs : float
        Mean absolute error, ``(1/n) sum_v |x_v - c_v|``.
    rmse : float
        Root mean squared error, ``sqrt((1/n) sum_v (x_v - c_v)^2)``.
    max_abs : float
        Largest absolute error, ``max_v |x_v - c_v|``.
    """

    level: int
    nodes: int
    mean_abs: float
    rmse: float
    max_abs: float


def _vector(values: ArrayLike, name: str, size: int) -> NDArray[np.float64]:
    array = np.asarray(values, dtype=np.float64)
    if array.shape != (size,):
        raise InvalidParameterError(name, array.shape, f"must have shape ({size},), one per node")
    if not np.isfinite(array).all():
        raise InvalidParameterError(name, "<array with NaN or inf>", "must be finite")
    return array


def level_errors(tree: Tree, estimate: ArrayLike, truth: ArrayLike) -> tuple[LevelError, ...]:
    """Error of ``estimate`` against ``truth``, level by level.

    Parameters
    ----------
    tree : Tree
        The hierarchy; both vectors are indexed by its (breadth-first) node numbers.
    estimate : array_like of float
        Released values, one per node (noisy or post-processed).
    truth : array_like of float
        True values, one per node.

    Returns
    -------
    tuple of LevelError
        One per level, root first.

    Raises
    ------
    InvalidParameterError
        If a vector does not have one finite value per node.

    Examples
    --------
    >>> import numpy as np
    >>> from dpcurator.hierarchy._tree import Tree
    >>> tree = Tree.from_paths([("a",), ("b",)])
    >>> errors = level_errors(tree, [10.0, 7.0, 1.0], [10, 4, 6])
    >>> errors[1]
    LevelError(level=1, nodes=2, mean_abs=4.0, rmse=4.123105625617661, max_abs=5.0)
    """
    x = _vector(estimate, "estimate", tree.n_nodes)
    c = _vector(truth, "truth", tree.n_nodes)
    errors = []
    for level, part in enumerate(tree.level_slices):
        diff = np.abs(x[part] - c[part])
        errors.append(
            LevelError(
                level=level,
                nodes=int(diff.size),
                mean_abs=float(diff.mean()),
                rmse=math.sqrt(float(np.mean(diff**2))),
                max_abs=float(diff.max()),
            )
        )
    return tuple(errors)


def earth_movers_distance(true_hist: ArrayLike, est_hist: ArrayLike) -> float:
    r"""Kuo et al.'s earth mover's distance between two count-of-counts histograms.

    ``h[s]`` is the number of groups of size ``s`` (``s = 0, 1, ...``). The shorter histogram
    is padded with zeros; if the totals differ, the difference is added to the size-0 bin of
    the one with fewer groups (groups that exist in one and not the other are compared with
    empty groups); then

    .. math::

        \mathrm{EMD}(h, \hat h)
        = \sum_j \Big| \sum_{s \le j} h_s - \sum_{s \le j} \hat h_s \Big|,

    the L1 distance between the cumulative histograms, which is the earth mover's distance on
    the line with unit cost per size step.

    Source: Kuo, Chiu, Kifer, Hay and Machanavajjhala, "Differentially Private Hierarchical
    Count-of-Counts Histograms", PVLDB 11(11) 2018 (the metric of their code,
    ``github.com/yzk5145/coco``); hierarchy.md (e).

    Parameters
    ----------
    true_hist, est_hist : array_like of float
        Non-empty one-dimensional histograms indexed by group size from 0, finite and
        non-negative (a released histogram is post-processed to be non-negative first).

    Returns
    -------
    float
        The distance, >= 0; 0 exactly when the padded histograms are equal.

    Raises
    ------
    InvalidParameterError
        If a histogram is empty, not one-dimensional, negative or not finite.

    Examples
    --------
    >>> earth_movers_distance([0, 3], [0, 0, 3])  # three groups, each one size too large
    3.0
    >>> earth_movers_distance([0, 2], [0, 1])  # one group missing: compared with an empty one
    1.0
    """
    h = _histogram(true_hist, "true_hist")
    g = _histogram(est_hist, "est_hist")
    size = max(h.size, g.size)
    h = np.pad(h, (0, size - h.size))
    g = np.pad(g, (0, size - g.size))
    gap = float(h.sum() - g.sum())
    if gap > 0:
        g[0] += gap
    else:
        h[0] -= gap
    return float(np.abs(np.cumsum(h) - np.cumsum(g)).sum())


def _histogram(values: ArrayLike, name: str) -> NDArray[np.float64]:
    array = np.array(values, dtype=np.float64)
    if array.ndim != 1 or array.size == 0:
        raise InvalidParameterError(name, array.shape, "must be a non-empty 1-D histogram")
    if not np.isfinite(array).all() or (array < 0).any():
        raise InvalidParameterError(name, "<histogram>", "must be finite and non-negative")
    return array
