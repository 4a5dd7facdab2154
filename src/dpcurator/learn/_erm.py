r"""Regularised convex ERM and its private release: the sensitivity lemma, output perturbation.

The problem (lecture 002, "DP optimization via output perturbation"), for a loss
:math:`\ell(\theta; x, t)` that is convex, smooth and :math:`\zeta`-Lipschitz in
:math:`\theta` on rows :math:`\|x\|_2 \le R` (:mod:`dpcurator.learn._losses`: generalised linear
losses with :math:`\zeta = GR`, the multinomial loss with :math:`\zeta = \sqrt2 R`):

.. math:: \theta^*(D) = \arg\min_\theta\ J_D(\theta) = \frac1n \sum_{i=1}^n
          \ell(\theta; x_i, t_i) + \frac{\mu}{2}\|\theta\|_2^2 .

Neighbours: replace one row (``n`` is public; the default), the relation of the lecture's
sensitivity lemma and of Chaudhuri, Monteleoni and Sarwate (2011), or add/remove one row (the
relation of DP-SGD), under which ``n`` is private and is replaced by a released count
(:func:`~dpcurator.learn._erm_noise.row_count`). The three private releases of the minimiser:

- output perturbation (:func:`output_perturbation`, here), noise on :math:`\hat\theta`;
- objective perturbation (:func:`~dpcurator.learn._objective.objective_perturbation`), noise
  in the objective;
- gradient perturbation (:func:`~dpcurator.learn._gradient.gradient_perturbation`), noisy
  full-batch gradient descent.

Noise comes only from :mod:`dpcurator.mechanisms` and from the exact samplers of
:mod:`dpcurator.noise` (through :mod:`dpcurator.learn._erm_noise`).

Examples
--------
>>> erm_sensitivity(lipschitz=1.0, strong_convexity=0.1, n=1000)
0.02
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import NDArray

from dpcurator._validation import check_delta, check_epsilon, check_integer, check_positive
from dpcurator.accounting import PureDPEvent, zcdp_rho_for, zcdp_to_epsilon
from dpcurator.errors import InvalidParameterError
from dpcurator.learn._erm_noise import (
    COUNT_SHARE,
    Neighbours,
    Noise,
    changed_examples,
    row_count,
    vector_laplace,
    vector_laplace_cost,
)
from dpcurator.learn._losses import (
    ERMLoss,
    GLMLoss,
    MultinomialLoss,
    huber_hinge_loss,
    logistic_loss,
    multinomial_loss,
    squared_loss,
)
from dpcurator.learn._objective import objective_perturbation
from dpcurator.learn._solver import PerturbedModel, solve_erm, solver_tolerance
from dpcurator.mechanisms import gaussian_mechanism
from dpcurator.noise import RandomSource, from_grid, grid_exponent, to_grid

__all__ = [
    "ERMLoss",
    "GLMLoss",
    "MultinomialLoss",
    "Neighbours",
    "Noise",
    "PerturbedModel",
    "erm_sensitivity",
    "excess_risk_bound",
    "huber_hinge_loss",
    "logistic_loss",
    "multinomial_loss",
    "objective_perturbation",
    "output_perturbation",
    "solve_erm",
    "solver_tolerance",
    "squared_loss",
]


def erm_sensitivity(
    lipschitz: float,
    strong_convexity: float,
    n: float,
    *,
    neighbours: Neighbours = "replace_one",
) -> float:
    r"""L2 sensitivity of the regularised minimiser: :math:`2L/(\mu n)`, or :math:`L/(\mu n)`.

    Lecture 002, "Output perturbation: sensitivity lemma": if :math:`\ell(\cdot, x)` is convex
    and ``L``-Lipschitz and the regulariser is ``mu``-strongly convex, minimisers of
    :math:`\sum_i\ell(\theta; x_i) + \frac{\mu n}2\|\theta\|^2` on datasets that differ in
    one replaced row satisfy :math:`\|w^* - w^{*\prime}\|_2 \le 2L/(\mu n)` (also Chaudhuri,
    Monteleoni and Sarwate 2011, Corollary 8). With one row added or removed and the same
    regulariser :math:`\Lambda = \mu n` (``n`` a public count), the objectives differ by one
    term, not two: with ``G`` the objective without the extra row and :math:`G + \ell_x` the
    other, :math:`\Lambda`-strong convexity of ``G`` gives :math:`\Lambda\|w^{*\prime} -
    w^*\|^2 \le \langle\nabla G(w^{*\prime}) - \nabla G(w^*), w^{*\prime} - w^*\rangle =
    -\langle\nabla\ell_x(w^{*\prime}), w^{*\prime} - w^*\rangle \le L\|w^{*\prime} - w^*\|`,
    whence :math:`L/(\mu n)`. Both bounds are tight.

    Parameters
    ----------
    lipschitz : float
        ``L`` > 0.
    strong_convexity : float
        ``mu`` > 0.
    n : float
        The (public) number of rows, >= 1.
    neighbours : {"replace_one", "add_remove"}, default "replace_one"

    Returns
    -------
    float

    Examples
    --------
    >>> erm_sensitivity(2.0, 0.5, 100)
    0.08
    >>> erm_sensitivity(2.0, 0.5, 100, neighbours="add_remove")
    0.04
    """
    lip = check_positive(lipschitz, "lipschitz")
    mu = check_positive(strong_convexity, "strong_convexity")
    count = check_positive(n, "n")
    if count < 1.0:
        raise InvalidParameterError("n", n, "must be >= 1")
    return changed_examples(neighbours) * lip / (mu * count)


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


def _count_split(
    epsilon: float, delta: float, noise: Noise, neighbours: Neighbours
) -> tuple[float, float]:
    """``(epsilon of the row count, epsilon of the release)`` of output perturbation.

    Laplace noise: basic composition, the count takes ``COUNT_SHARE`` of epsilon. Gaussian
    noise, whose vector release is proven through zCDP only: the split is of
    ``rho = zcdp_rho_for(epsilon, delta)``; the count (pure ``e``-DP, hence ``e^2/2``-zCDP,
    Bun and Steinke 2016, Proposition 1.4) takes ``COUNT_SHARE`` of it and the release is
    calibrated to the epsilon of the rest, so the zCDP accountant certifies the composition.
    """
    if neighbours == "replace_one":
        return 0.0, epsilon
    if noise == "laplace":
        return epsilon * COUNT_SHARE, epsilon * (1.0 - COUNT_SHARE)
    rho = zcdp_rho_for(epsilon, delta)
    return math.sqrt(2.0 * rho * COUNT_SHARE), zcdp_to_epsilon(rho * (1.0 - COUNT_SHARE), delta)


def output_perturbation(
    X: NDArray[np.float64],
    targets: NDArray[np.float64],
    loss: ERMLoss,
    *,
    data_norm: float,
    strong_convexity: float,
    epsilon: float,
    delta: float,
    noise: Noise,
    source: RandomSource | None,
    neighbours: Neighbours = "replace_one",
) -> PerturbedModel:
    r"""Output perturbation (lecture 002; Chaudhuri, Monteleoni and Sarwate 2011, Algorithm 1).

    Solve each problem (each column of ``targets`` for a :class:`GLMLoss`, all of them at
    once for a :class:`MultinomialLoss`) to the certified tolerance, then release
    :math:`\hat\theta + Z`. L2 sensitivity per problem:

    .. math:: \Delta_2 = \frac{\kappa\zeta}{\mu n} + \frac{2\,\mathrm{tol}}{\mu},
              \qquad \zeta = G R,

    (the lemma, :func:`erm_sensitivity`, plus the solver slack; ``G = sqrt(2)`` for the
    multinomial loss, whose parameter is the whole ``K x d`` matrix), with :math:`\kappa = 2`
    for replace-one neighbours (``n`` public, the default) and :math:`\kappa = 1` for
    add/remove, where ``n`` is a count released first with the geometric mechanism at
    :math:`\epsilon_c = \epsilon/8` (Laplace noise; with Gaussian noise an eighth of the zCDP
    budget, ``_count_split``) (:func:`~dpcurator.learn._erm_noise.row_count`; the
    regulariser of the summed objective is :math:`\mu\tilde n` and the release composes the
    count with the rest). The ``P`` problems see the same rows, so the stacked vector of ``D``
    coordinates has L2 sensitivity :math:`\sqrt P\,\Delta_2`.

    - ``noise="gaussian"``: :func:`~dpcurator.mechanisms.gaussian_mechanism` on the stacked
      vector, (epsilon, delta)-DP (discrete Gaussian on a public grid, calibrated through zCDP).
    - ``noise="laplace"``: pure epsilon-DP with the lecture's (and CMS11's) L2 Laplace noise,
      density :math:`\propto e^{-\epsilon_b\|z\|_2/(\sqrt P\Delta_2)}` (a Gamma norm and a
      uniform direction, :func:`~dpcurator.learn._erm_noise.vector_laplace`, built from the
      exact samplers; its approximation costs
      :func:`~dpcurator.learn._erm_noise.vector_laplace_cost`, so :math:`\epsilon_b = \epsilon
      - \epsilon_c -` that cost). The result is rounded to a public grid :math:`2^{-20}` times
      finer than the noise scale (post-processing), so its set of possible values does not
      depend on the data. Per-coordinate discrete Laplace with an L1 bound would be exact too
      but has about twice the variance per coordinate.

    Parameters
    ----------
    X : numpy.ndarray of shape (n, d)
        Rows of L2 norm at most ``data_norm`` (clip them first: :func:`clip_rows`).
    targets : numpy.ndarray of shape (n, K)
        One column of labels (``+-1``) or targets per problem, or one-hot rows (multinomial).
    loss : GLMLoss or MultinomialLoss
    data_norm : float
        ``R``, the declared row bound.
    strong_convexity : float
        ``mu`` > 0.
    epsilon, delta : float
        The budget of the whole release (``delta`` is used by Gaussian noise only).
    noise : {"laplace", "gaussian"}
    source : RandomSource or None
    neighbours : {"replace_one", "add_remove"}, default "replace_one"

    Returns
    -------
    PerturbedModel
        ``event``: :class:`~dpcurator.accounting.PureDPEvent` (Laplace) or the Gaussian
        mechanism's :class:`~dpcurator.accounting.DiscreteGaussianEvent`, preceded by the
        count's :class:`~dpcurator.accounting.DiscreteLaplaceEvent` under add/remove.

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
    mu = strong_convexity
    zeta = loss.slope_bound * data_norm
    eps_count, eps_release = _count_split(epsilon, delta, noise, neighbours)
    rows = row_count(n, neighbours, epsilon=eps_count, source=source)
    tol = solver_tolerance(zeta, rows.value)
    problems = loss.problems(targets)
    thetas = np.concatenate(
        [solve_erm(X, t, loss, mu, normaliser=rows.value, tol=tol) for t in problems]
    )
    lemma = erm_sensitivity(zeta, mu, rows.value, neighbours=neighbours)
    stacked_sensitivity = math.sqrt(len(problems)) * (lemma + 2.0 * tol / mu)
    if noise == "laplace":
        eps_b = eps_release - vector_laplace_cost(thetas.size)
        if not eps_b > 0.0:
            raise InvalidParameterError("epsilon", epsilon, "is too small for output perturbation")
        scale = stacked_sensitivity / eps_b
        noisy = thetas + vector_laplace(thetas.size, scale, source)
        bits = grid_exponent(scale, 20)  # a public grid 2**20 times finer than the noise
        released = np.asarray(from_grid(to_grid(noisy, bits), bits), dtype=np.float64)
        std = scale * math.sqrt(thetas.size + 1.0)
        event = rows.with_release(PureDPEvent(epsilon=eps_release))
        return PerturbedModel(released.reshape(-1, d), event, mu, std)
    release = gaussian_mechanism(
        thetas, epsilon=eps_release, delta=delta, sensitivity=stacked_sensitivity, source=source
    )
    coef = np.asarray(release.value, dtype=np.float64).reshape(-1, d)
    std = release.error.std if release.error is not None else 0.0
    return PerturbedModel(coef, rows.with_release(release.event), mu, float(std))
