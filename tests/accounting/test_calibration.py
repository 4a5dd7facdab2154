"""Tests of noise calibration: Laplace, classic and analytic Gaussian, discrete Gaussian,
zCDP Gaussian, the DP-SGD noise multiplier, and epsilon_for.

Oracles: the lectures' worked numbers, the defining equations (Balle-Wang profile, the exact
discrete Gaussian profile) solved independently in mpmath, and round trips through the
accountants.
"""

from __future__ import annotations

import importlib.util
import math
from collections.abc import Callable
from fractions import Fraction

import mpmath as mp
import pytest

from dpcurator.accounting import (
    Budget,
    DiscreteGaussianEvent,
    GaussianEvent,
    LaplaceEvent,
    PoissonSampledEvent,
    _calibration,
)
from dpcurator.accounting._calibration import (
    discrete_gaussian_sigma,
    dpsgd_noise_multiplier,
    epsilon_for,
    gaussian_sigma_analytic,
    gaussian_sigma_classic,
    laplace_scale,
    zcdp_gaussian_sigma,
    zcdp_rho_for,
)
from dpcurator.accounting._filters import PrivacyFilter
from dpcurator.accounting._rdp import RDPAccountant
from dpcurator.accounting._zcdp import ZCDPAccountant, event_rho
from dpcurator.errors import InvalidParameterError

_HAVE_PLD = importlib.util.find_spec("dpcurator.accounting._pld") is not None
_HAVE_PROFILES = importlib.util.find_spec("dpcurator.accounting._profiles") is not None
needs_pld = pytest.mark.skipif(not _HAVE_PLD, reason="dpcurator.accounting._pld not written yet")
needs_profiles = pytest.mark.skipif(
    not _HAVE_PROFILES, reason="dpcurator.accounting._profiles not written yet"
)


def _bw_delta(sigma: float, eps: float, sensitivity: float = 1.0) -> mp.mpf:
    """Balle and Wang 2018, Theorem 8, in mpmath (40 digits)."""
    with mp.workdps(40):
        s, e, d = mp.mpf(sigma), mp.mpf(eps), mp.mpf(sensitivity)
        return mp.ncdf(d / (2 * s) - e * s / d) - mp.exp(e) * mp.ncdf(-d / (2 * s) - e * s / d)


def _bw_sigma(eps: float, delta: float) -> mp.mpf:
    """Exact analytic-Gaussian sigma (sensitivity 1) by bisection in mpmath."""
    with mp.workdps(40):
        lo, hi = mp.mpf("1e-3"), mp.mpf(1e4)
        for _ in range(200):
            mid = mp.sqrt(lo * hi)
            lo, hi = (mid, hi) if _bw_delta(mid, eps) > delta else (lo, mid)
        return hi


# --------------------------------------------------------------------------------------------
# Laplace
# --------------------------------------------------------------------------------------------


def test_laplace_scale_lecture_examples() -> None:
    assert laplace_scale(0.1) == 10.0  # lecture 003: Δf / ε = 1 / 0.1 = 10
    assert laplace_scale(0.1, sensitivity=2.0) == 20.0  # lecture 004: two counts
    assert laplace_scale(math.log(3)) == pytest.approx(0.91, abs=0.005)  # lecture 004: 1/ln 3


def test_laplace_scale_never_rounds_below() -> None:
    for eps in [0.3, 0.7, 1 / 3, 1e-7, 7.1]:
        for d in [1.0, 0.1, 3.0]:
            b = laplace_scale(eps, d)
            assert LaplaceEvent(scale=b, sensitivity=d).epsilon <= eps
            assert Fraction(d) / Fraction(b) <= Fraction(eps)  # exactly, as accountants count
            assert b == pytest.approx(d / eps, rel=1e-15)
    # Regression: 1 / (1/3) rounds to 3.0, and 1/3 exactly is above the float 1/3; a budget of
    # the float 1/3 must still take the release calibrated for it.
    third = 1 / 3
    assert Fraction(1, 3) > Fraction(third)
    PrivacyFilter(Budget(third)).spend(LaplaceEvent(scale=laplace_scale(third)))


# --------------------------------------------------------------------------------------------
# Gaussian
# --------------------------------------------------------------------------------------------


def test_classic_sigma_lecture_formula() -> None:
    # Lecture 002: sigma = Δ2 sqrt(2 ln(1.25/δ)) / ε. eps = 0.5, delta = 1e-5, Δ = 1:
    # ln(125000) = 11.73606902, sqrt(23.47213804) = 4.84480527, / 0.5 = 9.68961054.
    assert gaussian_sigma_classic(0.5, 1e-5) == pytest.approx(9.68961054, rel=1e-8)
    assert gaussian_sigma_classic(0.5, 1e-5, sensitivity=3.0) == pytest.approx(
        3 * 9.68961054, rel=1e-8
    )


def test_classic_sigma_refuses_epsilon_one_and_above() -> None:
    for eps in [1.0, 2.5]:
        with pytest.raises(InvalidParameterError, match=r"^epsilon .*gaussian_sigma_analytic"):
            gaussian_sigma_classic(eps, 1e-5)


@pytest.mark.parametrize(
    ("eps", "delta"),
    [(0.5, 1e-5), (1.0, 1e-5), (0.05, 1e-6), (4.0, 1e-9), (20.0, 1e-12), (0.9, 0.1)],
)
def test_analytic_sigma_solves_the_profile_equation(eps: float, delta: float) -> None:
    sigma = gaussian_sigma_analytic(eps, delta)
    achieved = _bw_delta(sigma, eps)
    assert achieved <= delta  # the guarantee holds
    assert achieved >= delta * (1 - 1e-10)  # and is tight (relative precision 1e-12 in sigma)
    exact = _bw_sigma(eps, delta)
    assert sigma >= exact * (1 - 1e-15)  # never below the exact solution
    assert sigma == pytest.approx(float(exact), rel=1e-12)


def test_analytic_sigma_scales_and_beats_classic() -> None:
    for eps in [0.01, 0.1, 0.5, 0.99]:
        for delta in [1e-3, 1e-6, 1e-10]:
            analytic = gaussian_sigma_analytic(eps, delta)
            assert analytic < gaussian_sigma_classic(eps, delta)
    base = gaussian_sigma_analytic(2.0, 1e-6)
    assert gaussian_sigma_analytic(2.0, 1e-6, sensitivity=4.0) == pytest.approx(4 * base, rel=1e-12)
    # Negative control: a slightly smaller sigma violates the guarantee.
    assert _bw_delta(base * (1 - 1e-9), 2.0) > 1e-6


def test_zcdp_gaussian_sigma() -> None:
    assert zcdp_gaussian_sigma(0.5) == 1.0
    assert zcdp_gaussian_sigma(0.125, sensitivity=3.0) == 6.0
    for rho in [1e-3, 0.3, 7.0]:
        sigma = zcdp_gaussian_sigma(rho, sensitivity=2.0)
        assert event_rho(GaussianEvent(sigma=sigma, sensitivity=2.0)) <= rho
        exact = ZCDPAccountant().compose(GaussianEvent(sigma=sigma, sensitivity=2.0)).rho_exact
        assert exact <= Fraction(rho)
        assert sigma == pytest.approx(2.0 / math.sqrt(2 * rho), rel=1e-15)


@needs_profiles
@pytest.mark.parametrize(("eps", "delta", "d"), [(1.0, 1e-5, 1), (0.3, 1e-6, 1), (2.0, 1e-9, 3)])
def test_discrete_gaussian_sigma_solves_the_exact_profile(eps: float, delta: float, d: int) -> None:
    from dpcurator.accounting._profiles import privacy_profile

    sigma = discrete_gaussian_sigma(eps, delta, sensitivity=d)

    def profile(s: float) -> float:
        event = DiscreteGaussianEvent(sigma=s, sensitivity=d)
        return float(privacy_profile(event, eps, orientation="max"))

    assert profile(sigma) <= delta
    assert profile(sigma * (1 - 1e-8)) > delta  # smallest to 1e-9 relative (negative control)
    # Close to the continuous analytic sigma (CKS20: same privacy to within a few percent).
    assert sigma == pytest.approx(gaussian_sigma_analytic(eps, delta, float(d)), rel=0.01)


@needs_profiles
def test_discrete_gaussian_sigma_matches_an_independent_lattice_sum() -> None:
    """CKS20 Theorem 7 evaluated directly in mpmath at the returned sigma."""
    eps, delta = 1.0, 1e-5
    sigma = discrete_gaussian_sigma(eps, delta)
    with mp.workdps(30):
        s = mp.mpf(sigma)
        xs = range(-int(40 * sigma), int(40 * sigma) + 1)
        w = {x: mp.exp(-(mp.mpf(x) ** 2) / (2 * s * s)) for x in xs}
        norm = mp.fsum(w.values())

        def tail(t: mp.mpf) -> mp.mpf:
            return mp.fsum(v for x, v in w.items() if x > t) / norm

        value = tail(eps * s * s - mp.mpf(1) / 2) - mp.exp(eps) * tail(eps * s * s + mp.mpf(1) / 2)
    assert value <= delta * (1 + 1e-12)
    assert value >= delta * (1 - 1e-6)


# --------------------------------------------------------------------------------------------
# Validation
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("call", "name"),
    [
        (lambda: laplace_scale(0.0), "epsilon"),
        (lambda: laplace_scale(-1.0), "epsilon"),
        (lambda: laplace_scale(math.nan), "epsilon"),
        (lambda: laplace_scale(math.inf), "epsilon"),
        (lambda: laplace_scale(1.0, sensitivity=math.inf), "sensitivity"),
        (lambda: laplace_scale(1.0, sensitivity=0.0), "sensitivity"),
        (lambda: gaussian_sigma_classic(0.5, 0.0), "delta"),
        (lambda: gaussian_sigma_classic(0.5, 1.0), "delta"),
        (lambda: gaussian_sigma_classic(0.5, math.nan), "delta"),
        (lambda: gaussian_sigma_classic(0.5, 1e-5, sensitivity=math.nan), "sensitivity"),
        (lambda: gaussian_sigma_analytic(0.0, 1e-5), "epsilon"),
        (lambda: gaussian_sigma_analytic(1.0, 0.0), "delta"),
        (lambda: gaussian_sigma_analytic(1.0, 1.5), "delta"),
        (lambda: gaussian_sigma_analytic(1.0, 1e-5, sensitivity=math.inf), "sensitivity"),
        (lambda: discrete_gaussian_sigma(1.0, 1e-5, sensitivity=1.5), "sensitivity"),
        (lambda: discrete_gaussian_sigma(-1.0, 1e-5), "epsilon"),
        (lambda: discrete_gaussian_sigma(1.0, 0.0), "delta"),
        (lambda: zcdp_gaussian_sigma(0.0), "rho"),
        (lambda: zcdp_gaussian_sigma(math.nan), "rho"),
        (lambda: zcdp_gaussian_sigma(1.0, sensitivity=-2.0), "sensitivity"),
        (lambda: dpsgd_noise_multiplier(0.0, 1e-5, sampling_rate=0.1, steps=10), "target_epsilon"),
        (lambda: dpsgd_noise_multiplier(1.0, 0.0, sampling_rate=0.1, steps=10), "delta"),
        (lambda: dpsgd_noise_multiplier(1.0, 1e-5, sampling_rate=0.0, steps=10), "sampling_rate"),
        (lambda: dpsgd_noise_multiplier(1.0, 1e-5, sampling_rate=0.1, steps=0), "steps"),
        (
            lambda: dpsgd_noise_multiplier(
                1.0, 1e-5, sampling_rate=0.1, steps=10, accountant="zcdp"
            ),
            "accountant",
        ),
        (lambda: epsilon_for(GaussianEvent(1.0), 1e-5, accountant="nope"), "accountant"),
        (lambda: epsilon_for(GaussianEvent(1.0), 1e-5, accountant=3), "accountant"),  # type: ignore[arg-type]
        (lambda: epsilon_for(3.0, 1e-5, accountant="rdp"), "event_or_events"),  # type: ignore[arg-type]
        (lambda: epsilon_for([GaussianEvent(1.0), 3.0], 1e-5, "rdp"), r"event_or_events\[1\]"),  # type: ignore[list-item]
        (lambda: epsilon_for(GaussianEvent(1.0), 1.0, accountant="rdp"), "delta"),
    ],
)
def test_bad_parameters_name_the_argument(call: object, name: str) -> None:
    with pytest.raises(InvalidParameterError, match=rf"^{name} "):
        call()  # type: ignore[operator]


# --------------------------------------------------------------------------------------------
# DP-SGD and epsilon_for
# --------------------------------------------------------------------------------------------


def _rdp_sgd_epsilon(z: float, q: float, steps: int, delta: float) -> float:
    event = PoissonSampledEvent(q, GaussianEvent(sigma=z))
    return RDPAccountant().compose(event, steps).get_epsilon(delta)


@pytest.mark.parametrize(
    ("target", "delta", "q", "steps"),
    [(3.0, 1e-5, 256 / 60000, 14040), (1.0, 1e-5, 0.01, 1000), (8.0, 1e-6, 0.5, 50)],
)
def test_dpsgd_noise_multiplier_round_trip_rdp(
    target: float, delta: float, q: float, steps: int
) -> None:
    z = dpsgd_noise_multiplier(target, delta, sampling_rate=q, steps=steps, accountant="rdp")
    assert _rdp_sgd_epsilon(z, q, steps, delta) <= target
    assert _rdp_sgd_epsilon(z * (1 - 1e-2), q, steps, delta) > target  # negative control


@needs_pld
@pytest.mark.parametrize(("target", "delta", "q", "steps"), [(1.0, 1e-5, 0.01, 1000)])
def test_dpsgd_noise_multiplier_round_trip_pld(
    target: float, delta: float, q: float, steps: int
) -> None:
    from dpcurator.accounting._pld import PLDAccountant

    def pld_epsilon(z: float) -> float:
        event = PoissonSampledEvent(q, GaussianEvent(sigma=z))
        return PLDAccountant().compose(event, steps).get_epsilon(delta)

    z = dpsgd_noise_multiplier(target, delta, sampling_rate=q, steps=steps)
    assert pld_epsilon(z) <= target
    assert pld_epsilon(z * (1 - 1e-2)) > target
    # PLD is tighter than RDP, so it needs less noise for the same target.
    z_rdp = dpsgd_noise_multiplier(target, delta, sampling_rate=q, steps=steps, accountant="rdp")
    assert z < z_rdp


def test_epsilon_for_events_and_accountants() -> None:
    events = [GaussianEvent(2.0), LaplaceEvent(10.0)]
    rdp = RDPAccountant()
    for e in events:
        rdp.compose(e)
    assert epsilon_for(events, 1e-6, accountant="rdp") == rdp.get_epsilon(1e-6)
    assert epsilon_for(tuple(events), 1e-6, accountant=RDPAccountant()) == rdp.get_epsilon(1e-6)
    # A given accountant is copied, not modified; its events count.
    held = ZCDPAccountant().compose(GaussianEvent(1.0))
    both = epsilon_for(GaussianEvent(1.0), 1e-6, accountant=held)
    assert len(held.events) == 1 and held.rho == 0.5
    assert both == ZCDPAccountant().compose(GaussianEvent(1.0), 2).get_epsilon(1e-6)
    assert epsilon_for(LaplaceEvent(10.0), 0.0, accountant="basic") == pytest.approx(0.1)


@needs_pld
def test_epsilon_for_defaults_to_pld() -> None:
    event = GaussianEvent(sigma=2.0)
    eps = epsilon_for(event, 1e-6)
    exact = gaussian_sigma_analytic(eps, 1e-6)  # sigma that the PLD epsilon needs exactly
    assert exact <= 2.0 * (1 + 1e-3)
    assert eps <= epsilon_for(event, 1e-6, accountant="rdp")


# -- memoisation ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("public", "cached", "arguments"),
    [
        (gaussian_sigma_analytic, "_gaussian_sigma_analytic", (0.7, 1e-6, 2.0)),
        (zcdp_rho_for, "_zcdp_rho_for", (0.7, 1e-6)),
        (discrete_gaussian_sigma, "_discrete_gaussian_sigma", (0.7, 1e-6, 3)),
    ],
)
def test_memoised_calibrations_equal_the_uncached_search(
    public: Callable[..., float], cached: str, arguments: tuple[float, ...]
) -> None:
    """The cache returns exactly what the search computes, and validation still runs first."""
    inner = getattr(_calibration, cached)
    inner.cache_clear()
    first = public(*arguments)
    assert first == inner.__wrapped__(*arguments)  # bit-identical to the uncached search
    assert public(*arguments) == first
    assert inner.cache_info().hits == 1  # the second call was served from the cache
    with pytest.raises(InvalidParameterError):  # bad input is never looked up or cached
        public(-1.0, *arguments[1:])


def test_memoised_dpsgd_multiplier_equals_the_uncached_search() -> None:
    """The DP-SGD noise multiplier is memoised on (epsilon, delta, q, steps, accountant)."""
    _calibration._dpsgd_noise_multiplier.cache_clear()
    z = dpsgd_noise_multiplier(2.0, 1e-5, sampling_rate=0.01, steps=100, accountant="rdp")
    assert z == _calibration._dpsgd_noise_multiplier.__wrapped__(2.0, 1e-5, 0.01, 100, "rdp")
    assert dpsgd_noise_multiplier(2.0, 1e-5, sampling_rate=0.01, steps=100, accountant="rdp") == z
    assert _calibration._dpsgd_noise_multiplier.cache_info().hits == 1
