"""Calibration: how much noise a target privacy guarantee needs.

Every function here answers "the smallest noise that achieves (epsilon, delta)" (or rho) and
rounds *up*: the returned scale is never below the exact solution, so the guarantee holds.

- :func:`laplace_scale`: ``b = Δ / ε`` (Dwork, McSherry, Nissim and Smith 2006; lecture 000).
- :func:`gaussian_sigma_classic`: ``σ = Δ sqrt(2 ln(1.25/δ)) / ε`` for ε < 1 (Dwork and Roth
  2014, Theorem 3.22; lecture 002).
- :func:`gaussian_sigma_analytic`: the exact Gaussian calibration of Balle and Wang 2018.
- :func:`discrete_gaussian_sigma`: the exact discrete Gaussian calibration (Canonne, Kamath and
  Steinke 2020, Theorem 7).
- :func:`zcdp_gaussian_sigma`: ``σ = Δ / sqrt(2ρ)`` (Bun and Steinke 2016, Proposition 1.6).
- :func:`dpsgd_noise_multiplier`: the noise multiplier of a DP-SGD schedule.
- :func:`epsilon_for`: epsilon of events under an accountant.

The root-finding calibrations are pure functions of public floats, so each is memoised
(:func:`functools.lru_cache` on the validated arguments, :data:`CACHE_SIZE` entries): a
mechanism called in a loop (one Gaussian release per coordinate block, per step, per query)
pays for the search once. The public signatures validate first, so a bad argument is never
cached and always raises.

Examples
--------
>>> from dpcurator.accounting._calibration import gaussian_sigma_analytic, laplace_scale
>>> laplace_scale(0.1)
10.0
>>> round(gaussian_sigma_analytic(1.0, 1e-5), 4)
3.7306
"""

from __future__ import annotations

import functools
import importlib
import math
from collections.abc import Callable, Iterable
from fractions import Fraction

from scipy import special

from dpcurator._validation import (
    check_delta,
    check_epsilon,
    check_integer,
    check_positive,
    check_probability,
)
from dpcurator.accounting._accountant import Accountant
from dpcurator.accounting._events import (
    DiscreteGaussianEvent,
    GaussianEvent,
    PoissonSampledEvent,
    PrivacyEvent,
)
from dpcurator.accounting._rdp import DEFAULT_RDP_ORDERS, rdp_to_epsilon, sampled_gaussian_rdp
from dpcurator.accounting._registry import make_accountant
from dpcurator.accounting._zcdp import zcdp_to_epsilon
from dpcurator.errors import InternalError, InvalidParameterError

__all__ = [
    "discrete_gaussian_sigma",
    "dpsgd_noise_multiplier",
    "epsilon_for",
    "gaussian_sigma_analytic",
    "gaussian_sigma_classic",
    "laplace_scale",
    "zcdp_gaussian_sigma",
    "zcdp_rho_for",
]


CACHE_SIZE = 1024
"""Entries kept by each memoised calibration (a few hundred bytes each)."""


def _positive_delta(delta: object) -> float:
    out = check_delta(delta)
    if out == 0.0:
        raise InvalidParameterError("delta", delta, "must be in (0, 1) for this calibration")
    return out


def _round_up(value: float, ok: Callable[[float], bool]) -> float:
    """Step ``value`` up one ulp at a time until ``ok(value)`` holds (a few steps at most)."""
    for _ in range(64):
        if ok(value):
            return value
        value = math.nextafter(value, math.inf)
    raise InternalError(f"rounding up did not converge at {value!r}")  # pragma: no cover


def _bisect_log(fails: Callable[[float], bool], lo: float, hi: float, rel_tol: float) -> float:
    """Smallest x (to ``rel_tol``) in [lo, hi] that does not fail; ``fails(lo)``, not ``fails(hi)``.

    ``fails`` must be monotone (True below the threshold, False above). Bisection in log
    space; the upper end of the final bracket is returned, so the answer never fails.
    """
    for _ in range(400):
        if hi - lo <= rel_tol * hi:
            return hi
        mid = math.sqrt(lo * hi)
        if not lo < mid < hi:  # adjacent floats
            return hi
        if fails(mid):
            lo = mid
        else:
            hi = mid
    raise InternalError("bisection did not converge")  # pragma: no cover


def _bracket(
    fails: Callable[[float], bool], guess: float, limit: float = 1e15
) -> tuple[float, float]:
    """Return ``(lo, hi)`` around the threshold of a monotone ``fails``, starting at ``guess``."""
    lo = hi = guess
    if fails(guess):
        while fails(hi):
            lo, hi = hi, hi * 2.0
            if hi > limit * guess:
                raise InternalError(f"no bracket found above {guess!r}")  # pragma: no cover
    else:
        while not fails(lo):
            hi, lo = lo, lo / 2.0
            if lo < guess / limit:
                raise InternalError(f"no bracket found below {guess!r}")  # pragma: no cover
    return lo, hi


# --------------------------------------------------------------------------------------------
def laplace_scale(epsilon: float, sensitivity: float = 1.0) -> float:
    """Scale of Laplace noise for epsilon-DP: ``b = Δ / ε``.

    The Laplace mechanism with scale ``b`` on a statistic of L1 sensitivity Δ is (Δ/b)-DP
    (Dwork, McSherry, Nissim and Smith 2006; lecture 000, the Laplace mechanism). The result is
    rounded up so that ``sensitivity / b <= epsilon`` holds exactly and in floating point.

    Parameters
    ----------
    epsilon : float
        Target epsilon, > 0.
    sensitivity : float, default 1.0
        L1 sensitivity Δ, > 0.

    Returns
    -------
    float
        The scale b.

    Examples
    --------
    >>> laplace_scale(0.1)  # lecture 003: "Δf / ε = 1 / 0.1 = 10"
    10.0
    >>> laplace_scale(0.1, sensitivity=2.0)  # lecture 004: two counts, Δf = 2
    20.0
    """
    eps = check_epsilon(epsilon)
    d = check_positive(sensitivity, "sensitivity")
    # Exactly (accountants count d / b as a rational) and in floating point.
    return _round_up(d / eps, lambda b: Fraction(d) / Fraction(b) <= Fraction(eps) and d / b <= eps)


def gaussian_sigma_classic(epsilon: float, delta: float, sensitivity: float = 1.0) -> float:
    """Return the classic Gaussian mechanism's sigma: ``σ = Δ sqrt(2 ln(1.25/δ)) / ε``.

    Gaussian noise with this sigma on a statistic of L2 sensitivity Δ is (ε, δ)-DP for
    ε < 1 (Dwork and Roth 2014, Theorem 3.22; lecture 002, the Gaussian mechanism). The
    bound is loose; :func:`gaussian_sigma_analytic` is exact and valid for every epsilon.

    Parameters
    ----------
    epsilon : float
        Target epsilon, in (0, 1).
    delta : float
        Target delta, in (0, 1).
    sensitivity : float, default 1.0
        L2 sensitivity Δ, > 0.

    Returns
    -------
    float
        sigma.

    Raises
    ------
    InvalidParameterError
        If ``epsilon >= 1`` (the theorem does not hold there).

    Examples
    --------
    >>> round(gaussian_sigma_classic(0.5, 1e-5), 4)
    9.6896
    """
    eps = check_epsilon(epsilon)
    if eps >= 1.0:
        raise InvalidParameterError(
            "epsilon",
            epsilon,
            "must be < 1 for the classic Gaussian mechanism (Dwork and Roth 2014, Theorem "
            "3.22); use gaussian_sigma_analytic, exact for every epsilon",
        )
    dlt = _positive_delta(delta)
    d = check_positive(sensitivity, "sensitivity")
    sigma = d * math.sqrt(2.0 * math.log(1.25 / dlt)) / eps
    return math.nextafter(sigma, math.inf)


def _analytic_gaussian_delta(s: float, eps: float) -> float:
    """Balle and Wang 2018, Theorem 8, at noise multiplier ``s = σ/Δ``, rounded up.

    ``δ(s) = Φ(1/(2s) - εs) - e^ε Φ(-1/(2s) - εs)``; the second term is computed as
    ``exp(ε + log Φ(.))`` so that it does not overflow for large ε. The two terms nearly cancel
    when ε is small, so a bound on the rounding error (1e-14 of their sum, ten times the
    measured error of scipy's ``ndtr`` / ``log_ndtr`` with ``exp``) is added: the bisection then
    never accepts a sigma whose exact delta exceeds the target.
    """
    a, b = 0.5 / s, eps * s
    first = float(special.ndtr(a - b))
    second = math.exp(eps + float(special.log_ndtr(-a - b)))
    return first - second + 1e-14 * (first + second)


def gaussian_sigma_analytic(epsilon: float, delta: float, sensitivity: float = 1.0) -> float:
    r"""Smallest sigma for which the Gaussian mechanism is (ε, δ)-DP (the analytic Gaussian).

    Gaussian noise ``N(0, σ²)`` on a statistic of L2 sensitivity Δ is (ε, δ)-DP if and only if

    .. math:: \Phi\left(\frac{\Delta}{2\sigma} - \frac{\varepsilon\sigma}{\Delta}\right)
              - e^{\varepsilon}\Phi\left(-\frac{\Delta}{2\sigma}
              - \frac{\varepsilon\sigma}{\Delta}\right) \le \delta

    (Balle and Wang 2018, Theorem 8). The left side decreases in σ; bisection in log σ to
    relative precision 1e-13 returns the upper end of the bracket, so the result is never below
    the exact solution. Valid for every ε > 0, and always smaller than the classic sigma.

    Parameters
    ----------
    epsilon : float
        Target epsilon, > 0.
    delta : float
        Target delta, in (0, 1).
    sensitivity : float, default 1.0
        L2 sensitivity Δ, > 0.

    Returns
    -------
    float
        sigma.

    Examples
    --------
    >>> round(gaussian_sigma_analytic(0.5, 1e-5), 4)  # the classic formula gives 9.6896
    7.0318
    >>> round(gaussian_sigma_analytic(4.0, 1e-5, sensitivity=2.0), 4)
    2.1623
    """
    eps = check_epsilon(epsilon)
    dlt = _positive_delta(delta)
    d = check_positive(sensitivity, "sensitivity")
    return _gaussian_sigma_analytic(eps, dlt, d)


@functools.lru_cache(maxsize=CACHE_SIZE)
def _gaussian_sigma_analytic(eps: float, dlt: float, d: float) -> float:
    """:func:`gaussian_sigma_analytic` on validated arguments (memoised)."""

    def fails(s: float) -> bool:
        return _analytic_gaussian_delta(s, eps) > dlt

    guess = math.sqrt(2.0 * math.log(1.25 / dlt)) / eps
    s = _bisect_log(fails, *_bracket(fails, guess), rel_tol=1e-13)
    return _round_up(s * d, lambda sigma: not fails(sigma / d))


def discrete_gaussian_sigma(epsilon: float, delta: float, sensitivity: int = 1) -> float:
    """Smallest sigma for which the discrete Gaussian is (ε, δ)-DP, to 1e-9 relative.

    The discrete Gaussian ``N_Z(0, σ²)`` on an integer statistic with integer sensitivity Δ is
    (ε, δ)-DP exactly when ``P[Y > εσ²/Δ - Δ/2] - e^ε P[Y > εσ²/Δ + Δ/2] <= δ`` for
    ``Y ~ N_Z(0, σ²)`` (Canonne, Kamath and Steinke 2020, Theorem 7), the larger of the two
    orientations of the exact profile from :mod:`dpcurator.accounting._profiles`. Bisection in
    log σ; the upper end of the bracket is returned, so the guarantee holds.

    Parameters
    ----------
    epsilon : float
        Target epsilon, > 0.
    delta : float
        Target delta, in (0, 1).
    sensitivity : int, default 1
        Integer sensitivity Δ >= 1 (of a scalar statistic).

    Returns
    -------
    float
        sigma.

    Examples
    --------
    >>> sigma = discrete_gaussian_sigma(1.0, 1e-5)
    >>> abs(sigma / gaussian_sigma_analytic(1.0, 1e-5) - 1) < 0.01  # close to the continuous one
    True
    """
    eps = check_epsilon(epsilon)
    dlt = _positive_delta(delta)
    d = check_integer(sensitivity, "sensitivity", minimum=1)
    return _discrete_gaussian_sigma(eps, dlt, d)


@functools.lru_cache(maxsize=CACHE_SIZE)
def _discrete_gaussian_sigma(eps: float, dlt: float, d: int) -> float:
    """:func:`discrete_gaussian_sigma` on validated arguments (memoised)."""
    # Imported when first needed: the profiles module is heavier to load.
    privacy_profile = importlib.import_module("dpcurator.accounting._profiles").privacy_profile

    def fails(sigma: float) -> bool:
        event = DiscreteGaussianEvent(sigma=sigma, sensitivity=d)
        return float(privacy_profile(event, eps, orientation="max")) > dlt

    guess = _gaussian_sigma_analytic(eps, dlt, float(d))
    return _bisect_log(fails, *_bracket(fails, guess), rel_tol=1e-9)


def zcdp_gaussian_sigma(rho: float, sensitivity: float = 1.0) -> float:
    """Sigma of Gaussian noise for rho-zCDP: ``σ = Δ / sqrt(2ρ)``.

    Gaussian noise ``N(0, σ²)`` on a statistic of L2 sensitivity Δ is ``Δ²/(2σ²)``-zCDP (Bun
    and Steinke 2016, Proposition 1.6). Rounded up so that ``Δ²/(2σ²) <= ρ`` in floating point.

    Parameters
    ----------
    rho : float
        Target rho, > 0.
    sensitivity : float, default 1.0
        L2 sensitivity Δ, > 0.

    Returns
    -------
    float
        sigma.

    Examples
    --------
    >>> zcdp_gaussian_sigma(0.5)
    1.0
    >>> zcdp_gaussian_sigma(0.125, sensitivity=3.0)
    6.0
    """
    r = check_positive(rho, "rho")
    d = check_positive(sensitivity, "sensitivity")
    # Exactly (accountants count d² / (2 s²) as a rational) and in floating point.
    return _round_up(
        d / math.sqrt(2.0 * r),
        lambda s: (
            Fraction(d) ** 2 / (2 * Fraction(s) ** 2) <= Fraction(r)
            and 1.0 / (2.0 * (s / d) ** 2) <= r
        ),
    )


def zcdp_rho_for(epsilon: float, delta: float) -> float:
    """Largest rho (to 1e-12 relative, rounded down) whose zCDP guarantee implies (eps, delta)-DP.

    Inverts the conversion of :func:`~dpcurator.accounting.zcdp_to_epsilon` (Canonne, Kamath
    and Steinke 2020, Corollary 13), which is increasing in rho. Use it to calibrate noise whose
    only proven guarantee is zCDP (e.g. a multi-dimensional discrete Gaussian).

    Examples
    --------
    >>> from dpcurator.accounting import zcdp_to_epsilon
    >>> rho = zcdp_rho_for(1.0, 1e-5)
    >>> zcdp_to_epsilon(rho, 1e-5) <= 1.0
    True
    """
    eps = check_epsilon(epsilon)
    dlt = _positive_delta(delta)
    return _zcdp_rho_for(eps, dlt)


@functools.lru_cache(maxsize=CACHE_SIZE)
def _zcdp_rho_for(eps: float, dlt: float) -> float:
    """:func:`zcdp_rho_for` on validated arguments (memoised)."""

    def too_big(rho: float) -> bool:
        return zcdp_to_epsilon(rho, dlt) > eps

    # The smallest rho that fails, bracketed and bisected; step down from it until it holds.
    lo, hi = _bracket(lambda r: not too_big(r), eps * eps / 2.0)
    for _ in range(200):
        if hi - lo <= 1e-12 * hi:
            break
        mid = math.sqrt(lo * hi)
        if too_big(mid):
            hi = mid
        else:
            lo = mid
    rho = lo
    while too_big(rho):  # pragma: no cover - bisection keeps lo valid
        rho = math.nextafter(rho, 0.0)
    return rho


# --------------------------------------------------------------------------------------------
#: A coarse grid of orders, enough to bracket the PLD search.
_BRACKET_ORDERS: tuple[float, ...] = (
    *(1.0 + k / 4.0 for k in range(1, 12)),
    *(float(a) for a in range(4, 33)),
    48.0,
    64.0,
    128.0,
    256.0,
)


def _rdp_sgd_epsilon(
    q: float, steps: int, delta: float, orders: tuple[float, ...] = DEFAULT_RDP_ORDERS
) -> Callable[[float], float]:

    def epsilon(z: float) -> float:
        return rdp_to_epsilon(orders, steps * sampled_gaussian_rdp(q, z, orders), delta)[0]

    return epsilon


def _accountant_sgd_epsilon(
    name: str, q: float, steps: int, delta: float
) -> Callable[[float], float]:
    def epsilon(z: float) -> float:
        event = PoissonSampledEvent(q, GaussianEvent(sigma=z))
        return make_accountant(name).compose(event, steps).get_epsilon(delta)

    return epsilon


def dpsgd_noise_multiplier(
    target_epsilon: float,
    delta: float,
    *,
    sampling_rate: float,
    steps: int,
    accountant: str = "pld",
) -> float:
    """Smallest noise multiplier z for which DP-SGD meets (target_epsilon, delta).

    DP-SGD with Poisson sampling at rate q, gradients clipped to norm C and Gaussian noise of
    standard deviation ``z C``, run for ``steps`` steps, is the ``steps``-fold composition of
    the Poisson-sampled Gaussian mechanism with noise multiplier z (Abadi et al. 2016), under
    add/remove-one neighbours. Its epsilon at ``delta`` decreases in z; this finds the
    smallest z (to about 1e-3 relative, rounded up) with ``epsilon(z) <= target_epsilon``.

    The search is a bracketed secant (regula falsi with the Illinois rule) in
    ``(log z, log epsilon)``, where the curve is nearly straight, so a handful of accountant
    evaluations suffice. With ``accountant="pld"`` it starts from the z that a coarse RDP
    grid certifies (RDP bounds the PLD epsilon from above, so that z meets the target); 1,000
    steps take well under a second.

    Parameters
    ----------
    target_epsilon : float
        Target epsilon, > 0.
    delta : float
        Target delta, in (0, 1).
    sampling_rate : float
        Poisson sampling rate q, in (0, 1] (batch size / dataset size).
    steps : int
        Number of steps, >= 1.
    accountant : {"pld", "rdp"}, default "pld"
        The accountant that certifies epsilon.

    Returns
    -------
    float
        z = sigma / clipping norm.

    Examples
    --------
    >>> z = dpsgd_noise_multiplier(3.0, 1e-5, sampling_rate=256 / 60000, steps=14000,
    ...                            accountant="rdp")
    >>> round(z, 2)
    1.01
    """
    eps = check_epsilon(target_epsilon, "target_epsilon")
    dlt = _positive_delta(delta)
    q = check_probability(sampling_rate, "sampling_rate", open_left=True)
    n = check_integer(steps, "steps", minimum=1)
    if accountant not in ("pld", "rdp"):
        raise InvalidParameterError("accountant", accountant, "must be 'pld' or 'rdp'")
    return _dpsgd_noise_multiplier(eps, dlt, q, n, accountant)


@functools.lru_cache(maxsize=CACHE_SIZE)
def _dpsgd_noise_multiplier(eps: float, dlt: float, q: float, n: int, accountant: str) -> float:
    """:func:`dpsgd_noise_multiplier` on validated arguments (memoised)."""
    rdp_epsilon = _rdp_sgd_epsilon(
        q, n, dlt, DEFAULT_RDP_ORDERS if accountant == "rdp" else _BRACKET_ORDERS
    )
    if accountant == "rdp":
        return _secant_search(rdp_epsilon, eps, 1.0, rel_tol=2e-4)
    # RDP (on any grid) is an upper bound on the PLD epsilon, so its z meets the target.
    lo, hi = _bracket(lambda z: rdp_epsilon(z) > eps, 1.0)
    z_rdp = _bisect_log(lambda z: rdp_epsilon(z) > eps, lo, hi, rel_tol=1e-2)
    return _secant_search(_accountant_sgd_epsilon("pld", q, n, dlt), eps, z_rdp, rel_tol=5e-4)


def _secant_search(
    epsilon: Callable[[float], float], target: float, guess: float, rel_tol: float
) -> float:
    """Smallest z with ``epsilon(z) <= target`` for a decreasing ``epsilon``, to ``rel_tol``.

    Bracketed regula falsi with the Illinois modification on ``(log z, log epsilon)``, where
    the curve is nearly straight; falls back to bisection when an interpolated point would not
    shrink the bracket enough. The upper end (a z that meets the target) is returned.
    """

    def gap(z: float) -> float:
        value = epsilon(z)
        return math.log(value / target) if value > 0 else -math.inf

    hi, g_hi = guess, gap(guess)
    lo, g_lo = guess, g_hi
    while g_hi > 0:  # move up until the target is met
        lo, g_lo = hi, g_hi
        hi *= 1.25
        g_hi = gap(hi)
    while g_lo <= 0:  # move down until it is not
        hi, g_hi = lo, g_lo
        lo /= 1.25
        g_lo = gap(lo)
    side = 0
    for _ in range(100):
        if hi - lo <= rel_tol * hi:
            return hi
        x_lo, x_hi = math.log(lo), math.log(hi)
        if math.isfinite(g_hi):
            x = x_hi - g_hi * (x_hi - x_lo) / (g_hi - g_lo)
            # Keep clear of the ends so that the bracket shrinks every step.
            margin = 0.05 * (x_hi - x_lo)
            x = min(max(x, x_lo + margin), x_hi - margin)
        else:
            x = 0.5 * (x_lo + x_hi)
        z = math.exp(x)
        g = gap(z)
        if g > 0:
            lo, g_lo = z, g
            if side == -1:
                g_hi *= 0.5
            side = -1
        else:
            hi, g_hi = z, g
            if side == 1:
                g_lo *= 0.5
            side = 1
    raise InternalError("noise multiplier search did not converge")  # pragma: no cover


def epsilon_for(
    event_or_events: PrivacyEvent | Iterable[PrivacyEvent],
    delta: float,
    accountant: str | Accountant = "pld",
) -> float:
    """Epsilon at ``delta`` of one event or a sequence of events, under an accountant.

    Parameters
    ----------
    event_or_events : PrivacyEvent or iterable of PrivacyEvent
        What was released.
    delta : float
        Target delta, in [0, 1).
    accountant : str or Accountant, default "pld"
        An accountant name (``"pld"``, ``"rdp"``, ``"zcdp"``, ``"basic"``, ``"advanced"``,
        ``"optimal"``), or an Accountant, which is copied (the events are composed onto the
        copy, after whatever it already holds).

    Returns
    -------
    float
        epsilon.

    Examples
    --------
    >>> from dpcurator.accounting import GaussianEvent, LaplaceEvent
    >>> round(epsilon_for([LaplaceEvent(10.0), LaplaceEvent(5.0)], 0.0, accountant="basic"), 12)
    0.3
    >>> round(epsilon_for(GaussianEvent(sigma=1.0), 1e-5, accountant="zcdp"), 4)
    4.7284
    """
    if isinstance(accountant, Accountant):
        acc = accountant.copy()
    elif isinstance(accountant, str):
        acc = make_accountant(accountant)
    else:
        raise InvalidParameterError(
            "accountant", accountant, "must be an accountant name (str) or an Accountant"
        )
    if isinstance(event_or_events, PrivacyEvent):
        events: list[object] = [event_or_events]
    elif isinstance(event_or_events, Iterable):
        events = list(event_or_events)
    else:
        raise InvalidParameterError(
            "event_or_events", event_or_events, "must be a PrivacyEvent or an iterable of them"
        )
    for i, event in enumerate(events):
        if not isinstance(event, PrivacyEvent):
            raise InvalidParameterError(f"event_or_events[{i}]", event, "must be a PrivacyEvent")
        acc.compose(event)
    return acc.get_epsilon(delta)
