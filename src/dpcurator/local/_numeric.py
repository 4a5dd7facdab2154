r"""Mean estimation under local DP: each device reports one randomised number in its range.

Two one-dimensional mechanisms for values in a public interval ``[lower, upper]``. Each maps a
value ``x`` to ``t = 2 (x - lower) / (upper - lower) - 1`` in ``[-1, 1]`` and reports a random
``Y`` with ``E[Y | t] = t`` (mapped back to the value's units), so the mean of the reports is an
unbiased estimate of the devices' mean.

* :class:`DuchiMean`: Duchi, Jordan and Wainwright's two-point mechanism (JASA 2018; as
  restated in Wang et al., ICDE 2019, Algorithm 1): ``Y = +-C`` with
  ``C = (e^eps + 1) / (e^eps - 1)``. Best for small epsilon (below about 1.3).
* :class:`PiecewiseMean`: Wang et al.'s piecewise mechanism (ICDE 2019, Algorithm 2) on a
  fine grid of ``cells`` output points, sampled exactly (integers only). Best for larger epsilon.

Privacy, exactly (local DP; neighbours: one device's value replaced by any other value in
``[lower, upper]``). Every probability that decides an output is an exact rational or the exact
value of a float, and the outputs' likelihood ratio is bounded by a rational ``r <= e^eps``:

* ``r`` is ``e^eps`` rounded *down* to a float (the float ``exp`` stepped down four ulps, so it
  lies below ``e^eps`` whatever the rounding of ``exp``); the event reports
  ``epsilon_used = ln r`` rounded up (never understated, never above ``epsilon``).
* Both mechanisms first round the input at random (``DuchiMean``: ``t`` to ``-1`` or ``+1``;
  ``PiecewiseMean``: the band position to an adjacent grid point), then apply a mechanism whose
  output probabilities, for every rounded input, lie in ``[b, r b]`` for the same ``b``. A
  mixture of such distributions stays in ``[b, r b]``, so ``P[y | x] <= r P[y | x']`` for every
  output ``y`` and inputs ``x, x'``: ``ln r``-LDP **whatever** the rounding probabilities
  are. The rounding is exact too (a 64-bit uniform compared with the float's exact value, the
  tie settled by :func:`~dpcurator.noise.bernoulli`), so the estimators are unbiased for the
  float ``t``; the only inexactness is floating-point rounding of the affine map and of ``C``
  (relative ``2^-52``), a bias some 15 orders of magnitude below the noise.

:meth:`output_distribution` returns each mechanism's exact output law (``Fraction``
probabilities) for one input, so the guarantee can be checked by enumeration.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from fractions import Fraction
from typing import Any, NamedTuple

import numpy as np
from numpy.typing import NDArray
from scipy.special import ndtri

from dpcurator._validation import check_epsilon, check_finite, check_integer, check_probability
from dpcurator.accounting import PureDPEvent
from dpcurator.errors import InvalidParameterError
from dpcurator.noise import RandomSource, bernoulli, resolve_source, uniform_integers

__all__ = ["DuchiMean", "MeanEstimate", "PiecewiseMean"]

_EXP_ULPS_DOWN = 4
"""Ulps by which the float ``exp(eps)`` is stepped down (libm's ``exp`` errs < 1 ulp)."""
_LOG_ULPS_UP = 2
"""Ulps by which ``log1p``/``log`` of the ratio is stepped up (errs < 1 ulp)."""
_MIN_EPSILON = 1e-9
"""Smaller epsilons leave too few float steps between 1 and ``e^eps`` to round safely."""


# --------------------------------------------------------------------------------------------
# exact building blocks


def _ratio_at_most(epsilon: float) -> tuple[Fraction, float]:
    """Return ``(r, eps_r)``: a rational ``1 < r <= e^eps`` and ``ln r <= eps_r <= eps``.

    ``r`` is the float ``exp(eps)`` stepped down :data:`_EXP_ULPS_DOWN` ulps (an exact rational
    strictly below ``e^eps``); ``eps_r`` is ``log1p(r - 1)`` (``r - 1`` is exact for
    ``r <= 2``, Sterbenz) or ``log(r)`` stepped up :data:`_LOG_ULPS_UP` ulps, capped at ``eps``.
    """
    if epsilon < _MIN_EPSILON:
        raise InvalidParameterError(
            "epsilon", epsilon, f"must be >= {_MIN_EPSILON:g} for a mechanism in float64"
        )
    if epsilon > 700.0:
        raise InvalidParameterError("epsilon", epsilon, "must be <= 700 (e^eps overflows)")
    r_float = math.exp(epsilon)
    for _ in range(_EXP_ULPS_DOWN):
        r_float = math.nextafter(r_float, 0.0)
    log_r = math.log1p(r_float - 1.0) if r_float <= 2.0 else math.log(r_float)
    for _ in range(_LOG_ULPS_UP):
        log_r = math.nextafter(log_r, math.inf)
    return Fraction(r_float), min(epsilon, log_r)


# --------------------------------------------------------------------------------------------
# results


class MeanEstimate(NamedTuple):
    """An unbiased estimate of the devices' mean with its standard error.

    Unpacks as ``mean, std = mechanism.estimate(reports)``.

    Attributes
    ----------
    mean : float
        Average of the reports: unbiased for the devices' mean (not clipped to the range).
    std : float
        Standard error from the mechanism's closed-form variance, with the unknown spread of the
        true values estimated conservatively (see each mechanism's ``estimate``).
    """

    mean: float
    std: float

    def confidence_interval(self, level: float = 0.95) -> tuple[float, float]:
        """Normal-approximation interval ``mean +- z std`` (the mean of n bounded reports).

        Parameters
        ----------
        level : float, default 0.95
            Coverage, in (0, 1).

        Returns
        -------
        tuple of float

        Examples
        --------
        >>> lo, hi = MeanEstimate(10.0, 1.0).confidence_interval(0.95)
        >>> round(lo, 2), round(hi, 2)
        (8.04, 11.96)
        """
        lvl = check_probability(level, "level", open_left=True, open_right=True)
        z = float(ndtri(0.5 + lvl / 2.0))
        return self.mean - z * self.std, self.mean + z * self.std


# --------------------------------------------------------------------------------------------
# the shared shape


class _LocalMean(ABC):
    """Shared parts: the range, the value map to ``[-1, 1]``, the event, the estimator."""

    def __init__(self, epsilon: float, lower: float, upper: float) -> None:
        self.epsilon = check_epsilon(epsilon)
        self.lower = check_finite(lower, "lower")
        self.upper = check_finite(upper, "upper")
        if not self.lower < self.upper:
            raise InvalidParameterError("upper", upper, f"must be > lower = {self.lower!r}")
        if not math.isfinite(self.upper - self.lower):
            raise InvalidParameterError("upper", upper, "minus lower must be a finite float")
        self._ratio, self.epsilon_used = _ratio_at_most(self.epsilon)
        self._mid = self.lower + (self.upper - self.lower) / 2.0
        self._half = (self.upper - self.lower) / 2.0

    @property
    def event(self) -> PureDPEvent:
        """Privacy event of one report of one device: ``PureDPEvent(epsilon_used)``."""
        return PureDPEvent(self.epsilon_used)

    @property
    def scale(self) -> float:
        """``C``: reports lie in ``[-C, C]`` on the ``[-1, 1]`` scale of the values."""
        return float(self._scale_exact())

    @abstractmethod
    def _scale_exact(self) -> Fraction: ...

    def _unit(self, values: object, name: str = "values") -> NDArray[np.float64]:
        """Validate values and map them to ``u = (x - lower) / (upper - lower)`` in [0, 1]."""
        arr = np.asarray(values)
        if arr.dtype == np.bool_ or arr.dtype.kind not in "iuf":
            raise InvalidParameterError(
                name, f"<array of dtype {arr.dtype}>", "must hold real numbers"
            )
        if arr.size == 0:
            raise InvalidParameterError(name, "<empty array>", "must hold at least one value")
        x = arr.astype(np.float64).reshape(-1)
        # Devices' values are private: the message names the shape, never the values.
        if not np.isfinite(x).all():
            raise InvalidParameterError(
                name, f"<array of shape {arr.shape}>", "must hold finite numbers (no NaN)"
            )
        if bool(((x < self.lower) | (x > self.upper)).any()):
            raise InvalidParameterError(
                name,
                f"<array of shape {arr.shape}>",
                f"must lie in [lower, upper] = [{self.lower!r}, {self.upper!r}] (clip first)",
            )
        u = (x - self.lower) / (self.upper - self.lower)
        np.clip(u, 0.0, 1.0, out=u)  # rounding could leave [0, 1] by an ulp
        return u

    def _to_units(self, v: NDArray[np.float64]) -> NDArray[np.float64]:
        out: NDArray[np.float64] = self._mid + self._half * v
        return out

    def _from_reports(self, reports: object) -> NDArray[np.float64]:
        arr = np.asarray(reports)
        if arr.dtype == np.bool_ or arr.dtype.kind not in "iuf" or arr.size == 0:
            raise InvalidParameterError(
                "reports", f"<array of dtype {arr.dtype}, size {arr.size}>", "must hold numbers"
            )
        y = arr.astype(np.float64).reshape(-1)
        if not np.isfinite(y).all():
            raise InvalidParameterError(
                "reports", f"<array of shape {arr.shape}>", "must hold finite numbers"
            )
        v: NDArray[np.float64] = (y - self._mid) / self._half
        return v

    def _estimate(self, v: NDArray[np.float64], total_variance: float) -> MeanEstimate:
        n = v.size
        mean = self._mid + self._half * float(v.mean())
        std = self._half * math.sqrt(max(total_variance, 0.0)) / n
        return MeanEstimate(mean, std)

    @abstractmethod
    def _unit_variances(self, u: NDArray[np.float64]) -> NDArray[np.float64]:
        """Variance of one report on the ``[-1, 1]`` scale, for each unit value ``u``."""

    def variance(self, values: object) -> float:
        """Exact variance of the mean estimate when the devices hold ``values``.

        Parameters
        ----------
        values : array_like
            The devices' true values in ``[lower, upper]``.

        Returns
        -------
        float
            ``(upper - lower)^2 / 4 * sum_i Var[Y_i | t_i] / n^2`` in the values' units.
        """
        u = self._unit(values)
        return self._half**2 * float(self._unit_variances(u).sum()) / u.size**2

    @abstractmethod
    def privatize(self, values: object, *, source: RandomSource | None = None) -> Any:
        """Randomise each device's value (client side)."""

    @abstractmethod
    def estimate(self, reports: object) -> MeanEstimate:
        """Mean of the reports with its standard error (server side)."""

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(epsilon={self.epsilon:g}, lower={self.lower:g}, "
            f"upper={self.upper:g})"
        )


# --------------------------------------------------------------------------------------------
# Duchi et al.


class DuchiMean(_LocalMean):
    r"""Duchi, Jordan and Wainwright's one-dimensional LDP mean mechanism, sampled exactly.

    A device with value ``x`` in ``[lower, upper]`` maps it to ``t`` in ``[-1, 1]`` and reports
    ``Y = +C`` or ``Y = -C`` (in the value's units: ``mid + (upper - lower)/2 * Y``) with

    .. math::
        C = \frac{r + 1}{r - 1}, \qquad
        P[Y = +C \mid t] = \frac12 + \frac{r - 1}{2 (r + 1)}\, t ,

    where ``r <= e^eps`` is ``e^eps`` rounded down to a rational (``r = e^eps`` in the paper).
    Then ``E[Y] = t`` and ``Var[Y] = C^2 - t^2`` (J. C. Duchi, M. I. Jordan, M. J. Wainwright,
    "Minimax optimal procedures for locally private estimation", JASA 113(521), 2018; in the
    form of N. Wang et al., "Collecting and analyzing multidimensional data with local
    differential privacy", ICDE 2019, arXiv 1907.00782, Algorithm 1 and its variance lemma).
    The mean of ``n`` reports has variance ``sum_i (C^2 - t_i^2) / n^2 <= C^2 / n``.

    Sampling: ``P[Y = +C | t]`` equals ``P[S = +1] q + P[S = -1] (1 - q)`` for ``S`` the input
    rounded at random to ``+-1`` (``P[S = +1] = (1 + t)/2``) and ``q = r / (r + 1)``; so a
    device draws ``S`` exactly (a uniform word against the float ``(1 + t)/2``) and reports it
    with the exact rational probability ``q`` (:func:`~dpcurator.noise.bernoulli`), otherwise
    its opposite. Whatever ``S``, ``P[Y = y | S] / P[Y = y | S'] <= q / (1 - q) = r``, so every
    report is ``ln r``-LDP (``<= epsilon``; neighbours: one device's value replaced).

    Parameters
    ----------
    epsilon : float
        Privacy of one report, > 0 (at least 1e-9).
    lower, upper : float
        Public range of the values, ``lower < upper``.

    Attributes
    ----------
    epsilon_used : float
        ``ln r`` rounded up: the epsilon the reports actually spend (``<= epsilon``).

    Examples
    --------
    >>> import numpy as np
    >>> from dpcurator.noise import InsecureSeededSource
    >>> mech = DuchiMean(1.0, 0.0, 100.0)
    >>> values = np.full(100_000, 30.0)
    >>> reports = mech.privatize(values, source=InsecureSeededSource(0))
    >>> sorted({round(float(y), 2) for y in reports})  # 50 +- 50 C with C = 2.16
    [-58.2, 158.2]
    >>> mean, std = mech.estimate(reports)
    >>> abs(mean - 30.0) < 4 * std, round(std, 2)
    (True, 0.34)
    >>> mech.event.epsilon <= 1.0
    True
    """

    def __init__(self, epsilon: float, lower: float, upper: float) -> None:
        super().__init__(epsilon, lower, upper)
        self._q = self._ratio / (self._ratio + 1)

    @property
    def keep_probability(self) -> Fraction:
        """``q = r / (r + 1)``: the probability of reporting the rounded input's sign."""
        return self._q

    def _scale_exact(self) -> Fraction:
        return (self._ratio + 1) / (self._ratio - 1)

    def privatize(
        self, values: object, *, source: RandomSource | None = None
    ) -> NDArray[np.float64]:
        """Randomise each device's value: one report ``mid +- (upper - lower)/2 * C`` each.

        Parameters
        ----------
        values : array_like of float
            The devices' values in ``[lower, upper]`` (any shape; raises if one is outside).
        source : RandomSource, optional
            Randomness (secure by default).

        Returns
        -------
        numpy.ndarray of float64
            The reports, flat, one per device.

        Examples
        --------
        >>> from dpcurator.noise import InsecureSeededSource
        >>> DuchiMean(2.0, -1.0, 1.0).privatize([0.5, -1.0], source=InsecureSeededSource(1)).shape
        (2,)
        """
        src = resolve_source(source)
        u = self._unit(values)
        rounded_up = bernoulli(u, source=src)  # S = +1 with probability (1 + t)/2 = u
        keep = np.asarray(bernoulli(self._q, u.size, source=src), dtype=np.bool_)
        positive = rounded_up == keep
        c = self.scale
        return self._to_units(np.where(positive, c, -c))

    def estimate(self, reports: object) -> MeanEstimate:
        """Average the reports: the unbiased mean, with its standard error.

        The variance ``sum_i (C^2 - t_i^2) / n^2`` depends on the unknown ``t_i``; it is
        estimated by ``(C^2 - t_hat^2) / n`` with ``t_hat`` the estimated mean clipped to
        ``[-1, 1]``. Since ``sum_i t_i^2 >= n tbar^2`` this errs on the safe side (exact when
        all devices hold the same value), up to the ``O(1/n)`` noise in ``t_hat``.

        Parameters
        ----------
        reports : array_like of float
            Reports from :meth:`privatize`.

        Returns
        -------
        MeanEstimate
            ``(mean, std)`` in the values' units.

        Examples
        --------
        >>> mech = DuchiMean(1.0, 0.0, 1.0)
        >>> c = mech.scale
        >>> mean, std = mech.estimate([0.5 + c / 2, 0.5 - c / 2])
        >>> round(mean, 12), round(std, 4)
        (0.5, 0.7651)
        """
        v = self._from_reports(reports)
        n = v.size
        t_hat = min(max(float(v.mean()), -1.0), 1.0)
        c = self.scale
        return self._estimate(v, n * (c * c - t_hat * t_hat))

    def _unit_variances(self, u: NDArray[np.float64]) -> NDArray[np.float64]:
        t = 2.0 * u - 1.0
        c = self.scale
        out: NDArray[np.float64] = c * c - t * t
        return out

    def worst_case_variance(self, n: int) -> float:
        """Largest variance of the mean of ``n`` reports over all inputs: ``half^2 C^2 / n``.

        Examples
        --------
        >>> round(DuchiMean(1.0, -1.0, 1.0).worst_case_variance(1), 4)  # C^2
        4.6827
        """
        count = check_integer(n, "n", minimum=1)
        return self._half**2 * self.scale**2 / count

    def output_distribution(self, value: float) -> list[tuple[float, Fraction]]:
        """Return the exact law of one report for the input ``value``: ``[(output, prob)]``.

        Examples
        --------
        >>> mech = DuchiMean(1.0, 0.0, 1.0)
        >>> law = mech.output_distribution(1.0)
        >>> [p for _, p in law] == [mech.keep_probability, 1 - mech.keep_probability]
        True
        """
        u = Fraction(float(self._unit([value], "value")[0]))
        q = self._q
        p_plus = u * q + (1 - u) * (1 - q)
        c = self.scale
        hi, lo = self._to_units(np.array([c, -c]))
        return [(float(hi), p_plus), (float(lo), 1 - p_plus)]


# --------------------------------------------------------------------------------------------
# Piecewise mechanism on a grid


class PiecewiseMean(_LocalMean):
    r"""Wang et al.'s piecewise mechanism for LDP means, on a grid of ``cells`` outputs, exact.

    The continuous mechanism (N. Wang et al., ICDE 2019, arXiv 1907.00782, Algorithm 2) reports
    ``Y`` in ``[-C, C]``, ``C = (e^{eps/2} + 1)/(e^{eps/2} - 1)``, with density ``e^eps``
    times higher on a band ``[l(t), l(t) + C - 1]`` that slides with ``t`` than outside it;
    ``E[Y] = t`` and ``Var[Y] = t^2/(e^{eps/2} - 1) + (e^{eps/2} + 3)/(3 (e^{eps/2} - 1)^2)``.
    Its textbook sampler draws floats, which leaks through their bit patterns (Mironov 2012).

    Here the output range is cut into ``N = cells`` cells with midpoints
    ``v_j = C (2j + 1 - N) / N``; the band is ``K`` consecutive cells starting at cell ``s``,
    ``s in {0, ..., N - K}``, ``K = round(N / (e^{eps/2} + 1))`` (the continuous band's share).
    Given ``s`` each band cell has probability ``a = r b`` and every other cell ``b``, with
    ``K a + (N - K) b = 1`` and ``r <= e^eps`` rational. The identity
    ``sum_{j in band} v_j = K C (2s + K - N) / N`` makes ``E[Y | s] = t_s = 2s/(N-K) - 1``
    exactly when

    .. math:: C = \frac{N}{(a - b) K (N - K)} ,

    and the input ``t`` picks ``s`` by randomized rounding of ``(t + 1)(N - K)/2`` to an
    adjacent integer, so ``E[Y | t] = t``. Privacy: every cell has probability in ``[b, r b]``
    under every ``s``, hence under every mixture over ``s``: ``ln r``-LDP (``<= epsilon``;
    neighbours: one device's value replaced). Sampling is integer-only: one exact Bernoulli
    ``K a`` (band or not) and one exact uniform integer per device
    (:mod:`dpcurator.noise`), plus the exact rounding draw.

    Variance of one report (derived here from the cell sums):
    ``Var[Y | t] = alpha + (beta - 1) t^2 + beta 4 f (1 - f)/(N - K)^2`` with
    ``beta = C (N - K)/N``, ``alpha = (C/N)^2 (b N (N^2 - 1) + (a - b) K (K^2 - 1)) / 3`` and
    ``f`` the fractional part rounded; ``beta - 1`` tends to ``1/(e^{eps/2} - 1)`` and
    ``alpha`` to the continuous constant as ``N`` grows (the default grid is within 0.01 %).
    The piecewise mechanism beats :class:`DuchiMean` for epsilon above about 1.29 (Wang et al.).

    Parameters
    ----------
    epsilon : float
        Privacy of one report, > 0 (at least 1e-9).
    lower, upper : float
        Public range of the values, ``lower < upper``.
    cells : int, default 65536
        ``N``, the number of output points (at least 4).

    Attributes
    ----------
    epsilon_used : float
        ``ln r`` rounded up: the epsilon the reports actually spend (``<= epsilon``).

    Examples
    --------
    >>> import numpy as np
    >>> from dpcurator.noise import InsecureSeededSource
    >>> mech = PiecewiseMean(4.0, 0.0, 10.0)
    >>> reports = mech.privatize(np.full(50_000, 7.5), source=InsecureSeededSource(0))
    >>> mean, std = mech.estimate(reports)
    >>> abs(mean - 7.5) < 4 * std, round(std, 3)
    (True, 0.008)
    >>> mech.event.epsilon <= 4.0
    True
    """

    def __init__(self, epsilon: float, lower: float, upper: float, *, cells: int = 65536) -> None:
        super().__init__(epsilon, lower, upper)
        self.cells = check_integer(cells, "cells", minimum=4)
        if self.cells > 2**40:
            raise InvalidParameterError("cells", cells, "must be <= 2**40")
        n_cells = self.cells
        half_ratio = math.sqrt(float(self._ratio))
        self.band = min(max(round(n_cells / (half_ratio + 1.0)), 1), n_cells - 1)
        k = self.band
        self._b = 1 / (k * self._ratio + (n_cells - k))
        self._a = self._ratio * self._b
        self._band_probability = k * self._a
        self._c = Fraction(n_cells) / ((self._a - self._b) * k * (n_cells - k))
        c = float(self._c)
        self._beta = c * (n_cells - k) / n_cells
        alpha = (self._c / n_cells) ** 2 * (
            self._b * n_cells * (n_cells**2 - 1) + (self._a - self._b) * k * (k**2 - 1)
        )
        self._alpha = float(alpha / 3)

    def _scale_exact(self) -> Fraction:
        return self._c

    def _positions(
        self, u: NDArray[np.float64], source: RandomSource
    ) -> tuple[NDArray[np.int64], NDArray[np.float64]]:
        """Band starts ``s`` (randomized rounding of ``u (N - K)``) and the fractions rounded."""
        span = self.cells - self.band
        sigma = u * float(span)  # in [0, N - K]: u <= 1 and rounding is monotone
        base = np.floor(sigma)
        frac = sigma - base  # exact: both are floats below 2^53
        up = bernoulli(frac, source=source)
        return base.astype(np.int64) + up.astype(np.int64), frac

    def privatize(
        self, values: object, *, source: RandomSource | None = None
    ) -> NDArray[np.float64]:
        """Randomise each device's value: one report, a grid point of ``[-C, C]``, each.

        Parameters
        ----------
        values : array_like of float
            The devices' values in ``[lower, upper]`` (any shape; raises if one is outside).
        source : RandomSource, optional
            Randomness (secure by default).

        Returns
        -------
        numpy.ndarray of float64
            The reports in the values' units, flat, one per device.

        Examples
        --------
        >>> from dpcurator.noise import InsecureSeededSource
        >>> mech = PiecewiseMean(1.0, 0.0, 1.0, cells=8)
        >>> len(set(mech.privatize([0.2] * 1000, source=InsecureSeededSource(3)).tolist()))
        8
        """
        src = resolve_source(source)
        u = self._unit(values)
        n = u.size
        n_cells, k = self.cells, self.band
        start, _ = self._positions(u, src)
        in_band = np.asarray(bernoulli(self._band_probability, n, source=src), dtype=np.bool_)
        cell = np.empty(n, dtype=np.int64)
        inside = np.flatnonzero(in_band)
        outside = np.flatnonzero(~in_band)
        cell[inside] = start[inside] + uniform_integers(k, inside.size, source=src)
        other = uniform_integers(n_cells - k, outside.size, source=src)
        other += np.where(other >= start[outside], k, 0)  # skip the band's K cells
        cell[outside] = other
        v = float(self._c) * (2.0 * cell.astype(np.float64) + 1.0 - n_cells) / n_cells
        return self._to_units(v)

    def estimate(self, reports: object) -> MeanEstimate:
        """Average the reports: the unbiased mean, with its standard error.

        ``E[Y^2 | t] = alpha + beta E[t_s^2]`` is linear in ``t_s^2``, so
        ``S = (sum_i Y_i^2 - n alpha) / beta`` estimates ``sum_i t_i^2`` without bias (up to
        the tiny rounding term); clipped to ``[0, n]`` it gives the variance
        ``n alpha + (beta - 1) S + n beta / (N - K)^2`` (the last term bounds the rounding).

        Parameters
        ----------
        reports : array_like of float
            Reports from :meth:`privatize`.

        Returns
        -------
        MeanEstimate
            ``(mean, std)`` in the values' units.

        Examples
        --------
        >>> mech = PiecewiseMean(2.0, -1.0, 1.0)
        >>> mean, std = mech.estimate([0.0, 0.0])
        >>> mean, std > 0
        (0.0, True)
        """
        v = self._from_reports(reports)
        n = v.size
        span = self.cells - self.band
        s_hat = (float(np.dot(v, v)) - n * self._alpha) / self._beta
        s_hat = min(max(s_hat, 0.0), float(n))
        total = n * self._alpha + (self._beta - 1.0) * s_hat + n * self._beta / span**2
        return self._estimate(v, total)

    def _unit_variances(self, u: NDArray[np.float64]) -> NDArray[np.float64]:
        span = self.cells - self.band
        t = 2.0 * u - 1.0
        sigma = u * float(span)
        frac = sigma - np.floor(sigma)
        rounding = 4.0 * frac * (1.0 - frac) / span**2
        out: NDArray[np.float64] = self._alpha + (self._beta - 1.0) * t * t + self._beta * rounding
        return out

    def worst_case_variance(self, n: int) -> float:
        """Largest variance of the mean of ``n`` reports over all inputs (at ``t = +-1``).

        Examples
        --------
        >>> mech = PiecewiseMean(4.0, -1.0, 1.0)
        >>> z = np.exp(2.0)
        >>> continuous = 1 / (z - 1) + (z + 3) / (3 * (z - 1) ** 2)
        >>> bool(abs(mech.worst_case_variance(1) / continuous - 1) < 1e-3)
        True
        """
        count = check_integer(n, "n", minimum=1)
        span = self.cells - self.band
        per_report = self._alpha + self._beta - 1.0 + self._beta / span**2
        return self._half**2 * per_report / count

    def output_distribution(self, value: float) -> list[tuple[float, Fraction]]:
        """Return the exact law of one report for the input ``value``: ``[(output, prob)]``.

        One entry per cell (``cells`` entries), in increasing order of the output; meant for
        exact checks on small grids.

        Examples
        --------
        >>> mech = PiecewiseMean(1.0, 0.0, 1.0, cells=6)
        >>> law = mech.output_distribution(0.3)
        >>> len(law), sum(p for _, p in law)
        (6, Fraction(1, 1))
        """
        u = self._unit([value], "value")
        span = self.cells - self.band
        sigma = float(u[0]) * float(span)
        base = math.floor(sigma)
        frac = Fraction(sigma) - base
        n_cells, k = self.cells, self.band
        c = float(self._c)
        law: list[tuple[float, Fraction]] = []
        for j in range(n_cells):
            prob = Fraction(0)
            for start, weight in ((base, 1 - frac), (base + 1, frac)):
                if weight:
                    prob += weight * (self._a if start <= j < start + k else self._b)
            v = c * (2.0 * j + 1.0 - n_cells) / n_cells
            law.append((float(self._to_units(np.array([v]))[0]), prob))
        return law
