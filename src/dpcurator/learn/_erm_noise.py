r"""Noise of the ERM mechanisms, built from the exact samplers of :mod:`dpcurator.noise`.

- :data:`Neighbours` and :func:`changed_examples`: the neighbour relation of a release, and
  how many per-example terms of the objective it changes (2 for replace-one, 1 for
  add/remove);
- :func:`row_count`: the number of rows the mechanisms may use: ``n`` itself under replace-one
  (where it is public), a geometric-mechanism count under add/remove (where it is not);
- :func:`vector_laplace`: the L2 ("vector") Laplace law, density :math:`\propto e^{-\|b\|_2/s}`,
  of pure-DP output and objective perturbation (Chaudhuri, Monteleoni and Sarwate 2011), with
  the cost of its approximation (:func:`vector_laplace_cost`);
- :func:`staircase_gaussian`: a continuous "staircase" Gaussian, :math:`g(K + V)` with ``K``
  discrete Gaussian and ``V`` uniform in a cell, the noise of (epsilon, delta) objective
  perturbation.

Public grids (of the released models and of the staircase noise) are chosen by the one exact rule
of :func:`dpcurator.noise.grid_exponent`, with each caller's own precision.

No floating-point inversion of a CDF: every draw is an integer from an exact sampler, or a
uniform offset within a cell of ``2**-52``.

Examples
--------
>>> from dpcurator.noise import InsecureSeededSource
>>> staircase_gaussian(2.0**-30, 2.0**30, 3, InsecureSeededSource(0)).shape
(3,)
>>> row_count(500, "replace_one", epsilon=0.0, source=None).value  # n is public
500.0
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np
from numpy.typing import NDArray

from dpcurator._validation import check_integer, check_positive
from dpcurator.accounting import ComposedEvent, PrivacyEvent
from dpcurator.mechanisms import geometric_mechanism
from dpcurator.noise import RandomSource, discrete_gaussian, discrete_laplace, uniform_integers

__all__ = [
    "COUNT_SHARE",
    "NEIGHBOURS",
    "Neighbours",
    "Noise",
    "RowCount",
    "changed_examples",
    "row_count",
    "staircase_gaussian",
    "vector_laplace",
    "vector_laplace_cost",
]

Noise = Literal["laplace", "gaussian"]
"""Pure-DP Laplace-type noise, or (epsilon, delta) Gaussian-type noise."""

Neighbours = Literal["replace_one", "add_remove"]
"""Datasets that differ in one replaced row (``n`` public), or in one added or removed row."""

NEIGHBOURS: tuple[Neighbours, ...] = ("replace_one", "add_remove")

COUNT_SHARE = 0.125
"""Share of epsilon that output and objective perturbation spend on the row count under
add/remove neighbours (:func:`row_count`)."""


def changed_examples(neighbours: Neighbours) -> int:
    r"""How many per-example terms of :math:`\sum_i \ell(\theta; x_i)` neighbours change.

    Replace-one removes one term and adds another (2); add/remove adds or removes one (1). Every
    sensitivity of the ERM mechanisms is this number times one example's bound (e.g. the
    minimiser's :math:`2\zeta/\Lambda` against :math:`\zeta/\Lambda`, the gradient sum's
    :math:`2\zeta` against :math:`\zeta`).

    Examples
    --------
    >>> changed_examples("replace_one"), changed_examples("add_remove")
    (2, 1)
    """
    return 2 if neighbours == "replace_one" else 1


@dataclass(frozen=True, slots=True)
class RowCount:
    """The number of rows a release may use, and what obtaining it cost.

    Attributes
    ----------
    value : float
        ``n`` (replace-one: public) or the noisy count, at least 1 (add/remove).
    event : PrivacyEvent or None
        The count's release, ``None`` when ``n`` is public.

    Examples
    --------
    >>> from dpcurator.accounting import PureDPEvent
    >>> RowCount(100.0, None).with_release(PureDPEvent(1.0))
    PureDPEvent(epsilon=1.0)
    """

    value: float
    event: PrivacyEvent | None

    def with_release(self, event: PrivacyEvent) -> PrivacyEvent:
        """``event`` preceded by the count's release (adaptive composition), if any."""
        return event if self.event is None else ComposedEvent((self.event, event))


def row_count(
    n: int, neighbours: Neighbours, *, epsilon: float, source: RandomSource | None
) -> RowCount:
    r"""Return the row count that output and objective perturbation use in place of ``n``.

    Under replace-one neighbours ``n`` is the same on both datasets (public) and is returned
    unchanged at no cost. Under add/remove it differs by one, so it is released with the
    geometric mechanism (:func:`~dpcurator.mechanisms.geometric_mechanism`, sensitivity 1,
    ``epsilon``-DP) and clamped to at least 1 (post-processing). The mechanisms then treat it
    as public: the regulariser :math:`\Lambda = \mu\tilde n` of the summed objective and every
    bound that involves ``n`` use :math:`\tilde n`, so their sensitivities hold for any
    neighbouring pair, and the whole release is the adaptive composition of the count and the
    mechanism given the count.

    Parameters
    ----------
    n : int
        The number of rows.
    neighbours : {"replace_one", "add_remove"}
    epsilon : float
        The count's budget (add/remove only; ignored for replace-one).
    source : RandomSource or None

    Returns
    -------
    RowCount

    Examples
    --------
    >>> from dpcurator.noise import InsecureSeededSource
    >>> count = row_count(1000, "add_remove", epsilon=0.5, source=InsecureSeededSource(0))
    >>> abs(count.value - 1000) < 40, count.event.epsilon
    (True, 0.5)
    """
    if neighbours == "replace_one":
        return RowCount(float(n), None)
    release = geometric_mechanism(n, epsilon=epsilon, sensitivity=1, source=source)
    return RowCount(float(max(int(release.value), 1)), release.event)


_VECTOR_BITS = 36
"""The vector Laplace's exponentials and directions are resolved to ``2**-36`` of their scale."""

_UNIFORM_BITS = 52
"""Uniform offsets are drawn on the mid-points of ``2**52`` cells."""


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


def staircase_gaussian(
    cell: float, sigma_cells: float, size: int, source: RandomSource | None
) -> NDArray[np.float64]:
    r"""Draw :math:`g(K + V)`: ``K`` discrete Gaussian of parameter ``sigma_cells``, ``V`` uniform.

    The density is :math:`\nu(b) \propto p(\mathrm{round}(b/g))` with ``p`` the discrete
    Gaussian mass: a staircase that follows :math:`\mathcal N(0, (g\sigma)^2)` to within a cell
    ``g``, continuous so that the set of possible values does not depend on the data (objective
    perturbation's change of variables needs a density).

    Parameters
    ----------
    cell : float
        ``g`` > 0.
    sigma_cells : float
        The discrete Gaussian's parameter, in cells.
    size : int
    source : RandomSource or None

    Returns
    -------
    numpy.ndarray of shape (size,)

    Examples
    --------
    >>> from dpcurator.noise import InsecureSeededSource
    >>> b = staircase_gaussian(2.0**-30, 2.0**30, 1000, InsecureSeededSource(1))
    >>> 0.9 < float(b.std()) < 1.1
    True
    """
    k = np.asarray(discrete_gaussian(sigma_cells, size, source=source), dtype=np.float64)
    out: NDArray[np.float64] = cell * (k + _centred_uniform(size, source))
    return out
