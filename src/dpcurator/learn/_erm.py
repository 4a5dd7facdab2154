r"""Regularised convex ERM and its private versions: output and objective perturbation.

The problem (lecture 002, "DP optimization via output perturbation"), for a generalised linear
loss :math:`\ell(\theta; x, t) = \psi(\langle\theta, x\rangle, t)` and rows :math:`\|x\|_2 \le R`:

.. math:: \theta^*(D) = \arg\min_\theta\ J_D(\theta) = \frac1n \sum_{i=1}^n
          \psi(\langle\theta, x_i\rangle, t_i) + \frac{\mu}{2}\|\theta\|_2^2 .

Every loss here has a bounded slope :math:`|\partial_s\psi| \le G` and curvature
:math:`0 \le \partial_s^2\psi \le c`, so the per-example gradient is bounded by
:math:`\zeta = G R` (the loss is :math:`\zeta`-Lipschitz in :math:`\theta`) and the per-example
Hessian :math:`\partial_s^2\psi\, x x^\top` has rank one and eigenvalue at most
:math:`\lambda = c R^2`.

Neighbours: replace one row (``n`` is public), the relation of the lecture's sensitivity lemma
and of Chaudhuri, Monteleoni and Sarwate (2011). The solver stops at a *certified* gradient norm
``tol``; by strong convexity :math:`\|\hat\theta - \theta^*\| \le \mathrm{tol}/\mu`, and this slack
is charged in every sensitivity (output perturbation) or covered by a small extra noise
(objective perturbation, the "approximate minima perturbation" of Iyengar et al. 2019), so the
guarantees hold for the minimiser actually computed, not only for the exact one.

Noise comes only from :mod:`dpcurator.mechanisms` (output perturbation, and the small noise
covering the solver's slack) and from the exact samplers of :mod:`dpcurator.noise` (the linear
term of objective perturbation, see :func:`objective_perturbation`).

Examples
--------
>>> erm_sensitivity(lipschitz=1.0, strong_convexity=0.1, n=1000)
0.02
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import numpy as np
from numpy.typing import NDArray
from scipy.linalg import LinAlgError, cho_factor, cho_solve
from scipy.special import expit

from dpcurator._validation import check_delta, check_epsilon, check_integer, check_positive
from dpcurator.accounting import (
    ApproxDPEvent,
    ComposedEvent,
    PrivacyEvent,
    PureDPEvent,
    SelfComposedEvent,
)
from dpcurator.errors import InternalError, InvalidParameterError
from dpcurator.mechanisms import gaussian_mechanism, laplace_mechanism
from dpcurator.noise import (
    RandomSource,
    discrete_gaussian,
    discrete_laplace,
    from_grid,
    to_grid,
    uniform_integers,
)

__all__ = [
    "GLMLoss",
    "PerturbedModel",
    "erm_sensitivity",
    "excess_risk_bound",
    "huber_hinge_loss",
    "logistic_loss",
    "objective_perturbation",
    "output_perturbation",
    "solve_erm",
    "solver_tolerance",
    "squared_loss",
]

Noise = Literal["laplace", "gaussian"]
LossFactory = Callable[[float], "GLMLoss"]
"""``loss_for(mu_total) -> GLMLoss``: a loss whose threshold may depend on the final ``mu``."""

SLACK_FRACTION = 2.0**-8
"""Share of epsilon that objective perturbation spends on the noise covering the solver slack."""

JACOBIAN_SHARE = 0.5
"""At most this share of a problem's epsilon pays for the Jacobian (the regulariser is raised
otherwise), as in Chaudhuri, Monteleoni and Sarwate (2011) and Kifer, Smith and Thakurta (2012)."""

_STAIRCASE_BITS = 30
"""The Gaussian staircase grid of objective perturbation is ``2**30`` times finer than sigma."""

_VECTOR_BITS = 36

_UNIFORM_BITS = 52


# ---------------------------------------------------------------------------------------------
# Losses


@dataclass(frozen=True, slots=True)
class GLMLoss:
    r"""A generalised linear loss :math:`\psi(s, t)`, ``s`` the margin or prediction.

    Attributes
    ----------
    name : str
        ``"logistic"``, ``"huber_hinge"`` or ``"squared"``.
    slope_bound : float
        ``G``, a bound on :math:`|\partial_s \psi|`.
    curvature : float
        ``c``, a bound on :math:`\partial_s^2 \psi` (which is >= 0: the loss is convex).
    width : float
        The Huber width ``h`` (``huber_hinge``) or the residual threshold (``squared``).

    Examples
    --------
    >>> import numpy as np
    >>> value, slope, curvature = logistic_loss().evaluate(np.array([0.0]), np.array([1.0]))
    >>> float(slope[0]), float(curvature[0])
    (-0.5, 0.25)
    """

    name: str
    slope_bound: float
    curvature: float
    width: float = 0.0

    def evaluate(
        self, s: NDArray[np.float64], t: NDArray[np.float64]
    ) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
        """Return the loss, its first and its second derivative in ``s``, elementwise."""
        if self.name == "logistic":
            z = t * s
            value = np.logaddexp(0.0, -z)
            d1 = -t * expit(-z)
            d2 = expit(z) * expit(-z)
            return value, d1, d2
        if self.name == "huber_hinge":
            h = self.width
            z = t * s
            gap = 1.0 + h - z
            middle = np.abs(1.0 - z) <= h
            low = z < 1.0 - h
            value = np.where(low, 1.0 - z, np.where(middle, gap * gap / (4.0 * h), 0.0))
            dz = np.where(low, -1.0, np.where(middle, -gap / (2.0 * h), 0.0))
            return value, t * dz, np.where(middle, 1.0 / (2.0 * h), 0.0)
        # Squared loss, Huberised beyond the residual threshold (slope bounded by it).
        a = self.width
        r = s - t
        inside = np.abs(r) <= a
        value = np.where(inside, 0.5 * r * r, a * np.abs(r) - 0.5 * a * a)
        return value, np.clip(r, -a, a), inside.astype(np.float64)


def logistic_loss() -> GLMLoss:
    r"""Logistic loss :math:`\psi(s, t) = \ln(1 + e^{-ts})`, ``t`` in {-1, 1}.

    Slope bound ``G = 1``, curvature ``c = 1/4``.

    Examples
    --------
    >>> logistic_loss().curvature
    0.25
    """
    return GLMLoss("logistic", 1.0, 0.25)


def huber_hinge_loss(width: float = 0.5) -> GLMLoss:
    r"""Smoothed (Huber) hinge of Chaudhuri, Monteleoni and Sarwate (2011), Section 3.4.1.

    With :math:`z = ts`: 0 for :math:`z > 1 + h`, :math:`(1 + h - z)^2 / (4h)` for
    :math:`|1 - z| \le h`, :math:`1 - z` below; ``G = 1``, ``c = 1/(2h)``.

    Examples
    --------
    >>> huber_hinge_loss(0.5).curvature
    1.0
    """
    h = check_positive(width, "huber_width")
    return GLMLoss("huber_hinge", 1.0, 1.0 / (2.0 * h), h)


def squared_loss(residual_bound: float) -> GLMLoss:
    r"""Squared loss :math:`(s - t)^2/2`, linear beyond :math:`|s - t| > a`: ``G = a``, ``c = 1``.

    With labels in :math:`[-B, B]`, rows of norm at most ``R`` and ridge penalty ``mu``, the
    unconstrained minimiser has :math:`\|\theta^*\| \le B/\sqrt{\mu}` (compare :math:`J` at
    :math:`\theta^*` and at 0), so every residual there is at most :math:`a = RB/\sqrt\mu + B`:
    with that ``a`` the minimiser is exactly the ridge solution, and the slope stays bounded.

    Examples
    --------
    >>> squared_loss(3.0).slope_bound
    3.0
    """
    a = check_positive(residual_bound, "residual_bound")
    return GLMLoss("squared", a, 1.0, a)


# ---------------------------------------------------------------------------------------------
# The lemma, the utility bound, the solver


def erm_sensitivity(lipschitz: float, strong_convexity: float, n: int) -> float:
    r"""Replace-one L2 sensitivity of the regularised minimiser: :math:`2L/(\mu n)`.

    Lecture 002, "Output perturbation: sensitivity lemma": if :math:`\ell(\cdot, x)` is convex
    and ``L``-Lipschitz and the regulariser is ``mu``-strongly convex, minimisers on datasets
    that differ in one row satisfy :math:`\|w^* - w^{*\prime}\|_2 \le 2L/(\mu n)` (also
    Chaudhuri, Monteleoni and Sarwate 2011, Corollary 8). The bound is tight.

    Parameters
    ----------
    lipschitz : float
        ``L`` > 0.
    strong_convexity : float
        ``mu`` > 0.
    n : int
        Number of rows, >= 1.

    Returns
    -------
    float

    Examples
    --------
    >>> erm_sensitivity(2.0, 0.5, 100)
    0.08
    """
    lip = check_positive(lipschitz, "lipschitz")
    mu = check_positive(strong_convexity, "strong_convexity")
    count = check_integer(n, "n", minimum=1)
    return 2.0 * lip / (mu * count)


def excess_risk_bound(
    lipschitz: float,
    strong_convexity: float,
    n: int,
    *,
    epsilon: float,
    delta: float,
    dimension: int,
) -> float:
    r"""Return the lecture's utility bound of Gaussian output perturbation.

    Lecture 002, "Output perturbation: utility": with :math:`\sigma = 2L\sqrt{2\ln(1.25/\delta)}
    / (\epsilon\mu n)`, :math:`E[L(w_{priv}) - L(w^*)] \le L\,E\|Z\|_2 \le L\sqrt{d}\,\sigma
    \le 3L^2\sqrt{d\ln(1.25/\delta)}/(\epsilon\mu n)`, ``L`` here being the empirical risk
    without the regulariser. Returned: :math:`3L^2\sqrt{d\ln(1.25/\delta)}/(\epsilon\mu n)`.

    Examples
    --------
    >>> round(excess_risk_bound(1.0, 0.1, 1000, epsilon=1.0, delta=1e-5, dimension=4), 4)
    0.2055
    """
    lip = check_positive(lipschitz, "lipschitz")
    mu = check_positive(strong_convexity, "strong_convexity")
    count = check_integer(n, "n", minimum=1)
    eps = check_epsilon(epsilon)
    dlt = check_delta(delta)
    if dlt == 0.0:
        raise InvalidParameterError("delta", delta, "must be > 0 for the Gaussian bound")
    d = check_integer(dimension, "dimension", minimum=1)
    return 3.0 * lip * lip * math.sqrt(d * math.log(1.25 / dlt)) / (eps * mu * count)


def solver_tolerance(gradient_bound: float, n: int) -> float:
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


def _objective(
    X: NDArray[np.float64],
    *,
    t: NDArray[np.float64],
    loss: GLMLoss,
    mu: float,
    linear: NDArray[np.float64],
    theta: NDArray[np.float64],
) -> tuple[float, NDArray[np.float64], NDArray[np.float64]]:
    n = X.shape[0]
    value, d1, d2 = loss.evaluate(X @ theta, t)
    f = float(value.mean() + 0.5 * mu * theta @ theta + linear @ theta / n)
    grad = X.T @ d1 / n + mu * theta + linear / n
    return f, grad, d2


def solve_erm(
    X: NDArray[np.float64],
    t: NDArray[np.float64],
    loss: GLMLoss,
    mu: float,
    *,
    linear: NDArray[np.float64] | None = None,
    tol: float,
    max_iter: int = 200,
) -> NDArray[np.float64]:
    r"""Minimise the regularised (and possibly perturbed) risk to a certified gradient norm.

    The objective is :math:`\frac1n\sum\psi(\langle\theta, x_i\rangle, t_i) +
    \frac\mu2\|\theta\|^2 + \frac1n b^\top\theta`; the result has gradient norm at most
    ``tol / 2``.

    Damped Newton (exact Hessian, Cholesky, Armijo backtracking), which converges globally and
    quadratically on these smooth strongly convex objectives (semismooth Newton for the
    piecewise-quadratic Huber losses). The returned point has a computed gradient norm of at most
    ``tol / 2`` (half the budgeted tolerance, a margin for float64 rounding of the gradient), so
    :math:`\|\hat\theta - \theta^*\|_2 \le \mathrm{tol}/\mu` by strong convexity.

    Parameters
    ----------
    X : numpy.ndarray of shape (n, d)
    t : numpy.ndarray of shape (n,)
        Labels (``+-1`` for margin losses, targets for the squared loss).
    loss : GLMLoss
    mu : float
        Strong convexity, > 0.
    linear : numpy.ndarray of shape (d,), optional
        The vector ``b`` of objective perturbation.
    tol : float
        Certified gradient norm.
    max_iter : int, default 200

    Returns
    -------
    numpy.ndarray of shape (d,)

    Raises
    ------
    InternalError
        If the certified tolerance is not reached (the release is refused rather than made with
        an unaccounted slack).

    Examples
    --------
    >>> import numpy as np
    >>> X = np.array([[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0]])
    >>> theta = solve_erm(X, np.array([1.0, 1.0, -1.0]), logistic_loss(), 0.1, tol=1e-10)
    >>> bool(theta[0] > 0 and theta[1] > 0)
    True
    """
    n, d = X.shape
    b = np.zeros(d) if linear is None else linear
    theta = np.zeros(d)
    f, grad, d2 = _objective(X, t=t, loss=loss, mu=mu, linear=b, theta=theta)
    target = tol / 2.0
    eye = np.eye(d)
    for _ in range(max_iter):
        gnorm = float(np.linalg.norm(grad))
        if gnorm <= target:
            return theta
        hessian = (X.T * d2) @ X / n + mu * eye
        try:
            step = cho_solve(cho_factor(hessian), grad)
        except LinAlgError:  # pragma: no cover - H >= mu I is positive definite
            step = grad / mu
        slope = float(grad @ step)
        size = 1.0
        accepted = False
        for _ in range(60):
            candidate = theta - size * step
            f_new, grad_new, d2_new = _objective(
                X, t=t, loss=loss, mu=mu, linear=b, theta=candidate
            )
            # Armijo decrease, or (full step only) a halved gradient norm: near the optimum the
            # decrease of f falls below its float64 resolution while Newton still converges.
            if f_new <= f - 1e-4 * size * slope or (
                size == 1.0 and float(np.linalg.norm(grad_new)) <= 0.5 * gnorm
            ):
                accepted = True
                break
            size *= 0.5
        if not accepted:
            break
        theta, f, grad, d2 = candidate, f_new, grad_new, d2_new
    if float(np.linalg.norm(grad)) <= target:
        return theta
    raise InternalError(
        "the ERM solver did not reach its certified gradient norm "
        f"({target:.3g}); the model was not released."
    )


# ---------------------------------------------------------------------------------------------
# Output perturbation


@dataclass(frozen=True, slots=True)
class PerturbedModel:
    """The private parameters of ``K`` problems and what releasing them cost.

    Attributes
    ----------
    coef : numpy.ndarray of shape (K, d)
    event : PrivacyEvent
        What was released; an accountant turns it into (epsilon, delta).
    strong_convexity : float
        The ``mu`` actually used (objective perturbation may raise it).
    noise_std : float
        Standard deviation per coordinate of the noise on the parameters (output perturbation)
        or on the linear term ``b`` (objective perturbation).

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


def output_perturbation(
    X: NDArray[np.float64],
    targets: NDArray[np.float64],
    loss: GLMLoss,
    *,
    data_norm: float,
    strong_convexity: float,
    epsilon: float,
    delta: float,
    noise: Noise,
    source: RandomSource | None,
) -> PerturbedModel:
    r"""Output perturbation (lecture 002; Chaudhuri, Monteleoni and Sarwate 2011, Algorithm 1).

    For each of the ``K`` columns of ``targets`` solve the regularised problem to the certified
    tolerance, then release :math:`\hat\theta + Z`. Replace-one L2 sensitivity per problem:

    .. math:: \Delta_2 = \frac{2\zeta}{\mu n} + \frac{2\,\mathrm{tol}}{\mu},
              \qquad \zeta = G R,

    (the lemma, :func:`erm_sensitivity`, plus the solver slack). All ``K`` problems see the same
    rows, so the stacked ``K d`` vector has L2 sensitivity :math:`\sqrt K \Delta_2` and L1
    sensitivity at most :math:`K\sqrt d\,\Delta_2`.

    - ``noise="gaussian"``: :func:`~dpcurator.mechanisms.gaussian_mechanism` on the stacked
      vector, (epsilon, delta)-DP (discrete Gaussian on a public grid, calibrated through zCDP).
    - ``noise="laplace"``: pure epsilon-DP with the lecture's (and CMS11's) L2 Laplace noise,
      density :math:`\propto e^{-\epsilon_b\|z\|_2/(\sqrt K\Delta_2)}` (a Gamma norm and a
      uniform direction, :func:`vector_laplace`, built from the exact samplers; its
      approximation costs :func:`vector_laplace_cost`, so :math:`\epsilon_b = \epsilon -` that
      cost). The result is rounded to a public grid :math:`2^{-20}` times finer than the
      noise scale (post-processing), so its set of possible values does not depend on the data.
      Per-coordinate discrete Laplace with the L1 bound :math:`K\sqrt d\Delta_2` would be exact
      too but has twice the variance per coordinate (:math:`2Kd` against :math:`Kd + 1` times
      :math:`K\Delta_2^2/\epsilon^2`).

    Parameters
    ----------
    X : numpy.ndarray of shape (n, d)
        Rows of L2 norm at most ``data_norm`` (clip them first: :func:`clip_rows`).
    targets : numpy.ndarray of shape (n, K)
        One column of labels (``+-1``) or targets per problem.
    loss : GLMLoss
    data_norm : float
        ``R``, the declared row bound.
    strong_convexity : float
        ``mu`` > 0.
    epsilon, delta : float
        The budget of the whole release (``delta`` is used by Gaussian noise only).
    noise : {"laplace", "gaussian"}
    source : RandomSource or None

    Returns
    -------
    PerturbedModel
        ``event``: :class:`~dpcurator.accounting.PureDPEvent` (Laplace) or the Gaussian
        mechanism's :class:`~dpcurator.accounting.DiscreteGaussianEvent`.

    Examples
    --------
    >>> import numpy as np
    >>> from dpcurator.noise import InsecureSeededSource
    >>> X = np.array([[1.0, 0.0], [0.0, 1.0]] * 100)
    >>> t = np.array([[1.0], [-1.0]] * 100)
    >>> model = output_perturbation(X, t, logistic_loss(), data_norm=1.0, strong_convexity=0.1,
    ...                             epsilon=1.0, delta=0.0, noise="laplace",
    ...                             source=InsecureSeededSource(0))
    >>> model.coef.shape, model.event.epsilon <= 1.0
    ((1, 2), True)
    """
    n, d = X.shape
    K = targets.shape[1]
    mu = strong_convexity
    zeta = loss.slope_bound * data_norm
    tol = solver_tolerance(zeta, n)
    thetas = np.vstack([solve_erm(X, targets[:, k], loss, mu, tol=tol) for k in range(K)]).reshape(
        K, d
    )
    delta2 = 2.0 * zeta / (mu * n) + 2.0 * tol / mu
    if noise == "laplace":
        dimension = K * d
        eps_b = epsilon - vector_laplace_cost(dimension)
        if not eps_b > 0.0:
            raise InvalidParameterError("epsilon", epsilon, "is too small for output perturbation")
        scale = math.sqrt(K) * delta2 / eps_b
        noisy = thetas.reshape(-1) + vector_laplace(dimension, scale, source)
        bits = _grid_bits(scale, 20)  # a public grid 2**20 times finer than the noise
        released = np.asarray(from_grid(to_grid(noisy, bits), bits), dtype=np.float64)
        std = scale * math.sqrt(dimension + 1.0)
        return PerturbedModel(released.reshape(K, d), PureDPEvent(epsilon=epsilon), mu, std)
    release = gaussian_mechanism(
        thetas.reshape(-1),
        epsilon=epsilon,
        delta=delta,
        sensitivity=math.sqrt(K) * delta2,
        source=source,
    )
    coef = np.asarray(release.value, dtype=np.float64).reshape(K, d)
    std = release.error.std if release.error is not None else 0.0
    return PerturbedModel(coef, release.event, mu, float(std))


# ---------------------------------------------------------------------------------------------
# Objective perturbation


def _grid_bits(bound: float, precision: int) -> int:
    """``k`` with ``2**-k`` the largest power of two ``<= bound * 2**-precision``."""
    _, exponent = math.frexp(bound)
    return precision - (exponent - 1)


def _centred_uniform(size: int, source: RandomSource | None) -> NDArray[np.float64]:
    """Uniform offsets in (-1/2, 1/2) on the mid-points of ``2**52`` cells."""
    j = np.asarray(uniform_integers(2**_UNIFORM_BITS, size, source=source), dtype=np.float64)
    out: NDArray[np.float64] = (j + 0.5) * 2.0**-_UNIFORM_BITS - 0.5
    return out


def _geometric(t: float, size: int, source: RandomSource | None) -> NDArray[np.float64]:
    """``P(G = k) = (1 - p) p^k``, ``p = exp(-1/t)``: discrete Laplace conditioned on ``>= 0``.

    For ``X ~ DLap(t)``, ``P(X = k | X >= 0) = (1 - p) p^k`` exactly (CKS20, Definition 28).
    """
    parts: list[NDArray[np.float64]] = []
    need = size
    while need > 0:
        x = np.asarray(discrete_laplace(t, 2 * need + 16, source=source), dtype=np.float64)
        kept = x[x >= 0][:need]
        parts.append(kept)
        need -= kept.size
    return np.concatenate(parts) if parts else np.zeros(0)


def vector_laplace_cost(dimension: int) -> float:
    r"""Privacy cost of :func:`vector_laplace`'s approximation: ``2 eta``, ``eta`` below.

    Its density is within :math:`e^{\pm\eta}` of :math:`\propto e^{-\|b\|_2/s}` everywhere, with
    :math:`\eta = d\,2^{-36} + 2(\sqrt d\,T + d/4)/(2\sigma^2)`, :math:`\sigma = 2^{36}`,
    :math:`T = \sigma(\sqrt d + 10)` (see :func:`vector_laplace`), so a density ratio bound
    :math:`e^{\epsilon}` of the exact law becomes :math:`e^{\epsilon + 2\eta}`. Doubled for
    float64 rounding of the bound itself.

    Examples
    --------
    >>> vector_laplace_cost(100) < 1e-7
    True
    """
    d = float(dimension)
    sigma = 2.0**_VECTOR_BITS
    radius = sigma * (math.sqrt(d) + 10.0)
    eta = d * 2.0**-_VECTOR_BITS + 2.0 * (math.sqrt(d) * radius + d / 4.0) / (2.0 * sigma**2)
    return 4.0 * eta


def vector_laplace(
    dimension: int, scale: float, source: RandomSource | None
) -> NDArray[np.float64]:
    r"""Draw the L2 ("vector") Laplace noise, density :math:`\propto e^{-\|b\|_2 / s}` on R^d.

    The law of Chaudhuri, Monteleoni and Sarwate (2011) for pure-DP output and objective
    perturbation: :math:`b = R\,U` with :math:`R \sim \mathrm{Gamma}(d, s)` and ``U`` uniform
    on the sphere. Built from the exact samplers only:

    - :math:`R = \sum_{i \le d} E_i`, each :math:`E_i = (s/t)(G_i + V_i)` with
      :math:`t = 2^{36}`, ``G`` geometric of ratio :math:`e^{-1/t}` (discrete Laplace
      conditioned on being >= 0) and ``V`` uniform on (0, 1): the density of :math:`E_i` is
      within :math:`e^{\pm 1/t}` of the exponential law's at every point, so that of ``R`` is
      within :math:`e^{\pm d/t}` of the Gamma law's;
    - :math:`U = v/\|v\|` with :math:`v = K + V'`, ``K`` discrete Gaussian of parameter
      :math:`\sigma = 2^{36}` per coordinate, ``V'`` uniform on (-1/2, 1/2), redrawn unless
      :math:`\|v\|_2 \le T = \sigma(\sqrt d + 10)`. The continuous Gaussian restricted to that
      ball is rotation invariant; the staircase density of ``v`` is within
      :math:`\exp(\pm(\|v\|_1 + d/4)/(2\sigma^2))` of it there, so the density of ``U`` on the
      sphere is within :math:`e^{\pm 2(\sqrt d T + d/4)/(2\sigma^2)}` of the uniform one.

    So the density of ``b`` is within :math:`e^{\pm\eta}` of the exact law at every point
    (:func:`vector_laplace_cost`); callers spend :math:`2\eta` (about :math:`2\cdot10^{-8}` for
    :math:`d = 100`, :math:`1.3\cdot10^{-6}` for :math:`d = 10^4`) on top of the exact law's
    guarantee. Per coordinate
    :math:`E b_i^2 = (d + 1) s^2`.

    Parameters
    ----------
    dimension : int
        ``d`` >= 1.
    scale : float
        ``s`` > 0.
    source : RandomSource or None

    Returns
    -------
    numpy.ndarray of shape (d,)

    Examples
    --------
    >>> from dpcurator.noise import InsecureSeededSource
    >>> vector_laplace(3, 2.0, InsecureSeededSource(0)).shape
    (3,)
    """
    d = check_integer(dimension, "dimension", minimum=1)
    s = check_positive(scale, "scale")
    t = 2.0**_VECTOR_BITS
    exponentials = (_geometric(t, d, source) + _centred_uniform(d, source) + 0.5) * (s / t)
    radius = float(exponentials.sum())
    sigma = 2.0**_VECTOR_BITS
    limit = sigma * (math.sqrt(d) + 10.0)
    while True:
        k = np.asarray(discrete_gaussian(sigma, d, source=source), dtype=np.float64)
        v = k + _centred_uniform(d, source)
        norm = float(np.linalg.norm(v))
        if 0.0 < norm <= limit:
            out: NDArray[np.float64] = radius * (v / norm)
            return out


@dataclass(frozen=True, slots=True)
class _ObjectivePlan:
    mu: float
    epsilon: float  # per problem: jacobian + noise
    delta: float  # per problem
    grid: float  # Gaussian staircase cell g (0 for the vector Laplace)
    scale: float  # vector Laplace scale s (real units), or discrete Gaussian sigma (grid units)
    std: float  # real units, per coordinate of b


def _gaussian_loss_bound(
    sigma: float, g: float, zeta: float, d: int, *, t_a: float, u_b: float
) -> float:
    """Privacy loss of the Gaussian staircase term on the good event (see objective docs)."""
    s = math.sqrt(sigma * sigma + g * g / 4.0)
    top = (
        4.0 * zeta * s * t_a
        + 4.0 * zeta * zeta
        + 2.0 * g * d * s * u_b
        + 2.0 * g * math.sqrt(d) * zeta
        + g * g * d / 4.0
    )
    return top / (2.0 * sigma * sigma)


def _plan_objective(
    *,
    n: int,
    d: int,
    zeta: float,
    curvature: float,
    mu: float,
    epsilon: float,
    delta: float,
    noise: Noise,
) -> _ObjectivePlan:
    lam = curvature
    # Jacobian term log(1 + lam / (n mu)) capped at half the budget (raise mu if needed).
    mu_total = max(mu, lam / (n * math.expm1(min(epsilon * JACOBIAN_SHARE, 700.0))))
    eps_jacobian = math.log1p(lam / (n * mu_total)) * (1.0 + 2.0**-40)
    eps_noise = epsilon - eps_jacobian
    if not eps_noise > 0.0:  # pragma: no cover - eps_jacobian <= epsilon / 2 (1 + 2**-40)
        raise InternalError("objective perturbation left no budget for the noise.")
    if noise == "laplace":
        # Vector Laplace: ||v||_2 <= 2 zeta, so scale 2 zeta / eps_b, eps_b net of the sampler.
        eps_b = eps_noise - vector_laplace_cost(d)
        if not eps_b > 0.0:
            raise InvalidParameterError(
                "epsilon", epsilon, "is too small for objective perturbation"
            )
        scale = 2.0 * zeta / eps_b
        return _ObjectivePlan(mu_total, epsilon, 0.0, 0.0, scale, scale * math.sqrt(d + 1.0))
    delta_a = delta * (1.0 - 2.0**-10)
    delta_b = delta * 2.0**-10
    t_a = math.sqrt(2.0 * math.log(4.0 / delta_a))
    u_b = math.sqrt(2.0 * math.log(2.0 * d / delta_b))
    # Continuous solution of 2 zeta t / sigma + 2 zeta^2 / sigma^2 = eps_noise, then the grid.
    root = (-t_a + math.sqrt(t_a * t_a + 2.0 * eps_noise)) / 2.0
    sigma = zeta / root
    g = math.ldexp(1.0, -_grid_bits(sigma, _STAIRCASE_BITS))
    while _gaussian_loss_bound(sigma, g, zeta, d, t_a=t_a, u_b=u_b) > eps_noise:
        sigma *= 1.0 + 2.0**-24
    return _ObjectivePlan(mu_total, epsilon, delta, g, sigma / g, sigma)


def _objective_noise(
    plan: _ObjectivePlan, noise: Noise, d: int, source: RandomSource | None
) -> NDArray[np.float64]:
    if noise == "laplace":
        return vector_laplace(d, plan.scale, source)
    k = np.asarray(discrete_gaussian(plan.scale, d, source=source), dtype=np.float64)
    out: NDArray[np.float64] = plan.grid * (k + _centred_uniform(d, source))
    return out


def objective_perturbation(
    X: NDArray[np.float64],
    targets: NDArray[np.float64],
    loss_for: LossFactory,
    *,
    data_norm: float,
    strong_convexity: float,
    epsilon: float,
    delta: float,
    noise: Noise,
    source: RandomSource | None,
) -> PerturbedModel:
    r"""Objective perturbation with certified approximate minimisation.

    Chaudhuri, Monteleoni and Sarwate 2011 (CMS11), Algorithm 2, for pure DP; Kifer, Smith and
    Thakurta 2012 for (epsilon, delta).

    Each of the ``K`` problems draws a random vector ``b`` and releases the minimiser of

    .. math:: J_D(\theta) + \frac1n b^\top\theta, \qquad
              J_D = \frac1n\sum_i\psi(\langle\theta, x_i\rangle, t_i) + \frac{\mu'}2\|\theta\|^2 .

    **Privacy (per problem, budget** :math:`(\epsilon_k, \delta_k)` **).** The minimiser
    :math:`\theta` determines :math:`b_D(\theta) = -\sum_i\nabla\ell_i(\theta) - n\mu'\theta`, a
    bijection, so the density of the output is :math:`\nu(b_D(\theta))\,|\det\nabla b_D(\theta)|`
    (CMS11, Theorem 9). For neighbours, :math:`v = b_{D'}(\theta) - b_D(\theta) =
    \nabla\ell_1(\theta) - \nabla\ell'_1(\theta)` has :math:`\|v\|_2 \le 2\zeta`,
    :math:`\|v\|_1 \le 2\sqrt d\zeta`, and lies in :math:`\mathrm{span}(x_1, x'_1)`. The
    Hessians of one example have rank one and eigenvalue :math:`\le \lambda = cR^2`, so by the
    matrix determinant lemma the Jacobian ratio is within :math:`1 + \lambda/(n\mu')` (a
    tightening of CMS11's :math:`(1 + c/(n\Lambda))^2`): it costs
    :math:`\epsilon_J = \ln(1 + \lambda/(n\mu'))`, where :math:`\mu' = \max(\mu, \lambda /
    (n(e^{\epsilon_k/2} - 1)))` keeps it at most :math:`\epsilon_k/2` (CMS11's rule of raising
    the regulariser, their :math:`\Delta`). The rest, :math:`\epsilon_b = \epsilon_k -
    \epsilon_J`, pays for the noise ratio :math:`\nu(b)/\nu(b + v)`.

    **The noise is continuous, built from exact samplers.** A discrete ``b`` would make the
    set of possible outputs depend on the data. Laplace: :func:`vector_laplace`. Gaussian:
    :math:`b = g(K + V)` with ``K`` exact integer noise per coordinate and ``V`` uniform on
    :math:`(-1/2, 1/2)` (to 52 bits, finer than float64 resolves ``b``), a "staircase" density
    :math:`\nu(b) \propto p(\mathrm{round}(b/g))`.

    - Laplace (pure DP): ``b`` is the L2 Laplace noise of :func:`vector_laplace` with scale
      :math:`s = 2\zeta/\epsilon'_b`: :math:`\nu(b)/\nu(b') \le e^{\|v\|_2/s} \le
      e^{\epsilon'_b}` for the exact law (CMS11, Algorithm 2), and the sampler's approximation
      adds :func:`vector_laplace_cost`, so :math:`\epsilon'_b = \epsilon_b -` that cost.
      Output: :math:`\epsilon_k`-DP.
    - Gaussian (approximate DP): ``K`` discrete Gaussian :math:`\mathcal N_{\mathbb Z}(0,
      (\sigma/g)^2)`, :math:`g \le 2^{-30}\sigma`. With :math:`k = \mathrm{round}(b/g)`,
      :math:`\ln\nu(b)/\nu(b') = g^2(\|k'\|^2 - \|k\|^2)/(2\sigma^2) \le (2|\langle b, v\rangle|
      + \|v\|^2 + 2g\|b\|_1 + g\|v\|_1 + g^2 d/4)/(2\sigma^2)`. Since :math:`v = c_1x_1 +
      c_2x'_1` with :math:`|c_j| \le \zeta/R`, :math:`|\langle b, v\rangle| \le
      (\zeta/R)(|\langle b, x_1\rangle| + |\langle b, x'_1\rangle|)`. Each coordinate of ``b``
      is sub-Gaussian with variance proxy :math:`s^2 = \sigma^2 + g^2/4` (the discrete Gaussian
      is :math:`\sigma`-sub-Gaussian, Canonne, Kamath and Steinke 2020, Corollary 9; Hoeffding
      for ``gV``), so with probability :math:`\ge 1 - \delta_k`:
      :math:`|\langle b, x\rangle| \le sR\,t_a` for both rows, :math:`t_a =
      \sqrt{2\ln(4/\delta_a)}`, and :math:`\|b\|_1 \le d s u_b`, :math:`u_b =
      \sqrt{2\ln(2d/\delta_b)}` (:math:`\delta_a = (1 - 2^{-10})\delta_k`,
      :math:`\delta_b = 2^{-10}\delta_k`). On that event the loss is at most
      :math:`(4\zeta s t_a + 4\zeta^2 + 2gdsu_b + 2g\sqrt d\zeta + g^2d/4)/(2\sigma^2)`, and
      ``sigma`` is the smallest (to a relative :math:`2^{-24}`) making it
      :math:`\le\epsilon_b`: :math:`(\epsilon_k, \delta_k)`-DP (the proof of Kifer, Smith and
      Thakurta 2012, Theorem 2, whose :math:`\beta = \zeta^2(8\ln(2/\delta) + 4\epsilon) /
      \epsilon^2` it matches to leading order, adapted to the staircase).

    **Approximate minimiser.** The solver certifies :math:`\|\hat\theta - \theta^*\| \le
    \mathrm{tol}/\mu'`. A coupling of ``b`` and ``b'`` with equal exact minimisers leaves the
    computed ones within :math:`2\mathrm{tol}/\mu'`, so adding Laplace noise for that L1
    sensitivity (:math:`K\sqrt d \cdot 2\mathrm{tol}/\mu'`) with :math:`\epsilon_s =
    2^{-8}\epsilon` makes the release :math:`(\sum_k\epsilon_k + \epsilon_s, \sum_k\delta_k)`-DP
    (Iyengar, Near, Song, Thakkar, Thakurta and Wang 2019, "Towards practical differentially
    private convex optimization", Algorithm 1 and its privacy theorem). The ``K`` problems of
    one-vs-rest split the rest of the budget evenly (basic composition).

    The losses must have a convex, twice (almost everywhere) differentiable :math:`\psi`; the
    Huber losses are :math:`C^1` with a piecewise-constant second derivative (the change of
    variables holds almost everywhere, as CMS11 note for the Huber hinge).

    Parameters
    ----------
    X : numpy.ndarray of shape (n, d)
        Rows of L2 norm at most ``data_norm``.
    targets : numpy.ndarray of shape (n, K)
        One column of labels (``+-1``) or targets per problem.
    loss_for : callable
        ``loss_for(mu_total) -> GLMLoss`` (the squared loss's threshold depends on ``mu'``).
    data_norm : float
        ``R``, the declared row bound.
    strong_convexity : float
        The requested ``mu`` > 0 (raised to ``mu'`` if needed).
    epsilon, delta : float
        The budget of the whole release (``delta`` > 0 for Gaussian noise).
    noise : {"laplace", "gaussian"}
    source : RandomSource or None

    Returns
    -------
    PerturbedModel
        ``event``: ``ComposedEvent(SelfComposedEvent(PureDPEvent(eps_k) or ApproxDPEvent(eps_k,
        delta_k), K), DiscreteLaplaceEvent)``.

    Examples
    --------
    >>> import numpy as np
    >>> from dpcurator.accounting import BasicAccountant
    >>> from dpcurator.noise import InsecureSeededSource
    >>> X = np.array([[1.0, 0.0], [0.0, 1.0]] * 100)
    >>> t = np.array([[1.0], [-1.0]] * 100)
    >>> model = objective_perturbation(X, t, lambda mu: logistic_loss(), data_norm=1.0,
    ...                                strong_convexity=0.01, epsilon=1.0, delta=0.0,
    ...                                noise="laplace", source=InsecureSeededSource(0))
    >>> BasicAccountant().compose(model.event).get_epsilon(0.0) <= 1.0
    True
    """
    n, d = X.shape
    K = targets.shape[1]
    curvature_loss = loss_for(strong_convexity)
    lam = curvature_loss.curvature * data_norm * data_norm
    eps_slack = epsilon * SLACK_FRACTION
    eps_k = (epsilon - eps_slack) / K
    delta_k = delta / K
    # mu' depends only on lambda (not on the slope), so fix it first, then the loss.
    mu_total = max(strong_convexity, lam / (n * math.expm1(min(eps_k * JACOBIAN_SHARE, 700.0))))
    loss = loss_for(mu_total)
    zeta = loss.slope_bound * data_norm
    plan = _plan_objective(
        n=n,
        d=d,
        zeta=zeta,
        curvature=lam,
        mu=mu_total,
        epsilon=eps_k,
        delta=delta_k,
        noise=noise,
    )
    tol = solver_tolerance(zeta, n)
    thetas = np.empty((K, d))
    for k in range(K):
        b = _objective_noise(plan, noise, d, source)
        thetas[k] = solve_erm(X, targets[:, k], loss, plan.mu, linear=b, tol=tol)
    slack = laplace_mechanism(
        thetas.reshape(-1),
        epsilon=eps_slack,
        sensitivity=K * math.sqrt(d) * 2.0 * tol / plan.mu,
        source=source,
    )
    per_problem: PrivacyEvent = (
        PureDPEvent(epsilon=plan.epsilon)
        if noise == "laplace"
        else ApproxDPEvent(epsilon=plan.epsilon, delta=plan.delta)
    )
    stacked = per_problem if K == 1 else SelfComposedEvent(per_problem, K)
    event = ComposedEvent((stacked, slack.event))
    coef = np.asarray(slack.value, dtype=np.float64).reshape(K, d)
    return PerturbedModel(coef, event, plan.mu, plan.std)
