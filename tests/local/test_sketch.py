"""Count-mean sketches (Apple 2017) and the public hash families they are built on."""

from __future__ import annotations

import hashlib
import itertools
import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats
from scipy.linalg import hadamard

from dpcurator.accounting import PureDPEvent
from dpcurator.errors import InvalidParameterError, UnsupportedError
from dpcurator.local._hashing import HashFunctions, fingerprint, universal_hash
from dpcurator.local._sketch import (
    CountMeanSketch,
    HadamardCountMeanSketch,
    flip_probability,
    hadamard_transform,
)
from dpcurator.noise import InsecureSeededSource

SKETCHES = [CountMeanSketch, HadamardCountMeanSketch]


# --------------------------------------------------------------------------------------------
# hash families


def test_fingerprint_types_and_determinism() -> None:
    ints = fingerprint(np.array([0, 5, -1], dtype=np.int32))
    assert ints.tolist() == [0, 5, 2**64 - 1]
    strings = fingerprint(["smith", "jones", "smith"])
    assert strings[0] == strings[2] != strings[1]
    assert fingerprint(np.array(["smith"]))[0] == strings[0]
    assert fingerprint([b"smith"])[0] == strings[0]  # UTF-8 bytes hash like the string
    mixed = fingerprint(np.array(["smith", 5], dtype=object))
    assert mixed.tolist() == [int(strings[0]), 5]
    # the digest is stable across runs and platforms (BLAKE2b, not Python's salted hash)
    digest = hashlib.blake2b(b"a", digest_size=8, person=b"dpcurator-fp").digest()
    assert int(fingerprint(["a"])[0]) == int.from_bytes(digest, "little")
    for bad in ([1.5], [True], np.array([None], dtype=object), []):
        with pytest.raises(InvalidParameterError) as err:
            fingerprint(bad)
        assert err.value.name == "values"


@pytest.mark.statistical
@pytest.mark.parametrize("g", [3, 4, 7])
def test_per_device_hash_collides_with_probability_one_over_g(g: int) -> None:
    """Over 200 000 seeds, P[h(x) = h(y)] is 1/g within 4.5 binomial standard errors, for
    close keys and for keys that differ only in their high word; each key's bucket is uniform
    (chi-square, df = g - 1). Negative control: 1/(g+1) is rejected."""
    seeds = np.arange(200_000, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15)
    trials = seeds.size
    se = math.sqrt((1 / g) * (1 - 1 / g) / trials)
    base = universal_hash(1000, seeds, g)
    for other in (1001, 1000 + 2**40):
        rate = float((universal_hash(other, seeds, g) == base).mean())
        assert abs(rate - 1 / g) < 4.5 * se
        assert abs(rate - 1 / (g + 1)) > 4.5 * se
    counts = np.bincount(base, minlength=g)
    assert stats.chisquare(counts).pvalue > 1e-4


@pytest.mark.statistical
def test_tabulation_is_three_independent_where_linear_hashing_is_not() -> None:
    """For keys 0, 1, 2 and 5 000 function draws into 8 buckets, simple tabulation gives
    P[h(1) = h(0) and h(2) = h(0)] = 1/64 within 4.5 standard errors; the linear (pairwise
    independent) family does not (negative control: its collisions are strongly dependent on
    consecutive keys, which is why the sketches use tabulation)."""
    draws, m = 5_000, 8
    target = 1 / m**2
    se = math.sqrt(target * (1 - target) / draws)
    tab = HashFunctions.from_seed(5, count=draws, num_buckets=m).hash_all([0, 1, 2])
    both = (tab[:, 1] == tab[:, 0]) & (tab[:, 2] == tab[:, 0])
    assert abs(float(both.mean()) - target) < 4.5 * se
    lin = universal_hash(np.array([[0, 1, 2]]), np.arange(draws)[:, None], m)
    both_lin = (lin[:, 1] == lin[:, 0]) & (lin[:, 2] == lin[:, 0])
    assert abs(float(both_lin.mean()) - target) > 4.5 * se


def test_hash_functions_broadcast_and_validate() -> None:
    table = HashFunctions.from_seed(1, count=4, num_buckets=10)
    keys = np.array([3, 2**40 + 3, 2**64 - 1], dtype=np.uint64)
    full = table.hash_all(keys)
    assert full.shape == (4, 3) and full.min() >= 0 and full.max() < 10
    for f in range(4):
        assert np.array_equal(table(keys, np.full(3, f)), full[f])
    assert np.array_equal(table.hash_all(keys[:1])[:, 0], full[:, 0])  # width of keys irrelevant
    with pytest.raises(InvalidParameterError) as err:
        table(keys, [4, 0, 0])
    assert err.value.name == "which"
    for kwargs, name in [
        ({"count": 0, "num_buckets": 2}, "count"),
        ({"count": 1, "num_buckets": 0}, "num_buckets"),
        ({"count": 1, "num_buckets": 2**32 + 1}, "num_buckets"),
    ]:
        with pytest.raises(InvalidParameterError) as err:
            HashFunctions.from_seed(0, **kwargs)  # type: ignore[arg-type]
        assert err.value.name == name
    with pytest.raises(InvalidParameterError) as err:
        universal_hash([1.5], 0, 4)
    assert err.value.name == "keys"
    with pytest.raises(InvalidParameterError) as err:
        universal_hash([1, 2], [1, 2, 3], 4)
    assert err.value.name == "seeds"


# --------------------------------------------------------------------------------------------
# exact local-DP ratios


def test_flip_probability_is_at_least_the_ideal_one() -> None:
    for x in (1e-6, 0.5, 1.0, 3.0, 30.0, 800.0):
        r = flip_probability(x)
        ideal = 1 / (1 + math.exp(x)) if x < 700 else 0.0
        assert Fraction(r) >= Fraction(ideal) and r.denominator <= 2**52
        assert float(r) - ideal < 1e-12 + 2**-52
    with pytest.raises(InvalidParameterError) as err:
        CountMeanSketch(epsilon=1e-300, domain_size=4, num_hashes=1, width=4)
    assert err.value.name == "epsilon"


def _cms_law(cms: CountMeanSketch, x: int) -> dict[tuple[int, tuple[int, ...]], Fraction]:
    """P[(j, v~) | x] = (1/k) prod_l (1 - r if v~_l == v_l else r), exactly."""
    r = cms.flip_probability
    out = {}
    positions = cms.hashes.hash_all([x])[:, 0]
    for j in range(cms.num_hashes):
        clean = [1 if u == positions[j] else 0 for u in range(cms.width)]
        for noisy in itertools.product((0, 1), repeat=cms.width):
            prob = Fraction(1, cms.num_hashes)
            for a, b in zip(clean, noisy, strict=True):
                prob *= 1 - r if a == b else r
            out[j, noisy] = prob
    return out


def _hcms_law(hcms: HadamardCountMeanSketch, x: int) -> dict[tuple[int, int, int], Fraction]:
    """P[(j, l, w~) | x] = (1/(k m)) (1 - r if w~ == H[h_j(x), l] else r), exactly."""
    r = hcms.flip_probability
    h_m = hadamard(hcms.width)
    positions = hcms.hashes.hash_all([x])[:, 0]
    out = {}
    for j, col, w in itertools.product(range(hcms.num_hashes), range(hcms.width), (0, 1)):
        plus = h_m[positions[j], col] == 1
        prob = Fraction(1, hcms.num_hashes * hcms.width)
        out[j, col, w] = prob * (1 - r if (w == 1) == plus else r)
    return out


def _worst_log_ratio(laws: list[dict]) -> float:  # type: ignore[type-arg]
    worst = Fraction(1)
    for law_a, law_b in itertools.permutations(laws, 2):
        for y, pa in law_a.items():
            worst = max(worst, pa / law_b[y])
    return math.log(worst)


@pytest.mark.parametrize("epsilon", [0.5, 2.0, 6.0])
def test_exact_cms_ratio(epsilon: float) -> None:
    """m = 4, k = 3, d = 6: every output (16 vectors x 3 rows) for every value; the worst
    ratio is exactly the achieved epsilon 2 ln((1-r)/r), at most the requested epsilon."""
    cms = CountMeanSketch(epsilon=epsilon, domain_size=6, num_hashes=3, width=4, hash_seed=2)
    laws = [_cms_law(cms, x) for x in range(6)]
    assert all(sum(law.values()) == 1 for law in laws)
    worst = _worst_log_ratio(laws)
    assert worst == pytest.approx(cms.achieved_epsilon, rel=1e-12)
    assert worst <= epsilon + 1e-12
    assert cms.achieved_epsilon == pytest.approx(epsilon, rel=1e-9)
    assert cms.event == PureDPEvent(cms.achieved_epsilon)


@pytest.mark.parametrize("epsilon", [0.5, 2.0, 6.0])
def test_exact_hcms_ratio(epsilon: float) -> None:
    """m = 4, k = 3, d = 6: the worst ratio over (j, l, bit) is exactly ln((1-r)/r)."""
    hcms = HadamardCountMeanSketch(
        epsilon=epsilon, domain_size=6, num_hashes=3, width=4, hash_seed=2
    )
    laws = [_hcms_law(hcms, x) for x in range(6)]
    assert all(sum(law.values()) == 1 for law in laws)
    worst = _worst_log_ratio(laws)
    assert worst == pytest.approx(hcms.achieved_epsilon, rel=1e-12)
    assert worst <= epsilon + 1e-12


@pytest.mark.statistical
def test_cms_report_distribution_matches_exact_law() -> None:
    """Chi-square fit of 48 000 CMS reports of one value over the 48 cells (j, v~), df = 47;
    the law of a value hashed elsewhere is rejected (negative control)."""
    cms = CountMeanSketch(epsilon=2.0, domain_size=6, num_hashes=3, width=4, hash_seed=2)
    n = 48_000
    reports = cms.privatize(np.zeros(n, dtype=np.int64), source=InsecureSeededSource(5))
    codes = reports.rows * 16 + (reports.vectors() > 0).astype(np.int64) @ (1 << np.arange(4))
    observed = np.bincount(codes, minlength=48)
    critical = stats.chi2.ppf(1 - 1e-3, df=47)

    def expected(x: int) -> np.ndarray:
        law = _cms_law(cms, x)
        out = np.zeros(48)
        for (j, noisy), prob in law.items():
            out[j * 16 + sum(b << i for i, b in enumerate(noisy))] = n * float(prob)
        return out

    assert stats.chisquare(observed, expected(0)).statistic < critical
    positions = cms.hashes.hash_all(np.arange(6))
    other = next(x for x in range(1, 6) if (positions[:, x] != positions[:, 0]).any())
    assert stats.chisquare(observed, expected(other)).statistic > critical


@pytest.mark.statistical
def test_hcms_report_distribution_matches_exact_law() -> None:
    """Chi-square fit of 48 000 HCMS reports over the 24 cells (j, l, bit), df = 23."""
    hcms = HadamardCountMeanSketch(epsilon=1.0, domain_size=6, num_hashes=3, width=4)
    n = 48_000
    reports = hcms.privatize(np.full(n, 2), source=InsecureSeededSource(6))
    codes = (reports.rows * 4 + reports.columns) * 2 + reports.bits.astype(np.int64)
    observed = np.bincount(codes, minlength=24)
    critical = stats.chi2.ppf(1 - 1e-3, df=23)

    def expected(x: int) -> np.ndarray:
        out = np.zeros(24)
        for (j, col, w), prob in _hcms_law(hcms, x).items():
            out[(j * 4 + col) * 2 + w] = n * float(prob)
        return out

    assert stats.chisquare(observed, expected(2)).statistic < critical
    positions = hcms.hashes.hash_all(np.arange(6))
    other = next(x for x in range(6) if (positions[:, x] != positions[:, 2]).any())
    assert stats.chisquare(observed, expected(other)).statistic > critical


# --------------------------------------------------------------------------------------------
# estimators: bias and variance


COUNTS = np.array([800, 400, 200, 100, 100, 100, 50, 50, 50, 50, 50, 50])
VALUES = np.repeat(np.arange(COUNTS.size), COUNTS)


def _chi2_variance_ok(
    sample_var: np.ndarray, predicted: np.ndarray, reps: int, alpha: float
) -> bool:
    """Two-sided chi-square test of (R-1) s^2 / sigma^2 ~ chi2(R-1) for each value."""
    statistic = (reps - 1) * sample_var / predicted
    lo = stats.chi2.ppf(alpha / 2, reps - 1)
    hi = stats.chi2.ppf(1 - alpha / 2, reps - 1)
    return bool(((statistic > lo) & (statistic < hi)).all())


@pytest.mark.statistical
@pytest.mark.parametrize("cls", SKETCHES)
def test_variance_and_bias_at_fixed_hashes(cls: type[CountMeanSketch]) -> None:
    """300 simulations of 2 000 devices (12 values, k = 4, m = 16, eps = 2) with the same hash
    functions: each value's mean is n_x + bias (z-test, 4 sigma) and its variance matches
    fixed_hash_moments (chi-square, df = 299, level 1e-3 / 12 each; the estimates are sums of
    2 000 independent reports, so close to normal). Negative controls: the mean is not n_x
    (collisions bias it at fixed hashes), and the variance of the other protocol's constants
    is rejected."""
    sketch = cls(epsilon=2.0, domain_size=12, num_hashes=4, width=16, hash_seed=1)
    reps = 300
    src = InsecureSeededSource(7)
    est = np.array([sketch.estimate(VALUES, source=src).counts for _ in range(reps)])
    bias, var = sketch.fixed_hash_moments(COUNTS)
    assert (np.abs(est.mean(axis=0) - COUNTS - bias) < 4 * np.sqrt(var / reps)).all()
    assert (np.abs(est.mean(axis=0) - COUNTS) > 4 * np.sqrt(var / reps)).any()
    sample_var = est.var(axis=0, ddof=1)
    assert _chi2_variance_ok(sample_var, var, reps, 1e-3 / 12)
    other = (CountMeanSketch if cls is HadamardCountMeanSketch else HadamardCountMeanSketch)(
        epsilon=2.0, domain_size=12, num_hashes=4, width=16, hash_seed=1
    )
    assert not _chi2_variance_ok(sample_var, other.fixed_hash_moments(COUNTS)[1], reps, 1e-3)


@pytest.mark.statistical
@pytest.mark.parametrize("cls", SKETCHES)
def test_unbiased_over_hash_draws_with_predicted_variance(cls: type[CountMeanSketch]) -> None:
    """300 simulations, each with new hash functions (hash_seed) and new noise: each value's
    mean is n_x within 4 standard errors of the mean, using variance(n, counts); and the sample
    variance matches it within 4.5 delta-method standard errors (the collision term makes the
    estimates far from normal, so the tolerance uses the sample fourth moment:
    Var(s^2) ~ (mu_4 - sigma^4) / R). Negative control: without the m / (m - 1) factor the
    means are off."""
    reps, m = 300, 16
    src = InsecureSeededSource(8)
    est = np.array(
        [
            cls(epsilon=2.0, domain_size=12, num_hashes=4, width=m, hash_seed=1000 + s)
            .estimate(VALUES, source=src)
            .counts
            for s in range(reps)
        ]
    )
    var = cls(epsilon=2.0, domain_size=12, num_hashes=4, width=m).variance(
        int(COUNTS.sum()), COUNTS.astype(float)
    )
    mean = est.mean(axis=0)
    assert (np.abs(mean - COUNTS) < 4 * np.sqrt(var / reps)).all()
    no_factor = mean * (m - 1) / m
    assert (np.abs(no_factor - COUNTS) > 4 * np.sqrt(var / reps)).any()
    centred = est - mean
    s2 = (centred**2).sum(axis=0) / (reps - 1)
    mu4 = (centred**4).mean(axis=0)
    se_s2 = np.sqrt(np.clip(mu4 - s2**2, 0, None) / reps)
    assert (np.abs(s2 - var) < 4.5 * se_s2).all()


def test_variance_star_matches_research_note() -> None:
    """Without counts: CMS's mechanism part is (m/(m-1))^2 n e^{eps/2} / (e^{eps/2} - 1)^2
    (note D; SUE's variance), HCMS's is (m/(m-1))^2 n c'^2 with c' = (e^eps+1)/(e^eps-1)."""
    eps, n, m, k = 2.0, 10_000, 1024, 64
    alpha2 = (m / (m - 1)) ** 2
    cms = CountMeanSketch(epsilon=eps, num_hashes=k, width=m)
    e2 = math.exp(eps / 2)
    hash_part = alpha2 * n * (1 / m) * (1 - 1 / m) * (1 - 1 / k)
    assert cms.variance(n)[0] == pytest.approx(alpha2 * n * e2 / (e2 - 1) ** 2 + hash_part)
    hcms = HadamardCountMeanSketch(epsilon=eps, num_hashes=k, width=m)
    c = (math.exp(eps) + 1) / (math.exp(eps) - 1)
    assert hcms.variance(n)[0] == pytest.approx(alpha2 * n * c * c, rel=1e-5)
    with pytest.raises(InvalidParameterError) as err:
        cms.variance(0)
    assert err.value.name == "n"


@pytest.mark.statistical
def test_aggregate_intervals_cover_on_a_large_width() -> None:
    """HCMS with m = 1024 >> d = 50 (collisions negligible): 95 % intervals of aggregate()
    cover the true counts of a skewed population for 3 populations x 50 values at least at
    the binomial(150, 0.95) 0.1 % quantile; half-width intervals fail (negative control)."""
    d = 50
    truth = np.round(20_000 / np.arange(1, d + 1)).astype(np.int64)
    values = np.repeat(np.arange(d), truth)
    covered = covered_half = 0
    for seed in range(3):
        hcms = HadamardCountMeanSketch(
            epsilon=1.0, domain_size=d, num_hashes=32, width=1024, hash_seed=seed
        )
        est = hcms.estimate(values, source=InsecureSeededSource(30 + seed))
        err = np.abs(est.counts - truth)
        covered += int((err <= 1.96 * est.std).sum())
        covered_half += int((err <= 0.98 * est.std).sum())
    threshold = stats.binom.ppf(1e-3, 3 * d, 0.95)
    assert covered >= threshold
    assert covered_half < threshold


# --------------------------------------------------------------------------------------------
# server plumbing


def test_hadamard_transform_matches_the_matrix() -> None:
    x = np.arange(24, dtype=np.float64).reshape(3, 8) - 5
    assert np.allclose(hadamard_transform(x), x @ hadamard(8))
    with pytest.raises(InvalidParameterError):
        hadamard_transform(np.ones((1, 6)))


@pytest.mark.parametrize("cls", SKETCHES)
def test_sketches_merge_and_query_hashed_strings(cls: type[CountMeanSketch]) -> None:
    sketch = cls(epsilon=3.0, num_hashes=8, width=64)
    src = InsecureSeededSource(9)
    words = ["tea"] * 3000 + ["coffee"] * 1500 + ["water"] * 500
    part1 = sketch.sketch(sketch.privatize(words[:2500], source=src))
    part2 = sketch.sketch(sketch.privatize(words[2500:], source=src))
    merged = part1.merge(part2)
    assert merged.n == 5000
    est = merged.query(["tea", "coffee", "water", "juice"])
    truth = np.array([3000, 1500, 500, 0])
    assert (np.abs(est.counts - truth) < 4.5 * est.std).all()
    with pytest.raises(UnsupportedError):
        sketch.aggregate(sketch.privatize(words[:10], source=src))
    other = cls(epsilon=3.0, num_hashes=8, width=64)
    with pytest.raises(InvalidParameterError) as err:
        part1.merge(other.sketch(other.privatize(["tea"], source=src)))
    assert err.value.name == "other"


@pytest.mark.parametrize("cls", SKETCHES)
def test_aggregate_equals_query_of_every_value(cls: type[CountMeanSketch]) -> None:
    sketch = cls(epsilon=1.0, domain_size=20, num_hashes=4, width=32)
    reports = sketch.privatize(np.arange(400) % 20, source=InsecureSeededSource(10))
    agg = sketch.aggregate(reports)
    queried = sketch.sketch(reports).query(np.arange(20))
    assert np.allclose(agg.counts, queried.counts)
    assert (agg.variances >= queried.variances - 1e-9).all()  # plus the collision term
    assert agg.n == 400


@pytest.mark.parametrize("cls", SKETCHES)
def test_bad_parameters_name_the_argument(cls: type[CountMeanSketch]) -> None:
    cases: list[tuple[dict[str, object], str]] = [
        ({"epsilon": 0.0}, "epsilon"),
        ({"epsilon": float("nan")}, "epsilon"),
        ({"epsilon": 1.0, "domain_size": 1}, "domain_size"),
        ({"epsilon": 1.0, "num_hashes": 0}, "num_hashes"),
        ({"epsilon": 1.0, "width": 1}, "width"),
        ({"epsilon": 1.0, "hash_seed": "x"}, "hash_seed"),
    ]
    if cls is HadamardCountMeanSketch:
        cases.append(({"epsilon": 1.0, "width": 24}, "width"))
    for kwargs, name in cases:
        with pytest.raises(InvalidParameterError) as err:
            cls(**kwargs)  # type: ignore[arg-type]
        assert err.value.name == name
    sketch = cls(epsilon=1.0, domain_size=5, num_hashes=2, width=8)
    src = InsecureSeededSource(0)
    with pytest.raises(InvalidParameterError) as err:
        sketch.privatize([0, 5], source=src)
    assert err.value.name == "values"
    with pytest.raises(InvalidParameterError) as err:
        sketch.sketch("reports")
    assert err.value.name == "reports"
    with pytest.raises(InvalidParameterError) as err:
        sketch.fixed_hash_moments(np.ones(4))
    assert err.value.name == "counts"
