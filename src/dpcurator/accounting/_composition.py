"""Classic composition: basic, advanced (Dwork-Rothblum-Vadhan) and optimal (Kairouz-Oh-Viswanath).

The three accountants here see every event through one (epsilon, delta)-DP guarantee:

- :class:`~dpcurator.accounting.PureDPEvent`, Laplace, discrete Laplace and randomized response:
  their pure epsilon, delta = 0;
- :class:`~dpcurator.accounting.ApproxDPEvent`: its (epsilon, delta);
- Gaussian and discrete Gaussian events have no (epsilon, delta) of their own: they are accepted
  only when the accountant is built with ``gaussian_delta``, the delta to charge each of them, and
  are then (epsilon_G, gaussian_delta)-DP with epsilon_G read off the exact privacy profile
  (Balle and Wang 2018, Theorem 8; Canonne, Kamath and Steinke 2020, Theorem 7);
- a subsample of an (epsilon, delta)-DP event is
  (ln(1 + q (e^epsilon - 1)), q delta)-DP, Poisson subsampling at rate q under add/remove
  neighbours (Balle, Barthe and Gaboardi 2018, Theorem 8) and sampling m of n without
  replacement, q = m/n, under replace-one neighbours (same paper, Theorem 9). The events state
  their neighbour relation; composing events stated for different relations is the caller's
  responsibility;
- composed events recurse (inside a subsample, the inner events are first composed with basic
  composition, which is valid for any of them);
- zCDP events are not (epsilon, delta) guarantees: use ``ZCDPAccountant``.

Every event reduces to an exact rational (epsilon, delta): the floats' exact values, ``d / b``
for Laplace noise of scale b on sensitivity d, ``m / n`` for a sample of m out of n; where the
value is irrational (randomized response's logarithm, amplification, a Gaussian's epsilon) a
float computed with a rigorous margin that puts it above the exact value. Sums are exact, and a
float reported from them is rounded up (:func:`~dpcurator._validation.ceil_float`), so nothing
reported is ever below what was spent, not even by an ulp.

Examples
--------
>>> from dpcurator.accounting import LaplaceEvent
>>> from dpcurator.accounting._composition import (
...     AdvancedCompositionAccountant, BasicAccountant, OptimalHomogeneousAccountant)
>>> event = LaplaceEvent(scale=100.0)  # 0.01-DP
>>> round(BasicAccountant().compose(event, count=100).get_epsilon(1e-5), 6)
1.0
>>> round(AdvancedCompositionAccountant().compose(event, count=100).get_epsilon(1e-5), 4)
0.4849
>>> round(OptimalHomogeneousAccountant().compose(event, count=100).get_epsilon(1e-5), 4)
0.3372
"""

from __future__ import annotations

import copy
import importlib
import math
from fractions import Fraction
from typing import TYPE_CHECKING, ClassVar, NamedTuple, Self

import numpy as np
from scipy.special import gammaln, logsumexp

from dpcurator._validation import (
    ceil_float,
    check_delta,
    check_epsilon,
    check_integer,
    check_probability,
    floor_float,
    next_up,
)
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

if TYPE_CHECKING:
    from numpy.typing import NDArray

__all__ = [
    "AdvancedCompositionAccountant",
    "BasicAccountant",
    "OptimalHomogeneousAccountant",
    "advanced_composition_epsilon",
    "advanced_composition_per_step",
]

# Bound on the relative floating-point error of the log-space sum (gammaln of k <= 10^6 is
# accurate to ~1e-10 in absolute log terms); delta_RR is inflated by it to stay an upper bound.
_KOV_REL_ERROR = 1e-9

_PURE_EVENTS = (PureDPEvent, LaplaceEvent, DiscreteLaplaceEvent, RandomizedResponseEvent)
_GAUSSIAN_EVENTS = (GaussianEvent, DiscreteGaussianEvent)


class _Guarantee(NamedTuple):
    """``times`` mechanisms, each (exact_epsilon, exact_delta)-DP.

    The exact values are rationals: the event's exact epsilon and delta, or rigorous upper
    bounds of them where those are irrational. ``epsilon`` and ``delta`` round them up.
    """

    exact_epsilon: Fraction
    exact_delta: Fraction
    times: int

    @property
    def epsilon(self) -> float:
        """``exact_epsilon`` rounded up to a float."""
        return ceil_float(self.exact_epsilon)

    @property
    def delta(self) -> float:
        """``exact_delta`` rounded up to a float."""
        return ceil_float(self.exact_delta)


# Relative error bound of one floating-point operation (libm functions are within 1 ulp).
_EPS = 2.0**-52


def _pad_up(value: float, ulps: float) -> float:
    """Return ``value`` plus a relative margin of ``ulps`` units of 2^-52, rounded up.

    An upper bound of the exact quantity when ``value`` was computed with a relative error
    below that margin.
    """
    return next_up(value + abs(value) * ulps * _EPS)


def exact_pure_epsilon(event: PrivacyEvent) -> Fraction:
    """Return the epsilon of a pure-DP event as an exact rational (an upper bound if irrational).

    Package-internal helper (the zCDP accountant uses it too). ``PureDPEvent``: its float.
    Laplace and discrete Laplace: ``sensitivity / scale`` exactly (not the float quotient,
    which may round below it). Randomized response: ``ln(p (k - 1) / (1 - p))``, the ratio
    rounded up and the logarithm padded by two ulps (libm's log is within one).
    """
    if isinstance(event, PureDPEvent):
        return Fraction(event.epsilon)
    if isinstance(event, LaplaceEvent | DiscreteLaplaceEvent):
        return Fraction(event.sensitivity) / Fraction(event.scale)
    if isinstance(event, RandomizedResponseEvent):
        p = Fraction(event.p_truth)
        ratio = p * (event.categories - 1) / (1 - p)
        return Fraction(next_up(math.log(ceil_float(ratio)), 2))
    raise InternalError(f"{event!r} is not a pure-DP event.")  # pragma: no cover


# -- reduction of events to (epsilon, delta) ---------------------------------------------------


def _amplify(epsilon: Fraction, delta: Fraction, rate: Fraction) -> tuple[Fraction, Fraction]:
    """Amplification by subsampling at rate q (Balle, Barthe and Gaboardi 2018, Thms 8 and 9).

    ``(ln(1 + q (e^eps - 1)), q delta)``; for large eps the log is taken as
    ``eps + ln(q + (1 - q) e^-eps)`` so that it does not overflow. The delta is exact; the
    epsilon is computed from eps and q rounded up (it increases in both) and padded by a bound
    on its floating-point error (an absolute one for the large-eps form, whose sum cancels),
    so it is never below the exact value; it is at most eps, which always holds.
    """
    if rate >= 1:
        return epsilon, delta
    eps, q = ceil_float(epsilon), ceil_float(rate)
    if not math.isfinite(eps):
        return epsilon, rate * delta
    if eps > 1.0:
        log_term = math.log(q + (1.0 - q) * math.exp(-eps))
        value = next_up(eps + log_term + 16 * _EPS * (eps + abs(log_term)))
    else:
        value = _pad_up(math.log1p(q * math.expm1(eps)), 8)
    return min(Fraction(value), epsilon), rate * delta


def _gaussian_epsilon(event: PrivacyEvent, delta: float) -> float:
    """Smallest epsilon with delta(epsilon) <= ``delta`` on the exact profile of a Gaussian event.

    The profile is the hockey-stick divergence of Balle and Wang 2018 (Theorem 8) for the
    Gaussian, and the exact lattice sum of Canonne, Kamath and Steinke 2020 (Theorem 7) for the
    discrete Gaussian, both from :mod:`dpcurator.accounting._profiles`; the larger of the two
    orientations is used. Bisection on the decreasing profile; the upper end is returned, so the
    result is never below the exact epsilon.
    """
    # Imported when first needed: the profiles module is heavier to load.
    privacy_profile = importlib.import_module("dpcurator.accounting._profiles").privacy_profile

    def profile(eps: float) -> float:
        grid = np.array([eps], dtype=float)
        return max(
            float(np.asarray(privacy_profile(event, grid, orientation=side)).reshape(-1)[0])
            for side in ("remove", "add")
        )

    if profile(0.0) <= delta:
        return 0.0
    lo, hi = 0.0, 1.0
    while profile(hi) > delta:
        lo, hi = hi, 2.0 * hi
        if hi > 1e12:  # pragma: no cover - the Gaussian profile decays like a Gaussian tail
            raise InternalError(f"no epsilon found for {event!r} at delta={delta}.")
    for _ in range(200):
        if hi - lo <= 1e-13 * hi:
            break
        mid = 0.5 * (lo + hi)
        if profile(mid) <= delta:
            hi = mid
        else:
            lo = mid
    return hi


class _ApproxDPAccountant(Accountant):
    """Shared reduction of events to (epsilon, delta) guarantees (see the module docstring)."""

    def __init__(self, *, gaussian_delta: float | None = None) -> None:
        super().__init__()
        if gaussian_delta is not None:
            gaussian_delta = check_probability(
                gaussian_delta, "gaussian_delta", open_left=True, open_right=True
            )
        self._gaussian_delta = gaussian_delta
        self._gaussian_epsilons: dict[PrivacyEvent, float] = {}
        self._checked: tuple[PrivacyEvent, list[_Guarantee]] | None = None

    @property
    def gaussian_delta(self) -> float | None:
        """The delta charged to each Gaussian event (None: Gaussian events are refused)."""
        return self._gaussian_delta

    def _guarantees(self, event: PrivacyEvent) -> list[_Guarantee]:
        """Reduce ``event`` to the (epsilon, delta, times) guarantees it composes."""
        if isinstance(event, NoOpEvent):
            return []
        if isinstance(event, ComposedEvent):
            return [g for inner in event.events for g in self._guarantees(inner)]
        if isinstance(event, SelfComposedEvent):
            if event.count == 0:
                return []
            return [g._replace(times=g.times * event.count) for g in self._guarantees(event.event)]
        return [_Guarantee(*self._single(event), 1)]

    def _single(self, event: PrivacyEvent) -> tuple[Fraction, Fraction]:
        if isinstance(event, _PURE_EVENTS):
            return exact_pure_epsilon(event), Fraction(0)
        if isinstance(event, ApproxDPEvent):
            return Fraction(event.epsilon), Fraction(event.delta)
        if isinstance(event, PoissonSampledEvent):
            eps, delta = _basic_sum(self._guarantees(event.event))
            return _amplify(eps, delta, Fraction(event.sampling_rate))
        if isinstance(event, SampledWithoutReplacementEvent):
            eps, delta = _basic_sum(self._guarantees(event.event))
            return _amplify(eps, delta, Fraction(event.sample_size, event.population_size))
        if isinstance(event, _GAUSSIAN_EVENTS):
            if self._gaussian_delta is None:
                raise UnsupportedEventError(
                    f"{type(self).__name__} cannot account for {event!r}: Gaussian noise has no "
                    "pure or (epsilon, delta) guarantee of its own. Build the accountant with "
                    "gaussian_delta=... (the delta to charge each Gaussian release; its epsilon "
                    "then comes from the exact Balle-Wang profile), or use PLDAccountant, "
                    "RDPAccountant or ZCDPAccountant, which account for Gaussian noise tightly."
                )
            if event not in self._gaussian_epsilons:
                self._gaussian_epsilons[event] = _gaussian_epsilon(event, self._gaussian_delta)
            return Fraction(self._gaussian_epsilons[event]), Fraction(self._gaussian_delta)
        if isinstance(event, ZCDPEvent):
            raise UnsupportedEventError(
                f"{type(self).__name__} cannot account for {event!r}: a zCDP guarantee is not an "
                "(epsilon, delta) guarantee; use ZCDPAccountant (or RDPAccountant)."
            )
        raise UnsupportedEventError(
            f"{type(self).__name__} cannot account for {event!r}: it has no (epsilon, delta) "
            "guarantee this accountant knows of."
        )

    def _check_supported(self, event: PrivacyEvent) -> None:
        guarantees = self._guarantees(event)
        self._check_guarantees(event, guarantees)
        self._checked = (event, guarantees)

    def _check_guarantees(self, event: PrivacyEvent, guarantees: list[_Guarantee]) -> None:
        """Raise UnsupportedEventError for guarantees this accountant refuses (default: none)."""

    def _on_compose(self, event: PrivacyEvent, count: int) -> None:
        if self._checked is not None and self._checked[0] is event:
            guarantees = self._checked[1]
        else:  # pragma: no cover - compose always checks first
            guarantees = self._guarantees(event)
        self._checked = None
        for g in guarantees:
            self._add(g._replace(times=g.times * count))

    def _add(self, guarantee: _Guarantee) -> None:
        raise NotImplementedError  # pragma: no cover

    def copy(self) -> Self:
        """Return an independent copy, in time linear in the number of events composed.

        Events, fractions, tuples and cached arrays are immutable, so a shallow copy with fresh
        containers is independent (a deep copy would copy every event, which makes a filter's
        trial spends quadratic in the number of releases).
        """
        clone = copy.copy(self)
        clone._events = list(self._events)
        clone._gaussian_epsilons = dict(self._gaussian_epsilons)
        clone._checked = None
        return clone


def _basic_sum(guarantees: list[_Guarantee]) -> tuple[Fraction, Fraction]:
    """Compose ``guarantees`` by basic composition: (sum epsilon_i, min(1, sum delta_i)), exactly.

    The accountants keep their sums as exact fractions: long sums do not drift, and what they
    report is rounded up once, at the end. Fractions are immutable, so copies of an accountant
    share them safely.
    """
    eps = sum((g.exact_epsilon * g.times for g in guarantees), Fraction(0))
    delta = sum((g.exact_delta * g.times for g in guarantees), Fraction(0))
    return eps, min(delta, Fraction(1))


def approx_dp_guarantee(event: PrivacyEvent) -> tuple[float, float]:
    """(epsilon, delta) of ``event`` as the classic accountants see it, rounded up to floats.

    Basic composition inside. Package-internal helper (parallel composition uses it); raises
    :class:`~dpcurator.errors.UnsupportedEventError` for Gaussian and zCDP events.
    """
    eps, delta = _basic_sum(BasicAccountant()._guarantees(event))
    return ceil_float(eps), ceil_float(delta)


def _worst_case_delta(epsilon: float, delta: float, at: float) -> float:
    """Return delta at ``at`` of the worst (epsilon, delta)-DP pair (KOV 2015, Theorem 2.1).

    Every (epsilon, delta)-DP mechanism is a post-processing of the pair that puts mass delta on
    an infinite loss and randomized response with p = e^eps / (1 + e^eps) on the rest, so at
    ``at <= epsilon`` it is (at, delta + (1 - delta)(e^eps - e^at) / (1 + e^eps))-DP.
    """
    if delta >= 1.0:
        return 1.0
    if at >= epsilon:
        return delta
    # (e^eps - e^at) / (1 + e^eps) = -expm1(at - eps) / (1 + e^-eps), stable for large eps.
    # Each step errs by at most a few units of 2^-53 relative (the terms are positive): padded.
    slope = -math.expm1(at - epsilon) / (1.0 + math.exp(-epsilon))
    return min(1.0, _pad_up(delta + (1.0 - delta) * slope, 8))


# -- basic composition -------------------------------------------------------------------------


class BasicAccountant(_ApproxDPAccountant):
    r"""Basic composition: (epsilon_i, delta_i)-DP releases compose to (sum eps_i, sum delta_i).

    .. math:: \Big(\sum_i \epsilon_i,\ \sum_i \delta_i\Big)

    It holds when each release is chosen adaptively (lecture 002, "Basic Adaptive Composition";
    Dwork and Roth 2014, Theorem 3.16) and even when the privacy parameters themselves are chosen
    adaptively, which makes it a valid privacy filter and odometer (Rogers, Roth, Ullman and
    Vadhan 2016), so ``fully_adaptive`` is True. Neighbour relation: that of the events.

    Parameters
    ----------
    gaussian_delta : float, optional
        The delta to charge each Gaussian or discrete Gaussian event, in (0, 1); its epsilon is
        then the exact one at that delta. Without it Gaussian events are refused.

    Notes
    -----
    ``get_epsilon(delta)`` is ``sum eps_i`` when ``delta >= sum delta_i`` and ``math.inf``
    otherwise (no finite epsilon is certified). ``get_delta(epsilon)`` is ``sum delta_i`` when
    ``epsilon >= sum eps_i``; below that it is the delta of the worst
    (sum eps_i, sum delta_i)-DP pair at ``epsilon`` (Kairouz, Oh and Viswanath 2015, Thm 2.1).
    Sums are exact (each event's exact epsilon and delta, see the module docstring, added as
    rationals; :attr:`exact_sums` returns them); what is reported is rounded *up* to a float,
    never to the nearest, so it never understates what was spent.

    Examples
    --------
    >>> from fractions import Fraction
    >>> from dpcurator.accounting import ApproxDPEvent, LaplaceEvent
    >>> from dpcurator.accounting._composition import BasicAccountant
    >>> acc = BasicAccountant().compose(LaplaceEvent(scale=10.0), count=3)  # 3 x 1/10
    >>> acc.compose(ApproxDPEvent(0.25, 1e-6)).get_epsilon(1e-6)
    0.55
    >>> acc.exact_sums[0] == Fraction(3, 10) + Fraction(1, 4)
    True
    >>> acc.get_epsilon(1e-7)
    inf
    >>> acc.get_delta(0.55)
    1e-06
    >>> acc.compose(ApproxDPEvent(0.45, 0.0)).get_epsilon(1e-6)  # the float 0.45 is > 9/20
    1.0000000000000002
    """

    name: ClassVar[str] = "basic"
    fully_adaptive: ClassVar[bool] = True

    def __init__(self, *, gaussian_delta: float | None = None) -> None:
        super().__init__(gaussian_delta=gaussian_delta)
        self._eps_sum = Fraction(0)
        self._delta_sum = Fraction(0)

    @property
    def exact_sums(self) -> tuple[Fraction, Fraction]:
        """``(sum of epsilons, sum of deltas)`` of everything composed, as exact rationals."""
        return self._eps_sum, self._delta_sum

    def _add(self, guarantee: _Guarantee) -> None:
        self._eps_sum += guarantee.exact_epsilon * guarantee.times
        self._delta_sum += guarantee.exact_delta * guarantee.times

    def _epsilon(self, delta: float) -> float:
        return ceil_float(self._eps_sum) if Fraction(delta) >= self._delta_sum else math.inf

    def _delta(self, epsilon: float) -> float:
        sum_delta = min(ceil_float(self._delta_sum), 1.0)
        return _worst_case_delta(ceil_float(self._eps_sum), sum_delta, epsilon)


# -- advanced composition ----------------------------------------------------------------------


def _advanced_epsilon(sum_sq: float, drift: float, delta_prime: float) -> float:
    """``sqrt(2 ln(1/delta') sum_sq) + drift``, padded up by its floating-point error."""
    return _pad_up(math.sqrt(2.0 * -math.log(delta_prime) * sum_sq) + drift, 8)


def _drift(epsilon: float) -> float:
    """Bound on the expected privacy loss of an epsilon-DP step: eps (e^eps - 1)/(e^eps + 1)."""
    return _pad_up(epsilon * math.tanh(epsilon / 2.0), 8)


def advanced_composition_epsilon(epsilon: float, delta: float, k: int, delta_prime: float) -> float:
    r"""Epsilon of k adaptively chosen (epsilon, delta)-DP releases by advanced composition.

    For every :math:`\delta' > 0` the k-fold adaptive composition is
    :math:`(\epsilon', k\delta + \delta')`-DP with

    .. math:: \epsilon' = \epsilon\sqrt{2k\ln(1/\delta')}
              + k\epsilon\,\frac{e^{\epsilon} - 1}{e^{\epsilon} + 1}

    (Dwork, Rothblum and Vadhan 2010, Theorem III.3, with the drift term as proved in lecture 002:
    the expected privacy loss of an epsilon-DP step is at most
    :math:`\epsilon(e^\epsilon - 1)/(e^\epsilon + 1)`; the Dwork-Roth book, Theorem 3.20, states
    the looser :math:`k\epsilon(e^\epsilon - 1)`). The total delta is ``k * delta + delta_prime``.
    Basic composition (:math:`k\epsilon`) holds at the same time and may be smaller; this function
    returns the advanced bound alone.

    Parameters
    ----------
    epsilon : float
        Per-release epsilon, >= 0.
    delta : float
        Per-release delta in [0, 1).
    k : int
        Number of releases, >= 1.
    delta_prime : float
        The extra delta, in (0, 1); ``k * delta + delta_prime`` must be < 1.

    Returns
    -------
    float
        epsilon'.

    Examples
    --------
    >>> from dpcurator.accounting._composition import advanced_composition_epsilon
    >>> round(advanced_composition_epsilon(0.01, 0.0, 100, 1e-5), 6)
    0.484853
    """
    epsilon = check_epsilon(epsilon, allow_zero=True)
    delta = check_delta(delta)
    k = check_integer(k, "k", minimum=1)
    delta_prime = check_probability(delta_prime, "delta_prime", open_left=True, open_right=True)
    if k * delta + delta_prime >= 1.0:
        raise InvalidParameterError(
            "delta_prime",
            delta_prime,
            f"must leave k * delta + delta_prime < 1 (k * delta = {k * delta})",
        )
    return _advanced_epsilon(k * epsilon * epsilon, k * _drift(epsilon), delta_prime)


def advanced_composition_per_step(target_epsilon: float, k: int, delta_prime: float) -> float:
    r"""Per-release epsilon that keeps k releases within ``target_epsilon`` (lecture 002 corollary).

    Choosing :math:`\epsilon = \epsilon' / \sqrt{8k\ln(1/\delta')}` makes the k-fold adaptive
    composition :math:`(\epsilon', k\delta + \delta')`-DP for :math:`0 < \epsilon' < 1`
    (lecture 002, corollary of advanced composition; Dwork and Roth 2014, Corollary 3.21). Proof
    with the lecture's theorem: the square-root term is exactly :math:`\epsilon'/2`, and the drift
    is at most :math:`k\epsilon^2/2 = \epsilon'^2 / (16\ln(1/\delta')) \le \epsilon'/2` whenever
    :math:`\epsilon' \le 8\ln(1/\delta')`, which is checked.

    Parameters
    ----------
    target_epsilon : float
        The total epsilon', in (0, 1).
    k : int
        Number of releases, >= 1.
    delta_prime : float
        The extra delta of advanced composition, in (0, 1).

    Returns
    -------
    float
        The per-release epsilon.

    Examples
    --------
    >>> from dpcurator.accounting._composition import (
    ...     advanced_composition_epsilon, advanced_composition_per_step)
    >>> eps = advanced_composition_per_step(0.5, 100, 1e-5)
    >>> round(eps, 7)
    0.0052099
    >>> advanced_composition_epsilon(eps, 0.0, 100, 1e-5) <= 0.5
    True
    """
    target = check_epsilon(target_epsilon, "target_epsilon")
    if target >= 1.0:
        raise InvalidParameterError(
            "target_epsilon", target_epsilon, "must be < 1 (the corollary assumes it)"
        )
    k = check_integer(k, "k", minimum=1)
    delta_prime = check_probability(delta_prime, "delta_prime", open_left=True, open_right=True)
    log_term = math.log(1.0 / delta_prime)
    if target > 8.0 * log_term:
        raise InvalidParameterError(
            "delta_prime",
            delta_prime,
            f"must satisfy target_epsilon <= 8 ln(1/delta_prime) for the corollary ({target})",
        )
    return target / math.sqrt(8.0 * k * log_term)


class AdvancedCompositionAccountant(_ApproxDPAccountant):
    r"""Advanced composition (Dwork, Rothblum and Vadhan 2010), heterogeneous form.

    Releases that are (epsilon_i, delta_i)-DP compose, for every :math:`\delta' > 0`, to
    :math:`(\epsilon', \sum_i\delta_i + \delta')`-DP with

    .. math:: \epsilon' = \sqrt{2\ln(1/\delta')\sum_i\epsilon_i^2}
              + \sum_i \epsilon_i\,\frac{e^{\epsilon_i} - 1}{e^{\epsilon_i} + 1}.

    For equal epsilons this is lecture 002's theorem,
    :math:`\epsilon\sqrt{2k\ln(1/\delta')} + k\epsilon(e^\epsilon - 1)/(e^\epsilon + 1)` (the
    Dwork-Roth book, Theorem 3.20, states the looser drift :math:`k\epsilon(e^\epsilon - 1)`).
    The heterogeneous form is the lecture's proof run with per-step widths: the drift lemma bounds
    each step's expected loss by :math:`\epsilon_i(e^{\epsilon_i}-1)/(e^{\epsilon_i}+1)`, and
    Hoeffding's lemma on a step of width :math:`2\epsilon_i` gives the Chernoff exponent
    :math:`\lambda^2\sum_i\epsilon_i^2/2` (Kairouz, Oh and Viswanath 2015, Theorem 3.5 give the
    same form). Releases with delta_i > 0 reduce to pure ones as in Dwork and Roth, Theorem 3.20.

    ``get_epsilon(delta)`` spends all of ``delta - sum delta_i`` on :math:`\delta'` (epsilon'
    decreases in :math:`\delta'`) and returns the smaller of this bound and basic composition,
    which holds at the same time (lecture 002); ``math.inf`` when ``delta < sum delta_i``.
    ``get_delta(epsilon)`` inverts the bound, again taking the better of the two theorems.

    The theorem needs the privacy parameters fixed before the first release (Rogers, Roth, Ullman
    and Vadhan 2016 show that adaptively chosen parameters need a different bound), so
    ``fully_adaptive`` is False. Neighbour relation: that of the events.

    Parameters
    ----------
    gaussian_delta : float, optional
        The delta to charge each Gaussian or discrete Gaussian event (see
        :class:`BasicAccountant`).

    Examples
    --------
    >>> from dpcurator.accounting import PureDPEvent
    >>> from dpcurator.accounting._composition import AdvancedCompositionAccountant
    >>> acc = AdvancedCompositionAccountant().compose(PureDPEvent(0.01), count=1000)
    >>> round(acc.get_epsilon(1e-6), 4)
    1.7123
    >>> acc.get_delta(1.7123) < 1e-6 < acc.get_delta(1.7122)
    True
    """

    name: ClassVar[str] = "advanced"
    fully_adaptive: ClassVar[bool] = False

    def __init__(self, *, gaussian_delta: float | None = None) -> None:
        super().__init__(gaussian_delta=gaussian_delta)
        self._eps_sum = Fraction(0)
        self._sq_sum = Fraction(0)
        self._drift_sum = Fraction(0)
        self._delta_sum = Fraction(0)

    def _add(self, guarantee: _Guarantee) -> None:
        eps, times = guarantee.exact_epsilon, guarantee.times
        self._eps_sum += eps * times
        self._sq_sum += eps * eps * times
        self._drift_sum += Fraction(_drift(guarantee.epsilon)) * times
        self._delta_sum += guarantee.exact_delta * times

    def _epsilon(self, delta: float) -> float:
        basic = ceil_float(self._eps_sum)
        exact_slack = Fraction(delta) - self._delta_sum
        if exact_slack < 0:
            return math.inf
        slack = floor_float(exact_slack)  # a smaller delta' gives a larger epsilon': safe
        if slack <= 0.0:
            return basic
        sum_sq, drift = ceil_float(self._sq_sum), ceil_float(self._drift_sum)
        return min(basic, _advanced_epsilon(sum_sq, drift, slack))

    def _delta(self, epsilon: float) -> float:
        sum_delta = min(ceil_float(self._delta_sum), 1.0)
        best = _worst_case_delta(ceil_float(self._eps_sum), sum_delta, epsilon)
        sum_sq, drift = ceil_float(self._sq_sum), ceil_float(self._drift_sum)
        if epsilon > drift and sum_sq > 0.0:
            gap = floor_float(Fraction(epsilon) - Fraction(drift))
            exponent = gap * gap / (2.0 * sum_sq)
            exponent -= 4 * _EPS * exponent  # a lower bound of the exact exponent
            # exp errs by an ulp, plus the exponent's own error scaled by its size: padded.
            delta_prime = next_up(math.exp(-exponent) * (1.0 + 8 * _EPS * (exponent + 1.0)))
            best = min(best, next_up(sum_delta + delta_prime))
        return min(best, 1.0)


# -- optimal homogeneous composition -------------------------------------------------------------


class OptimalHomogeneousAccountant(_ApproxDPAccountant):
    r"""Optimal composition of k (epsilon, delta)-DP releases (Kairouz, Oh and Viswanath 2015).

    The k-fold adaptive composition of (epsilon, delta)-DP mechanisms is dominated by the k-fold
    product of the worst (epsilon, delta)-DP pair, and this is tight (KOV 2015, Theorem 3.3). Its
    privacy profile is

    .. math:: \delta(\epsilon') = 1 - (1-\delta)^k\,\bigl(1 - \delta_{RR}(\epsilon')\bigr),\quad
              \delta_{RR}(\epsilon') = \sum_{l=0}^{k}\binom{k}{l}
              \frac{\max\bigl(0,\ e^{(k-l)\epsilon} - e^{\epsilon'}e^{l\epsilon}\bigr)}
                   {(1+e^{\epsilon})^k},

    :math:`\delta_{RR}` being the hockey-stick divergence of k-fold randomized response; at the
    points :math:`\epsilon' = (k - 2i)\epsilon` it is KOV's Theorem 3.3 verbatim. It is evaluated
    in log space (``gammaln``, ``logsumexp``), so k = 10,000 takes milliseconds, and inflated by
    a relative 1e-9 that covers its floating-point error, so ``get_delta`` is an upper bound;
    ``get_epsilon`` inverts it exactly between the breakpoints :math:`(k-2i)\epsilon` (where
    the positive terms are fixed and :math:`\delta_{RR} = A - e^{\epsilon'}B`), then checks
    the result against ``get_delta`` and moves it up if round-off put it below the exact value.
    Optimality makes it never worse than basic or advanced composition.

    Homogeneous only: every composed event must reduce to the same (epsilon, delta) (equal to a
    relative 1e-12; the larger is kept); composing another raises
    :class:`~dpcurator.errors.UnsupportedEventError` naming both. No-op events are skipped. The
    theorem needs the parameters fixed in advance, so ``fully_adaptive`` is False. Neighbour
    relation: that of the events.

    Parameters
    ----------
    gaussian_delta : float, optional
        The delta to charge each Gaussian or discrete Gaussian event (see
        :class:`BasicAccountant`).

    Examples
    --------
    >>> from dpcurator.accounting import PureDPEvent
    >>> from dpcurator.accounting._composition import OptimalHomogeneousAccountant
    >>> acc = OptimalHomogeneousAccountant().compose(PureDPEvent(0.01), count=10_000)
    >>> round(acc.get_epsilon(1e-6), 3)
    4.886
    """

    name: ClassVar[str] = "optimal"
    fully_adaptive: ClassVar[bool] = False

    def __init__(self, *, gaussian_delta: float | None = None) -> None:
        super().__init__(gaussian_delta=gaussian_delta)
        self._k = 0
        self._param: tuple[float, float] | None = None
        self._first: PrivacyEvent | None = None
        self._masses: tuple[tuple[int, float], NDArray[np.float64], NDArray[np.float64]] | None
        self._masses = None

    @property
    def k(self) -> int:
        """Number of releases composed so far."""
        return self._k

    @property
    def parameters(self) -> tuple[float, float] | None:
        """The (epsilon, delta) every release shares, or None before the first one."""
        return self._param

    def _check_guarantees(self, event: PrivacyEvent, guarantees: list[_Guarantee]) -> None:
        param, first = self._param, self._first
        for g in guarantees:
            if param is None:
                param, first = (g.epsilon, g.delta), event
                continue
            if not (_close(g.epsilon, param[0]) and _close(g.delta, param[1])):
                raise UnsupportedEventError(
                    f"OptimalHomogeneousAccountant composes releases with one shared (epsilon, "
                    f"delta) only: {event!r} is ({g.epsilon!r}, {g.delta!r})-DP but {first!r} "
                    f"was ({param[0]!r}, {param[1]!r})-DP. Use AdvancedCompositionAccountant or "
                    "PLDAccountant for heterogeneous releases."
                )

    def _add(self, guarantee: _Guarantee) -> None:
        if self._param is None:
            self._param = (guarantee.epsilon, guarantee.delta)
            self._first = self.events[-1][0] if self.events else None
        else:
            eps, delta = self._param
            self._param = (max(eps, guarantee.epsilon), max(delta, guarantee.delta))
        self._k += guarantee.times

    def _log_masses(self) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """Return ln P_l and ln Q_l of k-fold randomized response for l < k/2 (the terms used).

        P_l = C(k, l) e^{(k-l) eps} / (1 + e^eps)^k, Q_l = C(k, l) e^{l eps} / (1 + e^eps)^k:
        the probabilities, under the two datasets, of the outcomes with l "wrong" answers.
        Cached for the current (k, eps).
        """
        eps, _ = self._param if self._param is not None else (0.0, 0.0)
        k = self._k
        if self._masses is None or self._masses[0] != (k, eps):
            ell = np.arange((k + 1) // 2, dtype=float)  # l < k/2
            log_binom = gammaln(k + 1.0) - gammaln(ell + 1.0) - gammaln(k - ell + 1.0)
            log_norm = k * float(np.logaddexp(0.0, eps))
            log_p = np.asarray(log_binom + (k - ell) * eps - log_norm, dtype=float)
            log_q = np.asarray(log_binom + ell * eps - log_norm, dtype=float)
            self._masses = ((k, eps), log_p, log_q)
        return self._masses[1], self._masses[2]

    def _log_delta_rr(self, epsilon_prime: float) -> float:
        """Return ln delta_RR(epsilon') of k-fold randomized response, in log space."""
        eps, _ = self._param if self._param is not None else (0.0, 0.0)
        k = self._k
        if eps == 0.0 or epsilon_prime >= k * eps:
            return -math.inf
        log_p, _ = self._log_masses()
        ell = np.arange(log_p.size, dtype=float)
        gap = (k - 2.0 * ell) * eps - epsilon_prime  # term l is positive iff gap > 0
        keep = gap > 0.0
        log_terms = log_p[keep] + np.log(-np.expm1(-gap[keep]))
        return float(logsumexp(log_terms))

    def _delta(self, epsilon: float) -> float:
        if self._param is None or self._k == 0:
            return 0.0
        _, delta = self._param
        log_keep = self._k * math.log1p(-delta)  # ln (1 - delta)^k
        base = -math.expm1(log_keep)  # 1 - (1 - delta)^k
        rr = math.exp(log_keep + self._log_delta_rr(epsilon)) * (1.0 + _KOV_REL_ERROR)
        return min(1.0, base + rr)

    def _epsilon(self, delta: float) -> float:
        if self._param is None or self._k == 0:
            return 0.0
        if self._delta(0.0) <= delta:
            return 0.0
        _, delta0 = self._param
        log_keep = self._k * math.log1p(-delta0)
        base = -math.expm1(log_keep)
        if delta < base:
            return math.inf  # even at epsilon' = k eps, where delta_RR = 0, delta is base
        # delta(eps') <= delta  <=>  delta_RR(eps') <= t, t as below (in log space).
        log_t = (
            math.log(delta - base) - log_keep - math.log1p(_KOV_REL_ERROR)
            if delta > base
            else -math.inf
        )
        candidate = self._solve_rr(log_t)
        # Guard the closed-form solution against round-off: it must certify delta.
        step = 1e-15 * max(candidate, 1.0)
        while self._delta(candidate) > delta:
            candidate += step
            step *= 2.0
        return candidate

    def _solve_rr(self, log_t: float) -> float:
        """Smallest eps' >= 0 with delta_RR(eps') <= t, solved exactly between breakpoints.

        On [b_m, b_{m-1}) with b_m = (k - 2m) eps the terms l < m are the positive ones, so
        delta_RR(eps') = SP_m - e^{eps'} SQ_m (SP, SQ prefix sums of P_l and Q_l), and
        eps' = ln(SP_m - t) - ln(SQ_m) on the segment where delta_RR crosses t.
        """
        eps, _ = self._param if self._param is not None else (0.0, 0.0)
        k = self._k
        if log_t == -math.inf:
            return k * eps
        log_p, log_q = self._log_masses()
        log_sp = np.logaddexp.accumulate(log_p)  # ln SP_{m}, index m - 1
        log_sq = np.logaddexp.accumulate(log_q)
        m = np.arange(1, log_p.size + 1, dtype=float)
        breaks = (k - 2.0 * m) * eps  # b_m, decreasing in m
        # ln delta_RR(b_m) = ln SP_m + ln(1 - e^{b_m} SQ_m / SP_m), increasing in m.
        ratio = np.minimum(breaks + log_sq - log_sp, 0.0)
        with np.errstate(divide="ignore"):
            log_at_breaks = log_sp + np.log(-np.expm1(ratio))
        above = np.nonzero((log_at_breaks > log_t) | (breaks <= 0.0))[0]
        if above.size == 0:  # pragma: no cover - delta_RR(0) > t was checked by the caller
            return 0.0
        i = int(above[0])
        lower = max(float(breaks[i]), 0.0)
        upper = float(breaks[i - 1]) if i > 0 else k * eps
        # ln(SP - t) = ln SP + ln(1 - t / SP); t < SP on this segment.
        log_sp_i, log_sq_i = float(log_sp[i]), float(log_sq[i])
        solution = log_sp_i + math.log(-math.expm1(min(log_t - log_sp_i, 0.0))) - log_sq_i
        return min(max(solution, lower), upper)


def _close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=1e-12, abs_tol=0.0)
