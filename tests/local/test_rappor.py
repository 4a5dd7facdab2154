"""RAPPOR (Erlingsson, Pihur and Korolova, CCS 2014): privacy, memoisation and decoding."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from dpcurator.accounting import PureDPEvent
from dpcurator.errors import InvalidParameterError
from dpcurator.local._rappor import Rappor, RapporReports, RapporSummary
from dpcurator.noise import InsecureSeededSource

CONFIGS = [
    (Fraction(1, 2), Fraction(1, 2), Fraction(3, 4)),  # the lecture's / paper's example
    (Fraction(1, 4), Fraction(1, 4), Fraction(3, 4)),
    (Fraction(3, 4), Fraction(0), Fraction(1)),
    (Fraction(1, 3), Fraction(1, 5), Fraction(2, 3)),
]


# --------------------------------------------------------------------------------------------
# privacy: closed forms and exact enumeration


def test_lecture_configuration_epsilons() -> None:
    """h=2, f=1/2, p=1/2, q=3/4: 4.39 permanent (4 ln 3) and 1.07 per report (2 ln(77/45))."""
    rappor = Rappor(num_bits=16, num_hashes=2, num_cohorts=4, f=0.5, p=0.5, q=0.75)
    assert round(rappor.permanent_epsilon, 2) == 4.39
    assert round(rappor.report_epsilon, 2) == 1.07
    assert rappor.permanent_epsilon == pytest.approx(4 * math.log(3), rel=1e-14)
    # q* = 11/16, p* = 9/16: ratio q*(1-p*)/(p*(1-q*)) = 77/45
    assert rappor.q_star_exact == Fraction(11, 16)
    assert rappor.p_star_exact == Fraction(9, 16)
    assert rappor.report_epsilon == pytest.approx(2 * math.log(77 / 45), rel=1e-14)
    assert rappor.event == PureDPEvent(rappor.report_epsilon)
    assert rappor.permanent_event == PureDPEvent(rappor.permanent_epsilon)


def _prr_law(bloom: tuple[int, ...], f: Fraction) -> dict[tuple[int, ...], Fraction]:
    """P[B' | B] by the definition: 1 w.p. f/2, 0 w.p. f/2, B_i w.p. 1 - f."""
    out = {}
    for prr in itertools.product((0, 1), repeat=len(bloom)):
        prob = Fraction(1)
        for b, b2 in zip(bloom, prr, strict=True):
            one = f / 2 + (1 - f) * b
            prob *= one if b2 else 1 - one
        out[prr] = prob
    return out


def _report_law(
    bloom: tuple[int, ...], f: Fraction, p: Fraction, q: Fraction, reports: int = 1
) -> dict[tuple[tuple[int, ...], ...], Fraction]:
    """P[S_1..S_r | B]: sum over the PRR of the product of independent IRRs (exact)."""
    prr_law = _prr_law(bloom, f)
    k = len(bloom)
    outputs = list(itertools.product((0, 1), repeat=k))
    out: dict[tuple[tuple[int, ...], ...], Fraction] = {}
    for seq in itertools.product(outputs, repeat=reports):
        total = Fraction(0)
        for prr, weight in prr_law.items():
            prob = weight
            for s in seq:
                for b2, bit in zip(prr, s, strict=True):
                    one = q if b2 else p
                    prob *= one if bit else 1 - one
            total += prob
        out[seq] = total
    return out


def _blooms(k: int, h: int) -> list[tuple[int, ...]]:
    """Every Bloom filter a value can have: 1..h bits set (fewer with hash collisions)."""
    return [b for b in itertools.product((0, 1), repeat=k) if 1 <= sum(b) <= h]


def _max_log_ratio(laws: list[dict[object, Fraction]]) -> float:
    worst = Fraction(1)
    for law_a, law_b in itertools.permutations(laws, 2):
        for y, pa in law_a.items():
            worst = max(worst, pa / law_b[y])
    return math.log(worst)


@pytest.mark.parametrize(("f", "p", "q"), CONFIGS)
def test_exact_report_ratio_is_report_epsilon(f: Fraction, p: Fraction, q: Fraction) -> None:
    """k=4 bits, h=2: enumerate all 16 reports for every Bloom pattern; the worst likelihood
    ratio of one report (PRR then IRR, summed exactly) is exactly e^report_epsilon."""
    rappor = Rappor(num_bits=4, num_hashes=2, num_cohorts=1, f=f, p=p, q=q)
    laws = [_report_law(b, f, p, q) for b in _blooms(4, 2)]
    for law in laws:
        assert sum(law.values()) == 1
    worst = _max_log_ratio(laws)  # type: ignore[arg-type]
    assert worst <= rappor.report_epsilon + 1e-12
    assert worst == pytest.approx(rappor.report_epsilon, rel=1e-12)  # tight: disjoint patterns


@pytest.mark.parametrize(("f", "p", "q"), CONFIGS[:2])
def test_exact_permanent_bound_over_repeated_reports(f: Fraction, p: Fraction, q: Fraction) -> None:
    """All reports about one value are post-processing of the PRR: the exact ratio of 1, 2 and
    3 reports grows with their number but never exceeds e^permanent_epsilon, and the PRR
    itself attains it (k=3 bits, h=1: two disjoint one-bit patterns, 8^3 outputs)."""
    rappor = Rappor(num_bits=3, num_hashes=1, num_cohorts=1, f=f, p=p, q=q)
    patterns = _blooms(3, 1)
    previous = 0.0
    for reports in (1, 2, 3):
        laws = [_report_law(b, f, p, q, reports) for b in patterns]
        worst = _max_log_ratio(laws)  # type: ignore[arg-type]
        assert worst <= rappor.permanent_epsilon + 1e-12
        assert worst <= reports * rappor.report_epsilon + 1e-12
        assert worst > previous
        previous = worst
    prr_laws = [_prr_law(b, f) for b in patterns]
    assert _max_log_ratio(prr_laws) == pytest.approx(rappor.permanent_epsilon, rel=1e-12)  # type: ignore[arg-type]


def test_longitudinal_event() -> None:
    rappor = Rappor(num_hashes=2, f=0.5, p=0.5, q=0.75)
    assert rappor.longitudinal_event(1).epsilon == pytest.approx(rappor.report_epsilon)
    assert rappor.longitudinal_event(3).epsilon == pytest.approx(3 * rappor.report_epsilon)
    assert rappor.longitudinal_event(100).epsilon == pytest.approx(rappor.permanent_epsilon)
    assert rappor.longitudinal_event(100, 3).epsilon == pytest.approx(3 * rappor.permanent_epsilon)
    with pytest.raises(InvalidParameterError) as err:
        rappor.longitudinal_event(2, 3)
    assert err.value.name == "num_values"


# --------------------------------------------------------------------------------------------
# the client's output law, one-shot and memoised


def _histogram(reports: RapporReports) -> np.ndarray:
    bits = reports.unpacked().astype(np.int64)
    codes = bits @ (1 << np.arange(bits.shape[1]))
    return np.bincount(codes, minlength=2 ** bits.shape[1])


def _exact_probabilities(rappor: Rappor, bloom: np.ndarray) -> np.ndarray:
    law = _report_law(tuple(int(b) for b in bloom), rappor.f_exact, rappor.p_exact, rappor.q_exact)
    probs = np.zeros(2**bloom.size)
    for (s,), prob in law.items():
        probs[sum(bit << i for i, bit in enumerate(s))] = float(prob)
    return probs


@pytest.mark.statistical
@pytest.mark.parametrize("memoised", [False, True])
def test_report_distribution_matches_exact_law(memoised: bool) -> None:
    """Chi-square goodness of fit of 40 000 reports of one value (16 cells, df = 15) against
    the exact law, for one-shot devices (PRR and IRR drawn together) and for memoised devices
    (one report each); the law of another Bloom pattern (negative control) is rejected."""
    rappor = Rappor(num_bits=4, num_hashes=2, num_cohorts=1, f=0.5, p=0.25, q=0.75)
    n = 40_000
    devices = np.arange(n) if memoised else None
    reports = rappor.privatize(["v"] * n, devices=devices, source=InsecureSeededSource(11))
    observed = _histogram(reports)
    bloom = rappor.bloom_filters(["v"], [0])[0]
    probs = _exact_probabilities(rappor, bloom)
    critical = stats.chi2.ppf(1 - 1e-3, df=15)
    assert stats.chisquare(observed, n * probs).statistic < critical
    other = np.roll(bloom, 1) if not np.array_equal(np.roll(bloom, 1), bloom) else ~bloom
    wrong = _exact_probabilities(rappor, other.astype(bool))
    assert stats.chisquare(observed, n * wrong).statistic > critical  # negative control


def test_permanent_response_is_memoised_per_device_and_value() -> None:
    """With p=0, q=1 a report is the PRR itself: a device repeats it for the same value, across
    calls; other devices and other values draw their own."""
    rappor = Rappor(num_bits=64, num_hashes=2, num_cohorts=4, f=0.5, p=0.0, q=1.0)
    src = InsecureSeededSource(3)
    first = rappor.privatize(["x", "y", "x"], devices=[7, 7, 8], source=src)
    again = rappor.privatize(["y", "x", "x"], devices=[7, 7, 8], source=src)
    a, b = first.unpacked(), again.unpacked()
    assert np.array_equal(a[0], b[1])  # device 7, value x
    assert np.array_equal(a[1], b[0])  # device 7, value y
    assert np.array_equal(a[2], b[2])  # device 8, value x
    assert not np.array_equal(a[0], a[2])  # two devices, same value: independent PRRs
    assert rappor.memoised == 3
    assert first.cohorts.tolist() == [3, 3, 0]  # cohort = id mod m
    rappor.forget()
    assert rappor.memoised == 0
    fresh = rappor.privatize(["x"], devices=[7], source=src).unpacked()[0]
    assert not np.array_equal(fresh, a[0])  # a new PRR (equal w.p. 2^-32 or so)


@pytest.mark.statistical
def test_repeated_reports_average_to_the_prr_not_the_value() -> None:
    """2 000 reports of one device about one value: each bit's mean is q (PRR bit 1) or p (PRR
    bit 0), within 4.5 binomial standard errors; the one-shot rates q*, p* are rejected for
    at least one bit (negative control: averaging many reports of one device does not reveal
    the Bloom filter, only the PRR)."""
    rappor = Rappor(num_bits=32, num_hashes=2, num_cohorts=1, f=0.5, p=0.25, q=0.75)
    r = 2_000
    reports = rappor.privatize(["v"] * r, devices=np.full(r, 5), source=InsecureSeededSource(4))
    means = reports.unpacked().mean(axis=0)
    se = math.sqrt(0.25 * 0.75 / r)
    near_q = np.abs(means - 0.75) < 4.5 * se
    near_p = np.abs(means - 0.25) < 4.5 * se
    assert (near_q | near_p).all()
    bloom = rappor.bloom_filters(["v"], [0])[0]
    one_shot = np.where(bloom, rappor.q_star, rappor.p_star)
    assert (np.abs(means - one_shot) > 4.5 * se).any()


def test_bloom_filters_and_design_matrix_agree() -> None:
    rappor = Rappor(num_bits=16, num_hashes=3, num_cohorts=5, hash_seed=9)
    candidates = ["a", "b", "c", 17]
    design = rappor.design_matrix(candidates).reshape(5, 16, 4)
    for j in range(5):
        blooms = rappor.bloom_filters(candidates, j)
        assert np.array_equal(design[j].T.astype(bool), blooms)
    assert (design.sum(axis=1) >= 1).all() and (design.sum(axis=1) <= 3).all()
    other = Rappor(num_bits=16, num_hashes=3, num_cohorts=5, hash_seed=10)
    assert not np.array_equal(other.design_matrix(candidates), rappor.design_matrix(candidates))


def test_summaries_merge_and_match_direct_counts() -> None:
    rappor = Rappor(num_bits=12, num_hashes=2, num_cohorts=3)
    src = InsecureSeededSource(8)
    batch1 = rappor.privatize(["a", "b"] * 50, source=src)
    batch2 = rappor.privatize(["c"] * 31, source=src)
    merged = rappor.summarize(batch1).merge(rappor.summarize(batch2))
    direct = np.zeros((3, 12), dtype=np.int64)
    for reports in (batch1, batch2):
        bits = reports.unpacked()
        for j in range(3):
            direct[j] += bits[reports.cohorts == j].sum(axis=0)
    assert np.array_equal(merged.bit_counts, direct)
    assert merged.n == 131
    t, var = rappor.estimate_bits(merged)
    assert t.shape == var.shape == (3, 12) and (var > 0).all()


# --------------------------------------------------------------------------------------------
# decoding


NAMES = [f"surname{i:02d}" for i in range(30)]
DECOYS = [f"absent{i:02d}" for i in range(30)]


def _zipf_population(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    pmf = 1.0 / np.arange(1, len(NAMES) + 1) ** 1.3
    pmf /= pmf.sum()
    rng = np.random.default_rng(seed)  # the population, not privacy noise
    idx = rng.choice(len(NAMES), size=n, p=pmf)
    return np.asarray(NAMES)[idx], np.bincount(idx, minlength=len(NAMES))


@pytest.mark.statistical
def test_decoding_finds_the_heavy_candidates_of_a_zipf_population() -> None:
    """300 000 devices, Zipf(1.3) over 30 names, lecture parameters (k=32, h=2, m=16): every
    name with a true count above 6 standard errors is significant at alpha/M, and none of the
    30 absent decoy candidates is (Bonferroni: P[any] <= 0.05)."""
    rappor = Rappor(num_bits=32, num_hashes=2, num_cohorts=16, f=0.5, p=0.5, q=0.75)
    values, truth = _zipf_population(300_000, seed=1)
    reports = rappor.privatize(values, source=InsecureSeededSource(21))
    result = rappor.decode(reports, NAMES + DECOYS, alpha=0.05)
    se = np.nanmedian(result.estimate.std)
    heavy = truth > 6 * se
    assert heavy.sum() >= 5
    assert result.significant[: len(NAMES)][heavy].all()
    assert not result.significant[len(NAMES) :].any()
    detected = [name for name, _, _ in result.detected()]
    assert detected[:3] == NAMES[:3]  # largest first
    assert 0.7 < result.dispersion < 1.3  # the model fits: noise as predicted


@pytest.mark.statistical
def test_decoded_standard_errors_give_95_percent_coverage() -> None:
    """With the full support as candidates (no selection), 4 populations x 30 names = 120
    intervals at 95 %: the number covering the truth is above the binomial(120, 0.95)
    0.1 % quantile. Negative control: intervals from half the standard errors (68 %) fail."""
    rappor = Rappor(num_bits=32, num_hashes=2, num_cohorts=16, f=0.5, p=0.5, q=0.75)
    covered = covered_half = total = 0
    for seed in range(4):
        values, truth = _zipf_population(100_000, seed=100 + seed)
        reports = rappor.privatize(values, source=InsecureSeededSource(200 + seed))
        est = rappor.decode(reports, NAMES, select=False).estimate
        err = np.abs(est.counts - truth)
        covered += int((err <= 1.96 * est.std).sum())
        covered_half += int((err <= 1.96 * est.std / 2).sum())
        total += truth.size
    threshold = stats.binom.ppf(1e-3, total, 0.95)
    assert covered >= threshold
    assert covered_half < threshold


def test_decode_without_any_selected_candidate() -> None:
    rappor = Rappor(num_bits=16, num_hashes=2, num_cohorts=2, f=0.5, p=0.5, q=0.75)
    reports = rappor.privatize(["a"] * 20, source=InsecureSeededSource(0))
    result = rappor.decode(reports, ["zz", "yy", "a"])
    assert result.estimate.counts.shape == (3,)
    unselected = ~result.selected
    assert np.isnan(result.estimate.variances[unselected]).all()
    assert (result.estimate.counts[unselected] == 0).all()
    assert (result.p_values[unselected] == 1).all()


# --------------------------------------------------------------------------------------------
# bad parameters


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"num_bits": 0}, "num_bits"),
        ({"num_bits": 4, "num_hashes": 5}, "num_hashes"),
        ({"num_hashes": 0}, "num_hashes"),
        ({"num_cohorts": 0}, "num_cohorts"),
        ({"f": 0}, "f"),
        ({"f": 1}, "f"),
        ({"f": float("nan")}, "f"),
        ({"p": -0.1}, "p"),
        ({"q": 1.5}, "q"),
        ({"p": 0.75, "q": 0.5}, "q"),
        ({"p": 0.5, "q": 0.5}, "q"),
        ({"hash_seed": 1.5}, "hash_seed"),
    ],
)
def test_bad_parameters_name_the_argument(kwargs: dict[str, object], name: str) -> None:
    with pytest.raises(InvalidParameterError) as err:
        Rappor(**kwargs)  # type: ignore[arg-type]
    assert err.value.name == name


def test_bad_calls_name_the_argument() -> None:
    rappor = Rappor(num_bits=8, num_hashes=2, num_cohorts=2)
    src = InsecureSeededSource(0)
    cases = [
        (lambda: rappor.privatize(["a", "b"], devices=[1], source=src), "devices"),
        (lambda: rappor.privatize(["a"], devices=[-1], source=src), "devices"),
        (lambda: rappor.privatize(["a"], devices=[0.5], source=src), "devices"),
        (lambda: rappor.privatize([1.5], source=src), "values"),
        (lambda: rappor.privatize([], source=src), "values"),
        (lambda: rappor.bloom_filters(["a"], [2]), "cohorts"),
        (lambda: rappor.decode(rappor.privatize(["a"], source=src), ["a", "a"]), "candidates"),
        (lambda: rappor.decode(rappor.privatize(["a"], source=src), ["a"], alpha=0), "alpha"),
        (lambda: rappor.summarize("reports"), "reports"),  # type: ignore[arg-type]
        (
            lambda: Rappor(num_bits=9).summarize(rappor.privatize(["a"], source=src)),
            "reports",
        ),
        (
            lambda: RapporSummary(
                np.zeros((2, 8), dtype=np.int64), np.zeros(2, dtype=np.int64)
            ).merge(RapporSummary(np.zeros((1, 8), dtype=np.int64), np.zeros(1, dtype=np.int64))),
            "other",
        ),
        (
            lambda: rappor.decode(
                RapporSummary(np.zeros((2, 8), dtype=np.int64), np.zeros(2, dtype=np.int64)), ["a"]
            ),
            "reports",
        ),
    ]
    for call, name in cases:
        with pytest.raises(InvalidParameterError) as err:
            call()
        assert err.value.name == name
