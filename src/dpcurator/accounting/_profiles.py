r"""Privacy profiles: the hockey-stick divergence of every event's dominating pair.

For a pair of distributions (P, Q) and ``a = e^eps`` the hockey-stick divergence is

.. math:: H_a(P \| Q) = \sup_S P(S) - a Q(S) = E_P[(1 - e^{\epsilon - L})_+] + P(L = +\infty),

with ``L = ln(dP/dQ)`` the privacy loss. A mechanism is (eps, delta)-DP exactly when
``delta >= H_{e^eps}(M(D) || M(D'))`` for all neighbours; the curve ``eps -> delta(eps)`` is its
*privacy profile* (Balle, Barthe and Gaboardi 2018). Each event below is reduced to a pair (P, Q)
that *dominates* it (Zhu, Dong and Wang 2022, Definition 7): ``P`` is the output distribution
on the dataset with the privacy unit, ``Q`` without it. The ``"remove"`` orientation is
``H(P || Q)``, the ``"add"`` orientation ``H(Q || P)``; for symmetric pairs they coincide. The two
are tied by ``H_a(Q || P) = 1 - a + a H_{1/a}(P || Q)``, which the tests check.

Events whose relation is replace-one (randomized response, sampling without replacement) have
symmetric pairs, so both orientations give the replace-one profile.

Examples
--------
>>> from dpcurator.accounting import GaussianEvent
>>> float(privacy_profile(GaussianEvent(sigma=1.0), 1.0))  # doctest: +ELLIPSIS
0.1269...
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, Literal, TypeVar, overload

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import special

from dpcurator._validation import check_integer, check_positive, check_probability
from dpcurator.accounting._events import (
    ApproxDPEvent,
    ComposedEvent,
    DiscreteGaussianEvent,
    DiscreteLaplaceEvent,
    GaussianEvent,
    LaplaceEvent,
    NoOpEvent,
    PoissonSampledEvent,
    PrivacyEvent,
    PureDPEvent,
    RandomizedResponseEvent,
    SampledWithoutReplacementEvent,
    SelfComposedEvent,
    ZCDPEvent,
)
from dpcurator.errors import InvalidParameterError, UnsupportedEventError

__all__ = [
    "hockey_stick_discrete_gaussian",
    "hockey_stick_gaussian",
    "hockey_stick_laplace",
    "hockey_stick_sampled_gaussian",
    "privacy_profile",
]

FloatArray = NDArray[np.float64]
Orientation = Literal["remove", "add"]

#: Largest number of lattice points (discrete Gaussian / Laplace) held in memory.
_MAX_ATOMS = 1 << 23
#: Losses beyond this are not searched for (the grid would not fit anyway).
_MAX_LOSS = 16384.0


_K = TypeVar("_K", bound=Hashable)
_V = TypeVar("_V")


class _BoundedCache(Generic[_K, _V]):
    """Least-recently-used cache bounded by the total size (in floats) of what it holds.

    A count-bounded cache could hold dozens of lattices of millions of points (a calibration
    bisecting over the discrete Gaussian's sigma); this one evicts by memory.
    """

    def __init__(self, build: Callable[[_K], _V], size_of: Callable[[_V], int], budget: int):
        self._build, self._size_of, self._budget = build, size_of, budget
        self._store: OrderedDict[_K, tuple[_V, int]] = OrderedDict()
        self._total = 0

    def __call__(self, key: _K) -> _V:
        if key in self._store:
            self._store.move_to_end(key)
            return self._store[key][0]
        value = self._build(key)
        size = self._size_of(value)
        if size <= self._budget:
            self._store[key] = (value, size)
            self._total += size
            while self._total > self._budget:
                _old, (_value, freed) = self._store.popitem(last=False)
                self._total -= freed
        return value

    def cache_clear(self) -> None:
        """Forget everything."""
        self._store.clear()
        self._total = 0


def _f64(x: object) -> FloatArray:
    return np.asarray(x, dtype=np.float64)


def _other(orientation: Orientation) -> Orientation:
    return "add" if orientation == "remove" else "remove"


def _log_diff(log_a: FloatArray, log_b: FloatArray) -> FloatArray:
    """``max(e^log_a - e^log_b, 0)`` without cancellation when ``log_b`` is close to ``log_a``."""
    with np.errstate(invalid="ignore", over="ignore"):
        out = np.exp(log_a) * -np.expm1(np.minimum(log_b - log_a, 0.0))
    return _f64(np.where(np.isneginf(log_a), 0.0, np.where(np.isneginf(log_b), np.exp(log_a), out)))


# ---------------------------------------------------------------------------------------------
# Dominating pairs
# ---------------------------------------------------------------------------------------------
class _LossPair(ABC):
    """A dominating pair (P, Q) with its privacy profile in both orientations."""

    symmetric: bool = False

    @abstractmethod
    def profile(self, eps: FloatArray, orientation: Orientation) -> FloatArray:
        """``H_{e^eps}`` of the orientation, vectorised over ``eps``."""


class _TailPair(_LossPair):
    """A pair given by the tails of its privacy loss (continuous, or with few atoms).

    ``tails(eps, o)`` returns ``(first(L_o > eps), second(L_o > eps))`` where ``L_o`` is the
    loss of orientation ``o`` (first = P, second = Q for ``"remove"``, swapped for ``"add"``).
    """

    def __init__(self) -> None:
        self._ranges: dict[tuple[Orientation, float, float], tuple[float, float]] = {}

    @abstractmethod
    def tails(self, eps: FloatArray, orientation: Orientation) -> tuple[FloatArray, FloatArray]:
        """Tail probabilities of the loss above ``eps`` under both distributions."""

    def lower_first(self, eps: FloatArray, orientation: Orientation) -> FloatArray:
        """``first(L_o <= eps)`` (up to an atom at ``eps``), accurate when small.

        The first distribution of ``o`` is the second of the other orientation, whose loss is
        ``-L_o``; so this is the other orientation's second-distribution tail at ``-eps``.
        """
        return self.tails(-eps, _other(orientation))[1]

    def loss_range(
        self, orientation: Orientation, lower_tail: float, upper_tail: float
    ) -> tuple[float, float]:
        """``(lo, hi)`` with ``first(L < lo) <= lower_tail``, ``delta(hi) <= upper_tail``."""
        key = (orientation, lower_tail, upper_tail)
        if key not in self._ranges:

            def delta(x: float) -> float:
                return float(self.profile(_f64([x]), orientation)[0])

            def lower(x: float) -> float:
                return float(self.lower_first(_f64([x]), orientation)[0])

            hi = _search_decreasing(delta, upper_tail)
            lo = _search_increasing(lower, lower_tail, hi)
            self._ranges[key] = (lo, hi)
        return self._ranges[key]


def _search_decreasing(f: Callable[[float], float], tail: float) -> float:
    """Smallest ``x >= 0`` (to 1e-7 relative) with ``f(x) <= tail``, for ``f`` nonincreasing."""
    if f(0.0) <= tail:
        return 0.0
    b = 1.0
    while f(b) > tail and b < _MAX_LOSS:
        b *= 2.0
    return _bisect(lambda x: f(x) <= tail, b / 2.0 if b > 1.0 else 0.0, b)


def _search_increasing(g: Callable[[float], float], tail: float, start: float) -> float:
    """Largest ``x <= start`` (to 1e-7 relative) with ``g(x) <= tail``, ``g`` nondecreasing."""
    if g(start) <= tail:
        return start
    step = 1.0
    while g(start - step) > tail and step < _MAX_LOSS:
        step *= 2.0
    return -_bisect(
        lambda x: g(-x) <= tail, step / 2.0 - start if step > 1.0 else -start, step - start
    )


def _bisect(good: Callable[[float], bool], a: float, b: float) -> float:
    """Smallest ``x`` in ``[a, b]`` with ``good(x)`` (``good`` monotone, ``good(b)``)."""
    while b - a > 1e-7 * max(1.0, abs(b)):
        mid = 0.5 * (a + b)
        a, b = (a, mid) if good(mid) else (mid, b)
    return b


class _GaussianPair(_TailPair):
    """P = N(mu, 1), Q = N(0, 1): the Gaussian mechanism with ``mu = sensitivity / sigma``."""

    symmetric = True

    def __init__(self, mu: float) -> None:
        super().__init__()
        self.mu = mu

    def tails(self, eps: FloatArray, orientation: Orientation) -> tuple[FloatArray, FloatArray]:
        mu = self.mu
        return _f64(special.ndtr(mu / 2 - eps / mu)), _f64(special.ndtr(-mu / 2 - eps / mu))

    def profile(self, eps: FloatArray, orientation: Orientation) -> FloatArray:
        mu = self.mu
        with np.errstate(invalid="ignore"):
            log_a = _f64(special.log_ndtr(mu / 2 - eps / mu))
            log_b = eps + _f64(special.log_ndtr(-mu / 2 - eps / mu))
        out = _log_diff(log_a, np.where(np.isposinf(eps), -np.inf, log_b))
        return _f64(np.where(np.isneginf(eps), 1.0, out))


class _LaplacePair(_TailPair):
    """P = Lap(d, b), Q = Lap(0, b), with ``eps0 = d / b``; the loss lies in ``[-eps0, eps0]``.

    The loss ``(|x| - |x - d|) / b`` is ``-eps0`` for ``x <= 0``, ``eps0`` for ``x >= d`` and
    linear between, so for ``-eps0 <= eps < eps0``: ``P(L > eps) = 1 - e^{(eps - eps0)/2} / 2``,
    ``Q(L > eps) = e^{-(eps + eps0)/2} / 2`` and ``delta(eps) = 1 - e^{(eps - eps0)/2}``.
    """

    symmetric = True

    def __init__(self, eps0: float) -> None:
        super().__init__()
        self.eps0 = eps0

    def tails(self, eps: FloatArray, orientation: Orientation) -> tuple[FloatArray, FloatArray]:
        e0 = self.eps0
        inside = (eps >= -e0) & (eps < e0)
        clipped = np.clip(eps, -e0, e0)
        s1 = np.where(inside, 1.0 - 0.5 * np.exp((clipped - e0) / 2), 0.0)
        s2 = np.where(inside, 0.5 * np.exp(-(clipped + e0) / 2), 0.0)
        below = eps < -e0
        return _f64(np.where(below, 1.0, s1)), _f64(np.where(below, 1.0, s2))

    def profile(self, eps: FloatArray, orientation: Orientation) -> FloatArray:
        return _laplace_profile(eps, self.eps0)


def _laplace_profile(eps: FloatArray, e0: float) -> FloatArray:
    with np.errstate(over="ignore"):
        out = np.where(
            eps < -e0,
            -np.expm1(np.minimum(eps, 0.0)),
            np.where(eps < e0, -np.expm1(np.minimum((eps - e0) / 2, 0.0)), 0.0),
        )
    return _f64(out)


class _PoissonPair(_TailPair):
    """Poisson subsampling at rate ``q`` of a tail pair (P, Q): the pair ((1-q)Q + qP, Q).

    Zhu, Dong and Wang 2022, Theorem 11 (dominating pairs of Poisson subsampling). With
    ``a = e^eps`` (advanced joint convexity, Balle, Barthe and Gaboardi 2018, Theorem 2):

    - remove: ``H_a((1-q)Q + qP || Q) = q H_{a'}(P || Q)``, ``a' = 1 + (a - 1)/q``, when
      ``a > 1 - q``; ``1 - a`` otherwise (take S = everything).
    - add: ``H_a(Q || (1-q)Q + qP) = (1 - a(1-q)) H_{a''}(Q || P)``,
      ``a'' = a q / (1 - a(1-q))``, when ``a(1-q) < 1``; 0 otherwise (take S = empty).
    """

    def __init__(self, q: float, inner: _TailPair) -> None:
        super().__init__()
        self.q = q
        self.inner = inner

    def _remove_arg(self, eps: FloatArray) -> tuple[FloatArray, FloatArray]:
        with np.errstate(divide="ignore", invalid="ignore"):
            a1 = np.expm1(eps) + self.q
            mask = a1 > 0
            inner_eps = np.where(mask, np.log(np.where(mask, a1, 1.0)) - math.log(self.q), 0.0)
        return _f64(mask), _f64(np.where(np.isposinf(eps), np.inf, inner_eps))

    def _add_arg(self, eps: FloatArray) -> tuple[FloatArray, FloatArray]:
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            b = np.expm1(-eps) + self.q
            mask = b > 0
            inner_eps = np.where(mask, math.log(self.q) - np.log(np.where(mask, b, 1.0)), 0.0)
        return _f64(mask), _f64(np.where(np.isneginf(eps), -np.inf, inner_eps))

    def tails(self, eps: FloatArray, orientation: Orientation) -> tuple[FloatArray, FloatArray]:
        q = self.q
        if orientation == "remove":
            mask, inner_eps = self._remove_arg(eps)
            t1, t2 = self.inner.tails(inner_eps, "remove")
            s1, s2 = (1 - q) * t2 + q * t1, t2
            return _f64(np.where(mask > 0, s1, 1.0)), _f64(np.where(mask > 0, s2, 1.0))
        mask, inner_eps = self._add_arg(eps)
        t1, t2 = self.inner.tails(inner_eps, "add")
        s1, s2 = t1, (1 - q) * t1 + q * t2
        return _f64(np.where(mask > 0, s1, 0.0)), _f64(np.where(mask > 0, s2, 0.0))

    def profile(self, eps: FloatArray, orientation: Orientation) -> FloatArray:
        q = self.q
        if orientation == "remove":
            mask, inner_eps = self._remove_arg(eps)
            inner = self.inner.profile(inner_eps, "remove")
            with np.errstate(over="ignore"):
                return _f64(np.where(mask > 0, q * inner, -np.expm1(np.minimum(eps, 0.0))))
        mask, inner_eps = self._add_arg(eps)
        inner = self.inner.profile(inner_eps, "add")
        with np.errstate(over="ignore", invalid="ignore"):
            factor = -np.expm1(np.minimum(eps + math.log1p(-q), 0.0))
        return _f64(np.where(mask > 0, factor * inner, 0.0))


class _AtomicPair(_LossPair):
    """A pair with finitely many outcomes: masses ``first``/``second`` and ``loss = ln(P/Q)``.

    Arrays describe the remove orientation (first = P, second = Q); the add orientation swaps
    them and negates the loss. Outcomes with ``Q = 0`` carry loss ``+inf``, with ``P = 0``
    loss ``-inf``. The profile is the exact finite sum ``sum_o (P_o - e^eps Q_o)_+``, evaluated
    with suffix sums that keep every term nonnegative (no cancellation).
    """

    def __init__(
        self, first: FloatArray, second: FloatArray, loss: FloatArray, *, symmetric: bool
    ) -> None:
        keep = (first > 0) | (second > 0)
        self.first, self.second, self.loss = first[keep], second[keep], loss[keep]
        self.symmetric = symmetric
        self._sorted: dict[Orientation, tuple[FloatArray, FloatArray, float]] = {}
        self._suffix: dict[Orientation, tuple[FloatArray, FloatArray]] = {}

    def atoms(self, orientation: Orientation) -> tuple[FloatArray, FloatArray, float]:
        """Finite losses (sorted), their first-distribution masses, and the mass at ``+inf``."""
        if orientation not in self._sorted:
            if orientation == "remove" or self.symmetric:
                p, loss = self.first, self.loss
            else:
                p, loss = self.second, -self.loss
            finite = np.isfinite(loss) & (p > 0)
            inf_mass = float(np.sum(p[np.isposinf(loss)]))
            order = np.argsort(loss[finite], kind="stable")
            self._sorted[orientation] = (
                _f64(loss[finite][order]),
                _f64(p[finite][order]),
                inf_mass,
            )
        return self._sorted[orientation]

    def suffix(self, orientation: Orientation) -> tuple[FloatArray, FloatArray]:
        """``S_j = sum_{i>=j} p_i e^{l_j - l_i}`` and ``D_j = delta(l_j)`` over sorted atoms."""
        if orientation not in self._suffix:
            loss, p, inf_mass = self.atoms(orientation)
            if loss.size == 0:
                self._suffix[orientation] = (_f64([]), _f64([]))
            else:
                with np.errstate(divide="ignore"):
                    tilted = np.log(p) - loss
                s = np.exp(np.logaddexp.accumulate(tilted[::-1])[::-1] + loss)
                steps = -np.expm1(loss[:-1] - loss[1:]) * s[1:]
                d = inf_mass + np.concatenate([np.cumsum(steps[::-1])[::-1], [0.0]])
                self._suffix[orientation] = (_f64(s), _f64(d))
        return self._suffix[orientation]

    def profile(self, eps: FloatArray, orientation: Orientation) -> FloatArray:
        loss, _p, inf_mass = self.atoms(orientation)
        if loss.size == 0:
            return _f64(np.full(eps.shape, inf_mass))
        s, d = self.suffix(orientation)
        j = np.searchsorted(loss, eps, side="right")
        inside = j < loss.size
        jj = np.minimum(j, loss.size - 1)
        with np.errstate(invalid="ignore"):
            frac = -np.expm1(np.minimum(eps - loss[jj], 0.0))
        return _f64(np.where(inside, d[jj] + s[jj] * frac, inf_mass))

    def loss_range(
        self, orientation: Orientation, lower_tail: float, upper_tail: float
    ) -> tuple[float, float]:
        """``(lo, hi)``: first atom above ``lower_tail`` of P-mass, first with small delta."""
        loss, p, _inf = self.atoms(orientation)
        if loss.size == 0:
            return 0.0, 0.0
        _s, d = self.suffix(orientation)
        lo_index = int(np.searchsorted(np.cumsum(p), lower_tail, side="right"))
        small = d <= upper_tail
        hi_index = int(np.argmax(small)) if bool(np.any(small)) else loss.size - 1
        lo_index = min(lo_index, hi_index)
        return float(loss[lo_index]), float(loss[hi_index])


class _SplicedPair(_LossPair):
    """Sampling without replacement of a symmetric pair, through its amplified profile.

    For ``eps >= 0`` the bound ``gamma delta(eps')`` with ``e^{eps'} = 1 + (e^eps - 1)/gamma``
    (Balle, Barthe and Gaboardi 2018, Theorem 10, applied at every ``(eps', delta(eps'))``) is
    the remove profile of the Poisson pair with rate ``gamma``; for ``eps < 0`` the symmetric
    replace-one relation gives ``1 - a + a delta(-eps)``, which is the Poisson add profile.
    """

    symmetric = True

    def __init__(self, poisson: _LossPair) -> None:
        self.poisson = poisson

    def profile(self, eps: FloatArray, orientation: Orientation) -> FloatArray:
        rem = self.poisson.profile(eps, "remove")
        add = self.poisson.profile(eps, "add")
        return _f64(np.where(eps >= 0, rem, add))


# ---------------------------------------------------------------------------------------------
# Pairs of events
# ---------------------------------------------------------------------------------------------
def _rr_atoms(eps: float, delta: float) -> _AtomicPair:
    """(eps, delta) randomized response: the worst case pair of (eps, delta)-DP.

    Kairouz, Oh and Viswanath 2015 (Section 2): every (eps, delta)-DP mechanism is a
    post-processing of this pair, so it dominates. Outcomes: ``+inf`` (P-mass delta), ``eps``,
    ``-eps`` (the RR pair scaled by ``1 - delta``) and ``-inf`` (Q-mass delta).
    """
    hi, lo = (1 - delta) * special.expit(eps), (1 - delta) * special.expit(-eps)
    return _AtomicPair(
        _f64([delta, hi, lo, 0.0]),
        _f64([0.0, lo, hi, delta]),
        _f64([np.inf, eps, -eps, -np.inf]),
        symmetric=True,
    )


def _discrete_laplace_atoms(scale: float, sensitivity: int) -> _AtomicPair:
    """P = DLap(d, s), Q = DLap(0, s): ``d + 1`` loss values, exact geometric sums."""
    if sensitivity + 1 > _MAX_ATOMS:
        raise UnsupportedEventError(
            f"DiscreteLaplaceEvent(sensitivity={sensitivity}) has too many loss values for an "
            "exact privacy loss distribution; account it as PureDPEvent(sensitivity / scale)."
        )
    r = math.exp(-1.0 / scale)
    c = -math.expm1(-1.0 / scale) / (1 + r)
    y = np.arange(1, sensitivity, dtype=np.float64)
    first = np.concatenate([[r**sensitivity / (1 + r)], c * r ** (sensitivity - y), [1 / (1 + r)]])
    second = first[::-1].copy()
    loss = np.concatenate(
        [[-sensitivity / scale], (2 * y - sensitivity) / scale, [sensitivity / scale]]
    )
    return _AtomicPair(_f64(first), _f64(second), _f64(loss), symmetric=True)


def _discrete_gaussian_lattice(sigma: float, sensitivity: int) -> tuple[FloatArray, float, int]:
    """Unnormalised weights ``exp(-x^2 / 2 sigma^2)`` on ``[-K, K]``, their sum, and ``K``."""
    k = math.ceil(12.0 * sigma) + sensitivity + 2
    if 2 * k + 1 > _MAX_ATOMS:
        raise UnsupportedEventError(
            f"DiscreteGaussianEvent(sigma={sigma}) needs {2 * k + 1} lattice points; exact "
            "lattice sums are limited to sigma <= 3e5 (use RDPAccountant or ZCDPAccountant)."
        )
    x = np.arange(-k, k + 1, dtype=np.float64)
    w = np.exp(-(x * x) / (2 * sigma * sigma))
    return _f64(w), float(math.fsum(w)), k


def _dg_tail_bound(sigma: float, k: int, z: float) -> float:
    """Bound on the N_Z(0, sigma^2) mass outside ``[-k, k]``: ``2 int_k^inf e^{-t^2/2s^2} / Z``."""
    return 2.0 * sigma * math.sqrt(math.pi / 2) * math.erfc(k / (sigma * math.sqrt(2))) / z


def _discrete_gaussian_atoms(sigma: float, sensitivity: int) -> _AtomicPair:
    """P = N_Z(d, sigma^2), Q = N_Z(0, sigma^2) on ``[-K, K + d]`` plus the excluded tails.

    The loss at ``y`` is ``(2 d y - d^2) / (2 sigma^2)`` (Canonne, Kamath and Steinke 2020,
    Theorem 7). Mass outside the lattice window is at most ``b`` (a Gaussian integral bound) for
    either distribution; it is kept as an outcome of loss ``+inf`` (P-mass b) and one of loss
    ``-inf`` (Q-mass b), which only raises the profile (the bound is rigorous).
    """
    w, z, k = _discrete_gaussian_lattice(sigma, sensitivity)
    d = sensitivity
    # Outcomes y where both weights are on the lattice window: Q needs |y| <= k, P |y - d| <= k.
    y = np.arange(d - k, k + 1, dtype=np.float64)
    q_mass = w[(y + k).astype(np.int64)] / z
    p_mass = w[(y - d + k).astype(np.int64)] / z
    b = _dg_tail_bound(sigma, k - d, z)
    loss = (2 * d * y - d * d) / (2 * sigma * sigma)
    return _AtomicPair(
        _f64(np.concatenate([[b], p_mass, [0.0]])),
        _f64(np.concatenate([[0.0], q_mass, [b]])),
        _f64(np.concatenate([[np.inf], loss, [-np.inf]])),
        symmetric=True,
    )


def _poisson_atoms(q: float, inner: _AtomicPair) -> _AtomicPair:
    """Exact Poisson subsampling of a finite pair: outcome-wise ((1-q)Q + qP, Q)."""
    first = (1 - q) * inner.second + q * inner.first
    with np.errstate(divide="ignore"):
        loss = np.logaddexp(math.log1p(-q) if q < 1 else -np.inf, math.log(q) + inner.loss)
    return _AtomicPair(_f64(first), inner.second.copy(), _f64(loss), symmetric=False)


def _gaussian_mu(event: PrivacyEvent) -> float | None:
    """Return ``sensitivity / sigma`` of a Gaussian or of a composition of Gaussians, else None.

    The composition of Gaussians on the same data is one Gaussian (root sum of squares).
    """
    if isinstance(event, GaussianEvent):
        return 1.0 / event.noise_multiplier
    if isinstance(event, SelfComposedEvent):
        inner = _gaussian_mu(event.event)
        return None if inner is None else inner * math.sqrt(event.count)
    if isinstance(event, ComposedEvent) and event.events:
        parts = [_gaussian_mu(e) for e in event.events]
        if all(m is not None for m in parts):
            return math.sqrt(math.fsum(m * m for m in parts if m is not None))
    return None


def _pure_parameters(event: PrivacyEvent) -> tuple[float, float] | None:
    """(eps, delta) of events that are characterised by one approximate-DP point."""
    if isinstance(event, NoOpEvent):
        return 0.0, 0.0
    if isinstance(
        event, PureDPEvent | LaplaceEvent | DiscreteLaplaceEvent | RandomizedResponseEvent
    ):
        return event.epsilon, 0.0
    if isinstance(event, ApproxDPEvent):
        return event.epsilon, event.delta
    return None


def _pair_size(pair: _LossPair) -> int:
    if isinstance(pair, _SplicedPair):
        return _pair_size(pair.poisson)
    return 16 * pair.first.size + 16 if isinstance(pair, _AtomicPair) else 16


def _build_pair(event: PrivacyEvent) -> _LossPair:
    """Return the dominating pair of ``event`` (see :func:`privacy_profile` for the sources)."""
    mu = _gaussian_mu(event)
    if mu is not None and mu > 0:
        return _GaussianPair(mu)
    if (
        isinstance(event, NoOpEvent)
        or (isinstance(event, ComposedEvent) and not event.events)
        or (isinstance(event, SelfComposedEvent) and event.count == 0)
    ):
        return _AtomicPair(_f64([1.0]), _f64([1.0]), _f64([0.0]), symmetric=True)
    if isinstance(event, PureDPEvent):
        return _rr_atoms(event.epsilon, 0.0)
    if isinstance(event, ApproxDPEvent):
        return _rr_atoms(event.epsilon, event.delta)
    if isinstance(event, RandomizedResponseEvent):
        p, po, k = event.p_truth, event.p_other, event.categories
        return _AtomicPair(
            _f64([p, po, (k - 2) * po]),
            _f64([po, p, (k - 2) * po]),
            _f64([event.epsilon, -event.epsilon, 0.0]),
            symmetric=True,
        )
    if isinstance(event, LaplaceEvent):
        return _LaplacePair(event.epsilon)
    if isinstance(event, DiscreteLaplaceEvent):
        return _discrete_laplace_atoms(event.scale, event.sensitivity)
    if isinstance(event, DiscreteGaussianEvent):
        if event.dimension > 1:
            raise UnsupportedEventError(
                f"{event!r}: with several coordinates changing, only the zCDP bound of the "
                "multivariate discrete Gaussian is proven (Canonne, Kamath and Steinke 2020, "
                "Theorem 14); use ZCDPAccountant or RDPAccountant."
            )
        if not float(event.sensitivity).is_integer():
            raise UnsupportedEventError(
                f"{event!r}: the exact discrete Gaussian profile (Canonne, Kamath and Steinke "
                "2020, Theorem 7) needs an integer sensitivity; use ZCDPAccountant."
            )
        return _discrete_gaussian_atoms(event.sigma, int(event.sensitivity))
    if isinstance(event, PoissonSampledEvent):
        return _poisson_pair(event)
    if isinstance(event, SampledWithoutReplacementEvent):
        return _swor_pair(event)
    if isinstance(event, ZCDPEvent):
        raise UnsupportedEventError(
            f"{event!r} has no finite dominating pair (zCDP bounds Renyi divergences only); "
            "use ZCDPAccountant."
        )
    if isinstance(event, ComposedEvent | SelfComposedEvent):
        raise UnsupportedEventError(
            f"{event!r}: the profile of a composition is computed by PLDAccountant (an upper "
            "bound): PLDAccountant().compose(event).get_delta(epsilon)."
        )
    raise UnsupportedEventError(f"{event!r} is not supported by privacy profiles.")


#: The dominating pair of an event, cached (events are frozen and hashable).
_pair_for: _BoundedCache[PrivacyEvent, _LossPair] = _BoundedCache(_build_pair, _pair_size, 1 << 24)


def _poisson_pair(event: PoissonSampledEvent) -> _LossPair:
    inner_event = event.event
    if isinstance(inner_event, RandomizedResponseEvent | SampledWithoutReplacementEvent):
        raise UnsupportedEventError(
            f"{event!r}: Poisson subsampling amplifies under add/remove neighbours, but "
            f"{type(inner_event).__name__} is stated for replace-one."
        )
    try:
        inner = _pair_for(inner_event)
    except UnsupportedEventError as exc:
        raise UnsupportedEventError(f"{event!r} is not supported: {exc}") from None
    if event.sampling_rate == 1.0:
        return inner
    if isinstance(inner, _AtomicPair):
        return _poisson_atoms(event.sampling_rate, inner)
    if isinstance(inner, _TailPair):
        return _PoissonPair(event.sampling_rate, inner)
    raise UnsupportedEventError(f"{event!r}: unsupported inner event {inner_event!r}.")


def _swor_pair(event: SampledWithoutReplacementEvent) -> _LossPair:
    gamma = event.sampling_rate
    pure = _pure_parameters(event.event)
    if pure is not None:
        eps0, delta0 = pure
        return _rr_atoms(math.log1p(gamma * math.expm1(eps0)), gamma * delta0)
    if _gaussian_mu(event.event) is None and not isinstance(event.event, DiscreteGaussianEvent):
        raise UnsupportedEventError(
            f"{event!r}: sampling without replacement is supported for events with a pure "
            "(eps, delta) point (BBG18, Theorem 10) and for (discrete) Gaussian events."
        )
    inner = _pair_for(event.event)
    if gamma == 1.0:
        return inner
    if isinstance(inner, _AtomicPair):
        return _SplicedPair(_poisson_atoms(gamma, inner))
    assert isinstance(inner, _TailPair)
    return _SplicedPair(_PoissonPair(gamma, inner))


# ---------------------------------------------------------------------------------------------
# Public API
# ---------------------------------------------------------------------------------------------
def _epsilons(value: ArrayLike) -> FloatArray:
    try:
        eps = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise InvalidParameterError("epsilons", value, "must be real numbers") from None
    if bool(np.any(np.isnan(eps))):
        raise InvalidParameterError("epsilons", value, "must not contain NaN")
    return eps


def _scalar_or_array(eps_in: ArrayLike, out: FloatArray) -> float | FloatArray:
    if np.ndim(eps_in) == 0:
        return float(out.reshape(()))
    return out


@overload
def privacy_profile(
    event: PrivacyEvent, epsilons: float, *, orientation: str = "remove"
) -> float: ...
@overload
def privacy_profile(
    event: PrivacyEvent, epsilons: ArrayLike, *, orientation: str = "remove"
) -> float | FloatArray: ...
def privacy_profile(
    event: PrivacyEvent, epsilons: ArrayLike, *, orientation: str = "remove"
) -> float | FloatArray:
    r"""Privacy profile ``delta(eps)`` of an event: the hockey-stick divergence of its pair.

    .. math:: \delta(\epsilon) = \sup_S P(S) - e^{\epsilon} Q(S)
              = E_P[(1 - e^{\epsilon - L})_+] + P(L = +\infty)

    for the event's dominating pair (P, Q); the event is (eps, delta(eps))-DP for every eps
    and no smaller delta is certified by the pair. Sources, per event:

    - :class:`GaussianEvent` (and compositions of Gaussians): Balle and Wang 2018, Theorem 8.
    - :class:`LaplaceEvent`: ``1 - e^{(eps - eps0)/2}`` on ``[-eps0, eps0]`` (the loss of the
      Laplace pair is piecewise linear; see :func:`hockey_stick_laplace`).
    - :class:`PureDPEvent`, :class:`ApproxDPEvent`, :class:`RandomizedResponseEvent`,
      :class:`DiscreteLaplaceEvent`, :class:`NoOpEvent`: exact finite sums over their outcomes;
      pure and approximate DP through the (eps, delta) randomized response pair (Kairouz, Oh
      and Viswanath 2015).
    - :class:`DiscreteGaussianEvent` (integer sensitivity): exact lattice sums (Canonne, Kamath
      and Steinke 2020, Theorem 7) with a rigorous bound on the truncated tails added.
    - :class:`PoissonSampledEvent` (add/remove): Zhu, Dong and Wang 2022, Theorem 11, with the
      advanced joint convexity of Balle, Barthe and Gaboardi 2018 (Theorem 2).
    - :class:`SampledWithoutReplacementEvent` (replace-one): Balle, Barthe and Gaboardi 2018,
      Theorem 10, on the inner (eps, delta) point, or pointwise on the inner (discrete)
      Gaussian profile (an upper bound).

    Parameters
    ----------
    event : PrivacyEvent
        The event.
    epsilons : float or array_like
        Any real values (negative and infinite ones too; not NaN).
    orientation : {"remove", "add", "max"}, default "remove"
        ``H(P || Q)``, ``H(Q || P)``, or the larger of the two (add/remove neighbours).

    Returns
    -------
    float or numpy.ndarray
        ``delta(eps)``, a float for a scalar ``epsilons``.

    Raises
    ------
    UnsupportedEventError
        For events without a finite dominating pair (:class:`ZCDPEvent`: use ZCDPAccountant)
        and compositions (use :class:`PLDAccountant`).
    InvalidParameterError
        For a NaN epsilon or an unknown orientation.

    Examples
    --------
    >>> from dpcurator.accounting import PureDPEvent, PoissonSampledEvent, GaussianEvent
    >>> privacy_profile(PureDPEvent(1.0), [0.0, 1.0])
    array([0.46211716, 0.        ])
    >>> event = PoissonSampledEvent(0.5, GaussianEvent(sigma=1.0))
    >>> round(privacy_profile(event, 0.5, orientation="max"), 6)
    0.079945
    """
    if orientation not in ("remove", "add", "max"):
        raise InvalidParameterError("orientation", orientation, "must be 'remove', 'add' or 'max'")
    eps = _epsilons(epsilons)
    pair = _pair_for(event)
    if orientation == "max" and not pair.symmetric:
        out = np.maximum(pair.profile(eps, "remove"), pair.profile(eps, "add"))
    else:
        out = pair.profile(eps, "remove" if orientation == "remove" else "add")
    return _scalar_or_array(epsilons, _f64(np.clip(out, 0.0, 1.0)))


@overload
def hockey_stick_gaussian(epsilons: float, noise_multiplier: float) -> float: ...
@overload
def hockey_stick_gaussian(epsilons: ArrayLike, noise_multiplier: float) -> float | FloatArray: ...
def hockey_stick_gaussian(epsilons: ArrayLike, noise_multiplier: float) -> float | FloatArray:
    r"""Exact privacy profile of the Gaussian mechanism (Balle and Wang 2018, Theorem 8).

    With ``s = noise_multiplier = sigma / sensitivity``,

    .. math:: \delta(\epsilon) = \Phi\left(\frac{1}{2s} - \epsilon s\right)
              - e^{\epsilon}\, \Phi\left(-\frac{1}{2s} - \epsilon s\right),

    evaluated as ``e^{la} (1 - e^{lb - la})`` with ``la, lb`` from ``log_ndtr`` so that deltas
    down to 1e-300 keep their relative accuracy. The pair is symmetric (add = remove).

    Parameters
    ----------
    epsilons : float or array_like
        Any real values.
    noise_multiplier : float
        ``sigma / sensitivity`` (> 0).

    Returns
    -------
    float or numpy.ndarray
        ``delta(eps)``.

    Examples
    --------
    >>> round(hockey_stick_gaussian(1.0, 1.0), 6)
    0.126937
    >>> float(hockey_stick_gaussian(20.0, 1.0))  # doctest: +ELLIPSIS
    2.66470670536...e-86
    """
    s = check_positive(noise_multiplier, "noise_multiplier")
    eps = _epsilons(epsilons)
    return _scalar_or_array(epsilons, _GaussianPair(1.0 / s).profile(eps, "remove"))


def hockey_stick_sampled_gaussian(
    epsilons: ArrayLike,
    noise_multiplier: float,
    sampling_rate: float,
    *,
    orientation: str = "remove",
) -> float | FloatArray:
    """Privacy profile of the Poisson-subsampled Gaussian, in closed form.

    With ``mu = 1 / noise_multiplier``, ``q = sampling_rate``, ``X ~ N(0, 1)``:

    - remove, ``P = (1-q) N(0,1) + q N(mu,1)`` vs ``Q = N(0,1)``: the loss
      ``ln(1 - q + q e^{mu x - mu^2/2})`` increases with ``x`` and exceeds ``eps`` exactly when
      ``x > x_eps = (ln((e^eps - 1 + q)/q) + mu^2/2) / mu``; so
      ``delta = q Phi(mu - x_eps) - (e^eps - 1 + q) Phi(-x_eps)`` (``1 - e^eps`` when
      ``e^eps <= 1 - q``).
    - add, ``H(Q || P)``: the loss exceeds ``eps`` when ``x < x_{-eps}``, so
      ``delta = (1 - e^eps (1-q)) Phi(x) - e^eps q Phi(x - mu)`` at ``x = x_{-eps}`` (0 when
      ``e^eps (1-q) >= 1``).

    These are the dominating pairs of Zhu, Dong and Wang 2022 (Theorem 11), in closed form;
    :func:`privacy_profile` computes the same numbers through the generic subsampling
    transform, and the tests check that they agree.

    Parameters
    ----------
    epsilons : float or array_like
        Any real values.
    noise_multiplier : float
        ``sigma / sensitivity`` (> 0).
    sampling_rate : float
        Poisson rate ``q`` in (0, 1].
    orientation : {"remove", "add"}, default "remove"
        Which direction of the add/remove relation.

    Returns
    -------
    float or numpy.ndarray
        ``delta(eps)``.

    Examples
    --------
    >>> round(hockey_stick_sampled_gaussian(0.5, 1.0, 0.5), 6)
    0.079945
    >>> round(hockey_stick_sampled_gaussian(0.5, 1.0, 0.5, orientation="add"), 6)
    0.009157
    """
    s = check_positive(noise_multiplier, "noise_multiplier")
    q = check_probability(sampling_rate, "sampling_rate", open_left=True)
    if orientation not in ("remove", "add"):
        raise InvalidParameterError("orientation", orientation, "must be 'remove' or 'add'")
    eps = _epsilons(epsilons)
    mu = 1.0 / s
    log_q = math.log(q)
    log1m_q = math.log1p(-q) if q < 1 else -math.inf

    def threshold(t: FloatArray) -> FloatArray:
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            return _f64((np.log(np.expm1(t) + q) - log_q + mu * mu / 2) / mu)

    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        if orientation == "remove":
            live = eps > log1m_q
            x = threshold(np.where(live, eps, 1.0))
            log_a = log_q + special.log_ndtr(mu - x)
            log_b = np.log(np.expm1(np.where(live, eps, 1.0)) + q) + special.log_ndtr(-x)
            body = _log_diff(_f64(log_a), _f64(np.where(np.isposinf(eps), -np.inf, log_b)))
            out = np.where(live, body, -np.expm1(np.minimum(eps, 0.0)))
        else:
            live = eps < -log1m_q
            e = np.where(live, eps, 0.0)
            x = threshold(-e)
            log_a = np.log(-np.expm1(np.minimum(e + log1m_q, 0.0))) + special.log_ndtr(x)
            log_b = e + log_q + special.log_ndtr(x - mu)
            body = _log_diff(_f64(log_a), _f64(log_b))
            out = np.where(live, np.where(np.isneginf(eps), 1.0, body), 0.0)
    return _scalar_or_array(epsilons, _f64(out))


def hockey_stick_laplace(
    epsilons: ArrayLike, scale: float, sensitivity: float = 1.0
) -> float | FloatArray:
    r"""Exact privacy profile of the Laplace mechanism (symmetric pair).

    With ``eps0 = sensitivity / scale``, P = Lap(d, b) and Q = Lap(0, b), the loss
    ``(|x| - |x - d|)/b`` is ``-eps0`` left of 0, ``eps0`` right of ``d`` and linear between;
    integrating ``E_P[(1 - e^{eps - L})_+]`` piecewise gives

    .. math:: \delta(\epsilon) = 1 - e^{(\epsilon - \epsilon_0)/2} \ \text{on}\
              [-\epsilon_0, \epsilon_0], \quad 0 \text{ above}, \quad
              1 - e^{\epsilon} \text{ below}

    (derived here from the pair of the Laplace mechanism, Dwork, McSherry, Nissim and Smith
    2006, at neighbouring values 0 and d; the tests check it by numerical integration).

    Parameters
    ----------
    epsilons : float or array_like
        Any real values.
    scale : float
        Laplace scale ``b`` (> 0).
    sensitivity : float, default 1
        L1 sensitivity ``d`` (> 0).

    Returns
    -------
    float or numpy.ndarray
        ``delta(eps)``.

    Examples
    --------
    >>> round(hockey_stick_laplace(0.5, scale=1.0), 6)
    0.221199
    """
    b = check_positive(scale, "scale")
    d = check_positive(sensitivity, "sensitivity")
    eps = _epsilons(epsilons)
    return _scalar_or_array(epsilons, _laplace_profile(eps, d / b))


@overload
def hockey_stick_discrete_gaussian(
    epsilons: float, sigma: float, sensitivity: int = 1
) -> float: ...
@overload
def hockey_stick_discrete_gaussian(
    epsilons: ArrayLike, sigma: float, sensitivity: int = 1
) -> float | FloatArray: ...
def hockey_stick_discrete_gaussian(
    epsilons: ArrayLike, sigma: float, sensitivity: int = 1
) -> float | FloatArray:
    r"""Exact privacy profile of the discrete Gaussian (Canonne, Kamath and Steinke 2020, Thm 7).

    For ``X ~ N_Z(0, sigma^2)`` and integer sensitivity ``d``,

    .. math:: \delta(\epsilon) = P[X > \epsilon\sigma^2/d - d/2]
              - e^{\epsilon} P[X > \epsilon\sigma^2/d + d/2].

    The tail sums are exact lattice sums over ``|x| <= 12 sigma + d + 2`` (summed from the
    small end); the mass beyond is bounded by a Gaussian integral (``< 1e-31``) and added, so
    the value is an upper bound that is exact to floating-point accuracy. The pair is
    symmetric (add = remove).

    Parameters
    ----------
    epsilons : float or array_like
        Any real values.
    sigma : float
        Scale ``sigma`` of the discrete Gaussian (> 0).
    sensitivity : int, default 1
        Integer L2 (= L1, one dimension) sensitivity ``d`` (>= 1).

    Returns
    -------
    float or numpy.ndarray
        ``delta(eps)``.

    Examples
    --------
    >>> round(hockey_stick_discrete_gaussian(1.0, sigma=1.0), 6)
    0.141351
    """
    s = check_positive(sigma, "sigma")
    d = check_integer(sensitivity, "sensitivity", minimum=1)
    eps = _epsilons(epsilons)
    w, z, k = _discrete_gaussian_lattice(s, d)
    # suffix[i] = P[X >= x_i] with x_i = i - k, summed from the top (small terms first).
    suffix = np.concatenate([np.cumsum(w[::-1])[::-1], [0.0]]) / z
    bound = _dg_tail_bound(s, k, z)

    def tail(t: FloatArray) -> FloatArray:
        # P[X > t] = P[X >= floor(t) + 1]
        with np.errstate(invalid="ignore", over="ignore"):
            first = np.floor(t) + 1 + k
        idx = np.clip(np.nan_to_num(first, nan=0.0, posinf=2 * k + 1, neginf=0), 0, 2 * k + 1)
        return _f64(suffix[idx.astype(np.int64)])

    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        t1 = eps * s * s / d - d / 2
        p_tail = tail(t1) + bound
        q_tail = tail(t1 + d)
        log_b = np.where(q_tail > 0, eps + np.log(np.where(q_tail > 0, q_tail, 1.0)), -np.inf)
        out = _log_diff(_f64(np.log(p_tail)), _f64(np.where(np.isposinf(eps), -np.inf, log_b)))
    out = np.where(np.isneginf(eps), 1.0, out)
    return _scalar_or_array(epsilons, _f64(np.clip(out, 0.0, 1.0)))
