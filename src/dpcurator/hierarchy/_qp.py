r"""Constraint-based DP: project noisy answers onto a polyhedron with a QP solver (OSQP).

The lectures' general form of post-processing (Fioretto and Van Hentenryck, "Constrained-based
DP"; research note ``hierarchy.md`` (b) B5): given noisy answers ``y = Q~`` of queries whose true
answers ``Q`` satisfy known linear constraints, release

.. math:: x^\star = \arg\min_x \sum_i w_i (x_i - y_i)^2 \quad \text{s.t.} \quad
          A_{eq} x = b_{eq},\; A_{ub} x \le b_{ub},\; \ell \le x \le u.

Privacy: ``x*`` is a function of ``y`` and of public constraints only, so it is exactly as
private as ``y`` (post-processing; Dwork and Roth 2014, Proposition 2.1). Accuracy: the feasible
set ``C`` is convex and closed, so the projection onto it in the norm
``||z||_W = (sum_i w_i z_i^2)^(1/2)`` is non-expansive; when the truth ``Q`` lies in ``C``,

.. math:: \|x^\star - Q\|_W \le \|\tilde Q - Q\|_W

(lecture 003, "Constrained-based DP: geometrical intuition"; Bertsekas, *Convex Optimization
Theory*, Proposition 1.1.9, the projection theorem).

:func:`project` solves the general problem; :func:`relaxed_tree_qp` is the continuous relaxation
of the hierarchical problem (consistency equalities plus integer domains used as bounds), the
``r`` baseline of the lectures' results table. :func:`consistency_matrix` gives the tree's
equalities as a sparse matrix for any other solver. OSQP (Stellato et al., "OSQP: an operator
splitting solver for quadratic programs", Math. Prog. Comp. 12, 2020) is the ``optimize``
extra: ``pip install 'dpcurator[optimize]'``.
"""

from __future__ import annotations

import importlib
import math
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Final

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import sparse

from dpcurator._validation import check_integer, check_positive
from dpcurator.errors import InfeasibleConstraintsError, InvalidParameterError, UnsupportedError
from dpcurator.hierarchy._domains import (
    Domains,
    as_float_bounds,
    check_domains,
    node_values,
    node_weights,
)
from dpcurator.hierarchy._least_squares import least_squares
from dpcurator.hierarchy._tree import Tree

__all__ = [
    "Projection",
    "consistency_matrix",
    "project",
    "relaxed_tree_projection",
    "relaxed_tree_qp",
]

DEFAULT_TOLERANCE: Final = 1e-8
"""OSQP's absolute and relative tolerance, on the correction ``x - y`` (the scale of the noise);
polishing then tries to solve the active set's KKT system exactly."""

_RHO: Final = 1.0
"""OSQP's initial ADMM step (adaptive afterwards). The shifted problem has unit-scale data, and
on the count-of-counts trees 1.0 needs half the iterations of OSQP's default 0.1."""

DEFAULT_MAX_ITER: Final = 200_000

_SOLVED: Final = frozenset({"solved", "solved inaccurate"})
_INFEASIBLE: Final = frozenset({"primal infeasible", "primal infeasible inaccurate"})


@dataclass(frozen=True)
class Projection:
    """The weighted projection of noisy answers onto a polyhedron, as OSQP returned it.

    Attributes
    ----------
    values : numpy.ndarray of float64
        ``x*``, one value per noisy answer.
    status : str
        OSQP's status: ``"solved"``, or ``"solved inaccurate"`` (stopped at ``max_iter`` with
        residuals within ten times the tolerance; see ``max_residual``).
    iterations : int
        ADMM iterations OSQP ran.
    polished : bool
        Whether OSQP's polishing step succeeded (it then solved the KKT system of the active
        constraints directly, so the values are accurate far beyond the ADMM tolerance).
    max_residual : float
        Largest violation of any constraint by ``values`` (equalities in absolute value,
        inequalities and bounds by how far they are exceeded), computed on the returned values.
    objective : float
        ``sum_i w_i (values_i - noisy_i)^2``.

    Examples
    --------
    >>> result = project([1.0, 2.0], A_eq=[[1.0, 1.0]], b_eq=[4.0])
    >>> result.values.round(6).tolist(), result.status
    ([1.5, 2.5], 'solved')
    """

    values: NDArray[np.float64]
    status: str
    iterations: int
    polished: bool
    max_residual: float
    objective: float


def project(
    noisy: ArrayLike,
    *,
    weights: ArrayLike | None = None,
    A_eq: ArrayLike | sparse.sparray | sparse.spmatrix | None = None,
    b_eq: ArrayLike | None = None,
    A_ub: ArrayLike | sparse.sparray | sparse.spmatrix | None = None,
    b_ub: ArrayLike | None = None,
    lower: ArrayLike | None = None,
    upper: ArrayLike | None = None,
    initial: ArrayLike | None = None,
    tolerance: float = DEFAULT_TOLERANCE,
    max_iter: int = DEFAULT_MAX_ITER,
) -> Projection:
    r"""Project noisy answers onto linear constraints: the lectures' constraint-based DP.

    Solves

    .. math:: \min_x \sum_i w_i (x_i - y_i)^2 \quad \text{s.t.} \quad A_{eq} x = b_{eq},\;
              A_{ub} x \le b_{ub},\; \ell \le x \le u

    with OSQP (polished). Post-processing of ``y``: no privacy cost. If the true answers
    satisfy the constraints, ``||x - Q||_W <= ||y - Q||_W`` (see the module docstring; lecture
    003, "Constrained-based DP").

    The solver works on the correction ``d = x - y``, so its tolerances are relative to the
    noise, not to the size of the counts (a national total of ``4e7`` keeps unit accuracy).

    Parameters
    ----------
    noisy : array_like of float, shape (n,)
        The noisy answers ``y``, finite.
    weights : array_like of float, shape (n,) or scalar, optional
        ``w >= 0`` (default 1): typically the inverse noise variances (0: unmeasured).
    A_eq, b_eq : matrix of shape (m, n) and array_like of shape (m,), optional
        Equalities ``A_eq x = b_eq`` (dense or :mod:`scipy.sparse`), given together.
    A_ub, b_ub : matrix of shape (p, n) and array_like of shape (p,), optional
        Inequalities ``A_ub x <= b_ub``, given together.
    lower, upper : array_like of float, shape (n,) or scalar, optional
        Bounds; ``-inf``/``inf`` (the default) for none. ``lower == upper`` fixes a value.
    initial : array_like of float, shape (n,), optional
        A guess of the solution to warm-start OSQP from (e.g. a least-squares estimate); by
        default the noisy answers clipped into the bounds.
    tolerance : float, default 1e-8
        OSQP's absolute and relative tolerance, > 0.
    max_iter : int, default 200000
        OSQP's iteration limit, >= 1.

    Returns
    -------
    Projection
        The values, OSQP's status and iteration count, and the largest constraint violation.

    Raises
    ------
    InfeasibleConstraintsError
        If no point satisfies the constraints (bounds with ``lower > upper``, or OSQP's
        certificate of primal infeasibility).
    InvalidParameterError
        For malformed input (shapes, NaN, negative weights), or naming ``max_iter`` when
        OSQP did not converge within it.
    UnsupportedError
        If OSQP (the ``optimize`` extra) is not installed.

    Examples
    --------
    Consistency of a total and its two parts, with non-negative parts:

    >>> result = project([10.0, 7.0, -2.0], A_eq=[[1.0, -1.0, -1.0]], b_eq=[0.0], lower=[0, 0, 0])
    >>> result.values.round(6).tolist()
    [8.5, 8.5, 0.0]
    >>> result.max_residual < 1e-9
    True
    """
    problem = _Problem.validated(
        noisy, weights=weights, A_eq=A_eq, b_eq=b_eq, A_ub=A_ub, b_ub=b_ub, lower=lower, upper=upper
    )
    tol = check_positive(tolerance, "tolerance")
    iterations = check_integer(max_iter, "max_iter", minimum=1)
    if initial is None:
        start = np.clip(problem.y, problem.lower, problem.upper)
    else:
        start = _vector(initial, "initial", size=problem.y.size)
    result = _solve_shifted(problem, start, tolerance=tol, max_iter=iterations)
    status = str(result.info.status)
    if status in _INFEASIBLE:
        raise InfeasibleConstraintsError(
            "no point satisfies the constraints (OSQP found a certificate of primal "
            "infeasibility); check that the true answers could satisfy them."
        )
    if status not in _SOLVED:
        raise InvalidParameterError(
            "max_iter", max_iter, f"was not enough for OSQP to converge (status {status!r})"
        )
    values = problem.y + np.asarray(result.x, dtype=np.float64)
    return Projection(
        values=values,
        status=status,
        iterations=int(result.info.iter),
        polished=int(result.info.status_polish) == 1,
        max_residual=problem.residual(values),
        objective=float(np.sum(problem.w * (values - problem.y) ** 2)),
    )


def consistency_matrix(tree: Tree) -> sparse.csr_array:
    """Return the tree's consistency equalities as a sparse matrix ``C`` with ``C x = 0``.

    One row per internal node ``v`` (in node order): ``x_v - sum_{c in ch(v)} x_c = 0``.

    Parameters
    ----------
    tree : Tree
        The hierarchy.

    Returns
    -------
    scipy.sparse.csr_array of float64, shape (internal nodes, tree.n_nodes)
        ``+1`` at ``(row(v), v)`` and ``-1`` at ``(row(v), c)`` for every child ``c`` of ``v``.

    Examples
    --------
    >>> tree = Tree.from_parents([-1, 0, 0])
    >>> consistency_matrix(tree).toarray().tolist()
    [[1.0, -1.0, -1.0]]
    """
    internal = np.flatnonzero(~tree.is_leaf)
    row_of = np.full(tree.n_nodes, -1, dtype=np.int64)
    row_of[internal] = np.arange(internal.size)
    children = np.arange(1, tree.n_nodes)
    rows = np.concatenate([row_of[internal], row_of[tree.parent[children]]])
    cols = np.concatenate([internal, children])
    data = np.concatenate([np.ones(internal.size), -np.ones(children.size)])
    return sparse.csr_array((data, (rows, cols)), shape=(internal.size, tree.n_nodes))


def relaxed_tree_qp(
    tree: Tree,
    noisy: ArrayLike,
    weights: ArrayLike,
    doms: Domains,
    *,
    initial: ArrayLike | None = None,
) -> NDArray[np.float64]:
    r"""Solve the continuous relaxation of the hierarchical post-processing problem.

    .. math:: \min_x \sum_v w_v (x_v - y_v)^2 \quad \text{s.t.} \quad
              x_v = \sum_{c \in ch(v)} x_c \;\; (v \text{ internal}), \quad
              \ell_v \le x_v \le u_v,

    the integer problem of ``hierarchy.md`` (a) without integrality (fixed nodes have
    ``lower == upper``; :data:`~dpcurator.hierarchy._domains.UNBOUNDED` means no bound). This is
    the first step of the lectures' ``r`` variants (Fioretto, Van Hentenryck and Zhu, CP 2019,
    the relaxed QP baseline); rounding it, which may break the constraints, is left to the
    caller. Post-processing: no privacy cost; the accuracy bound of :func:`project` holds.

    Parameters
    ----------
    tree : Tree
        The hierarchy.
    noisy : array_like of float, shape (tree.n_nodes,)
        Noisy counts in node order.
    weights : array_like of float, shape (tree.n_nodes,) or scalar
        Objective weights, >= 0.
    doms : Domains
        Integer bounds per node.
    initial : array_like of float, shape (tree.n_nodes,), optional
        Warm start for OSQP; by default the two-pass least-squares estimate, which already
        satisfies the equalities and the fixed nodes.

    Returns
    -------
    numpy.ndarray of float64, shape (tree.n_nodes,)
        The continuous optimum (consistent and within the bounds up to OSQP's accuracy);
        :func:`relaxed_tree_projection` also returns OSQP's status.

    Raises
    ------
    InfeasibleConstraintsError
        If the bounds and the consistency equalities cannot all hold.

    Examples
    --------
    The lectures' example D2 (``hierarchy.md`` (d)) with the root fixed to 10 and
    non-negative counts:

    >>> from dpcurator.hierarchy._domains import domains
    >>> tree = Tree.from_parents([-1, 0, 0, 1, 1, 2, 2])
    >>> noisy = [13.0, 7.0, 8.0, 7.0, -1.0, 2.0, 0.0]
    >>> x = relaxed_tree_qp(tree, noisy, 1.0, domains(tree, noisy, total=10))
    >>> x.round(4).tolist()
    [10.0, 5.7143, 4.2857, 5.7143, 0.0, 3.1429, 1.1429]
    """
    return relaxed_tree_projection(tree, noisy, weights, doms, initial=initial).values


def relaxed_tree_projection(
    tree: Tree,
    noisy: ArrayLike,
    weights: ArrayLike,
    doms: Domains,
    *,
    initial: ArrayLike | None = None,
) -> Projection:
    """Solve :func:`relaxed_tree_qp`'s problem; return the whole :class:`Projection`.

    Parameters and guarantee as :func:`relaxed_tree_qp`.

    Returns
    -------
    Projection
        Values, OSQP's status and iterations, the largest constraint violation.

    Examples
    --------
    >>> from dpcurator.hierarchy._domains import domains
    >>> tree = Tree.from_parents([-1, 0, 0])
    >>> result = relaxed_tree_projection(tree, [5.0, 4.0, -1.0], 1.0, domains(tree))
    >>> result.values.round(6).tolist(), result.status
    ([4.5, 4.5, 0.0], 'solved')
    """
    check_domains(tree, doms)
    y = node_values(tree, noisy)
    w = node_weights(tree, weights)
    start = least_squares(tree, y, w, doms) if initial is None else initial
    return project(
        y,
        weights=w,
        A_eq=consistency_matrix(tree),
        b_eq=np.zeros(int(np.count_nonzero(~tree.is_leaf))),
        lower=as_float_bounds(doms.lower),
        upper=as_float_bounds(doms.upper),
        initial=start,
    )


# -- helpers ---------------------------------------------------------------------------------


_Block = tuple[sparse.csr_array, NDArray[np.float64]]
"""A block of linear constraints: the matrix and its right-hand side."""


@dataclass(frozen=True)
class _Problem:
    """A validated projection problem: ``min sum w (x - y)^2`` s.t. ``eq``, ``ub``, bounds."""

    y: NDArray[np.float64]
    w: NDArray[np.float64]
    lower: NDArray[np.float64]
    upper: NDArray[np.float64]
    eq: _Block
    ub: _Block

    @classmethod
    def validated(
        cls,
        noisy: ArrayLike,
        *,
        weights: ArrayLike | None,
        A_eq: Any,
        b_eq: ArrayLike | None,
        A_ub: Any,
        b_ub: ArrayLike | None,
        lower: ArrayLike | None,
        upper: ArrayLike | None,
    ) -> _Problem:
        """Check every argument of :func:`project`; raise naming the first bad one."""
        y = _vector(noisy, "noisy")
        n = y.size
        w = _broadcast(1.0 if weights is None else weights, n, "weights")
        if np.any(w < 0):
            raise InvalidParameterError("weights", weights, "must be >= 0 everywhere")
        lo = _broadcast(-math.inf if lower is None else lower, n, "lower", allow_infinite=True)
        hi = _broadcast(math.inf if upper is None else upper, n, "upper", allow_infinite=True)
        if np.any(lo > hi):
            first = int(np.flatnonzero(lo > hi)[0])
            raise InfeasibleConstraintsError(
                f"lower[{first}] = {lo[first]} exceeds upper[{first}] = {hi[first]}: "
                "no point satisfies the bounds."
            )
        eq = _constraints(A_eq, b_eq, n, "A_eq", "b_eq")
        ub = _constraints(A_ub, b_ub, n, "A_ub", "b_ub")
        return cls(y, w, lo, hi, eq, ub)

    def residual(self, values: NDArray[np.float64]) -> float:
        """Return the largest violation of any constraint by ``values``."""
        (A_eq, b_eq), (A_ub, b_ub) = self.eq, self.ub
        return max(
            _largest(np.abs(A_eq @ values - b_eq)),
            _largest(A_ub @ values - b_ub),
            _largest(self.lower - values),
            _largest(values - self.upper),
        )


def _solve_shifted(
    problem: _Problem, start: NDArray[np.float64], *, tolerance: float, max_iter: int
) -> Any:
    """Run OSQP on the correction ``d = x - y``: ``min sum w d^2`` under the moved constraints.

    Shifting puts the data on the scale of the noise, whatever the size of the counts, so the
    tolerances mean the same on a block of 10 people and on a nation of 3e8; scaling ``P`` by
    the largest free weight leaves the minimiser unchanged and OSQP's step ``rho`` meaningful.
    Returns OSQP's result (``x``, ``info``).
    """
    y, lo, hi = problem.y, problem.lower, problem.upper
    (A_eq, b_eq), (A_ub, b_ub) = problem.eq, problem.ub
    bounded = np.flatnonzero(np.isfinite(lo) | np.isfinite(hi))
    rows = [A_eq, A_ub, sparse.eye_array(y.size, format="csr")[bounded]]
    lower_rows = [b_eq - A_eq @ y, np.full(b_ub.size, -np.inf), lo[bounded] - y[bounded]]
    upper_rows = [b_eq - A_eq @ y, b_ub - A_ub @ y, hi[bounded] - y[bounded]]
    solver = _osqp().OSQP()
    solver.setup(
        P=sparse.csc_matrix(sparse.diags_array(problem.w / _unit(problem.w[lo < hi]))),
        q=np.zeros(y.size),
        A=sparse.csc_matrix(sparse.vstack(rows, format="csc")),
        l=np.concatenate(lower_rows),
        u=np.concatenate(upper_rows),
        verbose=False,
        polishing=True,
        polish_refine_iter=10,
        rho=_RHO,
        eps_abs=tolerance,
        eps_rel=tolerance,
        max_iter=max_iter,
    )
    solver.warm_start(x=start - y)
    return solver.solve(raise_error=False)


def _osqp() -> ModuleType:
    try:
        return importlib.import_module("osqp")
    except ImportError:
        raise UnsupportedError(
            "Solving a QP needs OSQP, the 'optimize' extra: pip install 'dpcurator[optimize]' "
            "(or pip install osqp)."
        ) from None


def _vector(value: ArrayLike, name: str, *, size: int | None = None) -> NDArray[np.float64]:
    try:
        out = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise InvalidParameterError(name, value, "must be an array of numbers") from None
    if out.ndim != 1 or out.size == 0 or (size is not None and out.size != size):
        shape = "(n,)" if size is None else f"({size},)"
        raise InvalidParameterError(name, value, f"must be a non-empty array of shape {shape}")
    if not np.all(np.isfinite(out)):
        raise InvalidParameterError(name, value, "must be finite")
    return out


def _broadcast(
    value: ArrayLike, n: int, name: str, *, allow_infinite: bool = False
) -> NDArray[np.float64]:
    try:
        out = np.broadcast_to(np.asarray(value, dtype=np.float64), (n,)).copy()
    except (TypeError, ValueError):
        raise InvalidParameterError(
            name, value, f"must be a scalar or an array of shape ({n},)"
        ) from None
    if np.any(np.isnan(out)):
        raise InvalidParameterError(name, value, "must not be NaN")
    if not allow_infinite and not np.all(np.isfinite(out)):
        raise InvalidParameterError(name, value, "must be finite")
    return out


def _constraints(
    matrix: Any, rhs: ArrayLike | None, n: int, matrix_name: str, rhs_name: str
) -> _Block:
    """Validate one block ``matrix x (=|<=) rhs``; an absent block has zero rows."""
    if matrix is None and rhs is None:
        return sparse.csr_array((0, n)), np.zeros(0)
    if matrix is None or rhs is None:
        missing, given = (matrix_name, rhs_name) if matrix is None else (rhs_name, matrix_name)
        raise InvalidParameterError(missing, None, f"must be given together with {given}")
    try:
        block = sparse.csr_array(matrix, dtype=np.float64)
    except (TypeError, ValueError):
        raise InvalidParameterError(
            matrix_name, matrix, "must be a 2-D matrix of numbers"
        ) from None
    if block.ndim != 2 or block.shape[1] != n:
        raise InvalidParameterError(
            matrix_name, block.shape, f"must have shape (m, {n}), one column per answer"
        )
    if not np.all(np.isfinite(block.data)):
        raise InvalidParameterError(matrix_name, matrix, "must be finite")
    return block, _vector(rhs, rhs_name, size=block.shape[0]) if block.shape[0] else np.zeros(0)


def _unit(weights: NDArray[np.float64]) -> float:
    """Return the largest weight of the free values (1 if none), to put ``P`` on a unit scale."""
    top = float(weights.max()) if weights.size else 0.0
    return top if top > 0 else 1.0


def _largest(violations: NDArray[np.float64]) -> float:
    return float(max(0.0, violations.max())) if violations.size else 0.0
