"""What a mechanism returns: the released value, its privacy event and its error model.

A :class:`Release` never says "epsilon" by itself: it carries the
:class:`~dpcurator.accounting.PrivacyEvent` that describes what was done, so any accountant can
charge it. Numeric releases carry an :class:`ErrorModel` computed from the noise actually used
(discrete Laplace or discrete Gaussian on the grid, not an idealised continuous distribution).

Examples
--------
>>> import numpy as np
>>> from dpcurator.accounting import DiscreteLaplaceEvent
>>> error = ErrorModel("discrete_laplace", noise_scale=10.0, center=np.array(42.0))
>>> release = Release(42.0, DiscreteLaplaceEvent(scale=10.0), error)
>>> round(release.error.std, 3), round(release.event.epsilon, 3)
(14.136, 0.1)
>>> lo, hi = release.confidence_interval(0.95)
>>> float(lo), float(hi)
(12.0, 72.0)
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

import numpy as np
from numpy.typing import NDArray

from dpcurator._validation import check_positive, check_probability
from dpcurator.accounting import PrivacyEvent
from dpcurator.errors import InvalidParameterError, UnsupportedError

__all__ = ["DISTRIBUTIONS", "ErrorModel", "Release"]

T = TypeVar("T")

DISTRIBUTIONS = ("discrete_laplace", "discrete_gaussian")
"""Noise distributions an :class:`ErrorModel` knows (both on the integers, in grid units)."""

_DIRECT_SIGMA = 1000.0
"""Up to this sigma (in grid units) discrete Gaussian moments and tails are summed directly."""


# -- discrete Laplace: P[Z = z] = (1 - a) / (1 + a) a^|z|, a = exp(-1/t) (CKS20, Definition 28) ---
def _dlap_variance(t: float) -> float:
    # E[Z^2] = 2a / (1 - a)^2; 1 - a = -expm1(-1/t) keeps precision for large t.
    a = math.exp(-1.0 / t)
    return 2.0 * a / math.expm1(-1.0 / t) ** 2


def _dlap_mean_abs(t: float) -> float:
    # E|Z| = 2a / (1 - a^2) = 1 / sinh(1/t).
    return 1.0 / math.sinh(1.0 / t)


def _dlap_tail(t: float, q: int) -> float:
    # P[|Z| > q] = 2 a^(q+1) / (1 + a).
    return 2.0 * math.exp(-(q + 1) / t) / (1.0 + math.exp(-1.0 / t))


def _dlap_quantile(t: float, alpha: float) -> int:
    """Smallest integer ``q >= 0`` with ``P[|Z| > q] <= alpha`` (closed form, then checked)."""
    a = math.exp(-1.0 / t)
    q = max(0, math.ceil(t * math.log(2.0 / (alpha * (1.0 + a))) - 1.0))
    while q > 0 and _dlap_tail(t, q - 1) <= alpha:
        q -= 1
    while _dlap_tail(t, q) > alpha:
        q += 1
    return q


# -- discrete Gaussian: P[Z = z] ∝ exp(-z^2 / (2 sigma^2)) (CKS20, Definition 1) ---------------
def _dgauss_weights(sigma: float) -> tuple[NDArray[np.float64], NDArray[np.float64], float]:
    x = np.arange(0, math.ceil(40.0 * sigma) + 41, dtype=np.float64)
    with np.errstate(under="ignore"):
        w = np.exp(-(x**2) / (2.0 * sigma**2))
    total = float(w[0] + 2.0 * w[1:].sum())
    return x, w, total


def _dgauss_variance(sigma: float) -> float:
    # Direct sum for small sigma. For sigma > 1000, Poisson summation gives
    # Var = sigma^2 [1 + 2 sum_k (1 - 4 pi^2 sigma^2 k^2) e^{-2 pi^2 sigma^2 k^2}]
    #              / [1 + 2 sum_k e^{-2 pi^2 sigma^2 k^2}],
    # whose correction terms (< e^{-10^7}) vanish in float64: Var = sigma^2.
    if sigma <= _DIRECT_SIGMA:
        x, w, total = _dgauss_weights(sigma)
        return float(2.0 * (x**2 * w).sum() / total)
    return sigma**2


def _dgauss_mean_abs(sigma: float) -> float:
    # Direct sum for small sigma. Otherwise E|Z| = 2 S / Z with Z = sqrt(2 pi) sigma (Poisson
    # summation, corrections < e^{-10^7}) and S = sum_{x >= 1} x e^{-x^2/(2 sigma^2)}
    # = sigma^2 - 1/12 - 1/(240 sigma^2) + ... (Euler-Maclaurin; the next term is < 1e-15).
    if sigma <= _DIRECT_SIGMA:
        x, w, total = _dgauss_weights(sigma)
        return float(2.0 * (x * w).sum() / total)
    s = sigma**2 - 1.0 / 12.0 - 1.0 / (240.0 * sigma**2)
    return 2.0 * s / (math.sqrt(2.0 * math.pi) * sigma)


def _dgauss_quantile(sigma: float, alpha: float) -> int:
    """Smallest integer ``q >= 0`` with ``P[|Z| > q] <= alpha`` (exact for small sigma).

    For large sigma a rigorous bound: ``P[|Z| > q] <= erfc(q / (sigma sqrt 2))``, because the
    tail sum is below the integral of the decreasing density from ``q`` and the normaliser is at
    least ``sqrt(2 pi) sigma`` (Poisson summation: every correction term is positive). The ``q``
    returned is then at most one unit above the exact quantile.
    """
    if sigma <= _DIRECT_SIGMA:
        _, w, total = _dgauss_weights(sigma)
        # tails[q] = P[|Z| > q] = 2 sum_{x > q} w_x / total, summed from the far end.
        tails = 2.0 * np.cumsum(w[::-1])[::-1] / total
        tails = np.append(tails[1:], 0.0)
        hits = np.nonzero(tails <= alpha)[0]
        if hits.size and tails[-2] <= alpha:
            return int(hits[0])
    z = -statistics.NormalDist().inv_cdf(alpha / 2.0)
    q = max(0, math.ceil(sigma * z))
    while math.erfc(q / (sigma * math.sqrt(2.0))) > alpha:
        q += 1
    return q


@dataclass(frozen=True, slots=True, eq=False)
class ErrorModel:
    """The error of a numeric release: the noise distribution actually used, and what it implies.

    The released value is ``center = unit * (round(f(D) / unit) + Z)`` with ``Z`` integer noise
    (per coordinate, independent) of the named ``distribution`` and parameter ``noise_scale`` in
    grid units. So ``|center - f(D)| <= unit * |Z| + rounding`` coordinate-wise, where
    ``rounding`` is half a grid unit for real-valued statistics and 0 for integer ones.

    Parameters
    ----------
    distribution : {"discrete_laplace", "discrete_gaussian"}
        ``"discrete_laplace"``: ``P[Z = z] ∝ exp(-|z| / noise_scale)``;
        ``"discrete_gaussian"``: ``P[Z = z] ∝ exp(-z^2 / (2 noise_scale^2))``
        (Canonne, Kamath and Steinke 2020, Definitions 1 and 28).
    noise_scale : float
        ``t`` (Laplace) or ``sigma`` (Gaussian), in grid units, > 0.
    unit : float, default 1.0
        The grid width in the statistic's units (``2**-k``; 1 for integer mechanisms).
    rounding : float, default 0.0
        Largest rounding error per coordinate, in the statistic's units.
    center : numpy.ndarray
        The released value(s).

    Examples
    --------
    >>> import numpy as np
    >>> error = ErrorModel("discrete_laplace", noise_scale=10.0, center=np.array([5.0, 7.0]))
    >>> round(error.expected_l1, 3)  # k Delta/eps = 20 for continuous Laplace (lecture 000)
    19.967
    >>> error.tail_bound(0.05) <= 10.0 * math.log(2 / 0.05) + 1
    True
    """

    distribution: str
    noise_scale: float
    unit: float = 1.0
    rounding: float = 0.0
    center: NDArray[np.float64] = field(default_factory=lambda: np.zeros(()))

    def __post_init__(self) -> None:
        if self.distribution not in DISTRIBUTIONS:
            raise InvalidParameterError(
                "distribution", self.distribution, f"must be one of {DISTRIBUTIONS}"
            )
        object.__setattr__(self, "noise_scale", check_positive(self.noise_scale, "noise_scale"))
        object.__setattr__(self, "unit", check_positive(self.unit, "unit"))
        object.__setattr__(
            self, "rounding", check_positive(self.rounding, "rounding", allow_zero=True)
        )
        center = np.array(self.center, dtype=np.float64)
        center.setflags(write=False)
        object.__setattr__(self, "center", center)

    # -- moments ------------------------------------------------------------------------------
    @property
    def coordinates(self) -> int:
        """Number of released coordinates ``k``."""
        return int(self.center.size)

    @property
    def scale(self) -> float:
        """The noise parameter in the statistic's units (``noise_scale * unit``)."""
        return self.noise_scale * self.unit

    @property
    def variance(self) -> float:
        """Exact variance of the noise per coordinate, in the statistic's units squared.

        Discrete Laplace: ``2a / (1 - a)^2`` with ``a = exp(-1/t)``. Discrete Gaussian: summed
        directly, or ``sigma^2`` to float precision when ``sigma > 1000`` grid units (Poisson
        summation). Slightly below ``2 t^2`` and ``sigma^2``: the discrete noise is a bit tighter.
        """
        if self.distribution == "discrete_laplace":
            v = _dlap_variance(self.noise_scale)
        else:
            v = _dgauss_variance(self.noise_scale)
        return v * self.unit**2

    @property
    def std(self) -> float:
        """Standard deviation of the noise per coordinate (exact for the discrete noise used)."""
        return math.sqrt(self.variance)

    @property
    def expected_l1(self) -> float:
        """``E ||noise||_1`` over all coordinates, in the statistic's units.

        For discrete Laplace it is ``k unit / sinh(1 / t)``, just below the continuous
        ``k Delta / eps`` of lecture 000 (Laplace mechanism, utility theorem). The rounding of
        ``f(D)`` to the grid adds at most ``k * rounding`` to ``E ||M(D) - f(D)||_1``.
        """
        if self.distribution == "discrete_laplace":
            m = _dlap_mean_abs(self.noise_scale)
        else:
            m = _dgauss_mean_abs(self.noise_scale)
        return self.coordinates * m * self.unit

    # -- intervals and tails --------------------------------------------------------------------
    def _quantile(self, alpha: float) -> int:
        if self.distribution == "discrete_laplace":
            return _dlap_quantile(self.noise_scale, alpha)
        return _dgauss_quantile(self.noise_scale, alpha)

    def half_width(self, level: float = 0.95) -> float:
        """Half-width ``q unit + rounding`` of :meth:`confidence_interval` at ``level``.

        ``q`` is the smallest integer with ``P[|Z| > q] <= 1 - level`` (the interval's ends are
        then rounded outward when ``rounding > 0``).

        Examples
        --------
        >>> ErrorModel("discrete_laplace", noise_scale=1.0).half_width(0.9)
        2.0
        """
        level = check_probability(level, "level", open_left=True, open_right=True)
        return self._quantile(1.0 - level) * self.unit + self.rounding

    def confidence_interval(
        self, level: float = 0.95
    ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """Per-coordinate interval that contains ``f(D)`` with probability at least ``level``.

        ``center -+ (q unit + rounding)`` with ``q`` the smallest integer such that
        ``P[|Z| > q] <= 1 - level``: exact for discrete Laplace (closed form tail
        ``2 a^(q+1) / (1 + a)``) and for discrete Gaussian up to 1000 grid units, and at most one
        grid unit wider than exact above that (tail bounded by ``erfc(q / (sigma sqrt 2))``).
        The ends are rounded outward.

        Parameters
        ----------
        level : float, default 0.95
            Coverage probability, in (0, 1).

        Returns
        -------
        tuple of numpy.ndarray
            ``(lo, hi)``, each shaped like the released value.

        Examples
        --------
        >>> import numpy as np
        >>> error = ErrorModel("discrete_laplace", noise_scale=1.0, center=np.array([0.0, 10.0]))
        >>> lo, hi = error.confidence_interval(0.9)
        >>> lo.tolist(), hi.tolist()
        ([-2.0, 8.0], [2.0, 12.0])
        """
        half = self.half_width(level)
        lo = np.nextafter(self.center - half, -np.inf) if self.rounding else self.center - half
        hi = np.nextafter(self.center + half, np.inf) if self.rounding else self.center + half
        return lo, hi

    def tail_bound(self, beta: float) -> float:
        """Radius ``r`` with ``P[||M(D) - f(D)||_inf > r] <= beta`` over all ``k`` coordinates.

        Uses the exact per-coordinate tail and independence:
        ``P[max_i |Z_i| > q] = 1 - (1 - P[|Z| > q])^k``. For discrete Laplace the radius is at
        most ``scale * ln(k / beta) + unit + rounding``, the discrete counterpart of lecture 000's
        ``P(||M(D) - f(D)||_inf > (Delta/eps) ln(k/beta)) < beta``.

        Parameters
        ----------
        beta : float
            Failure probability, in (0, 1).

        Returns
        -------
        float

        Examples
        --------
        >>> import numpy as np
        >>> ErrorModel("discrete_laplace", noise_scale=1.0, center=np.zeros(10)).tail_bound(0.1)
        4.0
        """
        beta = check_probability(beta, "beta", open_left=True, open_right=True)
        per_coordinate = -math.expm1(math.log1p(-beta) / self.coordinates)
        return self._quantile(per_coordinate) * self.unit + self.rounding

    def __repr__(self) -> str:
        return (
            f"ErrorModel(distribution={self.distribution!r}, std={self.std:.6g}, "
            f"scale={self.scale:.6g}, unit={self.unit!r}, coordinates={self.coordinates})"
        )


@dataclass(frozen=True, slots=True, eq=False)
class Release(Generic[T]):
    """A released value with the privacy event that produced it and its error model.

    Parameters
    ----------
    value : T
        What the analyst sees (a float, an int, an array, a chosen candidate ...).
    event : PrivacyEvent
        What the release did, for accountants and budget filters.
    error : ErrorModel or None
        The noise's distribution for numeric releases; ``None`` for categorical outputs
        (randomized response, selections), whose utility is stated by the mechanism.

    Examples
    --------
    >>> from dpcurator.accounting import PureDPEvent
    >>> Release("blue", PureDPEvent(epsilon=1.0)).event
    PureDPEvent(epsilon=1.0)
    """

    value: T
    event: PrivacyEvent
    error: ErrorModel | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.event, PrivacyEvent):
            raise InvalidParameterError("event", self.event, "must be a PrivacyEvent")
        if self.error is not None and not isinstance(self.error, ErrorModel):
            raise InvalidParameterError("error", self.error, "must be an ErrorModel or None")

    def confidence_interval(self, level: float = 0.95) -> tuple[Any, Any]:
        """Shortcut for ``self.error.confidence_interval(level)``.

        Raises
        ------
        UnsupportedError
            For a categorical release (no error model).
        """
        if self.error is None:
            raise UnsupportedError(
                "this release is categorical and has no error model; see the mechanism's "
                "docstring for its utility guarantee."
            )
        return self.error.confidence_interval(level)
