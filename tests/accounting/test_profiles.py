"""Privacy profiles against independent high-precision references (mpmath at 50 digits)."""

from __future__ import annotations

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
    PureDPEvent,
    RandomizedResponseEvent,
    SampledWithoutReplacementEvent,
    SelfComposedEvent,
    ZCDPEvent,
)
from dpcurator.accounting._profiles import (
    hockey_stick_discrete_gaussian,
    hockey_stick_gaussian,
    hockey_stick_laplace,
    hockey_stick_sampled_gaussian,
    privacy_profile,
)
from dpcurator.errors import InvalidParameterError, UnsupportedEventError

mpmath.mp.dps = 50
mpf = mpmath.mpf

EPSILONS = [-3.0, -0.7, 0.0, 0.3, 1.0, 2.5, 6.0]
REL = 1e-9  # float64 closed forms vs 50-digit references; relative (tiny deltas included)


def _close(value: float, reference: mpmath.mpf, rel: float = REL, atol: float = 1e-300) -> bool:
    ref = float(reference)
    return abs(value - ref) <= rel * abs(ref) + atol


# Finite sums at an epsilon equal to a loss value (eps0 = d / b as a float, not as the exact
# real number) leave a residue of a few ulps: absolute slack 1e-15 there.
ATOL_FINITE = 1e-15


def _phi(x: mpmath.mpf, mean: float | mpmath.mpf = 0) -> mpmath.mpf:
    return mpmath.npdf(x, mean, 1)


# ---------------------------------------------------------------------------------------------
# References: E_P[(1 - e^{eps - L})_+] = integral of (p(x) - e^eps q(x))_+, at 50 digits.
# ---------------------------------------------------------------------------------------------
def _tail_integral(f: object, x0: mpmath.mpf, direction: int) -> mpmath.mpf:
    """Integral of ``f`` from ``x0`` to +inf (direction 1) or from -inf (direction -1).

    mpmath's quadrature tests convergence in absolute terms, so the integrand is rescaled by
    its size near ``x0`` and the variable by the Gaussian decay length ``1 / |x0|``.
    """
    scale = 1 / max(abs(x0), mpf(1))
    size = _phi(x0)

    def g(u: mpmath.mpf) -> mpmath.mpf:
        return f(x0 + direction * u * scale) / size  # type: ignore[operator]

    return mpmath.quad(g, [0, 1, 4, 16, 64, mpmath.inf]) * size * scale


def _ref_gaussian(eps: float, mu: float) -> mpmath.mpf:
    """P = N(mu, 1), Q = N(0, 1); L(x) = mu x - mu^2/2 > eps iff x > eps/mu + mu/2."""
    e, m = mpf(eps), mpf(mu)
    x0 = e / m + m / 2
    return _tail_integral(lambda x: _phi(x, m) - mpmath.exp(e) * _phi(x), x0, 1)


def _ref_laplace(eps: float, scale: float, d: float) -> mpmath.mpf:
    e, b, dd = mpf(eps), mpf(scale), mpf(d)

    def density(x: mpmath.mpf, c: mpmath.mpf) -> mpmath.mpf:
        return mpmath.exp(-abs(x - c) / b) / (2 * b)

    def f(x: mpmath.mpf) -> mpmath.mpf:
        return max(density(x, dd) - mpmath.exp(e) * density(x, mpf(0)), mpf(0))

    # Break at the kinks of the densities and where the integrand leaves zero.
    cross = min(max((b * e + dd) / 2, mpf(0)), dd)
    return mpmath.quad(f, [-mpmath.inf, -1, 0, cross, dd, dd + 1, mpmath.inf])


def _ref_sampled_gaussian(eps: float, mu: float, q: float, orientation: str) -> mpmath.mpf:
    e, m, qq = mpf(eps), mpf(mu), mpf(q)

    def mixture(x: mpmath.mpf) -> mpmath.mpf:
        return (1 - qq) * _phi(x) + qq * _phi(x, m)

    if orientation == "remove":
        first, second = mixture, _phi
    else:
        first, second = _phi, mixture

    def g(x: mpmath.mpf) -> mpmath.mpf:
        return first(x) - mpmath.exp(e) * second(x)

    # The likelihood ratio is monotone in x: find the crossing, integrate the positive side.
    points = [mpf(t) / 4 for t in range(-200, 201)]
    signs = [g(x) > 0 for x in points]
    if all(signs):
        return mpmath.quad(g, [-mpmath.inf, 0, mpmath.inf])
    if not any(signs):
        return mpf(0)
    k = next(i for i in range(len(points) - 1) if signs[i] != signs[i + 1])
    lo, hi = points[k], points[k + 1]
    for _ in range(200):  # bisection on the sign change (no closed form used)
        mid = (lo + hi) / 2
        if (g(mid) > 0) == signs[k]:
            lo = mid
        else:
            hi = mid
    root = (lo + hi) / 2
    return _tail_integral(g, root, 1 if signs[-1] else -1)


def _ref_discrete_gaussian(eps: float, sigma: float, d: int) -> mpmath.mpf:
    s2 = 2 * mpf(sigma) ** 2
    n = int(40 * sigma) + 40
    w = {x: mpmath.exp(-(mpf(x) ** 2) / s2) for x in range(-n - d, n + d + 1)}
    z = mpmath.fsum(w.values())
    e = mpmath.exp(mpf(eps))
    return mpmath.fsum(max(w[y - d] - e * w[y], mpf(0)) for y in range(-n, n + 1)) / z


def _ref_finite(first: list[mpmath.mpf], second: list[mpmath.mpf], eps: float) -> mpmath.mpf:
    e = mpmath.exp(mpf(eps))
    return mpmath.fsum(max(p - e * q, mpf(0)) for p, q in zip(first, second, strict=True))


# ---------------------------------------------------------------------------------------------
# Closed forms against the references
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("noise_multiplier", [0.3, 1.0, 5.0])
def test_gaussian_matches_numerical_integration(noise_multiplier: float) -> None:
    values = hockey_stick_gaussian(EPSILONS, noise_multiplier)
    event_values = privacy_profile(
        GaussianEvent(sigma=2 * noise_multiplier, sensitivity=2.0), EPSILONS
    )
    for eps, value, other in zip(EPSILONS, values, event_values, strict=True):
        ref = _ref_gaussian(eps, 1 / noise_multiplier)
        assert _close(float(value), ref), (eps, value, ref)
        assert _close(float(other), ref), (eps, other, ref)


def test_gaussian_tiny_deltas_keep_relative_accuracy() -> None:
    # delta ~ 1e-15 .. 1e-90: the log-space evaluation must not cancel to 0 or lose digits.
    for eps in [9.0, 12.0, 20.0]:
        ref = _ref_gaussian(eps, 1.0)
        value = hockey_stick_gaussian(eps, 1.0)
        assert float(ref) < 1e-14
        assert _close(value, ref, rel=1e-8), (eps, value, ref)
    # Small mu (large noise): e^eps Phi(...) is close to Phi(...); still 8 correct digits.
    ref = _ref_gaussian(3.0, 0.2)
    assert _close(hockey_stick_gaussian(3.0, 5.0), ref, rel=1e-8)


def test_gaussian_composition_is_a_gaussian() -> None:
    composed = ComposedEvent((GaussianEvent(1.0), GaussianEvent(2.0), GaussianEvent(2.0)))
    mu = math.sqrt(1 + 0.25 + 0.25)
    expected = hockey_stick_gaussian(EPSILONS, 1 / mu)
    np.testing.assert_allclose(privacy_profile(composed, EPSILONS), expected, rtol=1e-12)
    self_composed = SelfComposedEvent(GaussianEvent(2.0), 4)
    np.testing.assert_allclose(
        privacy_profile(self_composed, EPSILONS), hockey_stick_gaussian(EPSILONS, 1.0), rtol=1e-12
    )


@pytest.mark.parametrize(("scale", "sensitivity"), [(1.0, 1.0), (0.5, 2.0), (3.0, 0.5)])
def test_laplace_matches_numerical_integration(scale: float, sensitivity: float) -> None:
    event = LaplaceEvent(scale=scale, sensitivity=sensitivity)
    for eps in [-5.0, -1.0, 0.0, 0.2, 0.9, 3.9, 4.5]:
        ref = _ref_laplace(eps, scale, sensitivity)
        assert _close(hockey_stick_laplace(eps, scale, sensitivity), ref), eps
        assert _close(privacy_profile(event, eps), ref), eps
        assert _close(privacy_profile(event, eps, orientation="add"), ref), eps


@pytest.mark.parametrize("orientation", ["remove", "add"])
@pytest.mark.parametrize(("q", "noise_multiplier"), [(0.01, 1.0), (0.3, 0.7), (1.0, 1.0)])
def test_sampled_gaussian_matches_numerical_integration(
    q: float, noise_multiplier: float, orientation: str
) -> None:
    event = PoissonSampledEvent(q, GaussianEvent(sigma=noise_multiplier))
    for eps in [-2.0, -0.005, 0.0, 0.004, 0.5, 2.0]:
        ref = _ref_sampled_gaussian(eps, 1 / noise_multiplier, q, orientation)
        direct = hockey_stick_sampled_gaussian(eps, noise_multiplier, q, orientation=orientation)
        generic = privacy_profile(event, eps, orientation=orientation)
        assert _close(direct, ref), (eps, direct, ref)
        assert _close(generic, ref), (eps, generic, ref)


def test_sampled_gaussian_direct_and_generic_forms_agree() -> None:
    eps = np.linspace(-4, 8, 241)
    for q, s in [(1e-4, 0.8), (0.01, 1.0), (0.2, 2.0), (0.9, 0.5)]:
        event = PoissonSampledEvent(q, GaussianEvent(sigma=s))
        for orientation in ("remove", "add"):
            direct = hockey_stick_sampled_gaussian(eps, s, q, orientation=orientation)
            generic = privacy_profile(event, eps, orientation=orientation)
            np.testing.assert_allclose(generic, direct, rtol=1e-9, atol=1e-300)
            assert np.any(direct > 0)


@pytest.mark.parametrize(("sigma", "sensitivity"), [(0.6, 1), (1.0, 1), (2.5, 3)])
def test_discrete_gaussian_matches_lattice_sums(sigma: float, sensitivity: int) -> None:
    event = DiscreteGaussianEvent(sigma=sigma, sensitivity=sensitivity)
    for eps in [-1.0, 0.0, 0.5, 1.3, 4.0]:
        ref = _ref_discrete_gaussian(eps, sigma, sensitivity)
        assert _close(hockey_stick_discrete_gaussian(eps, sigma, sensitivity), ref), eps
        assert _close(privacy_profile(event, eps), ref), eps
        assert _close(privacy_profile(event, eps, orientation="add"), ref), eps


def test_discrete_gaussian_is_not_the_continuous_one() -> None:
    # Negative control for the lattice sums: the continuous Gaussian differs at small sigma.
    assert abs(hockey_stick_discrete_gaussian(0.5, 0.6) - hockey_stick_gaussian(0.5, 0.6)) > 1e-3


def test_randomized_response_and_pure_dp_are_exact_finite_sums() -> None:
    p, k = mpf(1) / 2, 5
    po = (1 - p) / (k - 1)
    first, second = [p, po, 3 * po], [po, p, 3 * po]
    for eps in [-2.0, 0.0, 0.5, 1.0, 1.3862943611198906, 2.0]:
        ref = _ref_finite(first, second, eps)
        value = privacy_profile(RandomizedResponseEvent(0.5, 5), eps)
        assert _close(value, ref, atol=ATOL_FINITE), eps
    e = mpf(1)
    rr = [mpmath.exp(e) / (1 + mpmath.exp(e)), 1 / (1 + mpmath.exp(e))]
    for eps in [-1.5, 0.0, 0.5, 0.999]:
        assert _close(privacy_profile(PureDPEvent(1.0), eps), _ref_finite(rr, rr[::-1], eps))
    assert privacy_profile(PureDPEvent(1.0), 1.0) == 0.0


def test_approx_dp_worst_case_pair() -> None:
    # delta + (1 - delta) * RR(eps) above -eps, and the Q-only mass delta matters below.
    eps0, delta0 = 0.7, 1e-3
    a = mpmath.exp(mpf(eps0))
    hi, lo = (1 - mpf(delta0)) * a / (1 + a), (1 - mpf(delta0)) / (1 + a)
    first, second = [mpf(delta0), hi, lo, mpf(0)], [mpf(0), lo, hi, mpf(delta0)]
    for eps in [-3.0, -0.7, 0.0, 0.3, 0.7, 5.0]:
        ref = _ref_finite(first, second, eps)
        assert _close(privacy_profile(ApproxDPEvent(eps0, delta0), eps), ref), eps
    assert privacy_profile(ApproxDPEvent(eps0, delta0), 50.0) == pytest.approx(delta0, rel=1e-15)


@pytest.mark.parametrize(("scale", "sensitivity"), [(1.0, 1), (0.7, 3), (4.0, 2)])
def test_discrete_laplace_exact(scale: float, sensitivity: int) -> None:
    n = 400
    r = mpmath.exp(-1 / mpf(scale))
    c = (1 - r) / (1 + r)
    first = [c * r ** abs(y - sensitivity) for y in range(-n, n + 1)]
    second = [c * r ** abs(y) for y in range(-n, n + 1)]
    event = DiscreteLaplaceEvent(scale=scale, sensitivity=sensitivity)
    for eps in [-1.0, 0.0, 0.3, sensitivity / scale - 0.01, sensitivity / scale]:
        ref = _ref_finite(first, second, eps)
        assert _close(privacy_profile(event, eps), ref, rel=1e-12, atol=ATOL_FINITE), eps


def test_noop_profile() -> None:
    eps = np.array([-2.0, -0.1, 0.0, 3.0])
    np.testing.assert_allclose(privacy_profile(NoOpEvent(), eps), np.maximum(0, 1 - np.exp(eps)))


# ---------------------------------------------------------------------------------------------
# Subsampling
# ---------------------------------------------------------------------------------------------
def test_poisson_transform_formulas() -> None:
    # remove: q H_{a'}(P||Q) with a' = 1 + (a - 1)/q; add: (1 - a(1-q)) H_{a''}(Q||P).
    q, inner = 0.25, LaplaceEvent(scale=0.5)
    event = PoissonSampledEvent(q, inner)
    for eps in [-0.2, 0.1, 0.6, 1.5]:
        a = math.exp(eps)
        removed = q * privacy_profile(inner, math.log(1 + (a - 1) / q)) if a > 1 - q else 1 - a
        assert privacy_profile(event, eps) == pytest.approx(removed, rel=1e-12)
        if a * (1 - q) < 1:
            a2 = a * q / (1 - a * (1 - q))
            added = (1 - a * (1 - q)) * privacy_profile(inner, math.log(a2), orientation="add")
        else:
            added = 0.0
        assert privacy_profile(event, eps, orientation="add") == pytest.approx(added, rel=1e-12)
    # Laplace's loss is bounded: the remove profile vanishes above ln(1 - q + q e^eps0).
    top = math.log(1 - q + q * math.exp(2.0))
    assert privacy_profile(event, top + 1e-9) == 0.0
    assert privacy_profile(event, top - 1e-3) > 0.0


def test_poisson_of_finite_pairs_is_exact() -> None:
    # Poisson(q, PureDP(eps)): outcome-wise mixture of the RR pair, summed exactly.
    q, eps0 = mpf("0.2"), mpf(2)
    a = mpmath.exp(eps0)
    p_first, p_second = [a / (1 + a), 1 / (1 + a)], [1 / (1 + a), a / (1 + a)]
    first = [(1 - q) * s + q * f for f, s in zip(p_first, p_second, strict=True)]
    event = PoissonSampledEvent(0.2, PureDPEvent(2.0))
    for eps in [-0.5, 0.0, 0.3, 1.0]:
        assert _close(privacy_profile(event, eps), _ref_finite(first, p_second, eps), rel=1e-12)
        ref_add = _ref_finite(p_second, first, eps)
        assert _close(privacy_profile(event, eps, orientation="add"), ref_add, rel=1e-12)


def test_sampling_without_replacement() -> None:
    gamma = 0.1
    # Pure inner event: ApproxDP(ln(1 + gamma (e^eps - 1)), gamma delta) (BBG18, Theorem 10).
    event = SampledWithoutReplacementEvent(10, 100, LaplaceEvent(scale=1.0))
    amplified = ApproxDPEvent(math.log1p(gamma * math.expm1(1.0)), 0.0)
    np.testing.assert_allclose(
        privacy_profile(event, EPSILONS), privacy_profile(amplified, EPSILONS)
    )
    # Gaussian inner event: pointwise amplified profile, mirrored for eps < 0.
    event = SampledWithoutReplacementEvent(10, 100, GaussianEvent(1.0))
    for eps in [0.0, 0.05, 0.5, 2.0]:
        inner_eps = math.log(1 + math.expm1(eps) / gamma)
        expected = gamma * hockey_stick_gaussian(inner_eps, 1.0)
        assert privacy_profile(event, eps) == pytest.approx(expected, rel=1e-12)
        a = math.exp(-eps)
        assert privacy_profile(event, -eps) == pytest.approx(1 - a + a * expected, rel=1e-12)
    full = SampledWithoutReplacementEvent(5, 5, GaussianEvent(1.0))
    np.testing.assert_allclose(
        privacy_profile(full, EPSILONS), hockey_stick_gaussian(EPSILONS, 1.0)
    )


# ---------------------------------------------------------------------------------------------
# Structural properties of every profile
# ---------------------------------------------------------------------------------------------
SUPPORTED = [
    GaussianEvent(0.8),
    LaplaceEvent(0.6),
    PureDPEvent(0.9),
    ApproxDPEvent(0.4, 1e-4),
    RandomizedResponseEvent(0.7, 3),
    DiscreteLaplaceEvent(1.2, 2),
    DiscreteGaussianEvent(1.5, 2),
    NoOpEvent(),
    PoissonSampledEvent(0.05, GaussianEvent(0.9)),
    PoissonSampledEvent(0.3, LaplaceEvent(0.8)),
    PoissonSampledEvent(0.2, DiscreteGaussianEvent(1.0)),
    PoissonSampledEvent(0.4, PoissonSampledEvent(0.5, GaussianEvent(0.6))),
    PoissonSampledEvent(0.1, ApproxDPEvent(1.0, 1e-3)),
    SampledWithoutReplacementEvent(3, 40, GaussianEvent(1.1)),
    SampledWithoutReplacementEvent(3, 40, DiscreteGaussianEvent(1.1)),
    SampledWithoutReplacementEvent(3, 40, PureDPEvent(1.0)),
]


@pytest.mark.parametrize("event", SUPPORTED, ids=lambda e: type(e).__name__)
def test_add_and_remove_are_tied(event: object) -> None:
    # H_a(Q||P) = 1 - a + a H_{1/a}(P||Q) for any pair of probability distributions.
    eps = np.linspace(-6, 6, 121)
    add = privacy_profile(event, eps, orientation="add")  # type: ignore[arg-type]
    remove = privacy_profile(event, -eps, orientation="remove")  # type: ignore[arg-type]
    np.testing.assert_allclose(add, 1 - np.exp(eps) + np.exp(eps) * remove, atol=1e-13)


@pytest.mark.parametrize("event", SUPPORTED, ids=lambda e: type(e).__name__)
def test_profiles_are_valid_hockey_stick_curves(event: object) -> None:
    eps = np.linspace(-8, 8, 801)
    for orientation in ("remove", "add"):
        delta = privacy_profile(event, eps, orientation=orientation)  # type: ignore[arg-type]
        assert np.all(np.diff(delta) <= 1e-15)  # nonincreasing
        assert np.all(delta >= np.maximum(0.0, -np.expm1(eps)) - 1e-15)  # S = everything
        assert np.all(delta <= 1.0)
        # convex in alpha = e^eps: chord slopes increase
        alpha = np.exp(eps)
        slopes = np.diff(delta) / np.diff(alpha)
        assert np.all(np.diff(slopes) >= -1e-9 * np.abs(slopes[1:]) - 1e-12)
        inf = privacy_profile(event, [-np.inf, np.inf], orientation=orientation)  # type: ignore[arg-type]
        assert inf[0] == pytest.approx(1.0, abs=1e-15)


@settings(max_examples=40, deadline=None)
@given(
    s=st.floats(0.2, 5.0),
    e1=st.floats(-5.0, 10.0),
    e2=st.floats(-5.0, 10.0),
    q=st.floats(1e-3, 1.0),
)
def test_sampled_gaussian_profile_is_monotone_in_epsilon(
    s: float, e1: float, e2: float, q: float
) -> None:
    lo, hi = min(e1, e2), max(e1, e2)
    event = PoissonSampledEvent(q, GaussianEvent(s))
    for orientation in ("remove", "add"):
        d_lo = privacy_profile(event, lo, orientation=orientation)
        d_hi = privacy_profile(event, hi, orientation=orientation)
        assert d_hi <= d_lo + 1e-15


def test_scalar_in_scalar_out() -> None:
    assert isinstance(privacy_profile(GaussianEvent(1.0), 1.0), float)
    assert isinstance(hockey_stick_gaussian(1.0, 1.0), float)
    out = privacy_profile(GaussianEvent(1.0), [[0.0, 1.0]])
    assert isinstance(out, np.ndarray)
    assert out.shape == (1, 2)


def test_max_orientation_is_the_larger_one() -> None:
    event = PoissonSampledEvent(0.5, GaussianEvent(1.0))
    eps = np.linspace(-1, 3, 41)
    both = np.maximum(
        privacy_profile(event, eps, orientation="remove"),
        privacy_profile(event, eps, orientation="add"),
    )
    np.testing.assert_array_equal(privacy_profile(event, eps, orientation="max"), both)
    assert not np.array_equal(
        privacy_profile(event, eps, orientation="remove"),
        privacy_profile(event, eps, orientation="add"),
    )


# ---------------------------------------------------------------------------------------------
# Errors
# ---------------------------------------------------------------------------------------------
def test_zcdp_is_unsupported_with_a_pointer() -> None:
    with pytest.raises(UnsupportedEventError, match=r"ZCDPEvent\(rho=0.5\).*ZCDPAccountant"):
        privacy_profile(ZCDPEvent(0.5), 1.0)


@pytest.mark.parametrize(
    "event",
    [
        ComposedEvent((GaussianEvent(1.0), LaplaceEvent(1.0))),
        PoissonSampledEvent(0.1, RandomizedResponseEvent(0.75)),
        PoissonSampledEvent(0.1, ZCDPEvent(1.0)),
        SampledWithoutReplacementEvent(1, 10, ZCDPEvent(1.0)),
        DiscreteGaussianEvent(1.0, sensitivity=1.5),
    ],
    ids=lambda e: type(e).__name__,
)
def test_unsupported_events_are_named(event: object) -> None:
    with pytest.raises(UnsupportedEventError, match=type(event).__name__):
        privacy_profile(event, 1.0)  # type: ignore[arg-type]


def test_bad_arguments() -> None:
    with pytest.raises(InvalidParameterError, match="epsilons"):
        privacy_profile(GaussianEvent(1.0), [0.0, float("nan")])
    with pytest.raises(InvalidParameterError, match="orientation"):
        privacy_profile(GaussianEvent(1.0), 1.0, orientation="sideways")
    with pytest.raises(InvalidParameterError, match="noise_multiplier"):
        hockey_stick_gaussian(1.0, 0.0)
    with pytest.raises(InvalidParameterError, match="sampling_rate"):
        hockey_stick_sampled_gaussian(1.0, 1.0, 0.0)
    with pytest.raises(InvalidParameterError, match="sensitivity"):
        hockey_stick_discrete_gaussian(1.0, 1.0, sensitivity=0)
    with pytest.raises(InvalidParameterError, match="scale"):
        hockey_stick_laplace(1.0, scale=-1.0)
    with pytest.raises(InvalidParameterError, match="epsilons"):
        hockey_stick_gaussian("one", 1.0)  # type: ignore[arg-type]
