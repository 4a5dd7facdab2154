r"""Constraint-based DP with faithfulness: project noisy data onto a downstream problem.

The lectures' program #2 (lecture 003, "Constrained based DP"; Fioretto, Van Hentenryck and
Mak, CPAIOR 2018 and IEEE TPS 2020): data ``D`` (private) feed an optimisation problem

.. math:: f^\star(D) = \min_x\; c_D^\top D + c_x^\top x + c_0 \quad \text{s.t.} \quad
          A_{eq} [D; x] = b_{eq},\; A_{ub} [D; x] \le b_{ub},\; \ell \le x \le u.

Given noisy data ``D~`` and a privately released optimal value ``f~*``, release

.. math:: \hat D = \arg\min_{D', x} \sum_i w_i (D'_i - \tilde D_i)^2 \quad \text{s.t.} \quad
          |c_D^\top D' + c_x^\top x + c_0 - \tilde f^\star| \le \beta,\;
          \text{the problem's constraints on } (D', x),\;
          \ell_D \le D' \le u_D.

Privacy: ``D^`` is computed from ``D~``, ``f~*`` and public constraints only (post-processing;
Dwork and Roth 2014, Proposition 2.1), so it is as private as the noisy releases together.
Accuracy: the feasible set ``C`` of ``(D', x)`` is a polyhedron (convex), and the objective is a
weighted squared distance in ``D'`` only, so ``D^`` is the projection of ``D~`` onto the convex
set ``proj_D(C)``; when the truth is in it (``D`` feasible with some ``x`` of cost within
``beta`` of ``f~*``),

.. math:: \|\hat D - D\|_W \le \|\tilde D - D\|_W

(lecture 003, "Constrained-based DP: properties, accuracy"; Bertsekas, *Convex Optimization
Theory*, Proposition 1.1.9). The QP is solved by Clarabel (Goulart and Chen, "Clarabel: an
interior-point solver for conic programs with quadratic objectives", arXiv 2405.12762, 2024),
or by OSQP through :func:`dpcurator.hierarchy.project` (today's projection, extended here by
the downstream problem's variables and the two faithfulness rows); both are the ``optimize``
extra. Clarabel is the default: an interior-point method is robust on this QP, whose decision
variables carry no weight (a degenerate Hessian on which OSQP's ADMM stalled at 200,000
iterations on the IEEE 39-bus case), and as accurate as the tests need (1e-8). The downstream
LP itself is solved with HiGHS through :func:`scipy.optimize.linprog` (SciPy, no extra).

In :func:`faithful_project` only the upper side of the faithfulness window is exact for the
optimal value: if ``(D^, x)`` is feasible with cost at most ``f~* + beta``, then
``f*(D^) <= f~* + beta``; the lower side ``>= f~* - beta`` is met by *some* feasible ``x``, not
necessarily the optimal one. :func:`bilevel_project` enforces both sides on the optimal value
(the lectures' bilevel version, Mak, Fioretto and Van Hentenryck, "Bilevel optimization for
differentially private optimization in energy systems", arXiv 2001.09508, 2020). ``f*`` is
convex in ``D`` (the value of an LP whose right-hand side is affine in ``D``), so
``{D: f*(D) <= t + beta}`` is convex and exact as above, while ``{D: f*(D) >= t - beta}`` is the
complement of a convex set. By LP duality any dual-feasible ``y`` gives an affine minorant
``f*(D) >= L_y(D)`` for *every* ``D`` (:meth:`LinearProblem.lower_bound`; ``L_y`` is tight at
the point whose dual ``y`` is, and its slope is a subgradient of ``f*``, for the DC-OPF the
locational marginal prices), so the halfspace ``L_y(D) >= t - beta`` is an inner approximation
of the lower side, and the program stays a convex QP. Re-linearising at each solution (the
difference-of-convex / sequential convex programming scheme) keeps each iterate feasible for
the next program, so the distance to ``D~`` never increases.
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Final

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import sparse
from scipy.optimize import linprog

from dpcurator._validation import check_finite, check_positive
from dpcurator.errors import InfeasibleConstraintsError, InvalidParameterError, UnsupportedError
from dpcurator.hierarchy import project

__all__ = [
    "SOLVERS",
    "FaithfulProjection",
    "LinearBound",
    "LinearProblem",
    "ProblemSolution",
    "bilevel_project",
    "faithful_project",
]

SOLVERS: Final = ("clarabel", "osqp")
"""The QP solvers of :func:`faithful_project`."""


_RESIDUAL_TOLERANCE: Final = 1e-9
"""Largest reduced cost dropped on a decision without a finite bound (HiGHS's own tolerance)."""


def _largest(violations: NDArray[np.float64]) -> float:
    return float(max(0.0, violations.max())) if violations.size else 0.0


def _clarabel(
    y: NDArray[np.float64],
    w: NDArray[np.float64],
    *,
    A_eq: sparse.csr_array,
    b_eq: NDArray[np.float64],
    A_ub: sparse.csr_array,
    b_ub: NDArray[np.float64],
    lower: NDArray[np.float64],
    upper: NDArray[np.float64],
) -> tuple[NDArray[np.float64], str]:
    """Solve ``min sum w (z - y)^2`` under the constraints with Clarabel, on ``d = z - y``."""
    try:
        clarabel = importlib.import_module("clarabel")
    except ImportError:
        raise UnsupportedError(
            "faithful_project needs Clarabel, the 'optimize' extra: "
            "pip install 'dpcurator[optimize]' (or pip install clarabel), or solver='osqp'."
        ) from None
    n = y.size
    eye = sparse.eye_array(n, format="csr")
    has_lo, has_hi = np.isfinite(lower), np.isfinite(upper)
    A = sparse.vstack([A_eq, A_ub, -eye[has_lo], eye[has_hi]], format="csc")
    b = np.concatenate(
        [b_eq - A_eq @ y, b_ub - A_ub @ y, y[has_lo] - lower[has_lo], upper[has_hi] - y[has_hi]]
    )
    settings = clarabel.DefaultSettings()
    settings.verbose = False
    solver = clarabel.DefaultSolver(
        sparse.csc_matrix(sparse.diags_array(2 * w / max(float(w.max()), 1e-300))),
        np.zeros(n),
        sparse.csc_matrix(A),
        b,
        [clarabel.ZeroConeT(A_eq.shape[0]), clarabel.NonnegativeConeT(b.size - A_eq.shape[0])],
        settings,
    )
    solution = solver.solve()
    status = str(solution.status)
    if "Infeasible" in status:
        raise InfeasibleConstraintsError(
            "no data satisfy the problem's constraints within beta (Clarabel found a "
            "certificate of infeasibility); widen beta or check the constraints."
        )
    if status not in {"Solved", "AlmostSolved"}:
        raise InfeasibleConstraintsError(f"Clarabel stopped without a solution ({status}).")
    return y + np.asarray(solution.x, dtype=np.float64), status


def _matrix(value: Any, rows: int | None, columns: int, name: str) -> sparse.csr_array:
    if value is None:
        return sparse.csr_array((0, columns))
    out = sparse.csr_array(value, dtype=np.float64)
    if out.shape[1] != columns or (rows is not None and out.shape[0] != rows):
        raise InvalidParameterError(name, out.shape, f"must have {columns} columns")
    if not np.all(np.isfinite(out.data)):
        raise InvalidParameterError(name, "...", "must be finite")
    return out


def _vector(value: ArrayLike | None, size: int, name: str, fill: float) -> NDArray[np.float64]:
    if value is None:
        return np.full(size, fill)
    out = np.broadcast_to(np.asarray(value, dtype=np.float64), (size,)).copy()
    if np.any(np.isnan(out)):
        raise InvalidParameterError(name, value, "must not contain NaN")
    return out


@dataclass(frozen=True, eq=False)
class ProblemSolution:
    """The downstream problem solved on one data vector.

    Attributes
    ----------
    feasible : bool
        Whether some ``x`` satisfies the constraints for this data.
    value : float
        The optimal value ``f*(D)`` (``nan`` when infeasible).
    decisions : numpy.ndarray
        The optimal ``x`` (empty when infeasible).
    status : str
        HiGHS's message.
    """

    feasible: bool
    value: float
    decisions: NDArray[np.float64]
    status: str


@dataclass(frozen=True, eq=False)
class LinearBound:
    r"""An affine minorant of a problem's optimal value: ``f*(D) >= slope . D + intercept``.

    Valid for *every* data vector ``D`` (``f*(D) = +inf`` when the problem is infeasible), by
    weak LP duality: it comes from one dual-feasible point (:meth:`LinearProblem.lower_bound`).

    Attributes
    ----------
    slope : numpy.ndarray
        A subgradient of ``f*`` at the point the bound was taken (for the DC-OPF, the
        locational marginal prices of the loads).
    intercept : float
    at : numpy.ndarray
        The data vector whose dual gave the bound (where it is tight).
    """

    slope: NDArray[np.float64]
    intercept: float
    at: NDArray[np.float64] = field(repr=False)

    def __call__(self, data: ArrayLike) -> float:
        """Return ``slope . data + intercept``, a lower bound on ``f*(data)``."""
        return float(self.slope @ np.asarray(data, dtype=np.float64) + self.intercept)


@dataclass(frozen=True, eq=False)
class LinearProblem:
    r"""A downstream linear program parameterised by data: the ``f`` and ``g`` of program #2.

    Variables are ``z = [D; x]``: ``n_data`` data entries, then the decisions ``x``.

    .. math:: \min_x\; \mathrm{cost}^\top [D; x] + \mathrm{constant} \quad \text{s.t.} \quad
              A_{eq} z = b_{eq},\; A_{ub} z \le b_{ub},\; \mathrm{lower} \le x \le \mathrm{upper}.

    Parameters
    ----------
    n_data : int
        Number of data entries (the first columns).
    cost : array_like of float, shape (n,)
        Objective coefficients of ``z``.
    A_eq, b_eq, A_ub, b_ub : matrices and vectors, optional
        Linear constraints on ``z`` (dense or sparse).
    lower, upper : array_like of float, shape (n - n_data,), optional
        Bounds of ``x`` (default: free).
    constant : float, default 0
        Added to the objective.

    Examples
    --------
    Serve a demand ``D`` from two sources at costs 1 and 3, the cheap one capped at 5:

    >>> lp = LinearProblem(1, cost=[0, 1, 3], A_eq=[[-1, 1, 1]], b_eq=[0], lower=[0, 0],
    ...                    upper=[5, 100])
    >>> lp.solve([8.0]).value
    14.0
    """

    n_data: int
    cost: NDArray[np.float64]
    A_eq: sparse.csr_array = field(repr=False)
    b_eq: NDArray[np.float64] = field(repr=False)
    A_ub: sparse.csr_array = field(repr=False)
    b_ub: NDArray[np.float64] = field(repr=False)
    lower: NDArray[np.float64] = field(repr=False)
    upper: NDArray[np.float64] = field(repr=False)
    constant: float = 0.0

    def __init__(
        self,
        n_data: int,
        *,
        cost: ArrayLike,
        A_eq: Any = None,
        b_eq: ArrayLike | None = None,
        A_ub: Any = None,
        b_ub: ArrayLike | None = None,
        lower: ArrayLike | None = None,
        upper: ArrayLike | None = None,
        constant: float = 0.0,
    ) -> None:
        c = np.asarray(cost, dtype=np.float64).ravel()
        if not isinstance(n_data, int) or not 0 < n_data < c.size or not np.all(np.isfinite(c)):
            raise InvalidParameterError(
                "n_data", n_data, f"must be an int between 1 and {c.size - 1} (len(cost) - 1)"
            )
        n = c.size
        eq = _matrix(A_eq, None, n, "A_eq")
        ub = _matrix(A_ub, None, n, "A_ub")
        if (eq.shape[0] and b_eq is None) or (ub.shape[0] and b_ub is None):
            raise InvalidParameterError("b_eq/b_ub", None, "must be given with A_eq/A_ub")
        b_e = _vector(b_eq, eq.shape[0], "b_eq", 0.0)
        b_u = _vector(b_ub, ub.shape[0], "b_ub", 0.0)
        if not (np.all(np.isfinite(b_e)) and np.all(np.isfinite(b_u))):
            raise InvalidParameterError("b_eq/b_ub", None, "must be finite")
        lo = _vector(lower, n - n_data, "lower", -np.inf)
        hi = _vector(upper, n - n_data, "upper", np.inf)
        if np.any(lo > hi):
            raise InfeasibleConstraintsError("the decisions' bounds cross (lower > upper)")
        for name, value in (
            ("n_data", n_data),
            ("cost", c),
            ("A_eq", eq),
            ("b_eq", b_e),
            ("A_ub", ub),
            ("b_ub", b_u),
            ("lower", lo),
            ("upper", hi),
            ("constant", check_finite(constant, "constant")),
        ):
            object.__setattr__(self, name, value)

    def __repr__(self) -> str:
        return (
            f"LinearProblem(n_data={self.n_data}, n_decisions={self.n_decisions}, "
            f"equalities={self.A_eq.shape[0]}, inequalities={self.A_ub.shape[0]})"
        )

    @property
    def n_decisions(self) -> int:
        """Number of decision variables ``x``."""
        return int(self.cost.size - self.n_data)

    def objective(self, data: ArrayLike, decisions: ArrayLike) -> float:
        """``cost . [D; x] + constant``."""
        z = np.concatenate([np.asarray(data, float), np.asarray(decisions, float)])
        return float(self.cost @ z + self.constant)

    def _decisions_lp(self, d: NDArray[np.float64]) -> Any:
        """Solve the decisions' LP at data ``d`` with HiGHS; return scipy's result."""
        k = self.n_data
        eq_x, ub_x = self.A_eq[:, k:], self.A_ub[:, k:]
        return linprog(
            self.cost[k:],
            A_ub=ub_x if ub_x.shape[0] else None,
            b_ub=self.b_ub - self.A_ub[:, :k] @ d if ub_x.shape[0] else None,
            A_eq=eq_x if eq_x.shape[0] else None,
            b_eq=self.b_eq - self.A_eq[:, :k] @ d if eq_x.shape[0] else None,
            bounds=np.column_stack([self.lower, self.upper]),
            method="highs",
        )

    def solve(self, data: ArrayLike) -> ProblemSolution:
        """Solve the LP for fixed data with HiGHS (:func:`scipy.optimize.linprog`)."""
        d = _vector(data, self.n_data, "data", 0.0)
        k = self.n_data
        result = self._decisions_lp(d)
        if result.status != 0:
            return ProblemSolution(False, float("nan"), np.empty(0), str(result.message))
        value = float(result.fun + self.cost[:k] @ d + self.constant)
        return ProblemSolution(True, value, np.asarray(result.x, float), str(result.message))

    def lower_bound(self, data: ArrayLike) -> LinearBound:
        r"""Return an affine lower bound on ``f*``, tight at ``data``, from the LP's dual.

        With the decisions' problem ``min c_x x s.t. E x = b_eq - E_D D, U x <= b_ub - U_D D,
        l <= x <= u``, any ``y`` (equalities) and ``z <= 0`` (inequalities) give the reduced
        costs ``r = c_x - E'y - U'z``; for every feasible ``x``, ``c_x x >= y'(b_eq - E_D D)
        + z'(b_ub - U_D D) + sum_i min(r_i l_i, r_i u_i)`` (weak duality, e.g. Bertsimas and
        Tsitsiklis, *Introduction to Linear Optimization*, Theorem 4.3). That right-hand side
        is affine in ``D``, so it bounds ``f*(D)`` from below for every ``D``. ``y, z`` are
        HiGHS's duals at ``data`` (so the bound is tight there, up to HiGHS's tolerance); the
        bound-multipliers are recomputed from ``r``, so dual feasibility is exact, not a
        solver's approximation. A decision without a finite bound where its reduced cost has
        the wrong sign would make the bound ``-inf``: reduced costs below 1e-9 there are
        dropped (HiGHS's own optimality tolerance), larger ones raise.

        Raises
        ------
        InfeasibleConstraintsError
            When the problem is infeasible at ``data`` (it has no dual optimum there).

        Examples
        --------
        Demand ``D`` served at unit cost 1 up to 5, then 3: ``f*(D) = D + 2 max(D - 5, 0)``.

        >>> lp = LinearProblem(1, cost=[0, 1, 3], A_eq=[[-1, 1, 1]], b_eq=[0], lower=[0, 0],
        ...                    upper=[5, 100])
        >>> cut = lp.lower_bound([8.0])
        >>> float(cut.slope[0]), round(cut.intercept, 6), cut([8.0]), cut([2.0]) <= 2.0
        (3.0, -10.0, 14.0, True)
        """
        d = _vector(data, self.n_data, "data", 0.0)
        k = self.n_data
        c_x = self.cost[k:]
        eq_x, ub_x = self.A_eq[:, k:], self.A_ub[:, k:]
        result = self._decisions_lp(d)
        if result.status != 0:
            raise InfeasibleConstraintsError(
                f"the downstream problem has no optimum at these data ({result.message}); "
                "take the bound at a feasible point"
            )
        y = np.asarray(result.eqlin.marginals, dtype=np.float64) if eq_x.shape[0] else np.zeros(0)
        z = (
            np.minimum(np.asarray(result.ineqlin.marginals, dtype=np.float64), 0.0)
            if ub_x.shape[0]
            else np.zeros(0)
        )
        reduced = c_x - eq_x.T @ y - ub_x.T @ z
        at_bound = np.where(reduced > 0, self.lower, self.upper)
        unbounded = ~np.isfinite(at_bound)
        scale = 1.0 + float(np.abs(c_x).max(initial=0.0))
        if np.any(np.abs(reduced[unbounded]) > _RESIDUAL_TOLERANCE * scale):
            raise InfeasibleConstraintsError(
                "no finite dual bound: a decision without a finite bound has a nonzero reduced "
                "cost; give the decisions finite bounds"
            )
        reduced[unbounded] = 0.0
        at_bound[unbounded] = 0.0
        slope = self.cost[:k] - self.A_eq[:, :k].T @ y - self.A_ub[:, :k].T @ z
        intercept = float(self.constant + y @ self.b_eq + z @ self.b_ub + float(reduced @ at_bound))
        return LinearBound(slope=np.asarray(slope, dtype=np.float64), intercept=intercept, at=d)


@dataclass(frozen=True, eq=False)
class FaithfulProjection:
    """The output of :func:`faithful_project`.

    Attributes
    ----------
    values : numpy.ndarray
        ``D^``, the released data.
    decisions : numpy.ndarray
        An ``x`` that is feasible with ``D^`` and has cost within ``beta`` of ``optimum``.
    objective : float
        The downstream objective at ``(D^, x)``.
    beta : float
        The faithfulness window used.
    distance : float
        ``||D^ - D~||_W``.
    max_residual : float
        Largest constraint violation (of the QP as solved).
    status : str
        The QP solver's status.
    optimal_value : float
        ``f*(D^)``, the downstream optimum on the released data (set by
        :func:`bilevel_project`; ``nan`` from :func:`faithful_project`, which does not solve
        the downstream problem).
    iterations : int
        Linearisations of the lower side used by :func:`bilevel_project` (0: the one-sided
        projection already met it, so it is the exact projection onto the bilevel set).
    """

    values: NDArray[np.float64]
    decisions: NDArray[np.float64]
    objective: float
    beta: float
    distance: float
    max_residual: float
    status: str
    optimal_value: float = math.nan
    iterations: int = 0


def faithful_project(
    noisy: ArrayLike,
    problem: LinearProblem,
    *,
    optimum: float | None,
    beta: float = np.inf,
    weights: ArrayLike | None = None,
    data_lower: ArrayLike | None = None,
    data_upper: ArrayLike | None = None,
    solver: str = "clarabel",
    cuts: Sequence[LinearBound] = (),
) -> FaithfulProjection:
    r"""Release the closest data keeping ``problem`` feasible and faithful (CBDP program #2).

    Solves (module docstring; lecture 003)

    .. math:: \min_{D', x} \sum_i w_i (D'_i - \tilde D_i)^2 \quad \text{s.t.} \quad
              |f(D', x) - \tilde f^\star| \le \beta,\; g(D', x) \le 0,\;
              \ell_D \le D' \le u_D

    with OSQP. Reads only its arguments: noisy data, a released optimum and public
    constraints (post-processing, no privacy cost). If the true data satisfy the constraints,
    ``||D^ - D||_W <= ||D~ - D||_W`` (projection onto a convex set).

    Parameters
    ----------
    noisy : array_like of float, shape (problem.n_data,)
        ``D~``.
    problem : LinearProblem
        The downstream problem (public).
    optimum : float or None
        ``f~*``, a privately released optimal value; ``None`` drops faithfulness (feasibility
        only, program #2 without its first constraint).
    beta : float, default inf
        The faithfulness window, >= 0.
    weights : array_like of float, optional
        ``w > 0`` (default 1).
    data_lower, data_upper : array_like of float, optional
        Public bounds of the data (e.g. 0 for loads and counts).
    solver : {"clarabel", "osqp"}, default "clarabel"
        Clarabel (an interior-point conic solver: robust on this QP, whose decisions carry no
        weight, and accurate to about 1e-8) or OSQP through
        :func:`dpcurator.hierarchy.project` (first-order; may stall on large networks).
    cuts : sequence of LinearBound, optional
        Affine minorants ``L`` of ``f*`` (:meth:`LinearProblem.lower_bound`); each adds the
        linear constraint ``L(D') >= optimum - beta``, which implies
        ``f*(D') >= optimum - beta`` (used by :func:`bilevel_project`). Public: they are
        computed from released data and the public problem.

    Returns
    -------
    FaithfulProjection

    Raises
    ------
    InfeasibleConstraintsError
        When no data vector satisfies the constraints within ``beta`` (widen ``beta``).
    UnsupportedError
        When the solver is not installed (the ``optimize`` extra).

    Examples
    --------
    Two demands served by one source of capacity 10 at unit cost; the noisy demands
    ``(7, 6)`` need 13, and the released optimum is 9 with ``beta = 0.5``:

    >>> lp = LinearProblem(2, cost=[0, 0, 1], A_eq=[[-1, -1, 1]], b_eq=[0], lower=[0],
    ...                    upper=[10])
    >>> out = faithful_project([7.0, 6.0], lp, optimum=9.0, beta=0.5, data_lower=0)
    >>> out.values.round(4).tolist(), round(out.objective, 4)
    ([5.25, 4.25], 9.5)
    """
    k = problem.n_data
    y = _vector(noisy, k, "noisy", 0.0)
    if not np.all(np.isfinite(y)):
        raise InvalidParameterError("noisy", noisy, "must be finite")
    w = _vector(weights, k, "weights", 1.0)
    if np.any(~np.isfinite(w)) or np.any(w <= 0):
        raise InvalidParameterError("weights", weights, "must be finite and > 0")
    lo = np.concatenate([_vector(data_lower, k, "data_lower", -np.inf), problem.lower])
    hi = np.concatenate([_vector(data_upper, k, "data_upper", np.inf), problem.upper])
    rows, bounds = [problem.A_ub], [problem.b_ub]
    window = np.inf
    if optimum is not None:
        target = check_finite(optimum, "optimum")
        window = check_positive(beta, "beta", allow_zero=True)
        if np.isfinite(window):
            c = problem.cost.reshape(1, -1)
            rows += [sparse.csr_array(c), sparse.csr_array(-c)]
            bounds += [
                np.array([target + window - problem.constant]),
                np.array([problem.constant - target + window]),
            ]
            for cut in cuts:
                row = np.concatenate([-cut.slope, np.zeros(problem.n_decisions)])
                rows.append(sparse.csr_array(row.reshape(1, -1)))
                bounds.append(np.array([cut.intercept - target + window]))
    elif cuts:
        raise InvalidParameterError("cuts", len(cuts), "need an optimum (and a finite beta)")
    A_eq = problem.A_eq
    A_ub = sparse.vstack(rows, format="csr")
    b_ub = np.concatenate(bounds)
    weight = np.concatenate([w, np.zeros(problem.n_decisions)])
    start = np.concatenate(
        [y, np.clip(np.zeros(problem.n_decisions), problem.lower, problem.upper)]
    )
    if solver == "clarabel":
        full, status = _clarabel(
            start, weight, A_eq=A_eq, b_eq=problem.b_eq, A_ub=A_ub, b_ub=b_ub, lower=lo, upper=hi
        )
    elif solver == "osqp":
        result = project(
            start,
            weights=weight,
            A_eq=A_eq if A_eq.shape[0] else None,
            b_eq=problem.b_eq if A_eq.shape[0] else None,
            A_ub=A_ub if A_ub.shape[0] else None,
            b_ub=b_ub if A_ub.shape[0] else None,
            lower=lo,
            upper=hi,
        )
        full, status = result.values, result.status
    else:
        raise InvalidParameterError("solver", solver, f"must be one of {', '.join(SOLVERS)}")
    residual = max(
        _largest(np.abs(A_eq @ full - problem.b_eq)),
        _largest(A_ub @ full - b_ub),
        _largest(lo - full),
        _largest(full - hi),
    )
    values, decisions = full[:k], full[k:]
    return FaithfulProjection(
        values=values,
        decisions=decisions,
        objective=problem.objective(values, decisions),
        beta=window,
        distance=float(np.sqrt(np.sum(w * (values - y) ** 2))),
        max_residual=residual,
        status=status,
    )


def _window_point(
    problem: LinearProblem,
    start: NDArray[np.float64],
    direction: NDArray[np.float64],
    *,
    box: tuple[NDArray[np.float64], NDArray[np.float64]],
    window: tuple[float, float],
) -> NDArray[np.float64]:
    """Find a point on ``clip(start + s direction, *box)``, ``s >= 0``, with ``f*`` in window.

    ``f*(start) < low``; along ``direction`` (a subgradient at ``start``) ``f*`` grows at least
    linearly, so doubling ``s`` finds a point at or above ``low`` (or infeasible), and
    bisection, on the convex and (where finite) continuous ``f*`` along the segment, a point in
    the window. Raises InfeasibleConstraintsError when there is none on this path.
    """
    lower, upper = box
    low, high = window

    def value(step: float) -> float:
        solution = problem.solve(np.clip(start + step * direction, lower, upper))
        return solution.value if solution.feasible else math.inf

    norm = float(np.linalg.norm(direction))
    if norm > 0:
        below, above = 0.0, max(high - low, 1e-9) / norm
        for _ in range(60):
            reached = value(above)
            if low <= reached <= high:
                return np.clip(start + above * direction, lower, upper)
            if reached > high:
                break
            below, above = above, 2 * above
        else:
            above = math.nan
        for _ in range(100 if math.isfinite(above) else 0):
            middle = (below + above) / 2
            reached = value(middle)
            if low <= reached <= high:
                return np.clip(start + middle * direction, lower, upper)
            below, above = (middle, above) if reached < low else (below, middle)
    raise InfeasibleConstraintsError(
        "no data with the downstream optimum inside [optimum - beta, optimum + beta] were found "
        "from the one-sided projection; widen beta"
    )


def bilevel_project(
    noisy: ArrayLike,
    problem: LinearProblem,
    *,
    optimum: float,
    beta: float,
    weights: ArrayLike | None = None,
    data_lower: ArrayLike | None = None,
    data_upper: ArrayLike | None = None,
    solver: str = "clarabel",
    max_iterations: int = 10,
    tolerance: float = 1e-6,
) -> FaithfulProjection:
    r"""Release data whose downstream *optimum* is within ``beta`` of ``optimum``, both sides.

    The lectures' bilevel version of program #2 (lecture 003; Mak, Fioretto and Van
    Hentenryck, arXiv 2001.09508, 2020):

    .. math:: \min_{D'} \sum_i w_i (D'_i - \tilde D_i)^2 \quad \text{s.t.} \quad
              |f^\star(D') - \tilde f^\star| \le \beta,\;
              \ell_D \le D' \le u_D,

    where ``f*(D')`` is the downstream LP's optimal value (``+inf`` if infeasible). Method
    (module docstring): first :func:`faithful_project` (exact for the upper side); if
    ``f*(D^) >= optimum - beta`` it is returned as is (``iterations = 0``). Otherwise the lower
    side is replaced by a dual cut ``L(D') >= optimum - beta`` with ``L <= f*`` everywhere
    (:meth:`LinearProblem.lower_bound`) taken at the current point, the QP is solved again and
    the cut re-taken at its solution, until the distance to ``D~`` decreases by less than
    ``tolerance`` (relative) or after ``max_iterations``. If the first cut leaves the QP
    infeasible (``f*`` is kinked between the point and the window), the cut is taken instead at
    a point inside the window found by a line search along the cut's slope from the one-sided
    projection (doubling, then bisection on the convex ``f*``).

    Guarantees (what is proved, not only observed):

    * Privacy: reads only its arguments (noisy data, a released optimum, public constraints):
      post-processing, as private as ``(D~, f~*)`` (Dwork and Roth 2014, Proposition 2.1).
    * Faithfulness: ``optimum - beta <= f*(D^) <= optimum + beta`` up to the solvers'
      tolerances (about 1e-8 relative): the upper side because ``D^`` has a feasible plan
      within ``beta`` (so the optimum is no larger), the lower side because
      ``f*(D^) >= L(D^) >= optimum - beta`` (weak duality). ``optimal_value`` is ``f*(D^)``
      as HiGHS solved it, for checking.
    * Monotone: from the first cut on, each iterate is feasible for the next QP (the cut taken
      at it is tight there), so ``||D^ - D~||_W`` never increases across iterations.
    * Accuracy: if the true ``D`` lies in the last QP's feasible set (feasible, a plan within
      ``beta`` of ``optimum``, ``L(D) >= optimum - beta``), ``||D^ - D||_W <= ||D~ - D||_W``
      (projection onto a convex set). If ``D`` only lies in the bilevel set
      (``|f*(D) - optimum| <= beta``) the lecture's ``||D^ - D|| <= 2 ||D~ - D||`` follows from
      the triangle inequality whenever ``||D^ - D~|| <= ||D - D~||``, which holds when
      ``iterations = 0`` (``D^`` is then the exact projection onto the bilevel set, a subset of
      the one-sided set it was projected onto) but not in general after linearisation: the
      scheme finds a stationary point of a nonconvex program, not necessarily its global
      minimum. Which of these held is checked ex post by the steward
      (:func:`~dpcurator.networks.compare_power`).

    Parameters
    ----------
    noisy, problem, weights, data_lower, data_upper, solver
        As for :func:`faithful_project`.
    optimum : float
        ``f~*``, a privately released optimal value.
    beta : float
        The window, finite and >= 0.
    max_iterations : int, default 10
    tolerance : float, default 1e-6

    Returns
    -------
    FaithfulProjection
        With ``optimal_value = f*(D^)`` and ``iterations``.

    Raises
    ------
    InfeasibleConstraintsError
        When a QP is infeasible (no data satisfy the constraints within ``beta``, or the
        linearised lower side cuts them all off): widen ``beta``.

    Examples
    --------
    One demand served at unit cost 1 up to 5, then 3 (``f*(D) = D + 2 max(D - 5, 0)``); the
    noisy demand 4 has ``f* = 4``, the released optimum is 11 with ``beta = 1``. The one-sided
    program keeps ``D~ = 4`` (a plan of cost 10 exists: serve it from the dear source), the
    bilevel one moves it to the nearest demand with ``f*(D) >= 10``, ``20/3``:

    >>> lp = LinearProblem(1, cost=[0, 1, 3], A_eq=[[-1, 1, 1]], b_eq=[0], lower=[0, 0],
    ...                    upper=[5, 100])
    >>> faithful_project([4.0], lp, optimum=11.0, beta=1.0).values.round(4).tolist()
    [4.0]
    >>> out = bilevel_project([4.0], lp, optimum=11.0, beta=1.0, data_lower=0.0)
    >>> out.values.round(4).tolist(), round(out.optimal_value, 4), out.iterations >= 1
    ([6.6667], 10.0, True)
    """
    target = check_finite(optimum, "optimum")
    window = check_positive(beta, "beta", allow_zero=True)
    if not math.isfinite(window):
        raise InvalidParameterError("beta", beta, "must be finite for the bilevel program")
    if not isinstance(max_iterations, int) or max_iterations < 1:
        raise InvalidParameterError("max_iterations", max_iterations, "must be an int >= 1")
    tol = check_positive(tolerance, "tolerance")
    options: dict[str, Any] = {
        "optimum": target,
        "beta": window,
        "weights": weights,
        "data_lower": data_lower,
        "data_upper": data_upper,
        "solver": solver,
    }
    current = faithful_project(noisy, problem, **options)
    solution = problem.solve(current.values)
    if not solution.feasible:
        raise InfeasibleConstraintsError(
            "the downstream problem is infeasible on the projection (solver tolerance); "
            "widen beta or rescale the problem"
        )
    slack = 1e-9 * max(1.0, abs(target))
    if solution.value >= target - window - slack:
        return replace(current, optimal_value=solution.value, iterations=0)
    iterations = 0
    for iterations in range(1, max_iterations + 1):
        cut = problem.lower_bound(current.values)
        try:
            step = faithful_project(noisy, problem, cuts=[cut], **options)
        except InfeasibleConstraintsError:
            if iterations > 1:  # pragma: no cover (the previous iterate is feasible)
                raise
            # The cut at a point below the window can be too pessimistic (f* is kinked in
            # between): take it at a point inside the window instead, where it is tight.
            lo = _vector(data_lower, problem.n_data, "data_lower", -np.inf)
            hi = _vector(data_upper, problem.n_data, "data_upper", np.inf)
            inside = _window_point(
                problem,
                current.values,
                cut.slope,
                box=(lo, hi),
                window=(target - window, target + window),
            )
            cut = problem.lower_bound(inside)
            step = faithful_project(noisy, problem, cuts=[cut], **options)
        improvement = current.distance - step.distance
        first = iterations == 1
        current = step
        if not first and improvement <= tol * max(1.0, step.distance):
            break
    solution = problem.solve(current.values)
    if not solution.feasible:  # pragma: no cover (the QP's plan is feasible)
        raise InfeasibleConstraintsError(
            "the downstream problem is infeasible on the projection (solver tolerance); "
            "widen beta or rescale the problem"
        )
    return replace(current, optimal_value=solution.value, iterations=iterations)
