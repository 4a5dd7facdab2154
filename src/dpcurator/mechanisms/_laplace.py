"""The Laplace mechanism on a public grid, and the geometric mechanism on the integers.

No floating-point Laplace noise is ever drawn. A real statistic is rounded to the grid
``2**-k`` (``k`` from the public parameters only), exact discrete Laplace noise is added in grid
units, and the result is mapped back exactly. Both neighbouring inputs then have the same set of
possible outputs (every grid point), which closes the floating-point attacks on textbook Laplace
samplers (Mironov 2012; Haney et al. 2022; research note A.2-A.3).

Examples
--------
>>> from dpcurator.noise import InsecureSeededSource
>>> release = laplace_mechanism(4213.0, epsilon=0.1, sensitivity=1.0,
...                             source=InsecureSeededSource(0))
>>> type(release.value).__name__, round(release.error.scale, 3)  # lecture 003: scale 1/0.1 = 10
('float', 10.0)
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from fractions import Fraction
from typing import Any, overload

import numpy as np
from numpy.typing import NDArray

from dpcurator._validation import check_epsilon, check_integer, check_positive
from dpcurator.accounting import DiscreteLaplaceEvent
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
    l1_grid_sensitivity,
    scale_at_least,
    unpack_float,
    unpack_int,
)
from dpcurator.mechanisms._release import ErrorModel, Release
from dpcurator.noise import RandomSource, discrete_laplace, resolve_source

__all__ = ["geometric_event", "geometric_mechanism", "laplace_mechanism"]


def _check_noise_units(scale: float, grid_bits: int) -> None:
    if scale > MAX_NOISE_UNITS:
        raise InvalidParameterError(
            "grid_bits",
            grid_bits,
            "is too fine for this epsilon and sensitivity (the noise would exceed 2**38 grid "
            "units); use a smaller grid_bits or leave it to the default",
        )


@overload
def laplace_mechanism(
    value: float,
    *,
    epsilon: float,
    sensitivity: float,
    changed_coordinates: int | None = ...,
    grid_bits: int | None = ...,
    source: RandomSource | None = ...,
) -> Release[float]: ...
@overload
def laplace_mechanism(
    value: Sequence[float] | NDArray[Any],
    *,
    epsilon: float,
    sensitivity: float,
    changed_coordinates: int | None = ...,
    grid_bits: int | None = ...,
    source: RandomSource | None = ...,
) -> Release[NDArray[np.float64]]: ...
def laplace_mechanism(
    value: float | Sequence[float] | NDArray[Any],
    *,
    epsilon: float,
    sensitivity: float,
    changed_coordinates: int | None = None,
    grid_bits: int | None = None,
    source: RandomSource | None = None,
) -> Release[Any]:
    r"""Release a real statistic (scalar or vector) with epsilon-DP Laplace-type noise.

    For ``f`` with L1 sensitivity ``Delta`` (``||f(D) - f(D')||_1 <= Delta`` for neighbours;
    lecture 000), the release is

    .. math:: M(D) = 2^{-k} \left(\mathrm{round}(2^k f(D)) + Z\right), \qquad
              Z_i \sim \mathrm{DLap}(t) \text{ i.i.d.}, \quad
              t = \frac{\lfloor \Delta 2^k \rfloor + m}{\epsilon},

    which is epsilon-DP: rounding moves each of the ``m`` coordinates that can change by less
    than one grid unit more, so the rounded statistic has integer L1 sensitivity
    ``floor(Delta 2^k) + m`` in grid units, and discrete Laplace noise of scale ``t`` on an
    integer statistic of sensitivity ``d`` is ``d/t``-DP (Dwork, McSherry, Nissim and Smith 2006;
    lecture 000, Laplace mechanism theorem; Canonne, Kamath and Steinke 2020, Section 5.2, for
    the discrete Laplace and its exact sampler). The grid ``2**-k`` is the largest power of two
    below ``2**-16 min(Delta/epsilon, Delta/m)`` (a function of public parameters only, computed
    exactly by :func:`dpcurator.noise.grid_exponent`), so the
    noise is within a relative ``2**-16`` of the continuous ``Lap(Delta/epsilon)``; the error is
    described exactly by ``release.error`` (lecture 000, utility theorem:
    ``E||M(D) - f(D)||_1 ~ k Delta/eps``). The neighbour relation is whichever one ``Delta`` was
    computed for (see :mod:`dpcurator.mechanisms` sensitivity helpers).

    Parameters
    ----------
    value : float or array_like of float
        ``f(D)``, finite. Values beyond ``2**52`` grid units (at least
        ``2**35 min(Delta/epsilon, Delta/m)``) saturate there; privacy is unaffected.
    epsilon : float
        Privacy parameter, > 0.
    sensitivity : float
        L1 sensitivity ``Delta`` of ``f``, finite and > 0.
    changed_coordinates : int, optional
        ``m``, how many coordinates can differ between neighbours (default: all). A histogram
        under add/remove has ``m = 1``, under replace ``m = 2``.
    grid_bits : int, optional
        Force the grid ``2**-grid_bits`` (still public); by default chosen as above.
    source : RandomSource, optional
        Randomness (secure by default).

    Returns
    -------
    Release
        ``value``: float (scalar input) or float64 array; ``event``:
        ``DiscreteLaplaceEvent(scale=t, sensitivity=floor(Delta 2^k) + m)`` in grid units, whose
        epsilon is at most the requested one; ``error``: the exact error model.

    Examples
    --------
    >>> from dpcurator.noise import InsecureSeededSource
    >>> release = laplace_mechanism([1.5, 2.5], epsilon=1.0, sensitivity=1.0,
    ...                             changed_coordinates=1, source=InsecureSeededSource(0))
    >>> release.value.shape, release.event.epsilon <= 1.0
    ((2,), True)
    >>> release.event
    DiscreteLaplaceEvent(scale=65537.0, sensitivity=65537)
    """
    eps = check_epsilon(epsilon)
    sens = check_positive(sensitivity, "sensitivity")
    check_scale_range(eps, sens)
    values, scalar = as_float_array(value)
    changed = check_changed_coordinates(changed_coordinates, int(values.size))
    if grid_bits is None:
        bits = grid_bits_for_noise(Fraction(sens) / Fraction(eps), Fraction(sens) / changed)
    else:
        bits = check_grid_bits(grid_bits)
    units = l1_grid_sensitivity(sens, bits, changed)
    scale = scale_at_least(units, eps)
    _check_noise_units(scale, bits)
    src = resolve_source(source)
    noise = np.asarray(discrete_laplace(scale, int(values.size), source=src), dtype=np.int64)
    released = add_noise_on_grid(values, noise, bits)
    unit = math.ldexp(1.0, -bits)
    error = ErrorModel(
        "discrete_laplace", noise_scale=scale, unit=unit, rounding=unit / 2.0, center=released
    )
    event = DiscreteLaplaceEvent(scale=scale, sensitivity=units)
    return Release(unpack_float(released, scalar), event, error)


@overload
def geometric_mechanism(
    value: int,
    *,
    epsilon: float,
    sensitivity: int = ...,
    source: RandomSource | None = ...,
) -> Release[int]: ...
@overload
def geometric_mechanism(
    value: Sequence[int] | NDArray[Any],
    *,
    epsilon: float,
    sensitivity: int = ...,
    source: RandomSource | None = ...,
) -> Release[NDArray[np.int64]]: ...
def geometric_mechanism(
    value: int | Sequence[int] | NDArray[Any],
    *,
    epsilon: float,
    sensitivity: int = 1,
    source: RandomSource | None = None,
) -> Release[Any]:
    r"""Release an integer statistic with two-sided geometric (discrete Laplace) noise.

    .. math:: M(D) = f(D) + Z, \qquad P[Z_i = z] = \frac{1 - \alpha}{1 + \alpha}\,\alpha^{|z|},
              \quad \alpha = e^{-\epsilon/\Delta},

    is epsilon-DP for ``f`` with integer L1 sensitivity ``Delta`` (Ghosh, Roughgarden and
    Sundararajan 2009, the geometric mechanism; Canonne, Kamath and Steinke 2020, Section 5.2).
    The output stays integral, so counts remain counts. Neighbour relation: the one ``Delta``
    was computed for.

    Parameters
    ----------
    value : int or array_like of int
        ``f(D)``, integers with ``|f(D)| <= 2**62``.
    epsilon : float
        Privacy parameter, > 0.
    sensitivity : int, default 1
        Integer L1 sensitivity, >= 1.
    source : RandomSource, optional

    Returns
    -------
    Release
        ``value``: int or int64 array; ``event``: ``DiscreteLaplaceEvent(scale=Delta/eps,
        sensitivity=Delta)`` (scale rounded up to a float); ``error``: exact error model.

    Examples
    --------
    >>> from dpcurator.noise import InsecureSeededSource
    >>> release = geometric_mechanism(120, epsilon=0.5, source=InsecureSeededSource(0))
    >>> isinstance(release.value, int), release.event
    (True, DiscreteLaplaceEvent(scale=2.0, sensitivity=1))
    """
    event = geometric_event(epsilon=epsilon, sensitivity=sensitivity)
    values, scalar = as_int_array(value)
    scale = event.scale
    noise = discrete_laplace(scale, int(values.size), source=resolve_source(source))
    released = values + np.asarray(noise, dtype=np.int64).reshape(values.shape)
    error = ErrorModel("discrete_laplace", noise_scale=scale, center=released.astype(np.float64))
    return Release(unpack_int(released, scalar), event, error)


def geometric_event(*, epsilon: float, sensitivity: int = 1) -> DiscreteLaplaceEvent:
    """Return the privacy event of :func:`geometric_mechanism` for these parameters.

    The same event the mechanism reports (its scale is the smallest float ``t >= Delta /
    epsilon`` with ``Delta / t <= epsilon``), known without running it: planners charge it
    before reading data.

    Raises
    ------
    InvalidParameterError
        For an epsilon or sensitivity the mechanism refuses (a scale above ``2**38``).

    Examples
    --------
    >>> geometric_event(epsilon=0.5, sensitivity=3)
    DiscreteLaplaceEvent(scale=6.0, sensitivity=3)
    """
    eps = check_epsilon(epsilon)
    sens = check_integer(sensitivity, "sensitivity", minimum=1)
    scale = scale_at_least(sens, eps)
    if scale > MAX_NOISE_UNITS:
        raise InvalidParameterError(
            "epsilon", epsilon, f"is too small for sensitivity {sens} (scale above 2**38)"
        )
    return DiscreteLaplaceEvent(scale=scale, sensitivity=sens)
