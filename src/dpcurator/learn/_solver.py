r"""The certified ERM solver and the record every private ERM release returns.

:func:`solve_erm` minimises the regularised (and possibly perturbed) empirical risk

.. math:: J(\theta) = \frac1n\sum_{i=1}^n \ell(\theta; x_i, t_i) + \frac{\mu}{2}\|\theta\|_2^2
          + \frac1n b^\top\theta

for any :data:`~dpcurator.learn._losses.ERMLoss` and stops at a *certified* gradient norm: by
strong convexity :math:`\|\hat\theta - \theta^*\|_2 \le \mathrm{tol}/\mu`, a slack that the
mechanisms charge in their sensitivities, so their guarantees hold for the minimiser actually
computed.

Examples
--------
>>> import numpy as np
>>> from dpcurator.learn._losses import logistic_loss
>>> X = np.array([[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0]])
>>> theta = solve_erm(X, np.array([1.0, 1.0, -1.0]), logistic_loss(), 0.1, tol=1e-10)
>>> bool(theta[0] > 0 and theta[1] > 0)
True
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray
from scipy.sparse.linalg import LinearOperator, cg

from dpcurator.accounting import PrivacyEvent
from dpcurator.errors import InternalError
from dpcurator.learn._losses import ERMLoss

__all__ = ["PerturbedModel", "solve_erm", "solver_tolerance"]


@dataclass(frozen=True, slots=True)
class PerturbedModel:
    """The private parameters of a release and what releasing them cost.

    Attributes
    ----------
    coef : numpy.ndarray of shape (K, d)
        One row per one-vs-rest problem, or the ``K`` class rows of a multinomial model.
    event : PrivacyEvent
        What was released; an accountant turns it into (epsilon, delta).
    strong_convexity : float
        The ``mu`` actually used (objective perturbation may raise it).
    noise_std : float
        Standard deviation per coordinate of the noise on the parameters (output perturbation),
        on the linear term ``b`` (objective perturbation) or on each gradient sum (gradient
        perturbation).

    Examples
    --------
    >>> import numpy as np
    >>> from dpcurator.accounting import PureDPEvent
    >>> PerturbedModel(np.zeros((1, 2)), PureDPEvent(1.0), 0.1, 2.0).coef.shape
    (1, 2)
    """

    coef: NDArray[np.float64]
    event: PrivacyEvent
    strong_convexity: float
    noise_std: float


def solver_tolerance(gradient_bound: float, n: float) -> float:
    """Certified gradient norm the solver must reach: ``zeta * max(2**-28 / n, 2**-40)``.

    Far above float64 rounding of a mean of ``n`` gradients (about ``zeta 2**-50``), and small
    enough that the slack ``2 tol / mu`` it adds to the sensitivity ``2 zeta / (mu n)`` is a
    relative ``2**-28`` (for ``n <= 2**12``) to ``n 2**-40``.

    Examples
    --------
    >>> solver_tolerance(1.0, 2**20) == 2.0**-40
    True
    """
    return gradient_bound * max(2.0**-28 / n, 2.0**-40)


class _Objective:
    """The solver's objective: ``(n/m)`` times the mean loss, the ridge and the linear term."""

    def __init__(
        self,
        X: NDArray[np.float64],
        t: NDArray[np.float64],
        loss: ERMLoss,
        *,
        mu: float,
        linear: NDArray[np.float64],
        normaliser: float,
    ) -> None:
        self.X, self.t, self.loss, self.mu, self.linear = X, t, loss, mu, linear
        self.normaliser = normaliser
        self.scale = X.shape[0] / normaliser  # mean loss times n / m: the summed loss over m

    def value_and_gradient(self, theta: NDArray[np.float64]) -> tuple[float, NDArray[np.float64]]:
        value, grad = self.loss.value_and_gradient(self.X, self.t, theta)
        f = (
            self.scale * value
            + 0.5 * self.mu * float(theta @ theta)
            + float(self.linear @ theta) / self.normaliser
        )
        return f, self.scale * grad + self.mu * theta + self.linear / self.normaliser

    def newton_step(
        self, theta: NDArray[np.float64], grad: NDArray[np.float64], forcing: float
    ) -> NDArray[np.float64]:
        """Solve ``(H + mu I) s = grad`` by conjugate gradients to relative residual ``forcing``.

        ``H + mu I`` is symmetric with eigenvalues >= ``mu``, so every CG iterate is a descent
        direction; only Hessian-vector products are formed (``O(n D)`` each).
        """
        product = self.loss.hessian_product(self.X, self.t, theta)
        size = theta.size

        def matvec(v: NDArray[np.float64]) -> NDArray[np.float64]:
            out: NDArray[np.float64] = self.scale * product(v) + self.mu * v
            return out

        operator = LinearOperator((size, size), matvec=matvec, dtype=np.float64)
        step, _ = cg(operator, grad, rtol=forcing, atol=0.0, maxiter=4 * size + 20)
        out: NDArray[np.float64] = np.asarray(step, dtype=np.float64)
        return out


def solve_erm(
    X: NDArray[np.float64],
    t: NDArray[np.float64],
    loss: ERMLoss,
    mu: float,
    *,
    linear: NDArray[np.float64] | None = None,
    normaliser: float | None = None,
    tol: float,
    max_iter: int = 200,
) -> NDArray[np.float64]:
    r"""Minimise the regularised (and possibly perturbed) risk to a certified gradient norm.

    The objective is :math:`\frac1m\sum_i\ell(\theta; x_i, t_i) + \frac\mu2\|\theta\|^2 +
    \frac1m b^\top\theta` with ``m`` the ``normaliser``: the number of rows ``n`` by default
    (the mean loss), or a public stand-in for it (the noisy count of add/remove neighbours,
    :func:`~dpcurator.learn._erm_noise.row_count`), which makes it the summed objective
    :math:`\sum_i\ell + \frac{\mu m}2\|\theta\|^2 + b^\top\theta` divided by ``m``.

    Damped, truncated Newton (Newton-CG: each step solves the Newton system by conjugate
    gradients on exact Hessian-vector products, to a relative residual
    :math:`\min(1/2, \|g\|^{1/2})`, then Armijo backtracking; Nocedal and Wright 2006,
    Algorithm 7.1), which converges globally and superlinearly on these smooth strongly convex
    objectives (semismooth Newton for the piecewise-quadratic Huber losses), without forming
    the ``D x D`` Hessian. The returned point has a computed gradient norm of at
    most ``tol / 2`` (half the budgeted tolerance, a margin for float64 rounding of the
    gradient), so :math:`\|\hat\theta - \theta^*\|_2 \le \mathrm{tol}/\mu` by strong
    convexity.

    Parameters
    ----------
    X : numpy.ndarray of shape (n, d)
    t : numpy.ndarray of shape (n,) or (n, K)
        Labels (``+-1`` for margin losses, targets for the squared loss) or, for a
        :class:`~dpcurator.learn._losses.MultinomialLoss`, one-hot rows.
    loss : GLMLoss or MultinomialLoss
    mu : float
        Strong convexity, > 0.
    linear : numpy.ndarray, optional
        The vector ``b`` of objective perturbation, of the parameter's length.
    normaliser : float, optional
        ``m`` > 0; default ``n``.
    tol : float
        Certified gradient norm.
    max_iter : int, default 200

    Returns
    -------
    numpy.ndarray of shape (loss.parameter_count(d),)
        The parameters, flat (``K`` rows of ``d`` for the multinomial loss).

    Raises
    ------
    InternalError
        If the certified tolerance is not reached (the release is refused rather than made with
        an unaccounted slack).

    Examples
    --------
    >>> import numpy as np
    >>> from dpcurator.learn._losses import multinomial_loss
    >>> X = np.array([[1.0, 0.0], [0.0, 1.0], [-1.0, -1.0]])
    >>> theta = solve_erm(X, np.eye(3), multinomial_loss(3), 0.1, tol=1e-10)
    >>> theta.reshape(3, 2).argmax(axis=0).tolist()  # class k scores highest on row k
    [0, 1]
    """
    size = loss.parameter_count(X.shape[1])
    b = np.zeros(size) if linear is None else linear
    m = float(X.shape[0]) if normaliser is None else normaliser
    objective = _Objective(X, t, loss, mu=mu, linear=b, normaliser=m)
    theta = np.zeros(size)
    f, grad = objective.value_and_gradient(theta)
    target = tol / 2.0
    for _ in range(max_iter):
        gnorm = float(np.linalg.norm(grad))
        if gnorm <= target:
            return theta
        step = objective.newton_step(theta, grad, forcing=min(0.5, math.sqrt(gnorm)))
        slope = float(grad @ step)
        size_factor = 1.0
        accepted = False
        for _ in range(60):
            candidate = theta - size_factor * step
            f_new, grad_new = objective.value_and_gradient(candidate)
            # Armijo decrease, or (full step only) a halved gradient norm: near the optimum the
            # decrease of f falls below its float64 resolution while Newton still converges.
            if f_new <= f - 1e-4 * size_factor * slope or (
                size_factor == 1.0 and float(np.linalg.norm(grad_new)) <= 0.5 * gnorm
            ):
                accepted = True
                break
            size_factor *= 0.5
        if not accepted:
            break
        theta, f, grad = candidate, f_new, grad_new
    if float(np.linalg.norm(grad)) <= target:
        return theta
    raise InternalError(
        "the ERM solver did not reach its certified gradient norm "
        f"({target:.3g}); the model was not released."
    )
