r"""Objective perturbation (Chaudhuri, Monteleoni and Sarwate 2011; Kifer, Smith and Thakurta 2012).

Noise enters the objective, not the output: the released minimiser of
:math:`J_D(\theta) + b^\top\theta/n` is private because ``b`` is, and the curvature of the loss
damps the noise in the directions the data determine well. See
:func:`objective_perturbation` for the guarantee and its proof.

Examples
--------
>>> import numpy as np
>>> from dpcurator.learn._losses import multinomial_loss
>>> from dpcurator.noise import InsecureSeededSource
>>> X = np.array([[1.0, 0.0], [0.0, 1.0], [-0.7, -0.7]] * 200)
>>> Y = np.eye(3)[[0, 1, 2] * 200]
>>> model = objective_perturbation(X, Y, lambda mu: multinomial_loss(3), data_norm=1.0,
...                                strong_convexity=0.01, epsilon=2.0, delta=0.0,
...                                noise="laplace", source=InsecureSeededSource(0))
>>> model.coef.shape  # one K x d problem, one budget
(3, 2)
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from dpcurator.accounting import (
    ApproxDPEvent,
    ComposedEvent,
    PrivacyEvent,
    PureDPEvent,
    SelfComposedEvent,
)
from dpcurator.errors import InternalError, InvalidParameterError
from dpcurator.learn._erm_noise import (
    COUNT_SHARE,
    Neighbours,
    Noise,
    changed_examples,
    row_count,
    staircase_gaussian,
    vector_laplace,
    vector_laplace_cost,
)
from dpcurator.learn._losses import ERMLoss
from dpcurator.learn._solver import PerturbedModel, solve_erm, solver_tolerance
from dpcurator.mechanisms import laplace_mechanism
from dpcurator.noise import RandomSource, grid_exponent

__all__ = ["JACOBIAN_SHARE", "SLACK_FRACTION", "LossFactory", "objective_perturbation"]

LossFactory = Callable[[float], ERMLoss]
"""``loss_for(mu_total) -> ERMLoss``: a loss whose threshold may depend on the final ``mu``."""

SLACK_FRACTION = 2.0**-8
"""Share of epsilon that objective perturbation spends on the noise covering the solver slack."""

JACOBIAN_SHARE = 0.5
"""At most this share of a problem's epsilon pays for the Jacobian (the regulariser is raised
otherwise), as in Chaudhuri, Monteleoni and Sarwate (2011) and Kifer, Smith and Thakurta (2012)."""

_STAIRCASE_BITS = 30
"""The Gaussian staircase grid of objective perturbation is ``2**30`` times finer than sigma."""


@dataclass(frozen=True, slots=True)
class ObjectivePlan:
    """The noise of one problem, planned from public parameters only.

    Attributes
    ----------
    mu : float
        The regulariser used, raised so that the Jacobian costs at most half the budget.
    epsilon, delta : float
        The problem's budget (Jacobian and noise).
    grid : float
        The Gaussian staircase cell ``g`` (0 for the vector Laplace).
    scale : float
        The vector Laplace scale (real units), or the discrete Gaussian's sigma in cells.
    std : float
        Standard deviation of one coordinate of ``b`` (real units).
    """

    mu: float
    epsilon: float
    delta: float
    grid: float
    scale: float
    std: float

    def draw(self, size: int, source: RandomSource | None) -> NDArray[np.float64]:
        """Draw the vector ``b`` of ``size`` coordinates."""
        if self.grid == 0.0:
            return vector_laplace(size, self.scale, source)
        return staircase_gaussian(self.grid, self.scale, size, source)


def gaussian_loss_bound(
    sigma: float,
    g: float,
    *,
    zeta: float,
    cross: float,
    size: int,
    t_a: float,
    u_b: float,
    changed: int = 2,
) -> float:
    """Privacy loss of the Gaussian staircase term on the good event (see the proof below).

    ``(2 k cross s t_a + k^2 zeta^2 + 2 g D s u_b + k g sqrt(D) zeta + g^2 D / 4) / (2 sigma^2)``
    with ``s = sqrt(sigma^2 + g^2/4)``, ``cross = w R``, ``D = size`` and ``k = changed`` the
    number of examples' gradients in which neighbours differ (2 replace-one, 1 add/remove).

    Examples
    --------
    >>> gaussian_loss_bound(10.0, 0.0, zeta=1.0, cross=1.0, size=5, t_a=5.0, u_b=6.0)
    1.02
    """
    s = math.sqrt(sigma * sigma + g * g / 4.0)
    top = (
        2.0 * changed * cross * s * t_a
        + (changed * zeta) ** 2
        + 2.0 * g * size * s * u_b
        + changed * g * math.sqrt(size) * zeta
        + g * g * size / 4.0
    )
    return top / (2.0 * sigma * sigma)


def plan_objective(
    loss: ERMLoss,
    *,
    n: float,
    size: int,
    radius: float,
    mu: float,
    epsilon: float,
    delta: float,
    noise: Noise,
    neighbours: Neighbours = "replace_one",
) -> ObjectivePlan:
    """Plan the noise of one problem of ``size`` parameters with budget ``(epsilon, delta)``.

    ``n`` is the public row count (:func:`~dpcurator.learn._erm_noise.row_count`); the noise
    covers a change of :func:`~dpcurator.learn._erm_noise.changed_examples` gradients.

    Examples
    --------
    >>> from dpcurator.learn._losses import logistic_loss
    >>> plan = plan_objective(logistic_loss(), n=1000, size=10, radius=1.0, mu=0.01,
    ...                       epsilon=1.0, delta=0.0, noise="laplace")
    >>> plan.mu == 0.01, round(plan.scale, 3)  # 2 zeta / (epsilon - ln(1 + 0.025))
    (True, 2.051)
    """
    mu_total = max(mu, loss.regulariser_for(radius, n, epsilon * JACOBIAN_SHARE))
    eps_jacobian = loss.jacobian_cost(radius, n, mu_total) * (1.0 + 2.0**-40)
    eps_noise = epsilon - eps_jacobian
    if not eps_noise > 0.0:  # pragma: no cover - eps_jacobian <= epsilon / 2 (1 + 2**-40)
        raise InternalError("objective perturbation left no budget for the noise.")
    changed = changed_examples(neighbours)
    zeta = loss.slope_bound * radius
    if noise == "laplace":
        # Vector Laplace: ||v||_2 <= k zeta, so scale k zeta / eps_b, eps_b net of the sampler.
        eps_b = eps_noise - vector_laplace_cost(size)
        if not eps_b > 0.0:
            raise InvalidParameterError(
                "epsilon", epsilon, "is too small for objective perturbation"
            )
        scale = changed * zeta / eps_b
        return ObjectivePlan(mu_total, epsilon, 0.0, 0.0, scale, scale * math.sqrt(size + 1.0))
    cross = loss.cross_weight * radius
    delta_a = delta * (1.0 - 2.0**-10)
    delta_b = delta * 2.0**-10
    t_a = math.sqrt(2.0 * math.log(2.0 * changed * loss.example_inner_products / delta_a))
    u_b = math.sqrt(2.0 * math.log(2.0 * size / delta_b))
    # Continuous solution of k cross t_a / sigma + (k zeta)^2 / (2 sigma^2) = eps_noise (the
    # bound below without its grid terms), then the grid.
    a, c = changed * cross * t_a, (changed * zeta) ** 2 / 2.0
    sigma = 2.0 * c / (-a + math.sqrt(a * a + 4.0 * c * eps_noise))
    g = math.ldexp(1.0, -grid_exponent(sigma, _STAIRCASE_BITS))
    while (
        gaussian_loss_bound(
            sigma, g, zeta=zeta, cross=cross, size=size, t_a=t_a, u_b=u_b, changed=changed
        )
        > eps_noise
    ):
        sigma *= 1.0 + 2.0**-24
    return ObjectivePlan(mu_total, epsilon, delta, g, sigma / g, sigma)


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
    neighbours: Neighbours = "replace_one",
) -> PerturbedModel:
    r"""Objective perturbation with certified approximate minimisation.

    Chaudhuri, Monteleoni and Sarwate 2011 (CMS11), Algorithm 2, for pure DP; Kifer, Smith and
    Thakurta 2012 for (epsilon, delta).

    Each of the ``P`` problems (the ``K`` one-vs-rest columns of a :class:`GLMLoss`, or the one
    ``K x d`` problem of a :class:`MultinomialLoss`) draws a random vector ``b`` of its
    parameter's length ``D`` and releases the minimiser of

    .. math:: J_D(\theta) + \frac1n b^\top\theta, \qquad
              J_D = \frac1n\sum_i\ell(\theta; x_i, t_i) + \frac{\mu'}2\|\theta\|^2 .

    **Neighbours.** ``neighbours="replace_one"`` (default): one row replaced, ``n`` public
    (CMS11's relation). ``neighbours="add_remove"``: one row added or removed; ``n`` is then
    private, so a count :math:`\tilde n` is released first with the geometric mechanism
    (:func:`~dpcurator.learn._erm_noise.row_count`, :math:`\epsilon_c = \epsilon/8`,
    :data:`~dpcurator.learn._erm_noise.COUNT_SHARE`) and every ``n`` below is :math:`\tilde n`
    (public from then on): the objective is the summed one, :math:`\sum_i\ell_i +
    \frac{\mu'\tilde n}2\|\theta\|^2 + b^\top\theta`, divided by :math:`\tilde n`. With
    :math:`\kappa` the number of examples' gradients that neighbours change (2 or 1,
    :func:`~dpcurator.learn._erm_noise.changed_examples`), the noise below covers
    :math:`\kappa` of them; the count composes with the rest (adaptive composition).

    **Privacy (per problem, budget** :math:`(\epsilon_k, \delta_k)` **).** The minimiser
    :math:`\theta` determines :math:`b_D(\theta) = -\sum_i\nabla\ell_i(\theta) - n\mu'\theta`, a
    bijection, so the density of the output is :math:`\nu(b_D(\theta))\,|\det\nabla b_D(\theta)|`
    (CMS11, Theorem 9). For neighbours, :math:`v = b_{D'}(\theta) - b_D(\theta)` is
    :math:`\nabla\ell_1(\theta) - \nabla\ell'_1(\theta)` (replace-one) or
    :math:`\pm\nabla\ell_1(\theta)` (add/remove): :math:`\|v\|_2 \le \kappa\zeta`,
    :math:`\|v\|_1 \le \kappa\sqrt D\zeta`. The Jacobian ratio of neighbours is at most
    :math:`\det(A + H_1)/\det(A) \le \prod_j(1 + \lambda_j(H_1)/(n\mu'))` with
    :math:`A \succeq n\mu' I` (the other examples and the regulariser) and :math:`H_1` one
    example's Hessian; its logarithm is the loss's
    :meth:`~dpcurator.learn._losses.GLMLoss.jacobian_cost` :math:`\epsilon_J`: :math:`\ln(1 +
    cR^2/(n\mu'))` for a rank-one GLM Hessian (a tightening of CMS11's :math:`(1 +
    c/(n\Lambda))^2`), :math:`(K - 1)\ln(1 + R^2/(Kn\mu'))` for the multinomial loss (see
    :class:`~dpcurator.learn._losses.MultinomialLoss`). The regulariser is raised to
    :math:`\mu' = \max(\mu, \mu_J)`, :math:`\mu_J` the smallest value with :math:`\epsilon_J
    \le \epsilon_k/2` (CMS11's rule of raising the regulariser, their :math:`\Delta`). The
    rest, :math:`\epsilon_b = \epsilon_k - \epsilon_J`, pays for the noise ratio
    :math:`\nu(b)/\nu(b + v)`.

    **The noise is continuous, built from exact samplers.** A discrete ``b`` would make the
    set of possible outputs depend on the data. Laplace:
    :func:`~dpcurator.learn._erm_noise.vector_laplace`. Gaussian:
    :math:`b = g(K + V)` with ``K`` exact integer noise per coordinate and ``V`` uniform on
    :math:`(-1/2, 1/2)` (to 52 bits, finer than float64 resolves ``b``), a "staircase" density
    :math:`\nu(b) \propto p(\mathrm{round}(b/g))`.

    - Laplace (pure DP): ``b`` is the L2 Laplace noise of
      :func:`~dpcurator.learn._erm_noise.vector_laplace` with scale
      :math:`s = \kappa\zeta/\epsilon'_b`: :math:`\nu(b)/\nu(b') \le e^{\|v\|_2/s} \le
      e^{\epsilon'_b}` for the exact law (CMS11, Algorithm 2), and the sampler's approximation
      adds :func:`~dpcurator.learn._erm_noise.vector_laplace_cost`, so :math:`\epsilon'_b =
      \epsilon_b -` that cost.
      Output: :math:`\epsilon_k`-DP.
    - Gaussian (approximate DP): ``D`` discrete Gaussian :math:`\mathcal N_{\mathbb Z}(0,
      (\sigma/g)^2)`, :math:`g \le 2^{-30}\sigma`. With :math:`k = \mathrm{round}(b/g)`,
      :math:`\ln\nu(b)/\nu(b') = g^2(\|k'\|^2 - \|k\|^2)/(2\sigma^2) \le (2|\langle b, v\rangle|
      + \|v\|^2 + 2g\|b\|_1 + g\|v\|_1 + g^2 D/4)/(2\sigma^2)`. The loss bounds the cross
      term of each changed example by ``m`` inner products of ``b`` with its row (its
      ``example_inner_products``) and a weight ``w`` (its ``cross_weight``): for a GLM, one
      example's gradient is :math:`cx` with :math:`|c| \le G`, so :math:`|\langle b, cx\rangle|
      \le G|\langle b, x\rangle|` (``m = 1``); for the multinomial loss, :math:`|\langle b,
      (p - e_y)x^\top\rangle| \le 2\max_k|\langle b_k, x\rangle|` (``m = K``); so
      :math:`|\langle b, v\rangle|` is at most :math:`\kappa w` times the largest of
      :math:`\kappa m` inner products. Each coordinate of ``b``
      is sub-Gaussian with variance proxy :math:`s^2 = \sigma^2 + g^2/4` (the discrete Gaussian
      is :math:`\sigma`-sub-Gaussian, Canonne, Kamath and Steinke 2020, Corollary 9; Hoeffding
      for ``gV``), so with probability :math:`\ge 1 - \delta_k`:
      :math:`|\langle b, x\rangle| \le sR\,t_a` for all :math:`\kappa m` inner products,
      :math:`t_a = \sqrt{2\ln(2\kappa m/\delta_a)}`, and :math:`\|b\|_1 \le D s u_b`, :math:`u_b =
      \sqrt{2\ln(2D/\delta_b)}` (:math:`\delta_a = (1 - 2^{-10})\delta_k`,
      :math:`\delta_b = 2^{-10}\delta_k`). On that event the loss is at most
      :math:`(2\kappa wRst_a + \kappa^2\zeta^2 + 2gDsu_b + \kappa g\sqrt D\zeta +
      g^2D/4)/(2\sigma^2)` (:func:`gaussian_loss_bound`), and
      ``sigma`` is the smallest (to a relative :math:`2^{-24}`) making it
      :math:`\le\epsilon_b`: :math:`(\epsilon_k, \delta_k)`-DP (the proof of Kifer, Smith and
      Thakurta 2012, Theorem 2, whose :math:`\beta = \zeta^2(8\ln(2/\delta) + 4\epsilon) /
      \epsilon^2` it matches to leading order, adapted to the staircase).

    **Approximate minimiser.** The solver certifies :math:`\|\hat\theta - \theta^*\| \le
    \mathrm{tol}/\mu'`. A coupling of ``b`` and ``b'`` with equal exact minimisers leaves the
    computed ones within :math:`2\mathrm{tol}/\mu'`, so adding Laplace noise for that L1
    sensitivity (:math:`P\sqrt D \cdot 2\mathrm{tol}/\mu'`) with :math:`\epsilon_s =
    2^{-8}(\epsilon - \epsilon_c)` makes the release :math:`(\epsilon_c + \sum_k\epsilon_k +
    \epsilon_s, \sum_k\delta_k)`-DP, :math:`\epsilon_c = 0` under replace-one (Iyengar, Near,
    Song, Thakkar, Thakurta and Wang 2019, "Towards practical differentially private convex
    optimization", Algorithm 1 and its privacy theorem). The ``P`` problems
    split the rest of the budget evenly (basic composition): one-vs-rest pays ``K`` times,
    the multinomial model once.

    The losses must have a convex, twice (almost everywhere) differentiable :math:`\psi`; the
    Huber losses are :math:`C^1` with a piecewise-constant second derivative (the change of
    variables holds almost everywhere, as CMS11 note for the Huber hinge).

    Parameters
    ----------
    X : numpy.ndarray of shape (n, d)
        Rows of L2 norm at most ``data_norm``.
    targets : numpy.ndarray of shape (n, K)
        One column of labels (``+-1``) or targets per problem, or one-hot rows (multinomial).
    loss_for : callable
        ``loss_for(mu_total) -> ERMLoss`` (the squared loss's threshold depends on ``mu'``);
        its curvature (hence the Jacobian cost) must not depend on ``mu``.
    data_norm : float
        ``R``, the declared row bound.
    strong_convexity : float
        The requested ``mu`` > 0 (raised to ``mu'`` if needed).
    epsilon, delta : float
        The budget of the whole release (``delta`` > 0 for Gaussian noise).
    noise : {"laplace", "gaussian"}
    source : RandomSource or None
    neighbours : {"replace_one", "add_remove"}, default "replace_one"

    Returns
    -------
    PerturbedModel
        ``event``: ``ComposedEvent(SelfComposedEvent(PureDPEvent(eps_k) or ApproxDPEvent(eps_k,
        delta_k), P), DiscreteLaplaceEvent)``, preceded by the count's ``DiscreteLaplaceEvent``
        under add/remove.

    Examples
    --------
    >>> import numpy as np
    >>> from dpcurator.accounting import BasicAccountant
    >>> from dpcurator.learn._losses import logistic_loss
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
    problems = loss_for(strong_convexity).problems(targets)
    parts = len(problems)
    eps_count = epsilon * COUNT_SHARE if neighbours == "add_remove" else 0.0
    rows = row_count(n, neighbours, epsilon=eps_count, source=source)
    eps_slack = (epsilon - eps_count) * SLACK_FRACTION
    eps_k = (epsilon - eps_count - eps_slack) / parts
    delta_k = delta / parts
    # mu' depends only on the curvature (not on the slope), so fix it first, then the loss.
    mu_total = max(
        strong_convexity,
        loss_for(strong_convexity).regulariser_for(data_norm, rows.value, eps_k * JACOBIAN_SHARE),
    )
    loss = loss_for(mu_total)
    size = loss.parameter_count(d)
    plan = plan_objective(
        loss,
        n=rows.value,
        size=size,
        radius=data_norm,
        mu=mu_total,
        epsilon=eps_k,
        delta=delta_k,
        noise=noise,
        neighbours=neighbours,
    )
    tol = solver_tolerance(loss.slope_bound * data_norm, rows.value)
    thetas = np.concatenate(
        [
            solve_erm(
                X, t, loss, plan.mu, linear=plan.draw(size, source), normaliser=rows.value, tol=tol
            )
            for t in problems
        ]
    )
    slack = laplace_mechanism(
        thetas,
        epsilon=eps_slack,
        sensitivity=parts * math.sqrt(size) * 2.0 * tol / plan.mu,
        source=source,
    )
    per_problem: PrivacyEvent = (
        PureDPEvent(epsilon=plan.epsilon)
        if noise == "laplace"
        else ApproxDPEvent(epsilon=plan.epsilon, delta=plan.delta)
    )
    stacked = per_problem if parts == 1 else SelfComposedEvent(per_problem, parts)
    event = rows.with_release(ComposedEvent((stacked, slack.event)))
    coef = np.asarray(slack.value, dtype=np.float64).reshape(-1, d)
    return PerturbedModel(coef, event, plan.mu, plan.std)
