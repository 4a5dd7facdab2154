"""The Gaussian mechanism on a public grid, and the discrete Gaussian mechanism on the integers.

As for Laplace, no floating-point Gaussian is drawn: a real statistic is rounded to the grid
``2**-k`` (``k`` from public parameters only), exact discrete Gaussian noise (Canonne, Kamath and
Steinke 2020) is added in grid units and the result is mapped back exactly, so the set of
possible outputs does not depend on the data (Jin et al. 2022 attack the float samplers;
research note A.4).

Examples
--------
>>> from dpcurator.noise import InsecureSeededSource
>>> release = gaussian_mechanism([0.5, 0.25], epsilon=1.0, delta=1e-6, sensitivity=1.0,
...                              source=InsecureSeededSource(0))
>>> type(release.event).__name__, release.error.distribution
('DiscreteGaussianEvent', 'discrete_gaussian')
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, overload

import numpy as np
from numpy.typing import NDArray

from dpcurator._validation import check_delta, check_epsilon, check_positive
from dpcurator.accounting import (
    DiscreteGaussianEvent,
    gaussian_sigma_analytic,
    gaussian_sigma_classic,
    zcdp_gaussian_sigma,
    zcdp_rho_for,
)
from dpcurator.errors import InvalidParameterError
from dpcurator.mechanisms._common import (
    MAX_NOISE_UNITS,
    add_noise_on_grid,
    as_float_array,
    as_int_array,
    check_changed_coordinates,
    check_grid_bits,
    check_scale_range,
    grid_bits_for_noise,
    l2_grid_sensitivity,
    unpack_float,
    unpack_int,
)
from dpcurator.mechanisms._release import ErrorModel, Release
from dpcurator.noise import RandomSource, discrete_gaussian, resolve_source

__all__ = ["discrete_gaussian_mechanism", "gaussian_mechanism"]

_CALIBRATIONS = ("analytic", "classic")

GAUSSIAN_PRECISION_BITS = 12
"""The Gaussian grid is ``2**12`` times finer than sigma and than ``Delta / sqrt(m)``: the
rounding raises sigma by a relative ``2**-12`` at most, and sigma stays near ``2**12`` to
``2**13`` grid units for ``m = 1`` (cheap for accountants that sum the exact discrete profile)."""

_EPSILON_MARGIN = 2.0**-20
"""Sigma is calibrated for ``epsilon (1 - 2**-20)``: the exact privacy profile of the discrete
Gaussian (CKS20, Theorem 7) differs from the continuous one by far less (below ``1e-8``
relative in epsilon at ``sigma >= 2**12``, checked in the tests with the accountants' exact
lattice sums), so the discrete noise meets (epsilon, delta) as well."""


def _sigma(
    calibration: str, epsilon: float, delta: float, sensitivity: float, dimension: int
) -> float:
    if dimension > 1:
        # Several coordinates can change: only the zCDP bound of the multivariate discrete
        # Gaussian is proven (CKS20, Theorem 14), so calibrate through it.
        return float(zcdp_gaussian_sigma(zcdp_rho_for(epsilon, delta), sensitivity))
    target = epsilon * (1.0 - _EPSILON_MARGIN)
    if calibration == "analytic":
        return float(gaussian_sigma_analytic(target, delta, sensitivity))
    return float(gaussian_sigma_classic(target, delta, sensitivity))


@overload
def gaussian_mechanism(
    value: float,
    *,
    epsilon: float,
    delta: float,
    sensitivity: float,
    calibration: str = ...,
    changed_coordinates: int | None = ...,
    grid_bits: int | None = ...,
    source: RandomSource | None = ...,
) -> Release[float]: ...
@overload
def gaussian_mechanism(
    value: Sequence[float] | NDArray[Any],
    *,
    epsilon: float,
    delta: float,
    sensitivity: float,
    calibration: str = ...,
    changed_coordinates: int | None = ...,
    grid_bits: int | None = ...,
    source: RandomSource | None = ...,
) -> Release[NDArray[np.float64]]: ...
def gaussian_mechanism(
    value: float | Sequence[float] | NDArray[Any],
    *,
    epsilon: float,
    delta: float,
    sensitivity: float,
    calibration: str = "analytic",
    changed_coordinates: int | None = None,
    grid_bits: int | None = None,
    source: RandomSource | None = None,
) -> Release[Any]:
    r"""Release a real statistic (scalar or vector) with (epsilon, delta)-DP Gaussian-type noise.

    For ``f`` with L2 sensitivity ``Delta`` (lecture 002), the release is

    .. math:: M(D) = 2^{-k} \left(\mathrm{round}(2^k f(D)) + Z\right), \qquad
              Z_i \sim \mathcal{N}_{\mathbb{Z}}(0, \sigma^2) \text{ i.i.d.},

    with ``sigma`` (in grid units) calibrated for the integer grid sensitivity ``Delta_k``
    (``floor(Delta 2^k) + 1`` for a scalar, ``ceil(Delta 2^k) + ceil(sqrt(m))`` for vectors:
    rounding moves each of the ``m`` changing coordinates by less than one unit, so the L2 norm
    of the change grows by less than ``sqrt(m)``):

    - ``calibration="analytic"`` (default): the smallest sigma whose Gaussian privacy profile
      meets (epsilon, delta) exactly (Balle and Wang 2018, Theorem 8);
    - ``calibration="classic"``: ``sigma = Delta_k sqrt(2 ln(1.25/delta)) / epsilon``
      (lecture 002, Gaussian mechanism theorem; Dwork and Roth 2014, Theorem 3.22; ``eps < 1``),

    both for ``epsilon (1 - 2**-20)``, a margin far above the difference between the exact
    discrete profile (Canonne, Kamath and Steinke 2020, Theorem 7) and the continuous one at
    ``sigma >= 2**12`` grid units. The discrete Gaussian with L2 sensitivity ``Delta_k`` is also
    ``Delta_k^2 / (2 sigma^2)``-zCDP (CKS20, Theorem 14). The event records
    ``(sigma, Delta_k)`` in grid units, so accountants see the discrete noise actually drawn.
    The grid ``2**-k`` is the largest power of two below ``2**-12 min(sigma_0, Delta/sqrt(m))``
    (``sigma_0`` the real-unit sigma for ``Delta``), a function of public parameters only,
    computed exactly (:func:`dpcurator.noise.grid_exponent`, no rounded ``sqrt(m)``); the
    rounding raises sigma by a relative ``2**-12`` at most. Neighbour relation: the one
    ``Delta`` was computed for (e.g. replace-one for a mean, :func:`mean_sensitivity`).

    Parameters
    ----------
    value : float or array_like of float
        ``f(D)``, finite.
    epsilon : float
        > 0.
    delta : float
        In (0, 1).
    sensitivity : float
        L2 sensitivity ``Delta``, finite and > 0.
    calibration : {"analytic", "classic"}, default "analytic"
    changed_coordinates : int, optional
        ``m``, how many coordinates can differ between neighbours (default: all).
    grid_bits : int, optional
        Force the grid ``2**-grid_bits``.
    source : RandomSource, optional

    Returns
    -------
    Release
        ``value``: float or float64 array; ``event``: ``DiscreteGaussianEvent(sigma,
        sensitivity)`` in grid units; ``error``: exact error model (``std`` is the discrete
        noise's, just below ``sigma``).

    Examples
    --------
    >>> from dpcurator.noise import InsecureSeededSource
    >>> release = gaussian_mechanism(0.3, epsilon=0.5, delta=1e-5, sensitivity=0.02,
    ...                              calibration="classic", source=InsecureSeededSource(0))
    >>> type(release.value).__name__, round(release.error.std, 4)  # 0.02 sqrt(2 ln 125000)/0.5
    ('float', 0.1938)
    """
    eps = check_epsilon(epsilon)
    dlt = check_delta(delta)
    if dlt == 0.0:
        raise InvalidParameterError("delta", delta, "must be > 0 for the Gaussian mechanism")
    sens = check_positive(sensitivity, "sensitivity")
    check_scale_range(eps, sens)
    if calibration not in _CALIBRATIONS:
        raise InvalidParameterError("calibration", calibration, f"must be one of {_CALIBRATIONS}")
    values, scalar = as_float_array(value)
    changed = check_changed_coordinates(changed_coordinates, int(values.size))
    dimension = changed if values.size > 1 else 1
    if grid_bits is None:
        sigma_real = _sigma(calibration, eps, dlt, sens, dimension)
        bits = grid_bits_for_noise(sigma_real, sens, GAUSSIAN_PRECISION_BITS, coordinates=changed)
    else:
        bits = check_grid_bits(grid_bits)
    units = l2_grid_sensitivity(sens, bits, changed)
    sigma = _sigma(calibration, eps, dlt, float(units), dimension)
    if sigma > MAX_NOISE_UNITS or sigma < 2.0**-40:
        raise InvalidParameterError(
            "grid_bits", bits, "gives a noise outside [2**-40, 2**38] grid units; use another grid"
        )
    src = resolve_source(source)
    noise = np.asarray(discrete_gaussian(sigma, int(values.size), source=src), dtype=np.int64)
    released = add_noise_on_grid(values, noise, bits)
    unit = math.ldexp(1.0, -bits)
    error = ErrorModel(
        "discrete_gaussian", noise_scale=sigma, unit=unit, rounding=unit / 2.0, center=released
    )
    event = DiscreteGaussianEvent(sigma=sigma, sensitivity=float(units), dimension=dimension)
    return Release(unpack_float(released, scalar), event, error)


@overload
def discrete_gaussian_mechanism(
    value: int,
    *,
    sigma: float,
    sensitivity: float = ...,
    source: RandomSource | None = ...,
) -> Release[int]: ...
@overload
def discrete_gaussian_mechanism(
    value: Sequence[int] | NDArray[Any],
    *,
    sigma: float,
    sensitivity: float = ...,
    source: RandomSource | None = ...,
) -> Release[NDArray[np.int64]]: ...
def discrete_gaussian_mechanism(
    value: int | Sequence[int] | NDArray[Any],
    *,
    sigma: float,
    sensitivity: float = 1.0,
    source: RandomSource | None = None,
) -> Release[Any]:
    r"""Release an integer statistic with discrete Gaussian noise.

    .. math:: M(D) = f(D) + Z, \qquad P[Z_i = z] \propto e^{-z^2 / (2\sigma^2)},\ z \in \mathbb{Z},

    is ``rho``-zCDP with ``rho = Delta^2 / (2 sigma^2)`` for ``f`` with L2 sensitivity ``Delta``
    (Canonne, Kamath and Steinke 2020, Theorem 14), and (epsilon, delta)-DP with the exact
    delta of their Theorem 7 in one dimension; an accountant turns the event into either. Use
    :func:`dpcurator.accounting.discrete_gaussian_sigma` to pick ``sigma`` for a
    target (epsilon, delta). Neighbour relation: the one ``Delta`` was computed for.

    Parameters
    ----------
    value : int or array_like of int
        ``f(D)``, integers with ``|f(D)| <= 2**62``.
    sigma : float
        Noise parameter, in ``[2**-40, 2**38]`` (a float is its exact dyadic value).
    sensitivity : float, default 1.0
        L2 sensitivity ``Delta`` of ``f``, > 0.
    source : RandomSource, optional

    Returns
    -------
    Release
        ``value``: int or int64 array; ``event``: ``DiscreteGaussianEvent(sigma, sensitivity,
        dimension)``, ``dimension = min(size, floor(Delta^2))`` (how many integer coordinates a
        change of L2 norm ``Delta`` can move);
        ``error``: exact error model.

    Examples
    --------
    >>> from dpcurator.noise import InsecureSeededSource
    >>> release = discrete_gaussian_mechanism([10, 20, 30], sigma=3.0,
    ...                                       source=InsecureSeededSource(0))
    >>> release.value.dtype, release.event
    (dtype('int64'), DiscreteGaussianEvent(sigma=3.0, sensitivity=1.0, dimension=1))
    """
    s = check_positive(sigma, "sigma")
    if not 2.0**-40 <= s <= MAX_NOISE_UNITS:
        raise InvalidParameterError("sigma", sigma, "must be in [2**-40, 2**38]")
    sens = check_positive(sensitivity, "sensitivity")
    values, scalar = as_int_array(value)
    noise = discrete_gaussian(s, int(values.size), source=resolve_source(source))
    released = values + np.asarray(noise, dtype=np.int64).reshape(values.shape)
    error = ErrorModel("discrete_gaussian", noise_scale=s, center=released.astype(np.float64))
    # An integer change of L2 norm <= Delta moves at most floor(Delta^2) coordinates.
    dimension = max(1, min(int(values.size), math.floor(sens * sens)))
    event = DiscreteGaussianEvent(sigma=s, sensitivity=sens, dimension=dimension)
    return Release(unpack_int(released, scalar), event, error)
