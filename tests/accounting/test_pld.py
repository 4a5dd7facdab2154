"""PLDAccountant: upper bounds against exact references, published figures, properties."""

from __future__ import annotations

import itertools
import math

import mpmath
import numpy as np
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
    PrivacyEvent,
    PureDPEvent,
    RandomizedResponseEvent,
    SampledWithoutReplacementEvent,
    SelfComposedEvent,
    ZCDPEvent,
    _pld,
)
from dpcurator.accounting._pld import PLDAccountant
from dpcurator.accounting._profiles import privacy_profile
from dpcurator.errors import InvalidParameterError, UnsupportedEventError

mpmath.mp.dps = 50
mpf = mpmath.mpf

H = 1e-4  # default grid step
# Tightness tolerance in epsilon: one grid step. Connect the dots is exact at the grid nodes and
# the composition of the discretised pairs is within O(h) of the truth; measured excesses on
# the cases below run from 2e-9 (one Gaussian) to 6e-5 (10000 narrow Gaussians).
TOL_EPS = H
ROUND_OFF = 1e-14  # float64 round-off allowed below an exact reference
# Above an exact reference the accountant adds its bound on the FFT's floating-point error
# (about 1e-9 of delta in the bulk of a distribution, at most 1e-5 relative in its far tail).
ALLOWANCE = 1e-8


# ---------------------------------------------------------------------------------------------
# Exact references
# ---------------------------------------------------------------------------------------------
def _gaussian_delta(eps: mpmath.mpf, mu: mpmath.mpf) -> mpmath.mpf:
    """Balle and Wang 2018, Theorem 8, at 50 digits (mu = sensitivity / sigma)."""
    return mpmath.ncdf(mu / 2 - eps / mu) - mpmath.exp(eps) * mpmath.ncdf(-mu / 2 - eps / mu)


def _gaussian_epsilon(delta: float, mu: float) -> float:
    """Invert the 50-digit Gaussian profile by bisection."""
    lo, hi, m, d = mpf(0), mpf(1000), mpf(mu), mpf(delta)
    if _gaussian_delta(lo, m) <= d:
        return 0.0
    for _ in range(200):
        mid = (lo + hi) / 2
        if _gaussian_delta(mid, m) > d:
            lo = mid
        else:
            hi = mid
    return float(hi)


def _kov_delta(eps: float, k: int, i: int) -> mpmath.mpf:
    """Kairouz, Oh and Viswanath 2015, Theorem 3.3: k-fold eps-DP is ((k-2i) eps, delta_i)-DP,

    delta_i = sum_{l<i} C(k, l) (e^{(k-l)eps} - e^{(k-2i+l)eps}) / (1 + e^eps)^k, and tight.
    """
    e = mpf(eps)
    total = mpmath.fsum(
        mpmath.binomial(k, ell) * (mpmath.exp((k - ell) * e) - mpmath.exp((k - 2 * i + ell) * e))
        for ell in range(i)
    )
    return total / (1 + mpmath.exp(e)) ** k


def _binomial_delta(eps0: float, k: int, eps: float) -> mpmath.mpf:
    """k-fold RR: the loss is eps0 (k - 2B), B ~ Bin(k, 1/(1 + e^eps0)) under P."""
    e0 = mpf(eps0)
    p = 1 / (1 + mpmath.exp(e0))
    total = mpf(0)
    for j in range(k + 1):
        loss = e0 * (k - 2 * j)
        if loss > eps:
            weight = mpmath.binomial(k, j) * (1 - p) ** (k - j) * p**j
            total += weight * (1 - mpmath.exp(mpf(eps) - loss))
    return total


# ---------------------------------------------------------------------------------------------
# Published figures
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("steps", "lowest", "target"),
    # Tightest peers (PRV accountant, dp_accounting at fine grids): 1.8282 and 6.1877.
    [(1000, 1.8282, 1.830), (10000, 6.1877, 6.195)],
)
def test_sampled_gaussian_acceptance_figures(steps: int, lowest: float, target: float) -> None:
    acc = PLDAccountant().compose(PoissonSampledEvent(0.01, GaussianEvent(sigma=1.0)), steps)
    eps = acc.get_epsilon(1e-5)
    assert lowest <= eps <= target
    assert acc.get_delta(eps) <= 1e-5 * (1 + 1e-9)
    assert acc.get_delta(eps - 1e-3) > 1e-5


def test_dp_accounting_published_values() -> None:
    # dp_accounting's pld_privacy_accountant_test: test_poisson_subsampled_gaussian and
    # test_gaussian_basic (expected 0.15594 and 0.126936 at epsilon 1).
    event = PoissonSampledEvent(0.2, GaussianEvent(sigma=0.5))
    acc = PLDAccountant().compose(event, 1).compose(event, 2)
    assert acc.get_delta(1.0) == pytest.approx(0.15594, abs=1e-4)
    assert acc.get_epsilon(0.15594) == pytest.approx(1.0, abs=1e-3)
    gaussian = GaussianEvent(sigma=math.sqrt(3))
    acc = PLDAccountant().compose(gaussian, 1).compose(gaussian, 2)
    assert acc.get_delta(1.0) == pytest.approx(0.126936, abs=1e-6)
    # test_epsilon_delta_basic: (1, 0.1) then (2, 0.2) gives exactly (3, 0.28).
    acc = PLDAccountant().compose(ApproxDPEvent(1.0, 0.1)).compose(ApproxDPEvent(2.0, 0.2))
    assert acc.get_delta(3.0) == pytest.approx(0.28, abs=ALLOWANCE)
    assert 3.0 - 1e-6 <= acc.get_epsilon(0.28 + ALLOWANCE) <= 3.0


def test_abadi_et_al_mnist_setting() -> None:
    # Abadi et al. 2016 (Section 5): q = 0.01, sigma = 4, T = 10000 steps; the moments
    # accountant certifies (1.26, 1e-5). The PLD bound is tighter; dp_accounting's PLD gives
    # 0.946999 at the same grid step.
    acc = PLDAccountant().compose(PoissonSampledEvent(0.01, GaussianEvent(4.0)), 10000)
    eps = acc.get_epsilon(1e-5)
    assert eps <= 1.26
    assert eps == pytest.approx(0.946999, abs=1e-5)


# ---------------------------------------------------------------------------------------------
# Upper bounds against closed forms
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("sigma", "count"), [(1.0, 1), (0.5, 3), (2.0, 10), (10.0, 1000), (100.0, 10000)]
)
def test_gaussian_composition_is_an_upper_bound(sigma: float, count: int) -> None:
    # k Gaussians with sigma compose to one Gaussian with sigma / sqrt(k). The last case has a
    # support far wider than its FFT window (Chernoff-placed, with wrap-around).
    mu = math.sqrt(count) / sigma
    acc = PLDAccountant().compose(GaussianEvent(sigma), count)
    for delta in [1e-2, 1e-5, 1e-9]:
        exact = _gaussian_epsilon(delta, mu)
        eps = acc.get_epsilon(delta)
        assert exact - 1e-9 <= eps <= exact + TOL_EPS, (delta, eps, exact)
    for eps in [0.0, 0.5, 2.0]:
        exact_delta = float(_gaussian_delta(mpf(eps), mpf(mu)))
        delta = acc.get_delta(eps)
        assert exact_delta - ROUND_OFF <= delta <= exact_delta * (1 + 1e-3) + 1e-12


@pytest.mark.parametrize(("eps0", "k"), [(0.1, 50), (1.0, 10), (0.5, 60)])
def test_pure_dp_composition_matches_kairouz_oh_viswanath(eps0: float, k: int) -> None:
    acc = PLDAccountant().compose(PureDPEvent(eps0), k)
    for i in range(1, min(k // 2, 8)):
        eps = (k - 2 * i) * eps0
        exact = _kov_delta(eps0, k, i)
        assert float(exact) == pytest.approx(float(_binomial_delta(eps0, k, eps)), rel=1e-30)
        delta = acc.get_delta(eps)
        assert float(exact) - ROUND_OFF <= delta <= float(exact) * (1 + 1e-4) + ALLOWANCE
    assert acc.get_epsilon(0.0) == pytest.approx(k * eps0, abs=1e-9)


def test_approx_dp_composition_matches_kairouz_oh_viswanath() -> None:
    # Theorem 3.3 with delta: ((k - 2i) eps, 1 - (1 - delta)^k (1 - delta_i)), tight.
    eps0, delta0, k = 0.5, 1e-4, 12
    acc = PLDAccountant().compose(ApproxDPEvent(eps0, delta0), k)
    for i in range(1, 6):
        exact = 1 - (1 - mpf(delta0)) ** k * (1 - _kov_delta(eps0, k, i))
        delta = acc.get_delta((k - 2 * i) * eps0)
        assert float(exact) - ROUND_OFF <= delta <= float(exact) * (1 + 1e-4) + ALLOWANCE


def test_randomized_response_off_grid_is_an_upper_bound() -> None:
    # eps = ln 3 is not a multiple of the grid step: each atom is split between two nodes.
    k, eps0 = 30, math.log(3)
    acc = PLDAccountant().compose(RandomizedResponseEvent(0.75), k)
    for eps in [2.0, 5.0, 10.0, 20.0]:
        exact = float(_binomial_delta(eps0, k, eps))
        delta = acc.get_delta(eps)
        assert exact - ROUND_OFF <= delta <= exact + 1e-3 * exact + 1e-12
    for delta in [1e-2, 1e-4]:
        eps = acc.get_epsilon(delta)
        assert float(_binomial_delta(eps0, k, eps)) <= delta * (1 + 1e-9)
        assert float(_binomial_delta(eps0, k, eps - k * H)) > delta  # within k grid steps


def test_discrete_gaussian_composition_against_lattice_convolution() -> None:
    sigma, d = 0.8, 1
    y = np.arange(-40, 41)
    w = np.exp(-(y.astype(float) ** 2) / (2 * sigma**2))
    p = w / w.sum()  # P's mass at y + d: same weights, loss (2 d (y + d) - d^2) / (2 sigma^2)
    loss = (2 * d * (y + d) - d * d) / (2 * sigma**2)
    two_loss = (loss[:, None] + loss[None, :]).ravel()
    two_p = (p[:, None] * p[None, :]).ravel()
    acc = PLDAccountant().compose(DiscreteGaussianEvent(sigma, d), 2)
    for eps in [0.5, 2.0, 4.0]:
        exact = float(np.sum(two_p * np.maximum(0.0, -np.expm1(eps - two_loss))))
        delta = acc.get_delta(eps)
        assert exact - 1e-13 <= delta <= exact * (1 + 1e-3) + 1e-12


@pytest.mark.parametrize(
    "event",
    [
        PoissonSampledEvent(0.05, GaussianEvent(0.8)),
        PoissonSampledEvent(0.3, LaplaceEvent(0.7)),
        SampledWithoutReplacementEvent(5, 50, GaussianEvent(1.0)),
        DiscreteLaplaceEvent(0.8, 2),
        PoissonSampledEvent(0.2, DiscreteGaussianEvent(1.0)),
    ],
    ids=lambda e: type(e).__name__,
)
def test_single_event_is_exact_at_grid_nodes(event: PrivacyEvent) -> None:
    # Connect the dots interpolates the profile exactly at the nodes and lies above between.
    acc = PLDAccountant().compose(event)
    nodes = np.arange(0, 30001, 1500) * H
    for eps in nodes:
        exact = privacy_profile(event, eps, orientation="max")
        assert acc.get_delta(eps) == pytest.approx(exact, rel=1e-9, abs=1e-13)
        between = eps + H / 2
        assert acc.get_delta(between) >= privacy_profile(event, between, orientation="max") - 1e-13


def test_orientations_are_both_accounted() -> None:
    event = PoissonSampledEvent(0.5, GaussianEvent(1.0))
    acc = PLDAccountant().compose(event, 3)
    composed = acc._composed()
    remove, add = composed["remove"].delta(0.5), composed["add"].delta(0.5)
    assert remove != pytest.approx(add, rel=1e-3)
    assert acc.get_delta(0.5) == max(remove, add)


# ---------------------------------------------------------------------------------------------
# Composition bookkeeping
# ---------------------------------------------------------------------------------------------
def test_all_ways_of_composing_agree() -> None:
    a, b = PoissonSampledEvent(0.1, GaussianEvent(1.0)), LaplaceEvent(2.0)
    ways = [
        PLDAccountant().compose(a, 3).compose(b, 2),
        PLDAccountant().compose(b).compose(a).compose(b).compose(a, 2),
        PLDAccountant().compose(ComposedEvent((SelfComposedEvent(a, 3), b, b))),
        PLDAccountant().compose(SelfComposedEvent(ComposedEvent((a, b)), 2)).compose(a),
    ]
    epsilons = [acc.get_epsilon(1e-6) for acc in ways]
    assert max(epsilons) - min(epsilons) < 1e-12
    assert PLDAccountant().compose(a, 3).get_epsilon(1e-6) < epsilons[0]


def test_empty_and_noop() -> None:
    assert PLDAccountant().get_epsilon(1e-5) == 0.0
    assert PLDAccountant().get_delta(0.0) == 0.0
    acc = PLDAccountant().compose(NoOpEvent(), 5).compose(ComposedEvent(()))
    assert acc.get_epsilon(0.0) == 0.0
    assert acc.get_delta(0.0) == 0.0


def test_pure_dp_has_zero_delta_above_the_total_epsilon() -> None:
    acc = PLDAccountant().compose(LaplaceEvent(1.0), 3).compose(LaplaceEvent(2.0), 2)
    assert acc.get_delta(4.0) == 0.0
    assert acc.get_epsilon(0.0) == pytest.approx(4.0, abs=1e-9)
    assert acc.get_delta(3.9) > 0.0


def test_approx_dp_mass_at_infinity() -> None:
    acc = PLDAccountant().compose(ApproxDPEvent(0.5, 0.01), 3)
    assert acc.get_epsilon(0.02) == math.inf  # 1 - 0.99^3 = 0.0297 > 0.02
    assert acc.get_delta(100.0) == pytest.approx(1 - 0.99**3, rel=1e-12)


def test_coarsened_grid_for_wide_distributions() -> None:
    # 2000-fold pure DP spans 4000 loss units; the window (Chernoff) needs ~1300 / h nodes,
    # beyond the 2^22 limit, so the step is doubled: the answer is still an upper bound.
    eps0, k = 1.0, 2000
    acc = PLDAccountant().compose(PureDPEvent(eps0), k)
    assert acc._composed()["remove"].h > H
    eps = acc.get_epsilon(1e-5)
    assert float(_binomial_delta(eps0, k, eps)) <= 1e-5
    assert float(_binomial_delta(eps0, k, eps - 0.05)) > 1e-5


def test_mass_above_the_window_is_bounded_and_added() -> None:
    # A large window tail makes a narrow window: mass lies above it. The Chernoff bound that
    # is added to delta must cover it.
    event = GaussianEvent(sigma=100.0)  # 10000 of them: one Gaussian with mu = 1, L ~ N(1/2, 1)
    pld = _pld._discretise_event(event, "remove", H, 1e-15)
    plan = _pld._window([(pld, 10000)], H, 1e-3, 10000 * pld.offset, 10000 * pld.top)
    top = (plan.first + plan.size) * H
    above = float(mpmath.ncdf(mpf(0.5) - mpf(top)))  # exact P(L >= top)
    assert above > 1e-9  # negative control: ignoring it would lose real mass
    assert above <= plan.outside <= 1e3 * above
    composed = _pld._compose([(pld, 10000)], H, 1e-3)
    for eps in [1.0, 2.0, 3.0, 4.0, 5.0]:
        assert composed.delta(eps) >= float(_gaussian_delta(mpf(eps), mpf(1))) - ROUND_OFF


# ---------------------------------------------------------------------------------------------
# Properties (hypothesis): small grids keep them fast
# ---------------------------------------------------------------------------------------------
EVENTS = st.one_of(
    st.builds(GaussianEvent, st.floats(0.5, 5.0)),
    st.builds(LaplaceEvent, st.floats(0.5, 5.0)),
    st.builds(PureDPEvent, st.floats(0.05, 1.0)),
    st.builds(
        PoissonSampledEvent, st.floats(0.01, 0.5), st.builds(GaussianEvent, st.floats(0.6, 3.0))
    ),
    st.builds(
        SampledWithoutReplacementEvent,
        st.just(5),
        st.integers(5, 100),
        st.builds(GaussianEvent, st.floats(0.6, 3.0)),
    ),
)


@settings(max_examples=20, deadline=None)
@given(events=st.lists(EVENTS, min_size=1, max_size=3), extra=EVENTS, count=st.integers(1, 20))
def test_composing_more_never_lowers_epsilon(
    events: list[PrivacyEvent], extra: PrivacyEvent, count: int
) -> None:
    base = PLDAccountant(discretization=1e-3)
    for event in events:
        base.compose(event, count)
    more = base.copy().compose(extra)
    # Exactly: delta(more) >= delta(base) for the discretised pairs (data processing). The
    # reported base delta exceeds its exact value by at most twice its round-off allowance.
    for eps in [0.1, 1.0, 3.0]:
        slack = 2 * max(c.allowance[c._first_above(eps)] for c in base._composed().values())
        assert more.get_delta(eps) >= base.get_delta(eps) - slack - ROUND_OFF
    for delta in [1e-3, 1e-6]:
        assert more.get_epsilon(delta) >= base.get_epsilon(delta) - 1e-6


@settings(max_examples=20, deadline=None)
@given(events=st.lists(EVENTS, min_size=1, max_size=3), count=st.integers(1, 50))
def test_epsilon_and_delta_are_monotone(events: list[PrivacyEvent], count: int) -> None:
    acc = PLDAccountant(discretization=1e-3)
    for event in events:
        acc.compose(event, count)
    deltas = [1e-10, 1e-7, 1e-4, 1e-2, 0.2]
    epsilons = [acc.get_epsilon(d) for d in deltas]
    assert all(a >= b for a, b in itertools.pairwise(epsilons))
    grid = [0.0, 0.01, 0.3, 1.0, 2.0, 5.0, 20.0]
    values = [acc.get_delta(e) for e in grid]
    assert all(a >= b for a, b in itertools.pairwise(values))
    # get_epsilon inverts get_delta: delta(eps(d)) <= d.
    for d, eps in zip(deltas, epsilons, strict=True):
        if math.isfinite(eps) and eps > 0:
            assert acc.get_delta(eps) <= d * (1 + 1e-9)


# ---------------------------------------------------------------------------------------------
# Interface and errors
# ---------------------------------------------------------------------------------------------
def test_identity() -> None:
    assert PLDAccountant.name == "pld"
    assert PLDAccountant.fully_adaptive is False


def test_unsupported_events_are_refused_and_named() -> None:
    acc = PLDAccountant().compose(GaussianEvent(1.0))
    before = acc.get_epsilon(1e-5)
    with pytest.raises(UnsupportedEventError, match=r"ZCDPEvent\(rho=0.1\)"):
        acc.compose(ComposedEvent((GaussianEvent(2.0), ZCDPEvent(0.1))))
    assert len(acc.events) == 1
    assert acc.get_epsilon(1e-5) == before
    assert not acc.supports(ZCDPEvent(0.1))
    assert not acc.supports(PoissonSampledEvent(0.1, RandomizedResponseEvent(0.75)))
    assert acc.supports(SampledWithoutReplacementEvent(1, 10, DiscreteGaussianEvent(2.0)))


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"discretization": 0.0}, "discretization"),
        ({"discretization": -1e-4}, "discretization"),
        ({"discretization": float("nan")}, "discretization"),
        ({"discretization": 2.0}, "discretization"),
        ({"tail_mass": 0.0}, "tail_mass"),
        ({"tail_mass": 0.5}, "tail_mass"),
    ],
)
def test_bad_constructor_arguments(kwargs: dict[str, float], name: str) -> None:
    with pytest.raises(InvalidParameterError, match=name):
        PLDAccountant(**kwargs)


def test_bad_query_arguments() -> None:
    acc = PLDAccountant().compose(GaussianEvent(1.0))
    with pytest.raises(InvalidParameterError, match="delta"):
        acc.get_epsilon(1.5)
    with pytest.raises(InvalidParameterError, match="epsilon"):
        acc.get_delta(-1.0)
    with pytest.raises(InvalidParameterError, match="count"):
        acc.compose(GaussianEvent(1.0), -1)
