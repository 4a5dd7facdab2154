r"""Rényi differential privacy (RDP): per-event curves, the RDP accountant, conversions.

A mechanism M is (α, ε(α))-RDP if for all neighbouring datasets D, D'

.. math:: D_\alpha(M(D) \| M(D')) = \frac{1}{\alpha - 1}
          \log \mathbb{E}_{M(D')}\left[\left(\frac{M(D)}{M(D')}\right)^{\alpha}\right]
          \le \varepsilon(\alpha)

(Mironov 2017, Definition 4). RDP curves add under (adaptive) composition at every order
(Mironov 2017, Proposition 1), and a curve converts to (ε, δ)-DP at any order; the accountant
keeps the curve on a fixed grid of orders and minimises the conversion over the grid.

References
----------
- I. Mironov. Rényi differential privacy. CSF 2017 (arXiv:1702.07476).
- I. Mironov, K. Talwar, L. Zhang. Rényi differential privacy of the sampled Gaussian
  mechanism. arXiv:1908.10530, 2019 (MTZ19).
- C. Canonne, G. Kamath, T. Steinke. The discrete Gaussian for differential privacy.
  NeurIPS 2020 (arXiv:2004.00010, CKS20).
- S. Asoodeh, J. Liao, F. Calmon, O. Kosut, L. Sankar. Three variants of differential privacy:
  lossless conversion and applications. IEEE JSAIT 2021.
- V. Feldman, T. Zrnic. Individual privacy accounting via a Rényi filter. NeurIPS 2021.

Examples
--------
>>> from dpcurator.accounting import GaussianEvent, PoissonSampledEvent
>>> from dpcurator.accounting._rdp import RDPAccountant
>>> acc = RDPAccountant().compose(PoissonSampledEvent(256 / 60000, GaussianEvent(1.1)), 14000)
>>> round(acc.get_epsilon(1e-5), 2)
2.59
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from typing import ClassVar

import numpy as np
from numpy.typing import NDArray
from scipy import special

from dpcurator._validation import check_delta, check_epsilon, check_positive, check_probability
from dpcurator.accounting._accountant import Accountant
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
from dpcurator.errors import InternalError, InvalidParameterError, UnsupportedEventError

__all__ = [
    "DEFAULT_RDP_ORDERS",
    "RDPAccountant",
    "rdp_curve",
    "rdp_to_delta",
    "rdp_to_epsilon",
    "sampled_gaussian_rdp",
]

FloatArray = NDArray[np.float64]

#: Default orders: every 0.1 from 1.1 to 10.9 and every 0.5 from 11 to 64, where compositions
#: like DP-SGD find their optimum, then sparse up to 1024 for small epsilons (219 orders).
DEFAULT_RDP_ORDERS: tuple[float, ...] = (
    *(1.0 + k / 10.0 for k in range(1, 100)),
    *(11.0 + k / 2.0 for k in range(0, 107)),
    *(72.0, 80.0, 96.0, 112.0, 128.0, 160.0, 192.0, 256.0, 320.0, 384.0, 512.0, 768.0, 1024.0),
)

_LOG_TRUNCATION = -30.0  # the fractional-order series stops below e^-30 * A (MTZ19, Sec. 3)
_MAX_SERIES_TERMS = 50_000_000
_PLD_HINT = "use PLDAccountant, which accounts for every event through its privacy profile"


# --------------------------------------------------------------------------------------------
# Validation helpers
# --------------------------------------------------------------------------------------------
def _check_orders(orders: object, name: str = "orders") -> FloatArray:
    if isinstance(orders, str | bytes) or not isinstance(orders, Sequence | np.ndarray):
        raise InvalidParameterError(name, orders, "must be a sequence of orders > 1")
    values: list[float] = []
    for value in orders:
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise InvalidParameterError(name, orders, "must contain only real numbers")
        out = float(value)
        if not (math.isfinite(out) and out > 1.0):
            raise InvalidParameterError(name, orders, "must contain only finite orders > 1")
        values.append(out)
    if not values:
        raise InvalidParameterError(name, orders, "must contain at least one order")
    return np.asarray(values, dtype=np.float64)


def _check_rdp(orders: object, rdp: object) -> tuple[FloatArray, FloatArray]:
    alphas = _check_orders(orders)
    try:
        values = np.asarray(rdp, dtype=np.float64).reshape(-1)
    except (TypeError, ValueError):
        raise InvalidParameterError("rdp", rdp, "must be a sequence of numbers") from None
    if values.shape != alphas.shape:
        raise InvalidParameterError(
            "rdp", rdp, f"must have one value per order ({alphas.size} orders)"
        )
    if np.any(np.isnan(values)) or np.any(values < 0):
        raise InvalidParameterError("rdp", rdp, "must contain only values >= 0 (no NaN)")
    return alphas, values


# --------------------------------------------------------------------------------------------
# The sampled Gaussian mechanism (MTZ19)
# --------------------------------------------------------------------------------------------
def _log_expm1(x: FloatArray) -> FloatArray:
    """``log(exp(x) - 1)`` for ``x > 0``, without overflow."""
    out = np.empty_like(x)
    big = x > 30.0
    out[big] = x[big] + np.log1p(-np.exp(-x[big]))
    out[~big] = np.log(np.expm1(x[~big]))
    return out


def _log_a_integer(q: float, z: float, alpha: int) -> float:
    """``log A_α`` for integer α >= 2 (MTZ19, Sec. 3, the binomial expansion).

    ``A_α = Σ_k C(α,k) (1-q)^(α-k) q^k exp((k²-k)/(2z²))``. Since the binomial weights sum to
    one and the k = 0, 1 terms have exponent 0, ``A_α - 1`` is a sum of non-negative terms with
    ``expm1``: computed in log space it has no cancellation, so tiny RDP values stay exact.
    """
    k = np.arange(2, alpha + 1, dtype=np.float64)
    log_binom = (
        special.gammaln(alpha + 1.0) - special.gammaln(k + 1.0) - special.gammaln(alpha - k + 1.0)
    )
    log_terms = (
        log_binom
        + k * math.log(q)
        + (alpha - k) * math.log1p(-q)
        + _log_expm1((k * k - k) / (2.0 * z * z))
    )
    log_a_minus_1 = float(special.logsumexp(log_terms))
    return float(np.logaddexp(0.0, log_a_minus_1))


def _log_tilted_tail(m: FloatArray, y: FloatArray, z: float, z0: float, slope: float) -> FloatArray:
    """``log(exp((m² - m) / (2 z²)) · erfc(y) / 2)`` where ``y² = (m - z0)² / (2 z²)``.

    For ``y > 0`` the Gaussian factor is folded into the exponent through
    ``(m² - m)/(2z²) - y² = m·slope - z0²/(2z²)`` (with ``slope = ln((1-q)/q)``) and
    ``erfc(y) = erfcx(y) e^{-y²}``, so no two huge numbers are subtracted.
    """
    out = np.empty_like(m)
    pos = y > 0
    out[pos] = m[pos] * slope - z0 * z0 / (2.0 * z * z) + np.log(0.5 * special.erfcx(y[pos]))
    neg = ~pos
    out[neg] = (m[neg] * m[neg] - m[neg]) / (2.0 * z * z) + np.log(0.5 * special.erfc(y[neg]))
    return out


def _log_a_fractional(q: float, z: float, alpha: float) -> float:
    """``log A_α`` for fractional α > 1 by the two series of MTZ19 (Sec. 3).

    Split the integral of ``μ0 ((1-q) + q μ1/μ0)^α`` at ``z0 = z² ln(1/q - 1) + 1/2``, where
    ``q μ1/μ0 = 1 - q``, and expand the binomial on each side (generalised binomial series,
    convergent there):

    - ``S0 = Σ_i C(α,i) q^i (1-q)^(α-i) exp((i²-i)/(2z²)) · erfc((i - z0)/(√2 z)) / 2``
    - ``S1 = Σ_i C(α,i) q^(α-i) (1-q)^i exp(((α-i)²-(α-i))/(2z²)) · erfc((z0-(α-i))/(√2 z)) / 2``

    For i > α both terms decrease monotonically in i (each is an integral of a quantity that
    decreases pointwise in i) and the signs of ``C(α, i)`` alternate, so the truncation error
    is at most the last term, which is added. Summation stops once the terms are below
    ``e^-30 A``.
    """
    log_q, log_1mq = math.log(q), math.log1p(-q)
    slope = log_1mq - log_q
    z0 = z * z * slope + 0.5
    root2z = math.sqrt(2.0) * z
    log_gamma_a = float(special.gammaln(alpha + 1.0))
    log_pos, log_neg = -math.inf, -math.inf
    log_abs_sum = -math.inf
    start, chunk = 0, 256
    while True:
        i = np.arange(start, start + chunk, dtype=np.float64)
        j = alpha - i
        log_coef = log_gamma_a - special.gammaln(i + 1.0) - special.gammaln(j + 1.0)
        sign = special.gammasgn(j + 1.0)
        log_s0 = (
            log_coef
            + i * log_q
            + j * log_1mq
            + _log_tilted_tail(i, (i - z0) / root2z, z, z0, slope)
        )
        log_s1 = (
            log_coef
            + j * log_q
            + i * log_1mq
            + _log_tilted_tail(j, (z0 - j) / root2z, z, z0, slope)
        )
        log_terms = np.logaddexp(log_s0, log_s1)
        positive = sign > 0
        if np.any(positive):
            log_pos = float(np.logaddexp(log_pos, special.logsumexp(log_terms[positive])))
        if np.any(~positive):
            log_neg = float(np.logaddexp(log_neg, special.logsumexp(log_terms[~positive])))
        log_abs_sum = float(np.logaddexp(log_pos, log_neg))
        last = float(log_terms[-1])
        start += chunk
        if start > alpha + 1 and last < log_pos + _LOG_TRUNCATION:
            break
        if start > _MAX_SERIES_TERMS:  # pragma: no cover - needs absurd parameters
            raise InternalError(
                f"the sampled Gaussian series did not converge (q={q}, z={z}, alpha={alpha})"
            )
        chunk = min(2 * chunk, 1 << 16)
    if log_neg >= log_pos:  # pragma: no cover - impossible for a convergent series
        raise InternalError("the sampled Gaussian series cancelled out")
    log_a = log_pos + math.log1p(-math.exp(log_neg - log_pos))
    # Round up: the truncation error (at most the last term) and floating-point rounding of
    # every term (a few ulps of the sum of magnitudes).
    margin = math.exp(last - log_a) + 64 * np.finfo(np.float64).eps * math.exp(log_abs_sum - log_a)
    return log_a + math.log1p(margin)


def sampled_gaussian_rdp(
    sampling_rate: float, noise_multiplier: float, orders: Sequence[float]
) -> FloatArray:
    r"""RDP curve of the Poisson-sampled Gaussian mechanism (one step of DP-SGD).

    With ``μ0 = N(0, z²)`` and ``μ = (1-q) N(0, z²) + q N(1, z²)`` the sampled Gaussian
    mechanism is (α, ε(α))-RDP under add/remove neighbours with

    .. math:: \varepsilon(\alpha) = \frac{1}{\alpha - 1} \log A_\alpha, \quad
              A_\alpha = \mathbb{E}_{x \sim \mu_0}[(\mu(x) / \mu_0(x))^\alpha]

    (MTZ19, Section 3: the divergence with the mixture first dominates the reverse one).
    Integer orders use the exact binomial sum, fractional orders the two erfc series of MTZ19;
    both run in log space. A fractional order's value is also capped by the chord between the
    neighbouring integer orders, valid because ``(α - 1) D_α`` is a cumulant generating
    function, hence convex in α.

    Parameters
    ----------
    sampling_rate : float
        Poisson sampling probability q, in (0, 1].
    noise_multiplier : float
        z = sigma / L2 sensitivity, > 0.
    orders : sequence of float
        Rényi orders, each > 1.

    Returns
    -------
    numpy.ndarray
        ε(α) for each order.

    Examples
    --------
    >>> [round(float(v), 6) for v in sampled_gaussian_rdp(0.01, 1.0, [2, 2.5])]
    [0.000172, 0.000218]
    >>> float(sampled_gaussian_rdp(1.0, 2.0, [3])[0])  # q = 1: the Gaussian, α / (2 z²)
    0.375
    """
    q = check_probability(sampling_rate, "sampling_rate", open_left=True)
    z = check_positive(noise_multiplier, "noise_multiplier")
    alphas = _check_orders(orders)
    if q == 1.0:
        return alphas / (2.0 * z * z)
    cache: dict[int, float] = {1: 0.0}

    def log_a_int(a: int) -> float:
        if a not in cache:
            cache[a] = _log_a_integer(q, z, a)
        return cache[a]

    out = np.empty_like(alphas)
    for idx, alpha in enumerate(alphas):
        if float(alpha).is_integer():
            log_a = log_a_int(int(alpha))
        else:
            lo, hi = math.floor(alpha), math.ceil(alpha)
            chord = log_a_int(lo) + (alpha - lo) * (log_a_int(hi) - log_a_int(lo))
            log_a = min(_log_a_fractional(q, z, float(alpha)), chord)
        out[idx] = log_a / (alpha - 1.0)
    return out


# --------------------------------------------------------------------------------------------
# Closed forms for the other events
# --------------------------------------------------------------------------------------------
def _gaussian_rdp(noise_multiplier: float, alphas: FloatArray) -> FloatArray:
    """``α Δ² / (2 σ²)`` (Mironov 2017, Table II; CKS20, Proposition 5 for the discrete one)."""
    return alphas / (2.0 * noise_multiplier * noise_multiplier)


def _log_excess(log_s_minus_1: FloatArray, alphas: FloatArray) -> FloatArray:
    """Return ``log(S) / (α - 1)`` from ``log(S - 1)``, exact for tiny ``S - 1``."""
    return np.asarray(np.logaddexp(0.0, log_s_minus_1) / (alphas - 1), dtype=np.float64)


def _laplace_rdp(eps: float, alphas: FloatArray) -> FloatArray:
    """Laplace with scale b and sensitivity d, ``eps = d / b`` (Mironov 2017, Table II).

    ``ε(α) = 1/(α-1) log( α/(2α-1) e^{(α-1) eps} + (α-1)/(2α-1) e^{-α eps} )``. The argument
    of the log is ``1 + g/(2α-1)`` with ``g = α expm1((α-1)eps) + (α-1) expm1(-α eps) >= 0``;
    for ``α eps < 1/2`` g is summed from its Taylor series
    ``α(α-1) Σ_{n>=2} ((α-1)^{n-1} + (-1)^n α^{n-1}) eps^n / n!`` so that tiny epsilons keep full
    relative precision. For a vector statistic with L1 sensitivity d, per-coordinate
    divergences add and the divergence is convex in the shift with value 0 at 0, hence
    superadditive: putting the whole shift on one coordinate is the worst case.
    """
    out = np.empty_like(alphas)
    small = alphas * eps < 0.5
    if np.any(small):
        a = alphas[small]
        n = np.arange(2, 26, dtype=np.float64)[:, None]
        log_fact = special.gammaln(n + 1.0)
        coef = (a - 1) ** (n - 1) + (-1.0) ** n * a ** (n - 1)
        g = a * (a - 1) * np.sum(coef * np.exp(n * math.log(eps) - log_fact), axis=0)
        out[small] = np.log1p(g / (2 * a - 1)) / (a - 1)
    big = ~small
    if np.any(big):
        a = alphas[big]
        log_mix = np.logaddexp(
            np.log(a / (2 * a - 1)) + (a - 1) * eps,
            np.log((a - 1) / (2 * a - 1)) - a * eps,
        )
        out[big] = log_mix / (a - 1)
    return np.maximum(out, 0.0)


def _rr_rdp(log_r: float, eps: float, alphas: FloatArray) -> FloatArray:
    """Rényi divergence of randomized response with ``p / r = e^eps`` (r the other-value mass).

    Outputs a, b and the k-2 others have probabilities (p, r), (r, p) and (r, r), so
    ``S = p^α r^{1-α} + r^α p^{1-α} + (k-2) r`` and, with ``u = (α-1) eps``,
    ``S - 1 = r e^{-u} expm1(u) expm1(α eps)`` (a product of positive factors, free of
    cancellation). The pair is symmetric, so both orientations agree.
    """
    u = (alphas - 1) * eps
    log_s_minus_1 = log_r + _log_expm1(u) + _log_expm1(alphas * eps) - u
    return _log_excess(log_s_minus_1, alphas)


def _binary_rr_rdp(eps: float, alphas: FloatArray) -> FloatArray:
    """Randomized response with ``p = e^eps / (1 + e^eps)``: every eps-DP pair's worst case.

    By Kairouz, Oh and Viswanath (2015, Theorem 2.1) every eps-DP pair is a post-processing of
    this one, so by data processing it bounds the Rényi divergence of any eps-DP mechanism:
    ``D_α = 1/(α-1) log((e^{α eps} + e^{-(α-1) eps}) / (1 + e^eps))``.
    """
    log_r = -(eps + math.log1p(math.exp(-eps)))  # r = 1 / (1 + e^eps)
    return _rr_rdp(log_r, eps, alphas)


def _randomized_response_rdp(event: RandomizedResponseEvent, alphas: FloatArray) -> FloatArray:
    """Exact Rényi divergence of k-ary randomized response, true values a vs b."""
    return _rr_rdp(math.log(event.p_other), event.epsilon, alphas)


def _log_h(loss: FloatArray, alphas: FloatArray) -> FloatArray:
    """``log(e^{αL} - 1 - α(e^L - 1))`` (>= 0 by convexity) for a grid of L x orders.

    Taylor series ``Σ_{n>=2} (α^n - α) L^n / n!`` where ``|αL| < 1/2``; otherwise the direct
    form, rearranged for large positive L so that nothing overflows.
    """
    a = np.broadcast_to(alphas, np.broadcast_shapes(loss.shape, alphas.shape))
    L = np.broadcast_to(loss, a.shape)
    out = np.empty(a.shape)
    small = np.abs(a * L) < 0.5
    if np.any(small):
        As, Ls = a[small], L[small]
        n = np.arange(2, 26, dtype=np.float64)[:, None]
        terms = (As**n - As) * Ls**n * np.exp(-special.gammaln(n + 1.0))
        with np.errstate(divide="ignore"):  # L = 0 (h = 0) at the lattice's midpoint
            out[small] = np.log(np.sum(terms, axis=0))
    pos = ~small & (L > 0)
    if np.any(pos):
        Ap, Lp = a[pos], L[pos]
        rest = (1 - Ap) * np.exp(-Ap * Lp) + Ap * np.exp(-(Ap - 1) * Lp)
        out[pos] = Ap * Lp + np.log1p(-rest)
    neg = ~small & (L <= 0)
    if np.any(neg):
        An, Ln = a[neg], L[neg]
        out[neg] = np.log(np.expm1(An * Ln) - An * np.expm1(Ln))
    return out


def _discrete_laplace_rdp(event: DiscreteLaplaceEvent, alphas: FloatArray) -> FloatArray:
    """Exact Rényi divergence of DLap(d, t) vs DLap(0, t) on the integers (d = sensitivity).

    ``S - 1 = Σ_x Q(x) h(L(x))`` with ``Q = DLap(0, t)``, ``L = log(P/Q)`` and
    ``h(L) = e^{αL} - 1 - α(e^L - 1) >= 0`` (the subtracted part sums to 0 since
    ``Σ Q e^L = Σ P = 1``), a sum of non-negative terms. With ``u = 1/t``, L is ``du`` on
    x >= d, ``-du`` on x <= 0 and ``(2x - d)u`` at 0 < x < d. For d = 1 this is binary
    randomized response with eps = u.
    Reflection x -> d - x swaps P and Q, so both orientations agree; superadditivity in the
    shift (as for Laplace) makes a single coordinate the worst case for L1 sensitivity d.
    """
    u = 1.0 / event.scale
    d = event.sensitivity
    if d == 1:
        return _binary_rr_rdp(u, alphas)
    log_c = math.log(math.tanh(u / 2.0))  # c = (1 - e^-u) / (1 + e^-u)
    log_geo = -math.log(-math.expm1(-u))  # 1 / (1 - e^-u)
    # x >= d: L = du, Q-mass c e^{-du} / (1 - e^-u); x <= 0: L = -du, Q-mass c / (1 - e^-u).
    ends = np.array([[log_c - d * u + log_geo], [log_c + log_geo]])
    log_sum = special.logsumexp(ends + _log_h(np.array([[d * u], [-d * u]]), alphas), axis=0)
    for start in range(1, d, 4096):  # 0 < x < d: L = (2x - d) u, Q-mass c e^{-xu}
        x = np.arange(start, min(start + 4096, d), dtype=np.float64)[:, None]
        part = special.logsumexp(log_c - x * u + _log_h((2 * x - d) * u, alphas), axis=0)
        log_sum = np.logaddexp(log_sum, part)
    return _log_excess(np.asarray(log_sum, dtype=np.float64), alphas)


def _gaussian_noise_multiplier(event: PrivacyEvent) -> float | None:
    """Effective noise multiplier of a composition of Gaussians, or None if not all Gaussian.

    Composing Gaussian mechanisms with noise multipliers z_i is exactly a Gaussian mechanism
    with ``z^-2 = Σ z_i^-2`` (its privacy loss is Gaussian; Dong, Roth and Su 2022, Corollary
    3.3), so Poisson sampling of such a composition is the sampled Gaussian mechanism.
    Returns ``math.inf`` for events that release nothing.
    """
    if isinstance(event, GaussianEvent):
        return event.noise_multiplier
    if isinstance(event, NoOpEvent):
        return math.inf
    if isinstance(event, SelfComposedEvent):
        inner = _gaussian_noise_multiplier(event.event)
        if inner is None:
            return None
        return math.inf if event.count == 0 else inner / math.sqrt(event.count)
    if isinstance(event, ComposedEvent):
        inverse_square = 0.0
        for sub in event.events:
            inner = _gaussian_noise_multiplier(sub)
            if inner is None:
                return None
            inverse_square += 1.0 / (inner * inner)
        return math.inf if inverse_square == 0 else 1.0 / math.sqrt(inverse_square)
    return None


def _unsupported(event: PrivacyEvent, why: str) -> UnsupportedEventError:
    return UnsupportedEventError(f"RDPAccountant cannot account for {event!r}: {why}; {_PLD_HINT}.")


_CLOSED_FORM = (
    NoOpEvent,
    GaussianEvent,
    DiscreteGaussianEvent,
    ZCDPEvent,
    LaplaceEvent,
    DiscreteLaplaceEvent,
    RandomizedResponseEvent,
    PureDPEvent,
)


def _check_event(event: PrivacyEvent) -> None:
    """Raise UnsupportedEventError if ``event`` has no RDP curve here (computes nothing)."""
    if isinstance(event, _CLOSED_FORM):
        return
    if isinstance(event, ApproxDPEvent):
        if event.delta > 0:
            raise _unsupported(event, "an (epsilon, delta > 0) guarantee implies no finite RDP")
        return
    if isinstance(event, SelfComposedEvent):
        _check_event(event.event)
        return
    if isinstance(event, ComposedEvent):
        for sub in event.events:
            _check_event(sub)
        return
    if isinstance(event, PoissonSampledEvent):
        if event.sampling_rate == 1.0:
            _check_event(event.event)
        elif _gaussian_noise_multiplier(event.event) is None:
            raise _unsupported(
                event, "only Poisson-sampled Gaussian mechanisms have an RDP curve here"
            )
        return
    if isinstance(event, SampledWithoutReplacementEvent):
        raise _unsupported(event, "sampling without replacement is not supported")
    raise _unsupported(event, f"{type(event).__name__} has no RDP curve")


def _curve(event: PrivacyEvent, alphas: FloatArray) -> FloatArray:
    """Compute the RDP curve of ``event`` on ``alphas`` (raises UnsupportedEventError)."""
    if isinstance(event, NoOpEvent):
        return np.zeros_like(alphas)
    if isinstance(event, GaussianEvent):
        return _gaussian_rdp(event.noise_multiplier, alphas)
    if isinstance(event, DiscreteGaussianEvent):
        return _gaussian_rdp(event.sigma / event.sensitivity, alphas)
    if isinstance(event, ZCDPEvent):
        return alphas * event.rho
    if isinstance(event, LaplaceEvent):
        return _laplace_rdp(event.epsilon, alphas)
    if isinstance(event, DiscreteLaplaceEvent):
        return _discrete_laplace_rdp(event, alphas)
    if isinstance(event, RandomizedResponseEvent):
        return _randomized_response_rdp(event, alphas)
    if isinstance(event, PureDPEvent):
        return _binary_rr_rdp(event.epsilon, alphas)
    if isinstance(event, ApproxDPEvent):
        if event.delta > 0:
            raise _unsupported(event, "an (epsilon, delta > 0) guarantee implies no finite RDP")
        if event.epsilon == 0:
            return np.zeros_like(alphas)
        return _binary_rr_rdp(event.epsilon, alphas)
    if isinstance(event, SelfComposedEvent):
        if event.count == 0:
            return np.zeros_like(alphas)
        return event.count * _curve(event.event, alphas)
    if isinstance(event, ComposedEvent):
        total = np.zeros_like(alphas)
        for sub in event.events:
            total += _curve(sub, alphas)
        return total
    if isinstance(event, PoissonSampledEvent):
        if event.sampling_rate == 1.0:
            return _curve(event.event, alphas)
        z = _gaussian_noise_multiplier(event.event)
        if z is None:
            raise _unsupported(
                event, "only Poisson-sampled Gaussian mechanisms have an RDP curve here"
            )
        if math.isinf(z):
            return np.zeros_like(alphas)
        return sampled_gaussian_rdp(event.sampling_rate, z, list(alphas))
    if isinstance(event, SampledWithoutReplacementEvent):
        raise _unsupported(event, "sampling without replacement is not supported")
    raise _unsupported(event, f"{type(event).__name__} has no RDP curve")


def rdp_curve(event: PrivacyEvent, orders: Sequence[float] = DEFAULT_RDP_ORDERS) -> FloatArray:
    """Compute the RDP curve ε(α) of one privacy event on the given orders.

    Per event (sensitivity d, noise multiplier z = sigma / d):

    - Gaussian, discrete Gaussian: ``α / (2 z²)`` (Mironov 2017, Table II; CKS20 Prop. 5).
    - Poisson-sampled Gaussian: :func:`sampled_gaussian_rdp` (MTZ19).
    - Laplace: Mironov 2017, Table II. Discrete Laplace and k-ary randomized response: the
      exact Rényi divergence of the lattice or finite pair. Pure eps-DP: binary randomized
      response with ``p = e^eps/(1+e^eps)``, the worst eps-DP pair (Kairouz, Oh and Viswanath
      2015). rho-zCDP: ``α rho``.
    - Compositions add curves (Mironov 2017, Proposition 1).

    Parameters
    ----------
    event : PrivacyEvent
        The event to account for.
    orders : sequence of float, default DEFAULT_RDP_ORDERS
        Rényi orders, each > 1.

    Returns
    -------
    numpy.ndarray
        ε(α) per order.

    Raises
    ------
    UnsupportedEventError
        For (epsilon, delta > 0) events, subsampled non-Gaussian events and sampling without
        replacement; :class:`PLDAccountant` accounts for those.

    Examples
    --------
    >>> from dpcurator.accounting import GaussianEvent, LaplaceEvent
    >>> [float(v) for v in rdp_curve(GaussianEvent(sigma=2.0), [2, 4])]
    [0.25, 0.5]
    >>> round(float(rdp_curve(LaplaceEvent(scale=1.0), [2])[0]), 6)
    0.619124
    """
    if not isinstance(event, PrivacyEvent):
        raise InvalidParameterError("event", event, "must be a PrivacyEvent")
    return _curve(event, _check_orders(orders))


# --------------------------------------------------------------------------------------------
# Conversions
# --------------------------------------------------------------------------------------------
def rdp_to_epsilon(
    orders: Sequence[float], rdp: Sequence[float] | FloatArray, delta: float
) -> tuple[float, float]:
    r"""Smallest epsilon certified at ``delta`` by an RDP curve, and the order that gives it.

    At each order (CKS20, Proposition 12; Asoodeh et al. 2021):

    .. math:: \varepsilon = \varepsilon(\alpha) + \log\frac{\alpha - 1}{\alpha}
              - \frac{\log\delta + \log\alpha}{\alpha - 1},

    minimised over the orders. It never exceeds Mironov's
    ``ε(α) + log(1/δ)/(α - 1)`` (2017, Proposition 3). Also, ``δ >= sqrt(1 - e^{-ε(α)})``
    (total variation by Bretagnolle-Huber, as KL = D_1 <= D_α) certifies epsilon = 0.

    Parameters
    ----------
    orders : sequence of float
        Rényi orders, each > 1.
    rdp : sequence of float
        ε(α) per order, each >= 0.
    delta : float
        Target delta in [0, 1). With delta = 0 only an all-zero curve gives a finite epsilon.

    Returns
    -------
    tuple of float
        ``(epsilon, order)``; order is NaN when epsilon is infinite.

    Examples
    --------
    >>> eps, order = rdp_to_epsilon([2, 4, 8, 16, 32], [0.5 * a for a in [2, 4, 8, 16, 32]], 1e-5)
    >>> round(eps, 4), order
    (5.0879, 4.0)
    """
    alphas, values = _check_rdp(orders, rdp)
    delta = check_delta(delta)
    zero = values == 0
    if np.any(zero):
        return 0.0, float(alphas[np.argmax(zero)])
    if delta == 0.0:
        return math.inf, math.nan
    with np.errstate(over="ignore"):
        eps = values + np.log1p(-1.0 / alphas) - (math.log(delta) + np.log(alphas)) / (alphas - 1.0)
        tv_bound = np.sqrt(-np.expm1(-values))
    eps = np.where(tv_bound <= delta, 0.0, np.maximum(eps, 0.0))
    best = int(np.argmin(eps))
    return float(eps[best]), float(alphas[best])


def rdp_to_delta(
    orders: Sequence[float], rdp: Sequence[float] | FloatArray, epsilon: float
) -> tuple[float, float]:
    r"""Smallest delta certified at ``epsilon`` by an RDP curve, and the order that gives it.

    The inverse of :func:`rdp_to_epsilon` at each order (CKS20, Proposition 12):

    .. math:: \delta = \frac{e^{(\alpha - 1)(\varepsilon(\alpha) - \varepsilon)}}{\alpha}
              \left(1 - \frac{1}{\alpha}\right)^{\alpha - 1},

    minimised over the orders, and never above ``sqrt(1 - e^{-ε(α)})`` (Bretagnolle-Huber) or 1.

    Parameters
    ----------
    orders : sequence of float
        Rényi orders, each > 1.
    rdp : sequence of float
        ε(α) per order, each >= 0.
    epsilon : float
        Target epsilon, >= 0.

    Returns
    -------
    tuple of float
        ``(delta, order)``.

    Examples
    --------
    >>> delta, order = rdp_to_delta([2, 4, 8, 16, 32], [0.5 * a for a in [2, 4, 8, 16, 32]], 5.0879)
    >>> round(delta * 1e5, 3), order
    (1.0, 4.0)
    """
    alphas, values = _check_rdp(orders, rdp)
    epsilon = check_epsilon(epsilon, allow_zero=True)
    with np.errstate(over="ignore", under="ignore", divide="ignore"):
        log_delta = (alphas - 1.0) * (values - epsilon + np.log1p(-1.0 / alphas)) - np.log(alphas)
        log_tv = 0.5 * np.log(-np.expm1(-values))  # -inf where the curve is 0
    log_delta = np.minimum(np.minimum(log_delta, log_tv), 0.0)
    best = int(np.argmin(log_delta))
    return float(math.exp(log_delta[best])), float(alphas[best])


# --------------------------------------------------------------------------------------------
# The accountant
# --------------------------------------------------------------------------------------------
class RDPAccountant(Accountant):
    """Rényi DP accountant: adds RDP curves on a fixed grid of orders.

    Every composed event contributes its curve ε(α) (see :func:`rdp_curve`); the total is
    converted to (ε, δ) by :func:`rdp_to_epsilon`, minimising over the orders. The guarantee is
    for the neighbour relation of the events (add/remove one unit for Poisson sampling).

    ``fully_adaptive`` is False: a Rényi privacy filter is valid at one order fixed in advance
    (Feldman and Zrnic 2021, Section 3, the Rényi filter), while this accountant picks the best
    order after the fact, which is only sound when the events' parameters are chosen in
    advance. Use :class:`ZCDPAccountant` (a bound at all orders at once) for fully adaptive
    filters.

    Parameters
    ----------
    orders : sequence of float, optional
        Rényi orders, each > 1. Default :data:`DEFAULT_RDP_ORDERS` (1.1 to 1024, every 0.1
        below 11 and every 0.5 below 64).

    Examples
    --------
    >>> from dpcurator.accounting import GaussianEvent, LaplaceEvent
    >>> acc = RDPAccountant(orders=[2, 4, 8, 16, 32, 64]).compose(GaussianEvent(2.0), count=4)
    >>> acc.rdp.tolist()[:2]
    [1.0, 2.0]
    >>> round(acc.get_epsilon(1e-6), 3)
    5.543
    >>> acc.supports(LaplaceEvent(1.0))
    True
    """

    name: ClassVar[str] = "rdp"
    fully_adaptive: ClassVar[bool] = False

    def __init__(self, orders: Sequence[float] | None = None) -> None:
        super().__init__()
        alphas = _check_orders(DEFAULT_RDP_ORDERS if orders is None else orders)
        self._orders = np.unique(alphas)
        self._rdp = np.zeros_like(self._orders)
        # Curves of recent events: a training loop composes the same event every step.
        self._curves: dict[PrivacyEvent, FloatArray] = {}

    @property
    def orders(self) -> FloatArray:
        """The Rényi orders (sorted, unique); a copy."""
        return self._orders.copy()

    @property
    def rdp(self) -> FloatArray:
        """The composed RDP curve ε(α), one value per order; a copy."""
        return self._rdp.copy()

    def get_epsilon_and_order(self, delta: float) -> tuple[float, float]:
        """Epsilon at ``delta`` and the Rényi order that achieves it."""
        return rdp_to_epsilon(list(self._orders), self._rdp, check_delta(delta))

    def get_delta_and_order(self, epsilon: float) -> tuple[float, float]:
        """Delta at ``epsilon`` and the Rényi order that achieves it."""
        return rdp_to_delta(list(self._orders), self._rdp, check_epsilon(epsilon, allow_zero=True))

    def _check_supported(self, event: PrivacyEvent) -> None:
        _check_event(event)

    def _on_compose(self, event: PrivacyEvent, count: int) -> None:
        try:
            curve = self._curves.get(event)
        except TypeError:  # an event with an unhashable field: no caching
            self._rdp = self._rdp + count * _curve(event, self._orders)
            return
        if curve is None:
            curve = _curve(event, self._orders)
            if len(self._curves) >= 64:
                self._curves.pop(next(iter(self._curves)))
            self._curves[event] = curve
        self._rdp = self._rdp + count * curve

    def _epsilon(self, delta: float) -> float:
        return rdp_to_epsilon(list(self._orders), self._rdp, delta)[0]

    def _delta(self, epsilon: float) -> float:
        return rdp_to_delta(list(self._orders), self._rdp, epsilon)[0]
