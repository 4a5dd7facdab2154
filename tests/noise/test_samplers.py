"""Tests of the exact vectorised samplers (src/dpcurator/noise/_samplers.py).

Distribution tests are seeded chi-square / binomial tests at ALPHA = 1e-4 (see noise_stats),
each with a negative control that must be rejected. Deterministic tests check the fast path
against an exact (mpmath) inversion word by word, and that the exact slow path keeps the
distribution right when the fast-path band is widened so that it runs on many draws.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from fractions import Fraction
from typing import Any

import mpmath
import numpy as np
import pytest
from noise_stats import (
    ALPHA,
    ScriptedSource,
    binomial_p,
    cdf_chi_square_p,
    chi_square_p,
    dgauss_moments,
    dgauss_pmf,
    dlap_cdf,
    dlap_moments,
    dlap_pmf,
    pmf_chi_square_p,
    two_sample_p,
)
from scipy import stats

from dpcurator.errors import InvalidParameterError
from dpcurator.noise import (
    InsecureSeededSource,
    _exact,
    _samplers,
    bernoulli,
    bernoulli_exp,
    discrete_gaussian,
    discrete_laplace,
    uniform_integers,
)
from dpcurator.noise._reference import (
    WordStream,
    discrete_gaussian_ref,
    discrete_laplace_ref,
)

PREC = 400  # mpmath bits for exact thresholds near 64-bit words


def seeded(seed: int) -> InsecureSeededSource:
    return InsecureSeededSource(seed)


class SlowPathCounter:
    """Counts exact slow-path comparisons (LazyUniform.less calls)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls = 0
        original = _exact.LazyUniform.less

        def counting(inner_self: _exact.LazyUniform, enclosure: _exact.Enclosure) -> bool:
            self.calls += 1
            return original(inner_self, enclosure)

        monkeypatch.setattr(_exact.LazyUniform, "less", counting)


# ---------------------------------------------------------------------------------------------
# uniform integers


@pytest.mark.statistical
def test_uniform_integers_small_high_chi_square() -> None:
    x = uniform_integers(7, size=70_000, source=seeded(1))
    assert x.dtype == np.int64
    counts = np.bincount(x, minlength=7)
    assert counts.size == 7
    p = stats.chisquare(counts).pvalue
    assert p > ALPHA
    # negative control: the same test on a distribution with 1% extra mass on 0 is rejected
    skewed = np.concatenate([x, np.zeros(700, dtype=np.int64)])
    assert stats.chisquare(np.bincount(skewed, minlength=7)).pvalue < ALPHA


@pytest.mark.statistical
@pytest.mark.parametrize("high", [2**40, 3 * 2**61, 2**63, 10**15 + 37])
def test_uniform_integers_large_high_bucketed(high: int) -> None:
    n = 64_000
    x = uniform_integers(high, size=n, source=seeded(2))
    assert int(x.min()) >= 0 and int(x.max()) < high
    edges = [high * k // 64 for k in range(65)]  # bucket k holds [edges[k], edges[k + 1])
    probs = np.diff(np.array(edges, dtype=object)).astype(np.float64) / high
    idx = np.searchsorted(np.array(edges[1:-1], dtype=np.float64), x.astype(np.float64), "right")
    counts = np.bincount(idx, minlength=64)
    p = stats.chisquare(counts, probs * n).pvalue
    assert p > ALPHA


@pytest.mark.statistical
def test_uniform_integers_negative_control_modulo_bias() -> None:
    """Naive 'word mod high' (no rejection) is biased for high = 3 * 2**61; the test sees it."""
    high = 3 * 2**61
    n = 64_000
    naive = (seeded(3).words(n) % np.uint64(high)).astype(np.float64)
    good = uniform_integers(high, size=n, source=seeded(3)).astype(np.float64)
    thirds = np.array([2**61, 2 * 2**61], dtype=np.float64)
    for sample, should_pass in ((good, True), (naive, False)):
        counts = np.bincount(np.searchsorted(thirds, sample, "right"), minlength=3)
        p = stats.chisquare(counts).pvalue
        assert bool(p > ALPHA) == should_pass


def test_uniform_integers_shapes_and_edge_cases() -> None:
    assert isinstance(uniform_integers(10, source=seeded(0)), int)
    assert uniform_integers(5, size=(2, 3), source=seeded(0)).shape == (2, 3)
    assert uniform_integers(5, size=0, source=seeded(0)).shape == (0,)
    assert np.all(uniform_integers(1, size=100, source=seeded(0)) == 0)
    assert uniform_integers(np.int64(4), size=3, source=seeded(0)).dtype == np.int64


@pytest.mark.parametrize("high", [0, -3, 2**63 + 1, 1.5, "7", True, None])
def test_uniform_integers_rejects_bad_high(high: Any) -> None:
    with pytest.raises(InvalidParameterError) as info:
        uniform_integers(high, size=3)
    assert info.value.name == "high"


@pytest.mark.parametrize("size", [-1, 1.5, (2, -1), "3", (2.0,), True])
def test_samplers_reject_bad_size(size: Any) -> None:
    calls: list[Callable[[], object]] = [
        lambda: uniform_integers(3, size),
        lambda: bernoulli("1/2", size),
        lambda: bernoulli_exp(1, size),
        lambda: discrete_laplace(1, size),
        lambda: discrete_gaussian(1, size),
    ]
    for call in calls:
        with pytest.raises(InvalidParameterError) as info:
            call()
        assert info.value.name == "size"


def test_samplers_reject_seeds_as_source() -> None:
    with pytest.raises(InvalidParameterError, match="InsecureSeededSource"):
        discrete_laplace(1, 3, source=7)  # type: ignore[call-overload]


# ---------------------------------------------------------------------------------------------
# Bernoulli(p)


@pytest.mark.statistical
@pytest.mark.parametrize(
    ("p", "value"), [("1/3", 1 / 3), (Fraction(2, 7), 2 / 7), (0.1, 0.1), ("999/1000", 0.999)]
)
def test_bernoulli_binomial(p: Any, value: float) -> None:
    n = 200_000
    x = bernoulli(p, size=n, source=seeded(4))
    assert x.dtype == np.bool_
    assert binomial_p(int(x.sum()), n, value) > ALPHA


@pytest.mark.statistical
def test_bernoulli_negative_control() -> None:
    n = 200_000
    x = bernoulli("1/3", size=n, source=seeded(4))
    assert binomial_p(int(x.sum()), n, 0.34) < ALPHA  # 2% off: about 6 standard deviations


def test_bernoulli_edges_and_types() -> None:
    assert bernoulli(0, size=100, source=seeded(0)).sum() == 0
    assert bernoulli(1, size=100, source=seeded(0)).all()
    assert bernoulli("1/1", source=seeded(0)) is True
    assert isinstance(bernoulli("1/2", source=seeded(0)), bool)
    assert bernoulli(0.5, size=(4, 5), source=seeded(0)).shape == (4, 5)


def test_bernoulli_refines_on_a_tied_word() -> None:
    prefix = (1 << 64) // 3
    # first word ties with floor(p 2**64); the second word decides
    assert bernoulli("1/3", size=1, source=ScriptedSource([prefix, 0]))[0]
    assert not bernoulli("1/3", size=1, source=ScriptedSource([prefix, 2**64 - 1]))[0]
    src = ScriptedSource([prefix, prefix, prefix, 0])
    assert bernoulli("1/3", size=1, source=src)[0]
    assert src.drawn == 4
    # a dyadic p ties exactly and needs no refinement: u >= p
    src = ScriptedSource([2**63])
    assert not bernoulli("1/2", size=1, source=src)[0]
    assert src.drawn == 1


@pytest.mark.parametrize("p", [-0.1, 1.5, "4/3", math.nan, math.inf, "abc", None, True])
def test_bernoulli_rejects_bad_p(p: Any) -> None:
    with pytest.raises(InvalidParameterError) as info:
        bernoulli(p, size=2)
    assert info.value.name == "p"


# ---------------------------------------------------------------------------------------------
# Bernoulli(exp(-gamma))


@pytest.mark.statistical
@pytest.mark.parametrize("gamma", [0, "1/3", 1, 5.5, Fraction(1, 10**6)])
def test_bernoulli_exp_binomial(gamma: Any) -> None:
    n = 200_000
    x = bernoulli_exp(gamma, size=n, source=seeded(5))
    value = math.exp(-float(Fraction(gamma)))
    assert binomial_p(int(x.sum()), n, value) > ALPHA
    if 0 < value < 1:
        # negative control: exp(-1.05 gamma) (gamma >= 1/3 gives >= 7 sd) or, for tiny gamma,
        # a probability 1e-3 lower, is rejected
        wrong = math.exp(-1.05 * float(Fraction(gamma))) if value < 0.9 else value - 1e-3
        assert binomial_p(int(x.sum()), n, wrong) < ALPHA


def test_bernoulli_exp_extremes() -> None:
    assert bernoulli_exp(0, size=1000, source=seeded(6)).all()
    # P(any True) = 1e5 * exp(-40) = 4e-13
    assert not bernoulli_exp(40, size=100_000, source=seeded(6)).any()
    assert not bernoulli_exp(10**9, size=1000, source=seeded(6)).any()
    assert not bernoulli_exp(Fraction(10**400), size=10, source=seeded(6)).any()
    assert isinstance(bernoulli_exp("1/2", source=seeded(6)), bool)


@pytest.mark.statistical
def test_bernoulli_exp_array_of_gammas() -> None:
    gammas = np.array([0.0, 0.1, 1.0, 2.5, 1000.0])
    n = 100_000
    x = bernoulli_exp(gammas, size=(n, 5), source=seeded(7))
    assert x.shape == (n, 5)
    for j, g in enumerate(gammas.tolist()):
        assert binomial_p(int(x[:, j].sum()), n, math.exp(-g)) > ALPHA
    # negative control: column 2 (gamma = 1) against exp(-1.05)
    assert binomial_p(int(x[:, 2].sum()), n, math.exp(-1.05)) < ALPHA
    # shape rules: size None keeps gamma's shape; lists are arrays; broadcasting
    assert bernoulli_exp(gammas, source=seeded(7)).shape == (5,)
    assert bernoulli_exp([0.5, 1.0], source=seeded(7)).shape == (2,)
    assert bernoulli_exp(np.array([[1.0], [2.0]]), size=(2, 3), source=seeded(7)).shape == (2, 3)
    assert bernoulli_exp(np.array([1, 2], dtype=np.int64), source=seeded(7)).shape == (2,)
    with pytest.raises(InvalidParameterError, match="must broadcast") as info:
        bernoulli_exp(gammas, size=(3, 4), source=seeded(7))
    assert info.value.name == "size"


def test_bernoulli_exp_fast_path_matches_mpmath_word_by_word() -> None:
    words = seeded(8).words(2000)
    gammas = np.linspace(0.0, 8.0, 2000)
    got = bernoulli_exp(gammas, source=ScriptedSource(words.tolist()))
    for w, g, out in zip(words.tolist(), gammas.tolist(), got.tolist(), strict=True):
        assert out == (mpmath.mpf(w) + mpmath.mpf(1) / 2 < mpmath.exp(-mpmath.mpf(g)) * 2**64)


@pytest.mark.parametrize(
    "gamma",
    [
        -1,
        -0.5,
        math.nan,
        math.inf,
        "x",
        None,
        np.array([1.0, -1.0]),
        np.array([np.nan]),
        np.array([np.inf]),
        np.array(["a"]),
        np.array([True]),
    ],
)
def test_bernoulli_exp_rejects_bad_gamma(gamma: Any) -> None:
    with pytest.raises(InvalidParameterError) as info:
        bernoulli_exp(gamma, size=2)
    assert info.value.name == "gamma"


@pytest.mark.statistical
def test_bernoulli_exp_slow_path_keeps_distribution(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_exact, "_BAND", 2.0**-4)
    counter = SlowPathCounter(monkeypatch)
    n = 40_000
    x = bernoulli_exp("1/3", size=n, source=seeded(9))
    assert counter.calls > 2000  # about 2 * 2**-4 * e^(-1/3) * n = 3600 expected
    assert binomial_p(int(x.sum()), n, math.exp(-1 / 3)) > ALPHA
    assert binomial_p(int(x.sum()), n, math.exp(-1.05 / 3)) < ALPHA


# ---------------------------------------------------------------------------------------------
# discrete Laplace


def dlap_p(samples: np.ndarray, scale: float) -> float:
    """Goodness of fit to DLap(scale): pmf bins for moderate scales, CDF bins for huge ones."""
    if scale <= 2000:
        half = int(60 * scale) + 20
        return pmf_chi_square_p(samples, lambda s: dlap_pmf(scale, s), half)
    qs = stats.laplace.ppf(np.linspace(0.01, 0.99, 99), scale=scale)
    return cdf_chi_square_p(samples, lambda k: dlap_cdf(scale, k), np.floor(qs).tolist())


@pytest.mark.statistical
@pytest.mark.parametrize("scale", ["1/3", 2.5, 10, 1000, 4097, "40000/3", 2**30])
def test_discrete_laplace_goodness_of_fit(scale: Any) -> None:
    t = float(Fraction(scale))
    x = discrete_laplace(scale, size=200_000, source=seeded(10))
    assert x.dtype == np.int64
    assert dlap_p(x, t) > ALPHA
    # negative control: the same test against DLap(1.05 t) rejects these samples
    assert dlap_p(x, 1.05 * t) < ALPHA


@pytest.mark.statistical
def test_discrete_laplace_negative_control_rounded_continuous() -> None:
    """Rounded continuous Laplace(1) is not DLap(1): P(0) is 0.393 instead of 0.462."""
    rounded = np.rint(np.random.default_rng(11).laplace(0.0, 1.0, 200_000)).astype(np.int64)
    assert dlap_p(rounded, 1.0) < ALPHA
    assert dlap_p(discrete_laplace(1, size=200_000, source=seeded(11)), 1.0) > ALPHA


@pytest.mark.statistical
@pytest.mark.parametrize("scale", [2.5, 10.0])
def test_discrete_laplace_moments(scale: float) -> None:
    n = 400_000
    x = discrete_laplace(scale, size=n, source=seeded(12)).astype(np.float64)
    p = math.exp(-1 / scale)
    variance = 2 * p / (1 - p) ** 2  # CKS20 / geometric: Var = 2p / (1 - p)^2
    second, fourth = dlap_moments(scale)
    assert second == pytest.approx(variance, rel=1e-9)
    # mean: 5 standard errors; sample second moment: 5 standard errors sqrt((m4 - m2^2) / n)
    assert abs(x.mean()) < 5 * math.sqrt(variance / n)
    se = math.sqrt((fourth - second**2) / n)
    assert abs(np.mean(x**2) - variance) < 5 * se
    # negative control: the variance of DLap(1.05 scale) is outside the same tolerance
    q = math.exp(-1 / (1.05 * scale))
    assert abs(np.mean(x**2) - 2 * q / (1 - q) ** 2) > 5 * se


def test_discrete_laplace_tiny_scale_and_types() -> None:
    # P(X != 0) = 2 p / (1 + p) with p = exp(-2**50): zero in any feasible run
    assert not discrete_laplace(2.0**-50, size=10_000, source=seeded(13)).any()
    assert isinstance(discrete_laplace("1/3", source=seeded(13)), int)
    assert discrete_laplace(3, size=(3, 4), source=seeded(13)).shape == (3, 4)
    assert discrete_laplace(3, size=0, source=seeded(13)).shape == (0,)


def exact_inversion(word: int, a: Fraction, *, two_sided: bool) -> int | None:
    """M = max{m : u < T(m)} for every u in [word, word + 1) / 2**64 (None if ambiguous).

    T(0) = 1, T(m) = c exp(-m a) with c = 2 / (1 + exp(-a)) (two-sided) or 1, at PREC bits.
    """
    with mpmath.workprec(PREC):
        p = mpmath.exp(-mpmath.mpf(a.numerator) / a.denominator)
        c = 2 / (1 + p) if two_sided else mpmath.mpf(1)
        lo_u = mpmath.mpf(word) / 2**64
        hi_u = mpmath.mpf(word + 1) / 2**64

        def tail(m: int) -> mpmath.mpf:
            return mpmath.mpf(1) if m == 0 else c * p**m

        m = max(0, int(mpmath.ceil(mpmath.log(c / hi_u) / -mpmath.log(p))) - 1)
        while m > 0 and not hi_u <= tail(m):
            m -= 1
        while hi_u <= tail(m + 1):
            m += 1
        if not (hi_u <= tail(m) and lo_u >= tail(m + 1)):
            return None
        return m


@pytest.mark.parametrize(
    ("a", "two_sided"),
    [
        (Fraction(3), True),  # DLap(1/3)
        (Fraction(1, 10), True),  # DLap(10)
        (Fraction(2, 5), True),  # DLap(5/2)
        (Fraction(1, 2**12), True),  # the largest scale that uses inversion
        (Fraction(2**50), True),  # DLap(2**-50)
        (Fraction(1), False),  # one-sided geometric blocks of the large-scale path
        (Fraction(5001, 5000), False),
    ],
)
def test_inversion_matches_exact_inversion(a: Fraction, two_sided: bool) -> None:
    words = seeded(14).words(1000)
    words[:4] = [0, 1, 2**64 - 1, 2**63]  # extremes
    tail = _samplers._Tail(a, two_sided=two_sided)
    got = _samplers._invert(tail, words.size, ScriptedSource(words.tolist()))
    checked = 0
    for w, m in zip(words.tolist(), got.tolist(), strict=True):
        expected = exact_inversion(w, a, two_sided=two_sided)
        if expected is not None:
            assert m == expected, (w, m, expected)
            checked += 1
    assert checked >= 990


def test_inversion_slow_search_from_bad_candidates() -> None:
    """The exact search corrects a wrong float guess in both directions."""
    a = Fraction(3, 7)
    tail = _samplers._Tail(a, two_sided=True)
    for w in seeded(15).words(40).tolist():
        expected = exact_inversion(w, a, two_sided=True)
        if expected is None:
            continue
        for candidate in (0, expected + 3, max(expected - 2, 0)):
            assert _samplers._invert_slow(w, candidate, tail, seeded(0)) == expected


@pytest.mark.statistical
def test_truncated_geometric_block() -> None:
    """R on {0..6} with P(R = r) proportional to exp(-r / 5) (the fine part at large scales)."""
    n = 100_000
    r = _samplers._truncated_geometric(7, Fraction(1, 5), n, seeded(29))
    weights = np.exp(-np.arange(7) / 5)
    counts = np.bincount(r, minlength=7)
    assert counts.size == 7
    assert stats.chisquare(counts, weights / weights.sum() * n).pvalue > ALPHA
    flat = np.full(7, n / 7)  # negative control: not uniform
    assert stats.chisquare(counts, flat).pvalue < ALPHA


@pytest.mark.statistical
def test_discrete_laplace_matches_reference_sampler() -> None:
    scale = Fraction(7, 3)
    stream = WordStream(seeded(16))
    ref = np.array([discrete_laplace_ref(scale, stream) for _ in range(30_000)])
    fast = discrete_laplace(scale, size=200_000, source=seeded(17))
    assert two_sample_p(fast, ref) > ALPHA
    assert dlap_p(ref, 7 / 3) > ALPHA
    # negative control: the reference against the fast sampler at 1.1 times the scale
    wrong = discrete_laplace(scale * Fraction(11, 10), size=200_000, source=seeded(18))
    assert two_sample_p(wrong, ref) < ALPHA


@pytest.mark.statistical
@pytest.mark.parametrize(("scale", "n"), [("5/2", 30_000), (5000, 20_000)])
def test_discrete_laplace_slow_path_keeps_distribution(
    monkeypatch: pytest.MonkeyPatch, scale: str | int, n: int
) -> None:
    """With the fast-path band widened to 2**-5, a large share of draws take the exact path."""
    monkeypatch.setattr(_exact, "_BAND", 2.0**-5)
    counter = SlowPathCounter(monkeypatch)
    x = discrete_laplace(scale, size=n, source=seeded(19))
    assert counter.calls > n // 10
    t = float(Fraction(scale))
    assert dlap_p(x, t) > ALPHA
    assert dlap_p(x, t * 1.1) < ALPHA


@pytest.mark.parametrize(
    "scale", [0, -1, math.nan, math.inf, -math.inf, "abc", None, 2.0**41, True, "1/0"]
)
def test_discrete_laplace_rejects_bad_scale(scale: Any) -> None:
    with pytest.raises(InvalidParameterError) as info:
        discrete_laplace(scale, size=2)
    assert info.value.name == "scale"


# ---------------------------------------------------------------------------------------------
# discrete Gaussian


def dgauss_p(samples: np.ndarray, sigma: float) -> float:
    """Goodness of fit to N_Z(0, sigma^2): pmf bins, or normal-CDF bins for sigma >= 10**4.

    For sigma >= 10**4 the discrete Gaussian CDF at k + 1/2 equals Phi((k + 1/2) / sigma) up
    to an error below 1e-12 (Poisson summation: the correction terms are exp(-2 pi^2 sigma^2)
    and the midpoint rule error is O(sigma^-2)), far below the test's resolution.
    """
    if sigma < 1e4:
        return pmf_chi_square_p(samples, lambda s: dgauss_pmf(sigma, s), int(12 * sigma) + 12)
    qs = np.floor(stats.norm.ppf(np.linspace(0.01, 0.99, 99), scale=sigma))
    return cdf_chi_square_p(samples, lambda k: stats.norm.cdf((k + 0.5) / sigma), qs.tolist())


@pytest.mark.statistical
@pytest.mark.parametrize("sigma", ["1/3", 2.5, 10, 1000, 2**30])
def test_discrete_gaussian_goodness_of_fit(sigma: Any) -> None:
    s = float(Fraction(sigma))
    x = discrete_gaussian(sigma, size=200_000, source=seeded(20))
    assert x.dtype == np.int64
    assert dgauss_p(x, s) > ALPHA
    assert dgauss_p(x, 1.05 * s) < ALPHA  # negative control


@pytest.mark.statistical
def test_discrete_gaussian_negative_control_rounded_continuous() -> None:
    """Rounded N(0, 1/9) puts 0.866 on 0; the discrete Gaussian puts 0.978 there."""
    rounded = np.rint(np.random.default_rng(21).normal(0.0, 1 / 3, 200_000)).astype(np.int64)
    assert dgauss_p(rounded, 1 / 3) < ALPHA
    assert dgauss_p(discrete_gaussian("1/3", size=200_000, source=seeded(21)), 1 / 3) > ALPHA


@pytest.mark.statistical
def test_discrete_gaussian_moments() -> None:
    sigma = 10.0
    n = 400_000
    x = discrete_gaussian(10, size=n, source=seeded(22)).astype(np.float64)
    second, fourth = dgauss_moments(sigma)
    # CKS20 Corollary 9: the variance is below sigma^2 (visibly so only for small sigma)
    assert second <= sigma**2 * (1 + 1e-12)
    assert dgauss_moments(0.5)[0] < 0.25 * 0.99
    assert abs(x.mean()) < 5 * math.sqrt(second / n)
    se = math.sqrt((fourth - second**2) / n)
    assert abs(np.mean(x**2) - second) < 5 * se
    wrong, _ = dgauss_moments(1.05 * sigma)  # negative control
    assert abs(np.mean(x**2) - wrong) > 5 * se


@pytest.mark.statistical
def test_discrete_gaussian_matches_reference_sampler() -> None:
    sigma = Fraction(3, 2)
    stream = WordStream(seeded(23))
    ref = np.array([discrete_gaussian_ref(sigma, stream) for _ in range(30_000)])
    fast = discrete_gaussian(sigma, size=200_000, source=seeded(24))
    assert two_sample_p(fast, ref) > ALPHA
    assert dgauss_p(ref, 1.5) > ALPHA
    wrong = discrete_gaussian(sigma * Fraction(11, 10), size=200_000, source=seeded(25))
    assert two_sample_p(wrong, ref) < ALPHA  # negative control


@pytest.mark.statistical
def test_discrete_gaussian_slow_path_keeps_distribution(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_exact, "_BAND", 2.0**-5)
    counter = SlowPathCounter(monkeypatch)
    x = discrete_gaussian("5/2", size=30_000, source=seeded(26))
    assert counter.calls > 3000
    assert dgauss_p(x, 2.5) > ALPHA
    assert dgauss_p(x, 2.5 * 1.1) < ALPHA


@pytest.mark.statistical
def test_discrete_gaussian_tiny_sigma() -> None:
    # sigma = 2**-10: P(X != 0) ~ 2 exp(-2**19): always 0, and the fast path stays usable
    assert not discrete_gaussian(2.0**-10, size=10_000, source=seeded(27)).any()
    # sigma = 1/5: P(X = +-1) = 2 exp(-12.5) / Z ~ 7.5e-6
    x = discrete_gaussian("1/5", size=200_000, source=seeded(27))
    pmf: Callable[[np.ndarray], np.ndarray] = lambda s: dgauss_pmf(0.2, s)  # noqa: E731
    expected_nonzero = 1 - float(pmf(np.array([0]))[0])
    assert stats.poisson.sf(int((x != 0).sum()) - 1, expected_nonzero * x.size) > ALPHA


def test_discrete_gaussian_types() -> None:
    assert isinstance(discrete_gaussian("3/2", source=seeded(28)), int)
    assert discrete_gaussian(3, size=(2, 2), source=seeded(28)).shape == (2, 2)
    assert discrete_gaussian(3, size=0, source=seeded(28)).shape == (0,)


@pytest.mark.parametrize(
    "sigma", [0, -2, math.nan, math.inf, "sigma", None, 2.0**41, 2.0**-41, False]
)
def test_discrete_gaussian_rejects_bad_sigma(sigma: Any) -> None:
    with pytest.raises(InvalidParameterError) as info:
        discrete_gaussian(sigma, size=2)
    assert info.value.name == "sigma"


def test_chi_square_helper_sanity() -> None:
    """The helper itself: exact bins give a p-value near 1 for perfectly matching counts."""
    edges = np.array([-np.inf, 0.0, 1.0, np.inf])
    probs = np.array([0.25, 0.5, 0.25])
    samples = np.array([-1] * 250 + [0] * 500 + [1] * 250)
    assert chi_square_p(samples, edges, probs) == pytest.approx(1.0)


@pytest.mark.statistical
@pytest.mark.parametrize("p", ["1/3", "2/7", "255/256", "1/512"])
def test_bernoulli_nibble_path_is_exact(p: str) -> None:
    """Large batches use 4 bits per draw; the frequency still matches p (binomial test).

    Negative control: the same test at min(1.25 p, 1) must reject.
    """
    from scipy.stats import binomtest

    n = 400_000
    prob = float(Fraction(p))
    hits = int(bernoulli(p, n, source=InsecureSeededSource(91)).sum())
    assert binomtest(hits, n, prob).pvalue > 1e-4
    assert binomtest(hits, n, min(prob * 1.25, 1.0)).pvalue < 1e-4


@pytest.mark.statistical
def test_bernoulli_with_an_array_of_probabilities() -> None:
    """One probability per draw: each column's frequency matches its p (binomial tests)."""
    from scipy.stats import binomtest

    probs = np.array([0.0, 0.1, 0.5, 0.875, 1.0, 2.0**-20])
    reps = 100_000
    draws = bernoulli(np.tile(probs, (reps, 1)), source=InsecureSeededSource(92))
    assert draws.shape == (reps, probs.size)
    assert not draws[:, 0].any() and draws[:, 4].all()
    for j in (1, 2, 3):
        assert binomtest(int(draws[:, j].sum()), reps, probs[j]).pvalue > 1e-4
    # Negative control: column 1 (p = 0.1) is far from 0.11.
    assert binomtest(int(draws[:, 1].sum()), reps, 0.11).pvalue < 1e-4
    with pytest.raises(InvalidParameterError, match="p"):
        bernoulli(np.array([0.5, 1.5]), source=InsecureSeededSource(0))


@pytest.mark.statistical
def test_bernoulli_nibble_path_ties_are_exact() -> None:
    """p = 3/1024 < 1/256: no nibble decides True alone; every True comes from two nested tie
    paths (nibble 0, nibble 0, then Bernoulli(3/4)). Negative control: a rate of 1/256 (the
    second tie path always saying True) must be rejected."""
    from scipy.stats import binomtest

    draws = bernoulli(Fraction(3, 1024), 400_000, source=InsecureSeededSource(11))
    ones = int(draws.sum())
    assert binomtest(ones, draws.size, 3 / 1024).pvalue > 1e-4
    assert binomtest(ones, draws.size, 1 / 256).pvalue < 1e-6
    assert not bernoulli(0, 500, source=InsecureSeededSource(0)).any()
    assert bernoulli(1, 500, source=InsecureSeededSource(0)).all()
