r"""Zero-concentrated differential privacy (zCDP): the rho accountant and its conversions.

A mechanism M is rho-zCDP if for all neighbouring D, D' and every order α > 1

.. math:: D_\alpha(M(D) \| M(D')) \le \alpha \rho

(Bun and Steinke 2016, Definition 1.1). rho adds under adaptive composition (their Lemma 1.7),
and converts to (ε, δ)-DP (Canonne, Kamath and Steinke 2020, Corollary 13).

The accountant adds each event's rho as an exact rational (``d² / (2 sigma²)`` from the event's
floats, ``eps² / 2`` from an exact or upper-bounded epsilon), so a sum never drifts below what
was spent; the conversions run on the sum rounded up and return an epsilon or a delta that is
certified with a rigorous margin for floating-point error, never below the exact value.

References
----------
- M. Bun, T. Steinke. Concentrated differential privacy: simplifications, extensions, and
  lower bounds. TCC 2016 (arXiv:1605.02065, BS16).
- C. Canonne, G. Kamath, T. Steinke. The discrete Gaussian for differential privacy.
  NeurIPS 2020 (arXiv:2004.00010, CKS20).
- V. Feldman, T. Zrnic. Individual privacy accounting via a Rényi filter. NeurIPS 2021.
- J. Whitehouse, A. Ramdas, R. Rogers, Z. S. Wu. Fully-adaptive composition in differential
  privacy. ICML 2023.

Examples
--------
>>> from dpcurator.accounting import GaussianEvent
>>> from dpcurator.accounting._zcdp import ZCDPAccountant
>>> acc = ZCDPAccountant().compose(GaussianEvent(sigma=10.0), count=50)
>>> acc.rho
0.25
>>> round(acc.get_epsilon(1e-6), 4)
3.5423
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import ClassVar

from dpcurator._validation import ceil_float, check_delta, check_epsilon, check_positive, next_up
from dpcurator.accounting._accountant import Accountant
from dpcurator.accounting._composition import exact_pure_epsilon
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

__all__ = ["ZCDPAccountant", "event_rho", "zcdp_to_delta", "zcdp_to_epsilon"]

_ULP = 2.0**-52
# exp() errs by at most one ulp (glibc: < 1); a delta read off exp(log δ) is padded by this
# many ulps so that it stays above the exact value.
_EXP_PAD_ULPS = 4
_HINT = "use PLDAccountant (any event) or RDPAccountant (Poisson-sampled Gaussians)"


def _log_delta_at(rho: float, epsilon: float, u: float) -> float:
    """``log δ`` of CKS20 Corollary 13 at order ``α = 1 + t``, ``t = e^u``, rounded up.

    ``(α-1)(αρ - ε) + α log(1 - 1/α) - log(α - 1)`` is evaluated as
    ``t((1+t)ρ - ε) - t log1p(1/t) - log1p(t)`` (``t log t - (1+t) log1p(t)`` for t < 1), which
    avoids the cancellation of ``t log t`` against ``t log(1 + t)`` at large orders. The
    result is padded by a bound on its floating-point rounding error so that it never falls
    below the exact value.
    """
    t = math.exp(u)  # may underflow to 0 (orders within 1e-308 of 1): the terms are then 0
    if t < 1.0:
        entropy_terms = (t * u, -(1.0 + t) * math.log1p(t))
    else:
        entropy_terms = (-t * math.log1p(1.0 / t), -math.log1p(t))
    terms = (t * (1.0 + t) * rho, -t * epsilon, *entropy_terms)
    value = math.fsum(terms)
    return value + 16 * _ULP * math.fsum(abs(x) for x in terms)


def _optimal_order(rho: float, epsilon: float) -> tuple[float, float]:
    """Return the order α* minimising CKS20's δ(α) bound, and ``log δ(α*)``.

    With ``α = 1 + e^u``, ``log δ`` is strictly convex in α (second derivative
    ``2ρ + 1/(α-1) - 1/α > 0``) with derivative ``2ρα - ρ - ε + log(1 - 1/α)``, which in u reads
    ``2ρ(1 + e^u) - ρ - ε + u - log1p(e^u)``: increasing from -inf to +inf, so its root is the
    unique minimiser, found by Brent's method. Working in ``u = log(α - 1)`` keeps orders
    within 1e-300 of 1 representable (they are optimal when rho is large and epsilon small).
    """

    def slope(u: float) -> float:
        return 2.0 * rho * (1.0 + math.exp(u)) - rho - epsilon + u - math.log1p(math.exp(u))

    hi = max(1.0, math.log((rho + epsilon) / (2.0 * rho) + 1.0))
    while slope(hi) <= 0:
        hi += 2.0
    lo = min(-1.0, epsilon - rho - 1.0)
    while slope(lo) >= 0:
        lo -= 2.0 * abs(lo)
    # SciPy's optimize is imported here, not with the module: it is large (about 23 MiB of
    # memory) and only the conversions to (epsilon, delta) need it, not a session's queries.
    from scipy import optimize  # noqa: PLC0415

    u = float(optimize.brentq(slope, lo, hi, xtol=1e-14, rtol=8 * 2.0**-52))
    return 1.0 + math.exp(u), _log_delta_at(rho, epsilon, u)


def zcdp_to_delta(rho: float, epsilon: float) -> float:
    r"""Smallest delta such that rho-zCDP implies (epsilon, delta)-DP.

    CKS20, Corollary 13 (tight among conversions through RDP at a single order):

    .. math:: \delta = \inf_{\alpha > 1} \frac{e^{(\alpha - 1)(\alpha\rho - \varepsilon)}}
              {\alpha - 1}\left(1 - \frac{1}{\alpha}\right)^{\alpha}

    The objective is strictly convex in α, so the infimum is found exactly by root finding on
    its derivative. The bound holds at every order, so the one found is evaluated with its
    floating-point error bounded and added, and ``exp`` padded by a few ulps: the result is never
    below the exact infimum. It is capped at 1.

    Parameters
    ----------
    rho : float
        zCDP parameter, >= 0.
    epsilon : float
        Target epsilon, >= 0.

    Returns
    -------
    float
        delta in [0, 1].

    Examples
    --------
    >>> round(zcdp_to_delta(0.5, 4.0), 8)
    0.0001958
    >>> zcdp_to_delta(0.0, 1.0)
    0.0
    """
    rho = check_positive(rho, "rho", allow_zero=True)
    epsilon = check_epsilon(epsilon, allow_zero=True)
    if rho == 0.0:
        return 0.0
    _, log_delta = _optimal_order(rho, epsilon)
    return _delta_from_log(log_delta)


def _delta_from_log(log_delta: float) -> float:
    """``exp(log δ)`` capped at 1 and rounded up (exp is within one ulp; padded by four)."""
    if log_delta >= 0.0:
        return 1.0
    return min(next_up(math.exp(log_delta), _EXP_PAD_ULPS), 1.0)


def zcdp_to_epsilon(rho: float, delta: float) -> float:
    r"""Smallest epsilon such that rho-zCDP implies (epsilon, delta)-DP.

    Inverts :func:`zcdp_to_delta` (CKS20, Corollary 13) in epsilon. ``log δ(ε)`` is a minimum
    of affine functions of ε, hence concave and decreasing, with slope ``-(α* - 1)``
    (envelope theorem). Newton steps started at Bun and Steinke's bound
    ``ρ + 2 sqrt(ρ log(1/δ))`` (BS16, Proposition 1.3), which CKS20 improves, therefore stay
    on the safe side of the root and decrease monotonically to it; every iterate certifies
    ``δ(ε) <= delta`` and the last one is returned (rounded up, never below the exact value).

    Parameters
    ----------
    rho : float
        zCDP parameter, >= 0.
    delta : float
        Target delta in [0, 1). With delta = 0 only rho = 0 gives a finite epsilon.

    Returns
    -------
    float
        epsilon >= 0 (``math.inf`` if delta = 0 and rho > 0).

    Examples
    --------
    >>> round(zcdp_to_epsilon(0.5, 1e-5), 4)
    4.7284
    >>> round(0.5 + 2 * math.sqrt(0.5 * math.log(1e5)), 4)  # Bun-Steinke, looser
    5.2985
    """
    rho = check_positive(rho, "rho", allow_zero=True)
    delta = check_delta(delta)
    if rho == 0.0:
        return 0.0
    if delta == 0.0:
        return math.inf
    log_target = math.log(delta)

    def certified(log_d: float) -> bool:  # what zcdp_to_delta would return is <= delta
        return _delta_from_log(log_d) <= delta

    if certified(_optimal_order(rho, 0.0)[1]):
        return 0.0
    eps = next_up(rho + 2.0 * math.sqrt(rho * -log_target), 4)
    alpha, log_d = _optimal_order(rho, eps)
    for _ in range(64):  # CKS20 Cor. 13 improves BS16 Prop. 1.3: only round-off can loop
        if certified(log_d):
            break
        eps = next_up(2.0 * eps)  # pragma: no cover
        alpha, log_d = _optimal_order(rho, eps)  # pragma: no cover
    else:  # pragma: no cover
        raise InternalError(f"zCDP conversion above Bun-Steinke for rho={rho}, delta={delta}")
    for _ in range(200):
        step = (log_d - log_target) / max(alpha - 1.0, 1e-300)  # <= 0
        candidate = max(eps + step, 0.0)
        if eps - candidate <= 4 * _ULP * eps:
            break
        cand_alpha, cand_log_d = _optimal_order(rho, candidate)
        if not certified(cand_log_d):
            # Rounding put the step just past the root: finish by bisection on the bracket
            # [candidate (fails), eps (certified)].
            lo = candidate
            while eps - lo > 4 * _ULP * eps:
                mid = 0.5 * (lo + eps)
                mid_alpha, mid_log_d = _optimal_order(rho, mid)
                if certified(mid_log_d):
                    eps, alpha, log_d = mid, mid_alpha, mid_log_d
                else:
                    lo = mid
            break
        eps, alpha, log_d = candidate, cand_alpha, cand_log_d
    return eps


def _event_rho(event: PrivacyEvent) -> Fraction:
    """Return rho of ``event`` as an exact rational, an upper bound if irrational.

    Raises UnsupportedEventError.
    """
    if isinstance(event, NoOpEvent):
        return Fraction(0)
    if isinstance(event, GaussianEvent | DiscreteGaussianEvent):
        return Fraction(event.sensitivity) ** 2 / (2 * Fraction(event.sigma) ** 2)
    if isinstance(event, ZCDPEvent):
        return Fraction(event.rho)
    if isinstance(
        event, LaplaceEvent | DiscreteLaplaceEvent | RandomizedResponseEvent | PureDPEvent
    ):
        return exact_pure_epsilon(event) ** 2 / 2
    if isinstance(event, ApproxDPEvent):
        if event.delta > 0:
            raise UnsupportedEventError(
                f"ZCDPAccountant cannot account for {event!r}: an (epsilon, delta > 0) "
                f"guarantee implies no zCDP bound; {_HINT}."
            )
        return Fraction(event.epsilon) ** 2 / 2
    if isinstance(event, SelfComposedEvent):
        inner = _event_rho(event.event)
        return event.count * inner
    if isinstance(event, ComposedEvent):
        return sum((_event_rho(sub) for sub in event.events), Fraction(0))
    if isinstance(event, PoissonSampledEvent) and event.sampling_rate == 1.0:
        return _event_rho(event.event)
    if isinstance(event, PoissonSampledEvent | SampledWithoutReplacementEvent):
        raise UnsupportedEventError(
            f"ZCDPAccountant cannot account for {event!r}: subsampling does not amplify zCDP "
            f"by a usable rho; {_HINT}."
        )
    raise UnsupportedEventError(
        f"ZCDPAccountant cannot account for {event!r}: {type(event).__name__} has no zCDP "
        f"bound; {_HINT}."
    )


def event_rho(event: PrivacyEvent) -> float:
    """Return the zCDP parameter rho of one privacy event.

    - Gaussian and discrete Gaussian with L2 sensitivity d: ``rho = d² / (2 sigma²)``
      (BS16, Proposition 1.6; CKS20, Theorem 4 and Theorem 14 for vectors).
    - Pure eps-DP events (PureDPEvent, Laplace, discrete Laplace, randomized response,
      (eps, 0)-approximate DP): ``rho = eps² / 2`` (BS16, Proposition 3.3).
    - ZCDPEvent: its rho. Compositions: rho adds (BS16, Lemma 1.7).

    rho is computed exactly from the event's floats and rounded up to a float.

    Parameters
    ----------
    event : PrivacyEvent
        The event to account for.

    Returns
    -------
    float
        rho >= 0.

    Raises
    ------
    UnsupportedEventError
        For (epsilon, delta > 0) events and subsampled events.

    Examples
    --------
    >>> from dpcurator.accounting import GaussianEvent, LaplaceEvent
    >>> event_rho(GaussianEvent(sigma=2.0, sensitivity=1.0))
    0.125
    >>> event_rho(LaplaceEvent(scale=2.0))
    0.125
    """
    if not isinstance(event, PrivacyEvent):
        raise InvalidParameterError("event", event, "must be a PrivacyEvent")
    return ceil_float(_event_rho(event))


class ZCDPAccountant(Accountant):
    """zCDP accountant: adds rho over composed events, converts by CKS20 Corollary 13.

    Each event contributes :func:`event_rho`; the total converts to (ε, δ) with
    :func:`zcdp_to_epsilon` / :func:`zcdp_to_delta`. The neighbour relation is that of the
    events. The sum of rho is kept exact (:attr:`rho_exact`); :attr:`rho` and the conversions
    use it rounded up, so a tiny release is never lost to rounding.

    ``fully_adaptive`` is True. A rho-zCDP bound is an RDP bound ``αρ`` at every order at
    once. A filter that admits a release only while the running sum of rho stays within the
    budget keeps, at each fixed order α, the running sum of ``αρ_t`` within ``αρ``, which is
    exactly a Rényi filter at that order; Rényi filters are valid when each release's
    parameters are chosen adaptively from past outputs (Feldman and Zrnic 2021, Section 3;
    Whitehouse, Ramdas, Rogers and Wu 2023, zCDP filters). Since the guarantee then holds at
    every order simultaneously, choosing the conversion's order after the fact is sound, unlike
    for an RDP curve on a grid of orders.

    Examples
    --------
    >>> from dpcurator.accounting import LaplaceEvent
    >>> acc = ZCDPAccountant().compose(LaplaceEvent(scale=10.0), count=100)
    >>> round(acc.rho, 12)
    0.5
    >>> f"{acc.get_delta(5.0):.4e}"
    '2.8961e-06'
    """

    name: ClassVar[str] = "zcdp"
    fully_adaptive: ClassVar[bool] = True

    def __init__(self) -> None:
        super().__init__()
        self._rho = Fraction(0)

    @property
    def rho(self) -> float:
        """The composed zCDP parameter, rounded up to a float."""
        return ceil_float(self._rho)

    @property
    def rho_exact(self) -> Fraction:
        """The composed zCDP parameter as an exact rational (the sum of every event's rho)."""
        return self._rho

    def _check_supported(self, event: PrivacyEvent) -> None:
        _event_rho(event)

    def _on_compose(self, event: PrivacyEvent, count: int) -> None:
        self._rho += count * _event_rho(event)

    def _epsilon(self, delta: float) -> float:
        rho = self.rho
        return zcdp_to_epsilon(rho, delta) if math.isfinite(rho) else math.inf

    def _delta(self, epsilon: float) -> float:
        rho = self.rho
        return zcdp_to_delta(rho, epsilon) if math.isfinite(rho) else 1.0
