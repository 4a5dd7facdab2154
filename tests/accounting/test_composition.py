"""Tests of the classic composition accountants: basic, advanced, optimal homogeneous (KOV)."""

from __future__ import annotations

import importlib.util
import itertools
import math
import sys
import types
from dataclasses import dataclass
from fractions import Fraction

import mpmath
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.special import ndtr

from dpcurator._validation import ceil_float
from dpcurator.accounting import (
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
from dpcurator.accounting._composition import (
    AdvancedCompositionAccountant,
    BasicAccountant,
    OptimalHomogeneousAccountant,
    advanced_composition_epsilon,
    advanced_composition_per_step,
    approx_dp_guarantee,
)
from dpcurator.errors import InvalidParameterError, UnsupportedEventError

CLASSIC = (BasicAccountant, AdvancedCompositionAccountant, OptimalHomogeneousAccountant)
HAS_PROFILES = importlib.util.find_spec("dpcurator.accounting._profiles") is not None


@dataclass(frozen=True, slots=True)
class _AlienEvent(PrivacyEvent):
    """An event no accountant here knows."""


# -- basic composition: the lecture's numbers ------------------------------------------------------


def test_basic_composition_sums_epsilons_and_deltas() -> None:
    # Lecture 002/003: sequential composition of (eps_i, delta_i) is (sum eps_i, sum delta_i).
    acc = BasicAccountant().compose(LaplaceEvent(scale=10.0), count=3)  # 3 x 0.1
    acc.compose(ApproxDPEvent(0.2, 1e-6)).compose(ApproxDPEvent(0.3, 2e-6))
    assert acc.get_epsilon(3e-6) == pytest.approx(0.8, abs=1e-15)
    assert acc.get_epsilon(1.0e-5) == pytest.approx(0.8, abs=1e-15)
    assert acc.get_epsilon(2.9e-6) == math.inf  # documented: inf below the sum of deltas
    assert acc.get_delta(0.8) == pytest.approx(3e-6, rel=1e-12)


def test_basic_get_delta_below_the_sum_is_the_worst_pair() -> None:
    # Below sum eps the (S, D)-DP composition is still (e, D + (1-D)(e^S - e^e)/(1 + e^S))-DP.
    acc = BasicAccountant().compose(ApproxDPEvent(1.0, 1e-3))
    expected = 1e-3 + (1 - 1e-3) * (math.e - math.exp(0.5)) / (1 + math.e)
    assert acc.get_delta(0.5) == pytest.approx(expected, rel=1e-12)
    assert acc.get_delta(0.0) == pytest.approx(1e-3 + (1 - 1e-3) * math.tanh(0.5), rel=1e-12)


def test_basic_sums_are_exact() -> None:
    # A thousand Laplace releases of scale 1000 (epsilon exactly 1/1000 each) sum to exactly 1;
    # float addition of their epsilons would overshoot.
    acc = BasicAccountant()
    for _ in range(1000):
        acc.compose(LaplaceEvent(scale=1000.0))
    assert acc.exact_sums == (Fraction(1), Fraction(0))
    assert acc.get_epsilon(0.0) == 1.0
    assert sum([0.001] * 1000) != 1.0  # the naive sum the exact one avoids
    # The float 0.001 is 1/1000 + 2.1e-20: a thousand of them exceed 1, and the reported sum
    # is rounded up, not to the nearest float (which would be 1.0).
    pure = BasicAccountant().compose(PureDPEvent(0.001), count=1000)
    assert pure.exact_sums[0] == 1000 * Fraction(0.001) > 1
    assert pure.get_epsilon(0.0) == math.nextafter(1.0, 2.0)


def test_basic_reports_round_up_never_to_nearest() -> None:
    # Regression: 1 + 1e-17 used to be reported as 1.0 (float() rounds to nearest).
    acc = BasicAccountant().compose(PureDPEvent(1.0)).compose(PureDPEvent(1e-17))
    assert acc.exact_sums[0] == 1 + Fraction(1e-17)
    assert acc.get_epsilon(0.0) == math.nextafter(1.0, 2.0)
    deltas = BasicAccountant().compose(ApproxDPEvent(0.5, 1e-6)).compose(ApproxDPEvent(0, 1e-30))
    assert deltas.get_delta(0.5) > 1e-6
    assert deltas.get_epsilon(1e-6) == math.inf  # the deltas no longer fit in 1e-6


def test_pure_events_count_their_exact_epsilon() -> None:
    # d / b exactly, not the float quotient (1 / 3.0 rounds below 1/3).
    third = LaplaceEvent(scale=3.0)
    assert third.epsilon < Fraction(1, 3)
    acc = BasicAccountant().compose(third, count=3)
    assert acc.exact_sums[0] == 1
    assert acc.compose(DiscreteLaplaceEvent(scale=7.0, sensitivity=2)).exact_sums[0] == Fraction(
        9, 7
    )
    # Randomized response: a rigorous upper bound of ln 3, a few ulps above it.
    rr = BasicAccountant().compose(RandomizedResponseEvent(0.75)).exact_sums[0]
    with mpmath.workdps(40):
        assert mpmath.mpf(rr.numerator) / rr.denominator > mpmath.log(3)
    assert float(rr) == pytest.approx(math.log(3.0), rel=1e-15)


@pytest.mark.parametrize(
    ("rate", "epsilon"), [(0.001, 0.5), (1e-6, 5.0), (0.3, 2.0), (0.5, 1e-9), (0.9, 40.0)]
)
def test_amplification_is_an_upper_bound(rate: float, epsilon: float) -> None:
    acc = BasicAccountant().compose(PoissonSampledEvent(rate, PureDPEvent(epsilon)))
    got = acc.exact_sums[0]
    with mpmath.workdps(60):
        exact = mpmath.log1p(mpmath.mpf(rate) * mpmath.expm1(mpmath.mpf(epsilon)))
        assert mpmath.mpf(got.numerator) / got.denominator >= exact
        assert float(got) == pytest.approx(float(exact), rel=1e-12)
    # Sampling m of n: the rate m/n exactly (the float 1/3 is below it).
    wor = BasicAccountant().compose(SampledWithoutReplacementEvent(1, 3, ApproxDPEvent(1.0, 3e-6)))
    assert wor.exact_sums[1] == Fraction(3e-6) / 3


def test_empty_accountants_spend_nothing() -> None:
    for cls in CLASSIC:
        acc = cls()
        assert acc.get_epsilon(0.0) == 0.0
        assert acc.get_delta(0.0) == 0.0


@pytest.mark.parametrize(
    ("event", "epsilon", "delta"),
    [
        (PureDPEvent(0.7), 0.7, 0.0),
        (LaplaceEvent(scale=4.0, sensitivity=2.0), 0.5, 0.0),
        (DiscreteLaplaceEvent(scale=4.0, sensitivity=3), 0.75, 0.0),
        (RandomizedResponseEvent(0.75), math.log(3.0), 0.0),  # the lecture's coin
        (RandomizedResponseEvent(2.0 / 3.0, categories=3), math.log(4.0), 0.0),
        (ApproxDPEvent(0.4, 1e-7), 0.4, 1e-7),
        (NoOpEvent(), 0.0, 0.0),
        (SelfComposedEvent(PureDPEvent(0.25), count=4), 1.0, 0.0),
        (SelfComposedEvent(PureDPEvent(0.25), count=0), 0.0, 0.0),
        (ComposedEvent((PureDPEvent(0.25), ApproxDPEvent(0.5, 1e-6))), 0.75, 1e-6),
    ],
)
def test_reduction_of_each_event(event: PrivacyEvent, epsilon: float, delta: float) -> None:
    eps, dlt = approx_dp_guarantee(event)
    assert eps == pytest.approx(epsilon, rel=1e-14, abs=1e-300)
    assert dlt == pytest.approx(delta, rel=1e-14, abs=1e-300)
    assert BasicAccountant().compose(event).get_epsilon(delta) == pytest.approx(epsilon, rel=1e-14)


def test_poisson_subsampling_amplifies() -> None:
    # Balle, Barthe, Gaboardi 2018, Thm 8: (ln(1 + q(e^eps - 1)), q delta).
    q, eps, delta = 0.01, 1.0, 1e-5
    got = approx_dp_guarantee(PoissonSampledEvent(q, ApproxDPEvent(eps, delta)))
    assert got[0] == pytest.approx(math.log(1 + q * (math.e - 1)), rel=1e-14)
    assert got[1] == pytest.approx(q * delta, rel=1e-14)
    # Small eps: log1p keeps relative accuracy.
    tiny = approx_dp_guarantee(PoissonSampledEvent(0.5, PureDPEvent(1e-12)))[0]
    assert tiny == pytest.approx(0.5e-12, rel=1e-9)
    # Large eps: no overflow, eps' = eps + ln(q) asymptotically.
    huge = approx_dp_guarantee(PoissonSampledEvent(0.5, PureDPEvent(800.0)))[0]
    assert huge == pytest.approx(800.0 + math.log(0.5), rel=1e-14)


def test_sampling_without_replacement_amplifies() -> None:
    # Balle, Barthe, Gaboardi 2018, Thm 9 (replace-one): rate m/n.
    event = SampledWithoutReplacementEvent(10, 1000, ApproxDPEvent(2.0, 1e-4))
    eps, delta = approx_dp_guarantee(event)
    assert eps == pytest.approx(math.log1p(0.01 * math.expm1(2.0)), rel=1e-14)
    assert delta == pytest.approx(1e-6, rel=1e-14)


def test_subsample_of_a_composition_is_composed_first() -> None:
    inner = ComposedEvent((PureDPEvent(0.5), PureDPEvent(0.5)))
    eps, _ = approx_dp_guarantee(PoissonSampledEvent(0.1, inner))
    assert eps == pytest.approx(math.log1p(0.1 * math.expm1(1.0)), rel=1e-14)


@pytest.mark.parametrize("cls", CLASSIC)
@pytest.mark.parametrize("event", [GaussianEvent(sigma=2.0), DiscreteGaussianEvent(sigma=3.0)])
def test_gaussian_needs_gaussian_delta(cls: type, event: PrivacyEvent) -> None:
    acc = cls()
    assert not acc.supports(event)
    with pytest.raises(UnsupportedEventError, match="gaussian_delta"):
        acc.compose(event)
    with pytest.raises(UnsupportedEventError, match="gaussian_delta"):
        acc.compose(PoissonSampledEvent(0.1, event))
    assert acc.events == ()


@pytest.mark.parametrize("cls", CLASSIC)
def test_zcdp_and_unknown_events_are_refused(cls: type) -> None:
    acc = cls()
    with pytest.raises(UnsupportedEventError, match="ZCDPAccountant"):
        acc.compose(ZCDPEvent(0.1))
    with pytest.raises(UnsupportedEventError, match="_AlienEvent"):
        acc.compose(_AlienEvent())
    # An unsupported event inside a composition refuses the whole of it.
    with pytest.raises(UnsupportedEventError):
        acc.compose(ComposedEvent((PureDPEvent(0.1), ZCDPEvent(0.1))))
    assert acc.events == ()
    assert acc.get_epsilon(0.0) == 0.0


@pytest.mark.parametrize("bad", [0, 0.0, 1.0, -1e-6, math.nan, "1e-6", True])
def test_gaussian_delta_is_validated(bad: object) -> None:
    with pytest.raises(InvalidParameterError, match="gaussian_delta"):
        BasicAccountant(gaussian_delta=bad)  # type: ignore[arg-type]


@mpmath.workdps(50)
def _balle_wang_delta(eps: float, mu: float) -> float:
    """Exact Gaussian profile (Balle and Wang 2018, Thm 8), mu = sensitivity / sigma, mpmath."""
    e, m = mpmath.mpf(eps), mpmath.mpf(mu)
    return float(mpmath.ncdf(m / 2 - e / m) - mpmath.exp(e) * mpmath.ncdf(-m / 2 - e / m))


def _fake_profiles() -> types.ModuleType:
    """A stand-in for _profiles.privacy_profile: the Balle-Wang closed form, one orientation."""
    module = types.ModuleType("dpcurator.accounting._profiles")
    calls: list[str] = []

    def privacy_profile(
        event: PrivacyEvent, epsilons: np.ndarray, *, orientation: str = "remove"
    ) -> np.ndarray:
        assert isinstance(event, GaussianEvent)
        calls.append(orientation)
        mu = 1.0 / event.noise_multiplier
        eps = np.asarray(epsilons, dtype=float)
        out = ndtr(mu / 2 - eps / mu) - np.exp(eps) * ndtr(-mu / 2 - eps / mu)
        # A deliberately asymmetric "add" side, to check that the larger side is used.
        return out if orientation == "remove" else 0.5 * out

    module.privacy_profile = privacy_profile  # type: ignore[attr-defined]
    module.calls = calls  # type: ignore[attr-defined]
    return module


def test_gaussian_epsilon_inverts_the_profile(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = _fake_profiles()
    monkeypatch.setitem(sys.modules, "dpcurator.accounting._profiles", fake)
    acc = BasicAccountant(gaussian_delta=1e-5).compose(GaussianEvent(sigma=3.0, sensitivity=2.0))
    eps = acc.get_epsilon(1e-5)
    assert _balle_wang_delta(eps, 2.0 / 3.0) <= 1e-5
    assert _balle_wang_delta(eps * (1 - 1e-9), 2.0 / 3.0) > 1e-5
    assert set(fake.calls) == {"remove", "add"}
    # Cached per event: composing it again does not call the profile again.
    n_calls = len(fake.calls)
    acc.compose(GaussianEvent(sigma=3.0, sensitivity=2.0), count=4)
    assert len(fake.calls) == n_calls
    # Exact sums: 5 x the float 1e-5 is above the float 5e-5; read at the sum rounded up.
    assert acc.get_epsilon(5e-5) == math.inf
    assert acc.get_epsilon(ceil_float(5 * Fraction(1e-5))) == pytest.approx(5 * eps, rel=1e-14)
    # A weak Gaussian whose delta(0) is already below gaussian_delta costs epsilon 0.
    weak = BasicAccountant(gaussian_delta=0.5).compose(GaussianEvent(sigma=100.0))
    assert weak.get_epsilon(0.5) == 0.0


@pytest.mark.skipif(not HAS_PROFILES, reason="_profiles.py (privacy profiles) not written yet")
def test_gaussian_epsilon_comes_from_the_exact_profile() -> None:
    acc = BasicAccountant(gaussian_delta=1e-6).compose(GaussianEvent(sigma=2.0, sensitivity=1.0))
    eps = acc.get_epsilon(1e-6)
    # The epsilon is the exact one: delta(eps) <= 1e-6 < delta(eps (1 - 1e-9)).
    assert _balle_wang_delta(eps, 0.5) <= 1e-6
    assert _balle_wang_delta(eps * (1 - 1e-9), 0.5) > 1e-6
    # Each Gaussian release is charged gaussian_delta, before amplification when subsampled.
    acc.compose(GaussianEvent(sigma=2.0), count=2)
    assert acc.get_epsilon(3e-6) == pytest.approx(3 * eps, rel=1e-14)
    assert acc.get_epsilon(2.9e-6) == math.inf
    sampled = BasicAccountant(gaussian_delta=1e-6).compose(
        PoissonSampledEvent(0.1, GaussianEvent(sigma=2.0))
    )
    assert sampled.get_delta(10.0) == pytest.approx(1e-7, rel=1e-12)


# -- advanced composition ------------------------------------------------------------------------


def test_advanced_composition_lecture_case() -> None:
    # Lecture 002: k = 100 releases of eps = 0.01, delta' = 1e-5, by hand.
    k, eps, dp = 100, 0.01, 1e-5
    by_hand = eps * math.sqrt(2 * k * math.log(1 / dp)) + k * eps * (math.exp(eps) - 1) / (
        math.exp(eps) + 1
    )
    assert by_hand == pytest.approx(0.48485254955, rel=1e-10)
    assert advanced_composition_epsilon(eps, 0.0, k, dp) == pytest.approx(by_hand, rel=1e-13)
    acc = AdvancedCompositionAccountant().compose(PureDPEvent(eps), count=k)
    assert acc.get_epsilon(dp) == pytest.approx(by_hand, rel=1e-13)
    assert acc.get_epsilon(dp) < BasicAccountant().compose(PureDPEvent(eps), count=k).get_epsilon(
        dp
    )
    # The Dwork-Roth drift k eps (e^eps - 1) is looser than the lecture's.
    dwork_roth = eps * math.sqrt(2 * k * math.log(1 / dp)) + k * eps * (math.exp(eps) - 1)
    assert by_hand < dwork_roth


def test_advanced_composition_with_deltas() -> None:
    # Total delta k delta + delta': the accountant spends what is left on delta'.
    # A dyadic delta, so that 200 of them sum to a float exactly (sums are exact).
    acc = AdvancedCompositionAccountant().compose(ApproxDPEvent(0.05, 2.0**-27), count=200)
    total = 200 * 2.0**-27 + 1e-6
    expected = advanced_composition_epsilon(0.05, 2.0**-27, 200, 1e-6)
    assert acc.get_epsilon(total) == pytest.approx(expected, rel=1e-9)
    assert acc.get_epsilon(200 * 2.0**-27) == pytest.approx(10.0, rel=1e-12)  # basic only
    # With decimal deltas the float product is below the exact sum: no finite epsilon there.
    decimal = AdvancedCompositionAccountant().compose(ApproxDPEvent(0.05, 1e-8), count=200)
    assert 200 * Fraction(1e-8) > Fraction(200 * 1e-8)
    assert decimal.get_epsilon(200 * 1e-8) == math.inf
    sum_deltas = ceil_float(200 * Fraction(1e-8))
    assert decimal.get_epsilon(sum_deltas) <= 10.0
    assert acc.get_epsilon(1e-6) == math.inf


def test_advanced_composition_heterogeneous_formula() -> None:
    epsilons = [0.01] * 50 + [0.05] * 20 + [0.2]
    acc = AdvancedCompositionAccountant()
    for e in epsilons:
        acc.compose(PureDPEvent(e))
    dp = 1e-6
    expected = math.sqrt(2 * math.log(1 / dp) * sum(e * e for e in epsilons)) + sum(
        e * (math.exp(e) - 1) / (math.exp(e) + 1) for e in epsilons
    )
    assert acc.get_epsilon(dp) == pytest.approx(expected, rel=1e-12)


def test_advanced_never_exceeds_basic() -> None:
    # Large eps: the advanced bound is worse; the lecture says both hold, so take the min.
    acc = AdvancedCompositionAccountant().compose(PureDPEvent(1.0), count=3)
    assert advanced_composition_epsilon(1.0, 0.0, 3, 1e-6) > 3.0
    assert acc.get_epsilon(1e-6) == 3.0
    assert acc.get_delta(3.0) == 0.0


def test_advanced_get_delta_inverts_get_epsilon() -> None:
    acc = AdvancedCompositionAccountant().compose(PureDPEvent(0.02), count=500)
    for delta in (1e-9, 1e-6, 1e-3):
        eps = acc.get_epsilon(delta)
        assert acc.get_delta(eps) == pytest.approx(delta, rel=1e-9)


def test_advanced_composition_per_step_meets_the_target() -> None:
    # Lecture 002 corollary: eps = eps' / sqrt(8 k ln(1/delta')) gives a total <= eps'.
    for target, k, dp in itertools.product((0.1, 0.5, 0.99), (1, 10, 1000, 100_000), (1e-3, 1e-9)):
        per_step = advanced_composition_per_step(target, k, dp)
        assert per_step == pytest.approx(target / math.sqrt(8 * k * math.log(1 / dp)), rel=1e-14)
        total = advanced_composition_epsilon(per_step, 0.0, k, dp)
        assert total <= target
        assert total > 0.5 * target  # and it is not absurdly conservative


def test_advanced_composition_function_validation() -> None:
    with pytest.raises(InvalidParameterError, match="k must be >= 1"):
        advanced_composition_epsilon(0.1, 0.0, 0, 1e-5)
    with pytest.raises(InvalidParameterError, match="delta_prime"):
        advanced_composition_epsilon(0.1, 0.0, 10, 0.0)
    with pytest.raises(InvalidParameterError, match="delta_prime"):
        advanced_composition_epsilon(0.1, 0.2, 10, 0.5)  # k delta + delta' >= 1
    with pytest.raises(InvalidParameterError, match=r"epsilon must be >= 0; got -0\.1"):
        advanced_composition_epsilon(-0.1, 0.0, 10, 1e-5)
    with pytest.raises(InvalidParameterError, match=r"target_epsilon must be < 1 .*; got 1\.0"):
        advanced_composition_per_step(1.0, 10, 1e-5)
    with pytest.raises(InvalidParameterError, match="delta_prime"):
        advanced_composition_per_step(0.9, 10, 0.95)  # 0.9 > 8 ln(1/0.95)
    with pytest.raises(InvalidParameterError, match="k must be an integer"):
        advanced_composition_per_step(0.5, 2.5, 1e-5)


# -- optimal homogeneous composition (Kairouz, Oh, Viswanath 2015) ---------------------------------


def _rr_hockey_stick_by_enumeration(k: int, p: Fraction, e_eps_prime: Fraction) -> Fraction:
    """Exact delta of k-fold randomized response by enumerating all 2^k outcomes (Fractions).

    P: each bit is 1 w.p. p; Q: each bit is 1 w.p. 1 - p. delta = sum_x max(0, P(x) - a Q(x)).
    Independent of the binomial formula under test.
    """
    total = Fraction(0)
    for bits in itertools.product((0, 1), repeat=k):
        px, qx = Fraction(1), Fraction(1)
        for b in bits:
            px *= p if b else 1 - p
            qx *= (1 - p) if b else p
        total += max(Fraction(0), px - e_eps_prime * qx)
    return total


@pytest.mark.parametrize("k", [1, 2, 5, 9])
@pytest.mark.parametrize("e_eps_prime", [Fraction(1), Fraction(2), Fraction(9), Fraction(100)])
def test_optimal_equals_exact_randomized_response_enumeration(
    k: int, e_eps_prime: Fraction
) -> None:
    # eps = ln 3 makes p = 3/4 exact; eps' = ln a with rational a.
    acc = OptimalHomogeneousAccountant().compose(RandomizedResponseEvent(0.75), count=k)
    exact = _rr_hockey_stick_by_enumeration(k, Fraction(3, 4), e_eps_prime)
    got = acc.get_delta(math.log(e_eps_prime))
    # ln 3 is accounted as a rigorous upper bound a few ulps above it, so where the exact delta
    # is 0 (eps' = k ln 3) the accountant reports a few 1e-16.
    assert got == pytest.approx(float(exact), rel=1e-8, abs=1e-14)
    assert got >= float(exact) * (1 - 1e-15)  # an upper bound


@mpmath.workdps(50)
def _kov_delta_mp(k: int, eps: float, delta: float, eps_prime: float) -> mpmath.mpf:
    """KOV 2015 Thm 3.3 profile at 50 digits, straight from the binomial sum."""
    e, ep = mpmath.mpf(eps), mpmath.mpf(eps_prime)
    total = mpmath.mpf(0)
    for ell in range(k + 1):
        term = mpmath.exp((k - ell) * e) - mpmath.exp(ep) * mpmath.exp(ell * e)
        if term > 0:
            total += mpmath.binomial(k, ell) * term
    rr = total / (1 + mpmath.exp(e)) ** k
    return 1 - (1 - mpmath.mpf(delta)) ** k * (1 - rr)


@pytest.mark.parametrize(
    ("k", "eps", "delta"), [(10, 0.5, 0.0), (100, 0.1, 0.0), (50, 1.0, 1e-6), (300, 0.05, 1e-8)]
)
def test_optimal_profile_matches_high_precision(k: int, eps: float, delta: float) -> None:
    acc = OptimalHomogeneousAccountant().compose(ApproxDPEvent(eps, delta), count=k)
    for eps_prime in (0.0, 0.3 * k * eps, 0.6 * k * eps, 0.95 * k * eps):
        exact = float(_kov_delta_mp(k, eps, delta, eps_prime))
        got = acc.get_delta(eps_prime)
        assert got == pytest.approx(exact, rel=1e-8)
        assert got >= exact * (1 - 1e-15)
    for target in (1e-3, 1e-6):
        eps_opt = acc.get_epsilon(target)
        if math.isinf(eps_opt):
            continue
        assert float(_kov_delta_mp(k, eps, delta, eps_opt)) <= target  # valid
        assert float(_kov_delta_mp(k, eps, delta, eps_opt * (1 - 1e-8))) > target  # tight


def test_optimal_matches_peer_figures() -> None:
    # dp_accounting 0.6, pld.from_privacy_parameters(eps, delta) self-composed k times,
    # value_discretization_interval=1e-4 (exact grid for these eps), get_epsilon_for_delta;
    # measured in /tmp/benchvenv on this machine.
    peers = [
        ((0.1, 0.0, 100, 1e-5), 4.306791372574041),
        ((0.01, 0.0, 100, 1e-5), 0.33717392073141905),
        ((0.5, 1e-7, 30, 1e-5), 13.240023173952888),
        ((0.01, 0.0, 10_000, 1e-6), 4.885515558123745),
    ]
    for (eps, delta, k, target), peer in peers:
        acc = OptimalHomogeneousAccountant().compose(ApproxDPEvent(eps, delta), count=k)
        assert acc.get_epsilon(target) == pytest.approx(peer, rel=1e-7)


def test_optimal_at_k_ten_thousand_is_exact() -> None:
    acc = OptimalHomogeneousAccountant().compose(PureDPEvent(0.01), count=10_000)
    eps = acc.get_epsilon(1e-6)
    assert acc.k == 10_000
    # Valid and tight against the 40-digit binomial sum (only terms with positive part).
    assert float(_kov_delta_mp_pos(10_000, 0.01, eps)) <= 1e-6
    assert float(_kov_delta_mp_pos(10_000, 0.01, eps - 1e-6)) > 1e-6
    adv = AdvancedCompositionAccountant().compose(PureDPEvent(0.01), count=10_000)
    assert eps < adv.get_epsilon(1e-6) < 100.0


@mpmath.workdps(40)
def _kov_delta_mp_pos(k: int, eps: float, eps_prime: float) -> mpmath.mpf:
    e, factor = mpmath.mpf(eps), mpmath.exp(mpmath.mpf(eps_prime))
    total = mpmath.mpf(0)
    for ell in range(k + 1):
        if (k - 2 * ell) * e <= eps_prime:
            break
        total += mpmath.binomial(k, ell) * (
            mpmath.exp((k - ell) * e) - factor * mpmath.exp(ell * e)
        )
    return total / (1 + mpmath.exp(e)) ** k


def test_optimal_is_within_kov_theorem_3_5() -> None:
    # KOV 2015, Theorem 3.5: closed-form upper bounds on the optimal epsilon.
    for eps, k, dt in [(0.1, 100, 1e-5), (0.01, 1000, 1e-6), (0.5, 20, 1e-3)]:
        acc = OptimalHomogeneousAccountant().compose(PureDPEvent(eps), count=k)
        drift = k * eps * (math.exp(eps) - 1) / (math.exp(eps) + 1)
        bound = min(
            k * eps,
            drift + eps * math.sqrt(2 * k * math.log(math.e + math.sqrt(k * eps * eps) / dt)),
            drift + eps * math.sqrt(2 * k * math.log(1 / dt)),
        )
        assert acc.get_epsilon(dt) <= bound


@settings(max_examples=40, deadline=None)
@given(
    eps=st.floats(0.001, 2.0),
    k=st.integers(1, 400),
    delta=st.sampled_from([0.0, 1e-9, 1e-7]),
    target=st.sampled_from([1e-6, 1e-4, 1e-2]),
)
def test_optimal_never_above_advanced_or_basic(
    eps: float, k: int, delta: float, target: float
) -> None:
    event = ApproxDPEvent(eps, delta)
    opt = OptimalHomogeneousAccountant().compose(event, count=k).get_epsilon(target)
    adv = AdvancedCompositionAccountant().compose(event, count=k).get_epsilon(target)
    basic = BasicAccountant().compose(event, count=k).get_epsilon(target)
    assert opt <= adv * (1 + 1e-12)
    assert adv <= basic
    if math.isfinite(basic):
        assert opt <= basic


def test_optimal_refuses_heterogeneous_releases() -> None:
    acc = OptimalHomogeneousAccountant().compose(PureDPEvent(0.1), count=3)
    acc.compose(LaplaceEvent(scale=10.0))  # also 0.1-DP: homogeneous
    assert acc.k == 4
    assert not acc.supports(PureDPEvent(0.2))
    with pytest.raises(UnsupportedEventError, match=r"PureDPEvent\(epsilon=0\.2\).*0\.1"):
        acc.compose(PureDPEvent(0.2))
    with pytest.raises(UnsupportedEventError, match="one shared"):
        acc.compose(ApproxDPEvent(0.1, 1e-9))
    assert acc.k == 4
    assert acc.parameters == (0.1, 0.0)
    with pytest.raises(UnsupportedEventError):
        OptimalHomogeneousAccountant().compose(ComposedEvent((PureDPEvent(0.1), PureDPEvent(0.3))))
    # No-ops do not count as releases.
    assert acc.compose(NoOpEvent()).k == 4


def test_optimal_with_zero_epsilon_and_delta() -> None:
    acc = OptimalHomogeneousAccountant().compose(ApproxDPEvent(0.0, 1e-6), count=10)
    base = 1 - (1 - 1e-6) ** 10
    assert acc.get_delta(0.0) == pytest.approx(base, rel=1e-9)
    assert acc.get_epsilon(1e-5) == 0.0
    assert acc.get_epsilon(9e-6) == math.inf


# -- properties shared by the three accountants ----------------------------------------------------

_events = st.one_of(
    st.builds(PureDPEvent, st.floats(0.001, 1.0)),
    st.builds(ApproxDPEvent, st.floats(0.0, 1.0), st.sampled_from([0.0, 1e-9, 1e-7])),
    st.builds(LaplaceEvent, st.floats(0.5, 50.0)),
)


@settings(max_examples=30, deadline=None)
@given(events=st.lists(_events, min_size=1, max_size=12), extra=_events)
def test_more_releases_never_lower_epsilon(events: list[PrivacyEvent], extra: PrivacyEvent) -> None:
    for cls in (BasicAccountant, AdvancedCompositionAccountant):
        acc = cls()
        for e in events:
            acc.compose(e)
        before = [acc.get_epsilon(d) for d in (1e-6, 1e-3)]
        acc.compose(extra)
        after = [acc.get_epsilon(d) for d in (1e-6, 1e-3)]
        assert all(a >= b for a, b in zip(after, before, strict=True))
        # Epsilon decreases in delta, delta decreases in epsilon.
        assert after[1] <= after[0]
        assert acc.get_delta(0.5) >= acc.get_delta(1.0) >= acc.get_delta(2.0)


@pytest.mark.parametrize("cls", CLASSIC)
def test_names_and_adaptivity(cls: type) -> None:
    expected = {
        BasicAccountant: ("basic", True),
        AdvancedCompositionAccountant: ("advanced", False),
        OptimalHomogeneousAccountant: ("optimal", False),
    }[cls]
    assert (cls.name, cls.fully_adaptive) == expected


@pytest.mark.parametrize("cls", CLASSIC)
def test_copy_is_independent(cls: type) -> None:
    acc = cls().compose(PureDPEvent(0.1), count=2)
    clone = acc.copy().compose(PureDPEvent(0.1))
    assert len(acc.events) == 1
    assert clone.get_epsilon(1e-6) > acc.get_epsilon(1e-6)
