r"""Post-processing of noisy hierarchical counts: one entry point over every solver.

:func:`postprocess` turns noisy counts ``y`` on a tree into a :class:`Solution`: values, the
objective ``sum_v w_v (x_v - y_v)^2``, the constraint violations left (:class:`Violations`) and,
for the integer optima, the optimality certificate. The methods:

=================  =============================================================  ==========
method             what it returns                                                exact?
=================  =============================================================  ==========
``"exact"``        integer optimum: least-squares warm start, exchanges,          yes
                   certificate (B4, :mod:`~dpcurator.hierarchy._exact`)
``"dp"``           integer optimum by the lectures' dynamic program (B2), small   yes
                   domains only
``"greedy"``       integer optimum by lazy greedy descent (B3), small totals      yes
``"least_squares"``  consistent real values, Hay et al.'s two passes (B6)         continuous
``"relaxed"``      the bounded continuous optimum rounded value by value (B5)     no (``#CV``)
``"topdown"``      parent by parent least squares then largest remainder (B7)     no
=================  =============================================================  ==========

Privacy: every method is a function of the noisy counts and of public constraints only, so the
output is exactly as private as the noisy counts (post-processing; Dwork and Roth, *The
Algorithmic Foundations of Differential Privacy*, 2014, Proposition 2.1). Accuracy: if the truth
``c`` is feasible, the integer optima satisfy ``f(x*) <= f(c)``, hence
``||x* - c||_W <= 2 ||y - c||_W``; the continuous projection satisfies
``||x - c||_W <= ||y - c||_W`` (lecture 003, "Constrained-based DP"; ``hierarchy.md`` (c) 8).

Examples
--------
The lectures' example D2: noisy counts on nation > 2 states > 2 counties each, total 10.

>>> from dpcurator.hierarchy._tree import Tree
>>> tree = Tree.from_parents([-1, 0, 0, 1, 1, 2, 2])
>>> solution = postprocess(tree, [13, 7, 8, 7, -1, 2, 0], total=10)
>>> solution.values.tolist(), solution.objective, solution.certified
([10, 6, 4, 6, 0, 3, 1], 30.0, True)
>>> solution.violations.total
0
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

import numpy as np
from numpy.typing import ArrayLike, NDArray

from dpcurator.errors import InvalidParameterError
from dpcurator.hierarchy._domains import (
    Domains,
    Invariants,
    check_domains,
    domains,
    node_values,
    node_weights,
)
from dpcurator.hierarchy._dynamic_program import dynamic_program
from dpcurator.hierarchy._exact import exact, is_optimal
from dpcurator.hierarchy._greedy import greedy
from dpcurator.hierarchy._least_squares import least_squares
from dpcurator.hierarchy._rounding import relaxed, topdown
from dpcurator.hierarchy._tree import FLOAT_TOLERANCE, Tree

__all__ = [
    "METHODS",
    "Solution",
    "Violations",
    "certify",
    "objective",
    "postprocess",
    "violations",
]

METHODS: Final = ("exact", "dp", "greedy", "least_squares", "relaxed", "topdown")
"""The post-processing methods of :func:`postprocess`."""


@dataclass(frozen=True)
class Violations:
    """Constraints a post-processed vector breaks (the lectures' ``#CV`` is ``total``).

    Attributes
    ----------
    consistency : int
        Internal nodes that differ from the sum of their children (beyond ``1e-9`` relative
        for real values).
    domain : int
        Values outside ``[lower, upper]`` (negatives, with the default ``lower = 0``); fixed
        nodes are counted under ``invariant`` instead.
    invariant : int
        Fixed nodes (the total, other invariants) that differ from their value.
    integrality : int
        Values that are not integers.

    Examples
    --------
    >>> Violations(consistency=2, domain=1, invariant=0, integrality=0).total
    3
    """

    consistency: int
    domain: int
    invariant: int
    integrality: int

    @property
    def total(self) -> int:
        """The number of violated constraints, all kinds together."""
        return self.consistency + self.domain + self.invariant + self.integrality


@dataclass(frozen=True)
class Solution:
    """The result of :func:`postprocess`.

    Attributes
    ----------
    values : numpy.ndarray
        One value per node: int64 for the integer methods, float64 for ``"least_squares"``.
    method : str
        The method that produced it (one of :data:`METHODS`).
    objective : float
        ``sum_v w_v (values_v - noisy_v)^2``.
    violations : Violations
        What the values break (all zero for ``"exact"``, ``"dp"``, ``"greedy"``,
        ``"topdown"``).
    certified : bool or None
        For the integer optima, whether the optimality certificate holds (it always does);
        ``None`` for the other methods.
    """

    values: NDArray[np.int64] | NDArray[np.float64]
    method: str
    objective: float
    violations: Violations
    certified: bool | None


def postprocess(
    tree: Tree,
    noisy: ArrayLike,
    *,
    weights: ArrayLike | None = None,
    lower: ArrayLike | None = 0,
    upper: ArrayLike | None = None,
    total: int | None = None,
    fixed: Invariants | None = None,
    window: ArrayLike | None = None,
    method: str = "exact",
) -> Solution:
    r"""Make noisy hierarchical counts consistent (and integral, within domains, invariant).

    Solves (for the exact methods; the others approximate it, see the module table)

    .. math:: \min_{x \in \mathbb{Z}^n} \sum_v w_v (x_v - y_v)^2 \quad \text{s.t.} \quad
              x_v = \sum_{c \in ch(v)} x_c, \quad lo_v \le x_v \le hi_v, \quad x_F = f.

    Post-processing of ``noisy``: it costs no privacy (module docstring).

    Parameters
    ----------
    tree : Tree
        The hierarchy.
    noisy : array_like of float, shape (n_nodes,)
        Noisy counts in node order, finite, within ``+-2**40``.
    weights : float or array_like of float, optional
        Objective weights ``w >= 0`` (default 1), e.g. inverse noise variances.
    lower, upper : int or array_like of int, optional
        Domain bounds (default ``[0, inf)``; ``None`` for no bound).
    total : int, optional
        The public total (root invariant).
    fixed : mapping, optional
        Further invariants ``{node index or label: value}``.
    window : float or array_like of float, optional
        Faithfulness window: non-fixed nodes stay within ``window`` of their noisy value.
    method : str, default "exact"
        One of :data:`METHODS` (see the module docstring).

    Returns
    -------
    Solution

    Raises
    ------
    InvalidParameterError
        Naming the argument for bad shapes or values, or ``method`` if unknown.
    InfeasibleConstraintsError
        If no consistent integer point satisfies the domains and invariants.
    UnsupportedError
        For ``"dp"`` on domains too large for its tables, or ``"relaxed"`` without OSQP.

    Examples
    --------
    >>> from dpcurator.hierarchy._tree import Tree
    >>> tree = Tree.from_paths([("IL", "Cook"), ("IL", "Lake"), ("WI", "Dane")])
    >>> noisy = [101.4, 60.2, 38.9, 55.0, 4.1, 41.3]
    >>> postprocess(tree, noisy).values.tolist()
    [101, 60, 41, 55, 5, 41]
    >>> postprocess(tree, noisy, method="least_squares").violations.integrality > 0
    True
    """
    if method not in METHODS:
        raise InvalidParameterError("method", method, f"must be one of {', '.join(METHODS)}")
    y = node_values(tree, noisy)
    w = node_weights(tree, weights)
    doms = domains(tree, y, lower=lower, upper=upper, total=total, fixed=fixed, window=window)
    values: NDArray[np.int64] | NDArray[np.float64]
    certified: bool | None = None
    if method == "exact":
        result = exact(tree, y, w, doms)
        values, certified = result.values, result.certified
    elif method in {"dp", "greedy"}:
        solver = dynamic_program if method == "dp" else greedy
        values = solver(tree, y, w, doms)
        certified = is_optimal(tree, values, y, w, doms)
    elif method == "least_squares":
        values = least_squares(tree, y, w, doms)
    elif method == "relaxed":
        values = relaxed(tree, y, w, doms)
    else:
        values = topdown(tree, y, w, doms)
    return Solution(
        values=values,
        method=method,
        objective=objective(y, values, w),
        violations=violations(tree, values, doms),
        certified=certified,
    )


def objective(noisy: ArrayLike, values: ArrayLike, weights: ArrayLike | None = None) -> float:
    """Return ``sum_v w_v (values_v - noisy_v)^2`` (weights default to 1).

    Raises
    ------
    InvalidParameterError
        Naming ``values`` or ``weights`` if their shapes differ from ``noisy``'s.

    Examples
    --------
    >>> objective([13, 7, 8], [10, 6, 4])
    26.0
    """
    y = np.asarray(noisy, dtype=np.float64)
    x = np.asarray(values, dtype=np.float64)
    if x.shape != y.shape:
        raise InvalidParameterError("values", x.shape, f"must have the shape of noisy, {y.shape}")
    w = np.ones_like(y) if weights is None else np.asarray(weights, dtype=np.float64)
    if w.shape not in {(), y.shape}:
        raise InvalidParameterError("weights", w.shape, f"must be a scalar or of shape {y.shape}")
    return float(np.sum(w * (x - y) ** 2))


def violations(tree: Tree, values: ArrayLike, doms: Domains) -> Violations:
    """Count what ``values`` breaks: consistency, domains, invariants, integrality.

    Real values are compared within ``1e-9`` (relative above 1).

    Raises
    ------
    InvalidParameterError
        Naming ``values`` or ``doms`` for wrong shapes.

    Examples
    --------
    The lectures' example D2: two-pass least squares rounded to the nearest integers breaks
    two sums and one non-negativity constraint (``hierarchy.md`` (d)).

    >>> from dpcurator.hierarchy._domains import domains
    >>> tree = Tree.from_parents([-1, 0, 0, 1, 1, 2, 2])
    >>> found = violations(tree, [10, 5, 5, 7, -1, 3, 1], domains(tree, total=10))
    >>> found, found.total
    (Violations(consistency=2, domain=1, invariant=0, integrality=0), 3)
    """
    check_domains(tree, doms)
    x = np.asarray(values)
    if x.shape != (tree.n_nodes,) or x.dtype.kind not in "iuf":
        raise InvalidParameterError("values", values, f"must be numbers of shape ({tree.n_nodes},)")
    real = x.astype(np.float64)
    slack = FLOAT_TOLERANCE * np.maximum(1.0, np.abs(real)) if x.dtype.kind == "f" else 0.0
    fixed = doms.fixed()
    outside = (real < doms.lower - slack) | (real > doms.upper + slack)
    return Violations(
        consistency=tree.consistency_violations(x),
        domain=int(np.count_nonzero(outside & ~fixed)),
        invariant=int(np.count_nonzero(outside & fixed)),
        integrality=int(np.count_nonzero(np.abs(real - np.round(real)) > slack)),
    )


def certify(
    tree: Tree,
    values: ArrayLike,
    noisy: ArrayLike,
    weights: ArrayLike | None,
    doms: Domains,
) -> bool:
    """Return whether integer ``values`` are an exact optimum (the B4 certificate, ``O(n)``).

    ``True`` iff ``values`` is integral, consistent, within ``doms`` and no single-unit move
    (from one leaf to another, or into or out of a free root) lowers the objective; by
    M-natural-convexity that is global optimality (see :mod:`~dpcurator.hierarchy._exact`).

    Raises
    ------
    InvalidParameterError
        Naming the argument for wrong shapes or values.

    Examples
    --------
    >>> from dpcurator.hierarchy._domains import domains
    >>> tree = Tree.from_parents([-1, 0, 0])
    >>> certify(tree, [3, 3, 0], [2, 3, 0], None, domains(tree, total=3))
    True
    >>> certify(tree, [3, 2, 1], [2, 3, 0], None, domains(tree, total=3))
    False
    """
    check_domains(tree, doms)
    x = np.asarray(values)
    if x.shape != (tree.n_nodes,) or x.dtype.kind not in "iuf":
        raise InvalidParameterError("values", values, f"must be numbers of shape ({tree.n_nodes},)")
    if x.dtype.kind == "f" and not np.all(np.isfinite(x) & (x == np.round(x))):
        return False
    y = node_values(tree, noisy)
    w = node_weights(tree, weights)
    return is_optimal(tree, x.astype(np.int64), y, w, doms)
