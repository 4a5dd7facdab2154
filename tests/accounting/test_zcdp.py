"""Tests of the zCDP accountant and of the zCDP -> (epsilon, delta) conversions.

Oracles: a direct numerical minimisation over the Rényi order in mpmath (50 digits), the exact
(Balle-Wang) epsilon of the Gaussian mechanism, and Bun and Steinke's closed-form bound.
"""

from __future__ import annotations

import math
from fractions import Fraction

import mpmath as mp
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpcurator.accounting import (
    ApproxDPEvent,
    ComposedEvent,
    DiscreteGaussianEvent,
    DiscreteLaplaceEvent,
    GaussianEvent,
    LaplaceEvent,
    NoOpEvent,
    PoissonSampledEvent,
    PureDPEvent,
    RandomizedResponseEvent,
    SampledWithoutReplacementEvent,
    SelfComposedEvent,
    ZCDPEvent,
)
from dpcurator.accounting._zcdp import ZCDPAccountant, event_rho, zcdp_to_delta, zcdp_to_epsilon
from dpcurator.errors import InvalidParameterError, UnsupportedEventError


def _golden_min(f: object, lo: float = -40.0, hi: float = 40.0) -> mp.mpf:
    """min over u in [lo, hi] of f(1 + e^u) by golden-section search (f unimodal in u)."""
    a, b = mp.mpf(lo), mp.mpf(hi)
    g = (mp.sqrt(5) - 1) / 2
    for _ in range(300):
        c, d = b - g * (b - a), a + g * (b - a)
        if f(1 + mp.e**c) < f(1 + mp.e**d):  # type: ignore[operator]
            b = d
        else:
            a = c
    return f(1 + mp.e ** ((a + b) / 2))  # type: ignore[operator,no-any-return]


def _mp_delta(rho: float, eps: float) -> float:
    """CKS20 Corollary 13 by direct minimisation over the order (mpmath, 50 digits)."""
    with mp.workdps(50):
        r, e = mp.mpf(rho), mp.mpf(eps)
        log_delta = _golden_min(
            lambda a: (a - 1) * (a * r - e) + a * mp.log(1 - 1 / a) - mp.log(a - 1)
        )
        return float(mp.e ** min(log_delta, 0))


def _mp_epsilon(rho: float, delta: float) -> float:
    """min over orders of the RDP -> DP conversion of the curve α rho (mpmath, 50 digits)."""
    with mp.workdps(50):
        r, log_d = mp.mpf(rho), mp.log(mp.mpf(delta))
        eps = _golden_min(lambda a: a * r + mp.log(1 - 1 / a) - (log_d + mp.log(a)) / (a - 1))
        return float(max(eps, 0))


CASES = [
    (1e-4, 1e-6),
    (0.005, 1e-5),
    (0.1, 1e-9),
    (0.5, 1e-5),
    (0.5, 0.01),
    (2.0, 1e-12),
    (40.0, 1e-6),
]


@pytest.mark.parametrize(("rho", "delta"), CASES)
def test_epsilon_matches_direct_minimisation(rho: float, delta: float) -> None:
    ours = zcdp_to_epsilon(rho, delta)
    exact = _mp_epsilon(rho, delta)
    assert ours >= exact * (1 - 1e-15)  # rounded up
    assert ours == pytest.approx(exact, rel=1e-12)
    # Never worse than Bun and Steinke (2016, Proposition 1.3).
    assert ours <= rho + 2 * math.sqrt(rho * math.log(1 / delta))


@pytest.mark.parametrize(("rho", "delta"), CASES)
def test_conversions_are_rigorous_upper_bounds(rho: float, delta: float) -> None:
    # No tolerance: a float that is >= the exact value is >= its nearest float too.
    eps = zcdp_to_epsilon(rho, delta)
    assert eps >= _mp_epsilon(rho, delta)
    assert zcdp_to_delta(rho, eps) <= delta
    assert zcdp_to_delta(rho, eps) >= _mp_delta(rho, eps)


@pytest.mark.parametrize(
    ("rho", "eps"), [(1e-4, 0.05), (0.5, 4.0), (0.5, 0.0), (2.0, 1.0), (30.0, 60.0)]
)
def test_delta_matches_direct_minimisation(rho: float, eps: float) -> None:
    ours = zcdp_to_delta(rho, eps)
    exact = _mp_delta(rho, eps)
    assert ours >= exact * (1 - 1e-15)
    assert ours == pytest.approx(exact, rel=1e-11)


def test_oracle_is_discriminating() -> None:
    """Negative control: the classic conversion eps(α) = αρ + log(1/δ)/(α-1) is detectably worse."""
    rho, delta = 0.5, 1e-5
    classic = min(
        a * rho + math.log(1 / delta) / (a - 1) for a in [1 + k / 1000 for k in range(1, 20000)]
    )
    assert classic > _mp_epsilon(rho, delta) * (1 + 1e-3)


@settings(max_examples=80, deadline=None)
@given(rho=st.floats(1e-6, 100.0), delta=st.floats(1e-15, 0.9))
def test_round_trip(rho: float, delta: float) -> None:
    eps = zcdp_to_epsilon(rho, delta)
    if eps > 0:
        back = zcdp_to_delta(rho, eps)
        assert back <= delta
        assert back >= delta * (1 - 1e-9)
    else:
        assert zcdp_to_delta(rho, 0.0) <= delta


@settings(max_examples=60, deadline=None)
@given(
    rho=st.floats(1e-5, 50.0),
    factor=st.floats(1.001, 10.0),
    delta=st.floats(1e-14, 0.1),
)
def test_epsilon_increases_with_rho(rho: float, factor: float, delta: float) -> None:
    assert zcdp_to_epsilon(rho * factor, delta) >= zcdp_to_epsilon(rho, delta)
    assert zcdp_to_delta(rho * factor, 1.0) >= zcdp_to_delta(rho, 1.0)


@settings(max_examples=60, deadline=None)
@given(
    rho=st.floats(1e-5, 50.0),
    delta=st.floats(1e-14, 0.1),
    factor=st.floats(1.001, 100.0),
)
def test_epsilon_decreases_with_delta(rho: float, delta: float, factor: float) -> None:
    assert zcdp_to_epsilon(rho, min(delta * factor, 0.99)) <= zcdp_to_epsilon(rho, delta)


def test_conversion_edge_cases() -> None:
    assert zcdp_to_epsilon(0.0, 1e-9) == 0.0
    assert zcdp_to_epsilon(0.0, 0.0) == 0.0
    assert zcdp_to_epsilon(0.1, 0.0) == math.inf
    assert zcdp_to_delta(0.0, 0.0) == 0.0
    assert zcdp_to_delta(1e3, 0.0) == 1.0  # capped
    # Large delta: epsilon 0 is certified once delta exceeds delta(0).
    assert zcdp_to_epsilon(1e-4, 0.5) == 0.0


@pytest.mark.parametrize(
    ("call", "name"),
    [
        (lambda: zcdp_to_epsilon(-1.0, 1e-5), "rho"),
        (lambda: zcdp_to_epsilon(math.nan, 1e-5), "rho"),
        (lambda: zcdp_to_epsilon(math.inf, 1e-5), "rho"),
        (lambda: zcdp_to_epsilon(0.5, 1.0), "delta"),
        (lambda: zcdp_to_epsilon(0.5, -1e-5), "delta"),
        (lambda: zcdp_to_delta(0.5, -1.0), "epsilon"),
        (lambda: zcdp_to_delta(0.5, math.nan), "epsilon"),
        (lambda: event_rho("not an event"), "event"),
    ],
)
def test_validation_names_the_argument(call: object, name: str) -> None:
    with pytest.raises(InvalidParameterError, match=rf"^{name} "):
        call()  # type: ignore[operator]


# --------------------------------------------------------------------------------------------
# The Gaussian: zCDP is an upper bound on the exact epsilon, and not a loose one
# --------------------------------------------------------------------------------------------


def _balle_wang_epsilon(sigma: float, delta: float) -> float:
    """Exact epsilon of the Gaussian mechanism (Balle and Wang 2018, Theorem 8), by bisection."""
    with mp.workdps(30):

        def profile(eps: mp.mpf) -> mp.mpf:
            a, b = 1 / (2 * mp.mpf(sigma)), eps * sigma
            return mp.ncdf(a - b) - mp.exp(eps) * mp.ncdf(-a - b)

        lo, hi = mp.mpf(0), mp.mpf(300)
        for _ in range(100):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if profile(mid) > delta else (lo, mid)
        return float(hi)


@pytest.mark.parametrize("sigma", [0.3, 1.0, 5.0, 20.0])
@pytest.mark.parametrize("delta", [1e-3, 1e-6, 1e-10])
def test_gaussian_zcdp_epsilon_is_above_the_exact_one_but_close(sigma: float, delta: float) -> None:
    eps = ZCDPAccountant().compose(GaussianEvent(sigma)).get_epsilon(delta)
    exact = _balle_wang_epsilon(sigma, delta)
    assert eps >= exact
    # Measured: at most 1.24x over this grid (1.09x at delta <= 1e-6).
    assert eps <= 1.25 * exact
    if delta <= 1e-6:
        assert eps <= 1.1 * exact


# --------------------------------------------------------------------------------------------
# Events and the accountant
# --------------------------------------------------------------------------------------------


def test_event_rho_per_event() -> None:
    assert event_rho(GaussianEvent(sigma=2.0, sensitivity=3.0)) == pytest.approx(9 / 8)
    assert event_rho(DiscreteGaussianEvent(sigma=2.0, sensitivity=3.0)) == pytest.approx(9 / 8)
    assert event_rho(ZCDPEvent(0.3)) == 0.3
    assert event_rho(NoOpEvent()) == 0.0
    for event in [
        PureDPEvent(0.5),
        LaplaceEvent(scale=4.0, sensitivity=2.0),
        DiscreteLaplaceEvent(scale=2.0),
        RandomizedResponseEvent(p_truth=1 / (1 + math.exp(-0.5))),
        ApproxDPEvent(0.5, 0.0),
    ]:
        assert event_rho(event) == pytest.approx(0.125, rel=1e-12)  # eps^2 / 2, eps = 0.5
    # The lecture's coin (eps = ln 3).
    assert event_rho(RandomizedResponseEvent(0.75)) == pytest.approx(math.log(3) ** 2 / 2)


def test_rho_adds_under_composition() -> None:
    events = [GaussianEvent(1.0), LaplaceEvent(2.0), ZCDPEvent(0.01)]
    total = sum(event_rho(e) for e in events)
    acc = ZCDPAccountant()
    for e in events:
        acc.compose(e)
    assert acc.rho == pytest.approx(total, rel=1e-14)
    assert event_rho(ComposedEvent(tuple(events))) == pytest.approx(total, rel=1e-14)
    assert event_rho(SelfComposedEvent(GaussianEvent(1.0), 7)) == pytest.approx(3.5)
    acc.compose(GaussianEvent(1.0), count=4)
    assert acc.rho == pytest.approx(total + 2.0, rel=1e-14)
    # Poisson "sampling" at rate 1 is no sampling.
    assert event_rho(PoissonSampledEvent(1.0, GaussianEvent(1.0))) == 0.5


def test_rho_is_summed_exactly_and_rounded_up() -> None:
    # Regression: a rho of 1e-300 added to 0.5 was lost (float addition rounds to nearest).
    acc = ZCDPAccountant().compose(ZCDPEvent(0.5)).compose(ZCDPEvent(1e-300))
    assert acc.rho_exact == Fraction(0.5) + Fraction(1e-300)
    assert acc.rho == math.nextafter(0.5, 1.0)
    assert acc.get_epsilon(1e-6) >= zcdp_to_epsilon(0.5, 1e-6)
    # A thousand Gaussians of sigma 10: exactly 1000/200 = 5.
    many = ZCDPAccountant().compose(GaussianEvent(sigma=10.0), count=1000)
    assert many.rho_exact == 5 and many.rho == 5.0
    assert sum([1 / 200] * 1000) != 5.0  # what float addition would report


def test_event_rho_is_exact_from_the_floats_and_rounded_up() -> None:
    # 1 / (2 * 3.0**2) rounds below 1/18; the exact value rounded up does not.
    assert Fraction(1, 18) > 1 / (2 * 3.0**2)
    got = event_rho(GaussianEvent(sigma=3.0))
    assert Fraction(got) >= Fraction(1, 18) and got == pytest.approx(1 / 18, rel=1e-15)
    assert Fraction(event_rho(LaplaceEvent(scale=3.0))) >= Fraction(1, 18)  # (1/3)^2 / 2
    assert Fraction(event_rho(DiscreteGaussianEvent(sigma=3.0, sensitivity=2.0))) >= Fraction(2, 9)
    rr = event_rho(RandomizedResponseEvent(0.75))
    with mp.workdps(40):
        assert mp.mpf(rr) >= mp.log(3) ** 2 / 2
    acc = ZCDPAccountant().compose(GaussianEvent(sigma=3.0), count=3)
    assert acc.rho_exact == Fraction(1, 6)


@pytest.mark.parametrize(
    "event",
    [
        ApproxDPEvent(1.0, 1e-6),
        PoissonSampledEvent(0.1, GaussianEvent(1.0)),
        SampledWithoutReplacementEvent(1, 10, LaplaceEvent(1.0)),
        ComposedEvent((GaussianEvent(1.0), ApproxDPEvent(0.1, 1e-9))),
    ],
)
def test_unsupported_events(event: object) -> None:
    acc = ZCDPAccountant().compose(GaussianEvent(1.0))
    assert not acc.supports(event)  # type: ignore[arg-type]
    with pytest.raises(UnsupportedEventError, match="ZCDPAccountant cannot account for"):
        acc.compose(event)  # type: ignore[arg-type]
    assert acc.rho == 0.5 and len(acc.events) == 1  # nothing was composed


def test_accountant_attributes_and_conversions() -> None:
    assert ZCDPAccountant.name == "zcdp"
    assert ZCDPAccountant.fully_adaptive is True
    acc = ZCDPAccountant().compose(GaussianEvent(sigma=10.0), count=50)
    assert acc.rho == pytest.approx(0.25)
    assert acc.get_epsilon(1e-6) == zcdp_to_epsilon(acc.rho, 1e-6)
    assert acc.get_delta(2.0) == zcdp_to_delta(acc.rho, 2.0)
    twin = acc.copy().compose(LaplaceEvent(1.0))
    assert twin.rho > acc.rho == pytest.approx(0.25)
    assert ZCDPAccountant().get_epsilon(0.0) == 0.0
