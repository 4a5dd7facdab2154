"""Tests of the RDP curves, the RDP accountant and the RDP -> (epsilon, delta) conversions.

The oracles are independent of the implementation: high-precision numerical integration
(mpmath) of the Rényi divergence's defining integral, direct lattice sums, and published
figures (TensorFlow Privacy's MNIST tutorial, Abadi et al. 2016).
"""

from __future__ import annotations

import math

import mpmath as mp
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
    PureDPEvent,
    RandomizedResponseEvent,
    SampledWithoutReplacementEvent,
    SelfComposedEvent,
    ZCDPEvent,
)
from dpcurator.accounting._rdp import (
    DEFAULT_RDP_ORDERS,
    RDPAccountant,
    rdp_curve,
    rdp_to_delta,
    rdp_to_epsilon,
    sampled_gaussian_rdp,
)
from dpcurator.errors import InvalidParameterError, UnsupportedEventError

# --------------------------------------------------------------------------------------------
# Independent oracles
# --------------------------------------------------------------------------------------------


def _mp_sampled_gaussian(q: float, z: float, alpha: float, *, reverse: bool = False) -> mp.mpf:
    """D_α(μ || μ0) by quadrature, μ = (1-q) N(0, z²) + q N(1, z²), μ0 = N(0, z²).

    ``reverse=True`` integrates D_α(μ0 || μ) instead (used as a negative control).
    """
    with mp.workdps(30):
        q, z, alpha = mp.mpf(q), mp.mpf(z), mp.mpf(alpha)

        def integrand(x: mp.mpf) -> mp.mpf:
            mu0 = mp.npdf(x, 0, z)
            ratio = (1 - q) + q * mp.exp((2 * x - 1) / (2 * z * z))
            if reverse:
                return mu0 * ratio ** (1 - alpha)
            return mu0 * ratio**alpha

        z0 = z * z * mp.log(1 / q - 1) + mp.mpf(1) / 2
        points = sorted({-mp.inf, -20 * z, mp.mpf(0), mp.mpf(1), z0, z0 + 20 * z * alpha, mp.inf})
        return mp.log(mp.quad(integrand, points)) / (alpha - 1)


def _mp_laplace(b: float, alpha: float, shift: float = 1.0) -> mp.mpf:
    """D_α(Lap(shift, b) || Lap(0, b)) by quadrature."""
    with mp.workdps(30):
        b, alpha, s = mp.mpf(b), mp.mpf(alpha), mp.mpf(shift)

        def integrand(x: mp.mpf) -> mp.mpf:
            p = mp.exp(-abs(x - s) / b) / (2 * b)
            q = mp.exp(-abs(x) / b) / (2 * b)
            return p**alpha * q ** (1 - alpha)

        return mp.log(mp.quad(integrand, [-mp.inf, 0, s, mp.inf])) / (alpha - 1)


def _lattice_divergence(scale: float, d: int, alpha: float, *, reverse: bool = False) -> float:
    """D_α(DLap(0, t) || DLap(d, t)) by a direct (truncated) sum in mpmath."""
    with mp.workdps(30):
        t, a = mp.mpf(scale), mp.mpf(alpha)
        norm = mp.tanh(1 / (2 * t))
        total = mp.mpf(0)
        for x in range(-int(80 * scale) - d, int(80 * scale) + 2 * d):
            p = norm * mp.exp(-abs(x) / t)
            q = norm * mp.exp(-abs(x - d) / t)
            if reverse:
                p, q = q, p
            total += p**a * q ** (1 - a)
        return float(mp.log(total) / (a - 1))


# --------------------------------------------------------------------------------------------
# The sampled Gaussian mechanism against numerical integration
# --------------------------------------------------------------------------------------------

SGM_CASES = [
    (0.01, 1.0, 2.0),
    (0.01, 1.0, 7.0),
    (0.01, 1.0, 2.5),
    (0.001, 0.5, 1.1),
    (0.1, 2.0, 1.1),
    (0.5, 1.0, 1.3),
    (0.9, 0.8, 1.4),
    (0.01, 100.0, 1.5),
    (0.004, 1.1, 12.0),
    (0.004, 1.1, 8.5),
    (0.2, 5.0, 40.0),
    (0.05, 3.0, 33.25),
]


@pytest.mark.parametrize(("q", "z", "alpha"), SGM_CASES)
def test_sampled_gaussian_matches_numerical_integration(q: float, z: float, alpha: float) -> None:
    ours = float(sampled_gaussian_rdp(q, z, [alpha])[0])
    exact = float(_mp_sampled_gaussian(q, z, alpha))
    # The implementation rounds up. Tolerance: 1e-9 relative, or 1e-13 absolute on
    # (α - 1) ε(α) = log A_α: the fractional series sums A_α itself (>= 1), truncated at
    # e^-30 A_α, with a margin of a few ulps of the sum of its terms' magnitudes.
    assert ours >= exact * (1 - 1e-12)
    assert ours == pytest.approx(exact, rel=1e-9, abs=1e-13 / (alpha - 1))


def test_sampled_gaussian_oracle_is_discriminating() -> None:
    """Negative control: the oracle separates the two orientations and nearby parameters."""
    q, z, alpha = 0.1, 1.0, 2.5
    ours = float(sampled_gaussian_rdp(q, z, [alpha])[0])
    reverse = float(_mp_sampled_gaussian(q, z, alpha, reverse=True))
    assert reverse < ours * (1 - 1e-3)  # MTZ19: the mixture-first divergence is the larger
    nearby = float(_mp_sampled_gaussian(q * (1 + 1e-6), z, alpha))
    assert abs(nearby - ours) > 1e-9 * ours


def test_sampled_gaussian_small_values_keep_their_precision() -> None:
    # A_α - 1 is summed without cancellation: RDP ~ α q² / (2 z²) even when ~1e-20.
    q, z = 1e-8, 10.0
    values = sampled_gaussian_rdp(q, z, [2.0, 3.0, 2.5])
    for alpha, value in zip([2.0, 3.0, 2.5], values, strict=True):
        leading = alpha * q * q * math.expm1(1 / z**2) / 2
        assert value == pytest.approx(leading, rel=1e-6)


def test_sampled_gaussian_special_cases() -> None:
    alphas = [1.5, 2.0, 10.0]
    # q = 1: no amplification, the Gaussian curve.
    assert sampled_gaussian_rdp(1.0, 2.0, alphas) == pytest.approx(np.array(alphas) / 8.0)
    # Amplification: below the unsampled Gaussian, increasing in q and in the order.
    unsampled = np.array(alphas) / 8.0
    low, high = sampled_gaussian_rdp(0.01, 2.0, alphas), sampled_gaussian_rdp(0.1, 2.0, alphas)
    assert np.all(low < high) and np.all(high < unsampled)
    curve = sampled_gaussian_rdp(0.02, 1.0, list(DEFAULT_RDP_ORDERS))
    assert np.all(np.diff(curve) >= 0)


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"sampling_rate": 0.0, "noise_multiplier": 1.0, "orders": [2]}, "sampling_rate"),
        ({"sampling_rate": 1.5, "noise_multiplier": 1.0, "orders": [2]}, "sampling_rate"),
        ({"sampling_rate": 0.1, "noise_multiplier": -1.0, "orders": [2]}, "noise_multiplier"),
        ({"sampling_rate": 0.1, "noise_multiplier": math.nan, "orders": [2]}, "noise_multiplier"),
        ({"sampling_rate": 0.1, "noise_multiplier": 1.0, "orders": [1.0]}, "orders"),
        ({"sampling_rate": 0.1, "noise_multiplier": 1.0, "orders": []}, "orders"),
        ({"sampling_rate": 0.1, "noise_multiplier": 1.0, "orders": [math.inf]}, "orders"),
        ({"sampling_rate": 0.1, "noise_multiplier": 1.0, "orders": "2"}, "orders"),
    ],
)
def test_sampled_gaussian_validates(kwargs: dict[str, object], name: str) -> None:
    with pytest.raises(InvalidParameterError, match=rf"^{name} "):
        sampled_gaussian_rdp(**kwargs)  # type: ignore[arg-type]


# --------------------------------------------------------------------------------------------
# Closed forms of the other events
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("b", "alpha"),
    [(1.0, 2.0), (0.5, 1.5), (3.0, 10.0), (0.1, 1.1), (10.0, 2.0), (1000.0, 1.5), (4.0, 1.9)],
)
def test_laplace_matches_numerical_integration(b: float, alpha: float) -> None:
    ours = float(rdp_curve(LaplaceEvent(scale=b), [alpha])[0])
    assert ours == pytest.approx(float(_mp_laplace(b, alpha)), rel=1e-10)
    # Sensitivity enters only through sensitivity / scale.
    scaled = float(rdp_curve(LaplaceEvent(scale=2 * b, sensitivity=2.0), [alpha])[0])
    assert scaled == pytest.approx(ours, rel=1e-12)


def test_laplace_divergence_is_convex_in_the_shift() -> None:
    """The superadditivity used for vector statistics (L1 shift on one coordinate is worst)."""
    shifts = np.linspace(0.05, 6.0, 60)
    for alpha in [1.1, 2.0, 8.0]:
        values = np.array([rdp_curve(LaplaceEvent(scale=1.0 / s), [alpha])[0] for s in shifts])
        assert np.all(np.diff(values, 2) >= -1e-12)
        values = np.array(
            [
                rdp_curve(DiscreteLaplaceEvent(scale=2.0, sensitivity=k), [alpha])[0]
                for k in range(1, 9)
            ]
        )
        assert np.all(np.diff(values, 2) >= -1e-12)


@pytest.mark.parametrize(("scale", "d"), [(1.0, 1), (2.5, 1), (2.0, 3), (0.7, 4), (30.0, 2)])
@pytest.mark.parametrize("alpha", [1.5, 2.0, 7.0])
def test_discrete_laplace_matches_lattice_sum(scale: float, d: int, alpha: float) -> None:
    ours = float(rdp_curve(DiscreteLaplaceEvent(scale=scale, sensitivity=d), [alpha])[0])
    assert ours == pytest.approx(_lattice_divergence(scale, d, alpha), rel=1e-10)
    assert ours == pytest.approx(_lattice_divergence(scale, d, alpha, reverse=True), rel=1e-10)
    # It is (d / scale)-DP, so below the worst eps-DP pair; with d = 1 it is that pair.
    pure = float(rdp_curve(PureDPEvent(d / scale), [alpha])[0])
    assert ours <= pure * (1 + 1e-12)
    if d == 1:
        assert ours == pytest.approx(pure, rel=1e-12)


@pytest.mark.parametrize(("p", "k"), [(0.75, 2), (2 / 3, 2), (0.5, 5), (0.9, 10), (0.2001, 5)])
def test_randomized_response_matches_direct_sum(p: float, k: int) -> None:
    event = RandomizedResponseEvent(p_truth=p, categories=k)
    with mp.workdps(40):
        P = mp.mpf(event.p_truth)
        r = (1 - P) / (k - 1)
        for alpha in [1.25, 2.0, 16.0]:
            a = mp.mpf(alpha)
            direct = mp.log(P**a * r ** (1 - a) + r**a * P ** (1 - a) + (k - 2) * r) / (a - 1)
            ours = float(rdp_curve(event, [alpha])[0])
            assert ours == pytest.approx(float(direct), rel=1e-12)


def test_pure_dp_is_binary_randomized_response() -> None:
    eps = math.log(3.0)  # the lecture's coin: p = 3/4
    coin = rdp_curve(RandomizedResponseEvent(p_truth=0.75), list(DEFAULT_RDP_ORDERS))
    pure = rdp_curve(PureDPEvent(eps), list(DEFAULT_RDP_ORDERS))
    assert pure == pytest.approx(coin, rel=1e-12)
    approx = rdp_curve(ApproxDPEvent(eps, 0.0), list(DEFAULT_RDP_ORDERS))
    assert approx == pytest.approx(pure, rel=1e-15)


@settings(max_examples=60, deadline=None)
@given(
    eps=st.floats(1e-4, 30.0),
    alpha=st.floats(1.01, 1000.0),
)
def test_pure_dp_curve_obeys_the_known_bounds(eps: float, alpha: float) -> None:
    value = float(rdp_curve(PureDPEvent(eps), [alpha])[0])
    assert 0.0 <= value <= eps * (1 + 1e-12)  # D_α <= D_∞ = eps
    assert value <= alpha * eps * eps / 2 * (1 + 1e-9) + 1e-300  # BS16 Prop. 3.3
    # Laplace and discrete Laplace with the same epsilon are post-processings of nothing
    # better than the worst case pair: their curves sit below.
    assert float(rdp_curve(LaplaceEvent(1.0 / eps), [alpha])[0]) <= value * (1 + 1e-9)


def test_gaussian_family_and_zcdp_curves() -> None:
    alphas = [1.5, 2.0, 64.0]
    expected = np.array(alphas) * 2.0**2 / (2 * 3.0**2)
    gaussian = rdp_curve(GaussianEvent(sigma=3.0, sensitivity=2.0), alphas)
    discrete = rdp_curve(DiscreteGaussianEvent(sigma=3.0, sensitivity=2.0), alphas)
    zcdp = rdp_curve(ZCDPEvent(rho=2.0 / 9.0), alphas)
    assert gaussian == pytest.approx(expected, rel=1e-14)
    assert discrete == pytest.approx(expected, rel=1e-14)
    assert zcdp == pytest.approx(expected, rel=1e-14)
    assert np.all(rdp_curve(NoOpEvent(), alphas) == 0)


def test_composition_adds_curves() -> None:
    orders = [1.5, 2.0, 4.0, 32.0]
    a, b = LaplaceEvent(2.0), GaussianEvent(3.0)
    s = PoissonSampledEvent(0.01, GaussianEvent(1.0))
    total = rdp_curve(a, orders) + rdp_curve(b, orders) + 3 * rdp_curve(s, orders)
    composed = ComposedEvent((a, b, SelfComposedEvent(s, count=3)))
    assert rdp_curve(composed, orders) == pytest.approx(total, rel=1e-13)
    assert np.all(rdp_curve(SelfComposedEvent(a, 0), orders) == 0)
    acc = RDPAccountant(orders).compose(a).compose(b).compose(s, count=3)
    assert acc.rdp == pytest.approx(total, rel=1e-13)


def test_poisson_sampling_of_composed_gaussians_is_one_gaussian() -> None:
    orders = [1.5, 2.0, 8.0]
    # Gaussians with z = 2 and z = 2 compose to z = sqrt(2) exactly (Gaussian privacy loss).
    inner = ComposedEvent((GaussianEvent(2.0), SelfComposedEvent(GaussianEvent(2.0), 1)))
    got = rdp_curve(PoissonSampledEvent(0.05, inner), orders)
    assert got == pytest.approx(sampled_gaussian_rdp(0.05, math.sqrt(2.0), orders), rel=1e-12)
    # Rate 1 is no sampling, whatever the inner event.
    laplace = LaplaceEvent(1.0)
    assert rdp_curve(PoissonSampledEvent(1.0, laplace), orders) == pytest.approx(
        rdp_curve(laplace, orders)
    )
    assert np.all(rdp_curve(PoissonSampledEvent(0.3, NoOpEvent()), orders) == 0)


@pytest.mark.parametrize(
    "event",
    [
        ApproxDPEvent(1.0, 1e-6),
        PoissonSampledEvent(0.1, LaplaceEvent(1.0)),
        PoissonSampledEvent(0.1, DiscreteGaussianEvent(1.0)),
        SampledWithoutReplacementEvent(10, 100, GaussianEvent(1.0)),
        ComposedEvent((GaussianEvent(1.0), ApproxDPEvent(0.5, 1e-9))),
        SelfComposedEvent(PoissonSampledEvent(0.5, PureDPEvent(1.0)), 3),
    ],
)
def test_unsupported_events_are_refused_with_a_pointer_to_pld(event: object) -> None:
    acc = RDPAccountant()
    assert not acc.supports(event)  # type: ignore[arg-type]
    with pytest.raises(UnsupportedEventError, match="PLDAccountant") as info:
        acc.compose(event)  # type: ignore[arg-type]
    assert "RDPAccountant cannot account for" in str(info.value)
    assert acc.events == () and np.all(acc.rdp == 0)
    with pytest.raises(UnsupportedEventError):
        rdp_curve(event)  # type: ignore[arg-type]


def test_rdp_curve_rejects_non_events() -> None:
    with pytest.raises(InvalidParameterError, match=r"^event "):
        rdp_curve(1.0)  # type: ignore[arg-type]


# --------------------------------------------------------------------------------------------
# Conversions
# --------------------------------------------------------------------------------------------


def test_rdp_to_epsilon_is_the_improved_conversion() -> None:
    orders = [2.0, 4.0, 8.0, 16.0]
    rdp = [0.5 * a for a in orders]  # the Gaussian with z = 1
    delta = 1e-6
    eps, order = rdp_to_epsilon(orders, rdp, delta)
    by_hand = [
        r + math.log((a - 1) / a) - (math.log(delta) + math.log(a)) / (a - 1)
        for a, r in zip(orders, rdp, strict=True)
    ]
    assert eps == pytest.approx(min(by_hand), rel=1e-14)
    assert order == orders[int(np.argmin(by_hand))]
    classic = min(r - math.log(delta) / (a - 1) for a, r in zip(orders, rdp, strict=True))
    assert eps < classic


@settings(max_examples=60, deadline=None)
@given(
    rho=st.floats(1e-4, 50.0),
    delta=st.floats(1e-12, 0.5),
)
def test_rdp_to_delta_inverts_rdp_to_epsilon(rho: float, delta: float) -> None:
    orders = list(DEFAULT_RDP_ORDERS)
    rdp = [rho * a for a in orders]
    eps, order = rdp_to_epsilon(orders, rdp, delta)
    back, _ = rdp_to_delta(orders, rdp, eps)
    assert back <= delta * (1 + 1e-9)
    if eps > 0:  # the curve is also tight at the chosen order
        alpha_index = orders.index(order)
        at_order, _ = rdp_to_delta([order], [rdp[alpha_index]], eps)
        assert at_order == pytest.approx(delta, rel=1e-8)


def test_conversion_edge_cases() -> None:
    orders = [2.0, 3.0]
    assert rdp_to_epsilon(orders, [0.0, 0.0], 1e-9) == (0.0, 2.0)
    assert rdp_to_epsilon(orders, [0.1, 0.2], 0.0)[0] == math.inf
    assert math.isnan(rdp_to_epsilon(orders, [0.1, 0.2], 0.0)[1])
    assert rdp_to_delta(orders, [0.0, 0.0], 0.5)[0] == 0.0
    # Bretagnolle-Huber: a tiny curve certifies epsilon = 0 at delta >= sqrt(1 - e^-rdp).
    tiny = 1e-10
    assert rdp_to_epsilon(orders, [tiny, 2 * tiny], 2e-5)[0] == 0.0
    assert rdp_to_delta(orders, [tiny, 2 * tiny], 0.0)[0] <= math.sqrt(tiny) * (1 + 1e-6)
    # delta never exceeds 1.
    assert rdp_to_delta(orders, [50.0, 80.0], 0.1)[0] == 1.0


@pytest.mark.parametrize(
    ("orders", "rdp", "name"),
    [
        ([2.0, 3.0], [0.1], "rdp"),
        ([2.0, 3.0], [0.1, -0.1], "rdp"),
        ([2.0, 3.0], [0.1, math.nan], "rdp"),
        ([0.5, 3.0], [0.1, 0.2], "orders"),
        ([2.0, True], [0.1, 0.2], "orders"),
    ],
)
def test_conversions_validate(orders: list[float], rdp: list[float], name: str) -> None:
    with pytest.raises(InvalidParameterError, match=rf"^{name} "):
        rdp_to_epsilon(orders, rdp, 1e-5)
    with pytest.raises(InvalidParameterError, match=rf"^{name} "):
        rdp_to_delta(orders, rdp, 1.0)


def test_conversions_validate_delta_and_epsilon() -> None:
    with pytest.raises(InvalidParameterError, match=r"^delta "):
        rdp_to_epsilon([2.0], [0.1], 1.0)
    with pytest.raises(InvalidParameterError, match=r"^epsilon "):
        rdp_to_delta([2.0], [0.1], -1.0)


# --------------------------------------------------------------------------------------------
# Published figures
# --------------------------------------------------------------------------------------------

#: TensorFlow Privacy, tutorials/README.md and mnist_dpsgd_tutorial.py: MNIST (60,000
#: examples), batch 256, 60000 // 256 = 234 steps per epoch, delta = 1e-5, orders
#: 1.1, 1.2, ..., 10.9, 12, ..., 63 and Mironov's conversion eps = rdp + log(1/delta)/(alpha-1).
TF_PRIVACY_FIGURES = [
    (1.12, 60, 2.92),  # the default run: "For delta=1e-5, the current epsilon is: 2.92"
    (1.12, 1, 1.00),
    (1.12, 2, 1.04),
    (1.2, 10, 1.20),  # table row "0.32 | 1.2 | 1.0 | 256 | 10 | 1.20 | 95.0%"
]


@pytest.mark.parametrize(("z", "epochs", "published"), TF_PRIVACY_FIGURES)
def test_tf_privacy_mnist_tutorial_figures(z: float, epochs: int, published: float) -> None:
    orders = [1 + x / 10 for x in range(1, 100)] + list(range(12, 64))
    steps = epochs * (60000 // 256)
    rdp = steps * sampled_gaussian_rdp(256 / 60000, z, orders)
    classic = min(r - math.log(1e-5) / (a - 1) for a, r in zip(orders, rdp, strict=True))
    assert round(classic, 2) == published
    # The improved conversion and our default orders certify strictly less.
    acc = RDPAccountant().compose(PoissonSampledEvent(256 / 60000, GaussianEvent(z)), steps)
    assert acc.get_epsilon(1e-5) < published - 0.2


def test_tf_privacy_default_run_with_the_improved_conversion() -> None:
    acc = RDPAccountant().compose(PoissonSampledEvent(256 / 60000, GaussianEvent(1.12)), 60 * 234)
    eps, order = acc.get_epsilon_and_order(1e-5)
    # Published 2.92 with the classic conversion. This value (same orders as dp_accounting
    # 0.6's defaults near the optimum) matched dp_accounting's RdpAccountant when measured.
    assert eps == pytest.approx(2.5165, abs=1e-4)
    assert order == 8.3
    delta, _ = acc.get_delta_and_order(eps)
    assert delta <= 1e-5 * (1 + 1e-9)


def test_abadi_et_al_moments_accountant_figure() -> None:
    """Abadi et al. 2016, Sec. 3.1: q = 0.01, sigma = 4, delta = 1e-5, T = 10,000 -> eps ~ 1.26.

    The moments accountant is RDP at orders lambda + 1 with lambda <= 32 and the tail bound
    eps = D_{lambda+1} + log(1/delta) / lambda.
    """
    orders = list(range(2, 34))
    rdp = 10_000 * sampled_gaussian_rdp(0.01, 4.0, orders)
    moments = min(r - math.log(1e-5) / (a - 1) for a, r in zip(orders, rdp, strict=True))
    assert round(moments, 2) == 1.26
    assert rdp_to_epsilon(orders, rdp, 1e-5)[0] < 1.1


# --------------------------------------------------------------------------------------------
# The accountant
# --------------------------------------------------------------------------------------------


def test_accountant_attributes_and_orders() -> None:
    assert RDPAccountant.name == "rdp"
    assert RDPAccountant.fully_adaptive is False
    acc = RDPAccountant(orders=[4, 2, 2, 8.5])
    assert acc.orders.tolist() == [2.0, 4.0, 8.5]
    assert RDPAccountant().orders.tolist() == sorted(DEFAULT_RDP_ORDERS)
    assert min(DEFAULT_RDP_ORDERS) < 1.25 and max(DEFAULT_RDP_ORDERS) == 1024
    with pytest.raises(InvalidParameterError, match=r"^orders "):
        RDPAccountant(orders=[2.0, 1.0])


def test_accountant_copy_is_independent_and_delta_zero() -> None:
    acc = RDPAccountant().compose(GaussianEvent(2.0))
    twin = acc.copy().compose(GaussianEvent(2.0))
    assert twin.get_epsilon(1e-6) > acc.get_epsilon(1e-6)
    assert acc.get_epsilon(0.0) == math.inf
    assert RDPAccountant().get_epsilon(0.0) == 0.0
    assert RDPAccountant().compose(NoOpEvent(), 5).get_delta(0.0) == 0.0
    assert acc.get_delta(acc.get_epsilon(1e-6)) <= 1e-6 * (1 + 1e-9)


def test_accountant_gaussian_close_to_exact_and_above_it() -> None:
    """RDP is an upper bound: above the exact Balle-Wang epsilon of one Gaussian, not by much."""
    sigma, delta = 2.0, 1e-5

    def exact_delta(eps: float) -> float:
        a, b = 1 / (2 * sigma), eps * sigma
        return float(mp.ncdf(a - b) - mp.exp(eps) * mp.ncdf(-a - b))

    lo, hi = 0.0, 10.0
    for _ in range(100):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if exact_delta(mid) > delta else (lo, mid)
    eps = RDPAccountant().compose(GaussianEvent(sigma)).get_epsilon(delta)
    assert hi <= eps <= 1.25 * hi


_EVENTS = st.one_of(
    st.floats(0.5, 20.0).map(GaussianEvent),
    st.floats(0.5, 20.0).map(LaplaceEvent),
    st.floats(0.05, 3.0).map(PureDPEvent),
    st.tuples(st.floats(0.001, 0.2), st.floats(0.6, 5.0)).map(
        lambda t: PoissonSampledEvent(t[0], GaussianEvent(t[1]))
    ),
)
_FAST_ORDERS = [1.5, 2.0, 3.0, 5.0, 8.0, 16.0, 32.0, 64.0, 256.0]


@settings(max_examples=40, deadline=None)
@given(events=st.lists(_EVENTS, min_size=1, max_size=4), extra=_EVENTS)
def test_composition_is_monotone_in_events(events: list[object], extra: object) -> None:
    acc = RDPAccountant(_FAST_ORDERS)
    for event in events:
        acc.compose(event)  # type: ignore[arg-type]
    more = acc.copy().compose(extra)  # type: ignore[arg-type]
    assert np.all(more.rdp >= acc.rdp)
    for delta in (1e-9, 1e-5):
        assert more.get_epsilon(delta) >= acc.get_epsilon(delta)
    assert more.get_delta(1.0) >= acc.get_delta(1.0)


@settings(max_examples=40, deadline=None)
@given(event=_EVENTS, steps=st.integers(1, 5000), more=st.integers(1, 5000))
def test_composition_is_monotone_in_steps(event: object, steps: int, more: int) -> None:
    few = RDPAccountant(_FAST_ORDERS).compose(event, steps)  # type: ignore[arg-type]
    many = RDPAccountant(_FAST_ORDERS).compose(event, steps + more)  # type: ignore[arg-type]
    assert many.get_epsilon(1e-6) >= few.get_epsilon(1e-6)
    assert many.rdp == pytest.approx(few.rdp * (steps + more) / steps, rel=1e-12)


def test_composing_step_by_step_equals_composing_once() -> None:
    step = PoissonSampledEvent(0.01, GaussianEvent(1.0))
    loop = RDPAccountant()
    for _ in range(300):
        loop.compose(step)
    once = RDPAccountant().compose(step, count=300)
    assert loop.rdp == pytest.approx(once.rdp, rel=1e-12)
    assert len(loop.events) == 300
