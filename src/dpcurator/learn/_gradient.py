r"""Gradient perturbation: noisy full-batch gradient descent on the regularised empirical risk.

The third way to release a private ERM minimiser, next to output and objective perturbation
(:mod:`dpcurator.learn._erm`, :mod:`dpcurator.learn._objective`): instead of one large noise on
the answer, ``T`` small Gaussian noises on the gradients, accounted tightly (Bassily, Smith and
Thakurta 2014, Algorithm 1, full-batch; the Gaussian composition of Dong, Roth and Su 2019).
It needs no strong convexity for privacy, and its noise grows like :math:`\sqrt D` (the number
of parameters) instead of ``D``, which pays off for models with many parameters (the
multinomial model of ten classes) and for approximate DP.

Examples
--------
>>> import numpy as np
>>> from dpcurator.accounting import PLDAccountant
>>> from dpcurator.learn._losses import logistic_loss
>>> from dpcurator.noise import InsecureSeededSource
>>> X = np.array([[1.0, 0.0], [0.0, 1.0]] * 200)
>>> t = np.array([[1.0], [-1.0]] * 200)
>>> model = gradient_perturbation(X, t, logistic_loss(), data_norm=1.0, strong_convexity=0.01,
...                               epsilon=1.0, delta=1e-5, steps=20,
...                               source=InsecureSeededSource(0))
>>> bool(model.coef[0, 0] > 0 > model.coef[0, 1])
True
>>> PLDAccountant().compose(model.event).get_epsilon(1e-5) <= 1.0
True
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import NDArray

from dpcurator._validation import check_integer, check_positive
from dpcurator.accounting import (
    ComposedEvent,
    GaussianEvent,
    PrivacyEvent,
    SelfComposedEvent,
    gaussian_sigma_analytic,
)
from dpcurator.errors import InvalidParameterError
from dpcurator.learn._bounds import clip_rows
from dpcurator.learn._erm_noise import Neighbours, changed_examples
from dpcurator.learn._losses import ERMLoss
from dpcurator.learn._solver import PerturbedModel
from dpcurator.mechanisms import discrete_gaussian_mechanism
from dpcurator.noise import RandomSource, grid_exponent

__all__ = [
    "GRADIENT_COUNT_SHARE",
    "GRADIENT_GRID_BITS",
    "gradient_grid_sensitivity",
    "gradient_perturbation",
]

GRADIENT_GRID_BITS = 16
"""The gradient grid ``2**-k`` makes ``zeta 2**k >= 2**16 sqrt(D)``: rounding each example's
gradient raises the sensitivity by a relative ``2**-17`` at most."""

GRADIENT_COUNT_SHARE = 1.0 / 32.0
"""Under add/remove neighbours, the share of the Gaussian-DP budget ``mu**2`` spent on the
row count that normalises the gradient sums (the ``T`` steps get the rest)."""

_MAX_SIGMA_UNITS = 2.0**38
"""Largest noise parameter (grid units) of the discrete Gaussian mechanism."""


def gradient_grid_sensitivity(
    gradient_bound: float, size: int, bits: int, *, neighbours: Neighbours = "replace_one"
) -> float:
    r"""L2 sensitivity, in grid units, of a sum of rounded per-example gradients.

    Each gradient is clipped to norm :math:`\zeta` (computed norm; the true one is within a
    relative :math:`\eta = (D + 64)2^{-52}`), scaled by :math:`2^k` (exact) and rounded per
    coordinate (a move of at most :math:`\sqrt D/2`): one example's row has norm at most
    :math:`2^k\zeta(1 + \eta) + \sqrt D/2`. Replacing a row moves the sum by twice that,
    adding or removing one by once that
    (:func:`~dpcurator.learn._erm_noise.changed_examples`).

    Parameters
    ----------
    gradient_bound : float
        ``zeta``, the clipping norm.
    size : int
        ``D``, the number of coordinates.
    bits : int
        The grid exponent ``k``.
    neighbours : {"replace_one", "add_remove"}, default "replace_one"

    Returns
    -------
    float

    Examples
    --------
    >>> round(gradient_grid_sensitivity(1.0, 4, 16), 3)  # 2 (2**16 (1 + eta) + 1)
    131074.0
    >>> round(gradient_grid_sensitivity(1.0, 4, 16, neighbours="add_remove"), 3)
    65537.0
    """
    eta = (size + 64) * 2.0**-52
    row = math.ldexp(gradient_bound, bits) * (1.0 + eta) + math.sqrt(size) / 2.0
    changed = changed_examples(neighbours)
    return math.nextafter(changed * row * (1.0 + 2.0**-50), math.inf)


def _noisy_gradient_sum(
    gradients: NDArray[np.float64],
    *,
    clip: float,
    bits: int,
    sigma: float,
    sensitivity: float,
    source: RandomSource | None,
) -> NDArray[np.float64]:
    """Clip, round to the grid, sum exactly in integers, add discrete Gaussian noise."""
    rows = np.rint(np.ldexp(clip_rows(gradients, clip), bits)).astype(np.int64)
    release = discrete_gaussian_mechanism(
        rows.sum(axis=0), sigma=sigma, sensitivity=sensitivity, source=source
    )
    out: NDArray[np.float64] = np.ldexp(np.asarray(release.value, dtype=np.float64), -bits)
    return out


def _calibrate(
    epsilon: float, delta: float, compositions: int, neighbours: Neighbours
) -> tuple[float, float | None]:
    """Noise multipliers ``(z, z_count)`` that make the run (epsilon, delta)-DP (see below)."""
    z_total = gaussian_sigma_analytic(epsilon * (1.0 - 2.0**-20), delta)  # = 1 / mu
    if neighbours == "replace_one":
        return z_total * math.sqrt(compositions), None
    share = GRADIENT_COUNT_SHARE
    return z_total * math.sqrt(compositions / (1.0 - share)), z_total / math.sqrt(share)


def _sigma_units(z: float, sensitivity: float, epsilon: float, steps: int) -> float:
    """``sigma = z Delta`` rounded so that ``sigma / Delta >= z``; refused beyond the sampler."""
    sigma = z * sensitivity
    while sigma / sensitivity < z:  # the reported multiplier is never below z
        sigma = math.nextafter(sigma, math.inf)
    if sigma > _MAX_SIGMA_UNITS:
        raise InvalidParameterError(
            "epsilon", epsilon, f"is too small for {steps} noisy gradient steps"
        )
    return sigma


def _noisy_row_count(
    n: int, z: float, epsilon: float, steps: int, source: RandomSource | None
) -> tuple[float, GaussianEvent]:
    """Release the add/remove row count: a sum of ones on the gradients' grid, multiplier ``z``."""
    bits = GRADIENT_GRID_BITS
    sensitivity = gradient_grid_sensitivity(1.0, 1, bits, neighbours="add_remove")
    sigma = _sigma_units(z, sensitivity, epsilon, steps)
    ones = np.ones((n, 1))
    noisy = _noisy_gradient_sum(
        ones, clip=1.0, bits=bits, sigma=sigma, sensitivity=sensitivity, source=source
    )
    return max(float(noisy[0]), 1.0), GaussianEvent(sigma=sigma, sensitivity=sensitivity)


def gradient_perturbation(
    X: NDArray[np.float64],
    targets: NDArray[np.float64],
    loss: ERMLoss,
    *,
    data_norm: float,
    strong_convexity: float,
    epsilon: float,
    delta: float,
    steps: int,
    max_grad_norm: float | None = None,
    neighbours: Neighbours = "replace_one",
    source: RandomSource | None,
) -> PerturbedModel:
    r"""Noisy full-batch gradient descent, calibrated to (epsilon, delta) by the PLD accountant.

    For each problem (each column of ``targets`` for a GLM loss, one for the multinomial loss),
    starting at :math:`\theta_0 = 0`, ``T = steps`` times:

    .. math:: \theta_{t+1} = \theta_t - \eta\Big(\frac{2^{-k}}{m}\big(\textstyle\sum_i
              \mathrm{round}(2^k\,\mathrm{clip}_\zeta\nabla\ell_i(\theta_t)) + Z_t\big) +
              \mu\theta_t\Big),
              \qquad Z_t \sim \mathcal N_{\mathbb Z}(0, \sigma^2)^D,

    and release :math:`\theta_T`. The step is :math:`\eta = 1/(L + \mu)` with ``L`` the loss's
    smoothness bound (:meth:`~dpcurator.learn._losses.GLMLoss.smoothness`), a data-independent
    choice for which gradient descent converges on smooth convex objectives. Each example's
    gradient is clipped to L2 norm :math:`\zeta` = ``max_grad_norm``, by default the loss's
    Lipschitz bound :math:`GR` (then clipping is a no-op in exact arithmetic and only makes the
    bound hold in floating point); a smaller declared norm trades a bias for less noise, as in
    DP-SGD (Abadi et al. 2016). The normaliser ``m`` is ``n`` under replace-one neighbours, and
    a noisy count under add/remove (below).

    **Neighbours.** ``neighbours="replace_one"`` (default): one row replaced, ``n`` public; a
    gradient sum moves by at most :math:`2\zeta`. ``neighbours="add_remove"`` (the relation of
    DP-SGD, Opacus and :class:`~dpcurator.learn.DPSGD`): one row added or removed; a sum moves
    by at most :math:`\zeta`, half as far, so half the noise buys the same guarantee. ``n`` is
    then private: it is released once, as a sum of ones on the same grid with Gaussian noise of
    multiplier :math:`z_c`, clamped to at least 1, and used as the public normaliser ``m``.

    **Privacy.** Each step is a Gaussian-type mechanism on an integer vector of L2 sensitivity
    ``Delta`` for the chosen relation (:func:`gradient_grid_sensitivity`, grid units, with
    :math:`\zeta 2^k \ge 2^{16}\sqrt D`); :math:`\theta_{t+1}` is post-processing of the noisy
    sums (and of the count), so the run (all ``P`` problems, ``PT`` steps, every iterate) is
    the adaptive composition of ``PT`` Gaussian mechanisms of noise multiplier
    :math:`z = \sigma/\Delta` (and of the count's, :math:`z_c`). For the continuous Gaussian
    this composition is exactly :math:`\mu`-Gaussian DP with :math:`\mu^2 = PT/z^2 + 1/z_c^2`
    (Dong, Roth and Su 2019, Corollary 3.3; no count term under replace-one), whose
    privacy-loss distribution is that of one Gaussian mechanism of multiplier :math:`1/\mu`:
    :math:`1/\mu` is the exact (analytic) Gaussian calibration of Balle and Wang 2018
    (:func:`~dpcurator.accounting.gaussian_sigma_analytic`) for ``epsilon (1 - 2**-20)``,
    split as :math:`1/z_c^2 = \mu^2/32` (:data:`GRADIENT_COUNT_SHARE`) and the rest to the
    steps, so the PLD accountant certifies ``epsilon`` for the reported event.

    **The noise actually drawn** is the exact ``D``-dimensional discrete Gaussian
    (:func:`~dpcurator.mechanisms.discrete_gaussian_mechanism`: integers in, integers out, so
    no floating-point attack applies). Its Rényi divergences are at most the continuous
    Gaussian's for every integer shift of norm :math:`\le\Delta` (Canonne, Kamath and Steinke
    2020, Theorem 14): every RDP or zCDP accounting of the reported event (``rho = PT/(2z^2)``)
    is proven. That its privacy profile, hence the PLD figure, is within the continuous one's is,
    at :math:`\sigma \ge 2^{16}\sqrt D z` grid units, a numerical fact (the privacy loss is a
    lattice discretisation of the Gaussian one of step :math:`\Delta/\sigma^2 \le 2^{-16}/z^2`)
    rather than a theorem here, as for :class:`~dpcurator.learn.DPSGD`: the event reported is
    ``SelfComposedEvent(GaussianEvent(sigma, Delta), P T)`` with the same ``(sigma, Delta)``,
    preceded by the count's ``GaussianEvent`` under add/remove.

    Parameters
    ----------
    X : numpy.ndarray of shape (n, d)
        Rows of L2 norm at most ``data_norm``.
    targets : numpy.ndarray of shape (n, K)
        One column of labels (``+-1``) or targets per problem, or one-hot rows (multinomial).
    loss : GLMLoss or MultinomialLoss
    data_norm : float
        ``R``, the declared row bound.
    strong_convexity : float
        The regulariser ``mu`` >= 0 (not needed for privacy).
    epsilon : float
        > 0.
    delta : float
        In (0, 1).
    steps : int
        ``T`` >= 1, gradient steps per problem.
    max_grad_norm : float, optional
        The clipping norm ``zeta`` > 0; default the loss's bound ``G R``.
    neighbours : {"replace_one", "add_remove"}, default "replace_one"
    source : RandomSource or None

    Returns
    -------
    PerturbedModel
        ``noise_std``: the noise's standard deviation per coordinate of a gradient sum (real
        units, before the division by ``m``).

    Examples
    --------
    >>> import numpy as np
    >>> from dpcurator.learn._losses import multinomial_loss
    >>> from dpcurator.noise import InsecureSeededSource
    >>> X = np.array([[1.0, 0.0], [0.0, 1.0], [-0.7, -0.7]] * 100)
    >>> model = gradient_perturbation(X, np.eye(3)[[0, 1, 2] * 100], multinomial_loss(3),
    ...                               data_norm=1.0, strong_convexity=0.0, epsilon=2.0,
    ...                               delta=1e-5, steps=10, source=InsecureSeededSource(1))
    >>> model.event.count, model.coef.shape
    (10, (3, 2))
    >>> model = gradient_perturbation(X, np.eye(3)[[0, 1, 2] * 100], multinomial_loss(3),
    ...                               data_norm=1.0, strong_convexity=0.0, epsilon=2.0,
    ...                               delta=1e-5, steps=10, neighbours="add_remove",
    ...                               source=InsecureSeededSource(1))
    >>> [type(event).__name__ for event in model.event.events]  # the count, then the steps
    ['GaussianEvent', 'SelfComposedEvent']
    """
    if not delta > 0.0:
        raise InvalidParameterError("delta", delta, "must be > 0 for gradient perturbation")
    count_steps = check_integer(steps, "steps", minimum=1)
    n, d = X.shape
    problems = loss.problems(targets)
    size = loss.parameter_count(d)
    zeta = (
        loss.slope_bound * data_norm
        if max_grad_norm is None
        else check_positive(max_grad_norm, "max_grad_norm")
    )
    bits = grid_exponent(zeta, GRADIENT_GRID_BITS, coordinates=size)
    sensitivity = gradient_grid_sensitivity(zeta, size, bits, neighbours=neighbours)
    total_steps = len(problems) * count_steps
    z, z_count = _calibrate(epsilon, delta, total_steps, neighbours)
    sigma = _sigma_units(z, sensitivity, epsilon, total_steps)
    event: PrivacyEvent = SelfComposedEvent(
        GaussianEvent(sigma=sigma, sensitivity=sensitivity), total_steps
    )
    normaliser = float(n)
    if z_count is not None:
        normaliser, count_event = _noisy_row_count(n, z_count, epsilon, total_steps, source)
        event = ComposedEvent((count_event, event))
    step = 1.0 / (loss.smoothness(data_norm) + strong_convexity)
    thetas = []
    for t in problems:
        theta = np.zeros(size)
        for _ in range(count_steps):
            noisy = _noisy_gradient_sum(
                loss.example_gradients(X, t, theta),
                clip=zeta,
                bits=bits,
                sigma=sigma,
                sensitivity=sensitivity,
                source=source,
            )
            theta = theta - step * (noisy / normaliser + strong_convexity * theta)
        thetas.append(theta)
    coef = np.concatenate(thetas).reshape(-1, d)
    return PerturbedModel(coef, event, strong_convexity, math.ldexp(sigma, -bits))
