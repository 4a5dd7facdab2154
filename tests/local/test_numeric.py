"""LDP mean estimation (src/dpcurator/local/_numeric.py): exact laws, then the estimators.

Exact checks enumerate every output of a mechanism with ``Fraction`` probabilities (research
note B.6: for a pure LDP randomiser the tightest audit is the ratio of one output's
probabilities under two inputs). Statistical checks are seeded; their tolerances come from the
sampling distributions named in each test, and each has a negative control that must fail.
"""

from __future__ import annotations

import math
from fractions import Fraction

import mpmath
import numpy as np
import pytest
from numpy.typing import NDArray
from scipy import stats

from dpcurator.accounting import PureDPEvent
from dpcurator.errors import InvalidParameterError
from dpcurator.local._numeric import (
    DuchiMean,
    MeanEstimate,
    PiecewiseMean,
    _ratio_at_most,
)
from dpcurator.noise import InsecureSeededSource, bernoulli
from tests.privacy_check import audit, value_events

mpmath.mp.dps = 60

EPSILONS = [1e-9, 1e-6, 0.01, 0.5, 1.0, math.log(3), 2.0, 4.0, 10.0, 50.0, 700.0]


def _exp(epsilon: float) -> mpmath.mpf:
    return mpmath.exp(mpmath.mpf(epsilon))


def _mp(value: Fraction) -> mpmath.mpf:
    return mpmath.mpf(value.numerator) / value.denominator


# ---- the rational ratio r <= e^eps ------------------------------------------------------------


@pytest.mark.parametrize("epsilon", EPSILONS)
def test_ratio_is_below_exp_and_epsilon_used_is_tight(epsilon: float) -> None:
    r, used = _ratio_at_most(epsilon)
    assert r > 1
    assert _mp(r) < _exp(epsilon)  # strictly inside the budget, checked in 60 digits
    assert mpmath.log(_mp(r)) <= used <= epsilon  # the event never understates ln r
    assert epsilon - used <= 1e-13 * max(epsilon, 1.0)  # and wastes almost nothing


@pytest.mark.parametrize("bad", [0.0, -1.0, 1e-12, 701.0, math.inf, math.nan])
def test_unusable_epsilons_are_refused(bad: float) -> None:
    with pytest.raises(InvalidParameterError, match="epsilon"):
        DuchiMean(bad, 0.0, 1.0)
    with pytest.raises(InvalidParameterError, match="epsilon"):
        PiecewiseMean(bad, 0.0, 1.0)


# ---- parameters and inputs --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("lower", "upper", "name"),
    [
        (1.0, 1.0, "upper"),
        (2.0, 1.0, "upper"),
        (math.nan, 1.0, "lower"),
        (0.0, math.inf, "upper"),
        (-1e308, 1e308, "upper"),
        ("0", 1.0, "lower"),
    ],
)
def test_bad_ranges_are_refused(lower: object, upper: object, name: str) -> None:
    for mech in (DuchiMean, PiecewiseMean):
        with pytest.raises(InvalidParameterError, match=f"^{name} "):
            mech(1.0, lower, upper)  # type: ignore[arg-type]


@pytest.mark.parametrize("cells", [3, 0, 2**41, 4.5])
def test_bad_grids_are_refused(cells: object) -> None:
    with pytest.raises(InvalidParameterError, match=r"^cells "):
        PiecewiseMean(1.0, 0.0, 1.0, cells=cells)  # type: ignore[arg-type]


@pytest.mark.parametrize("mech", [DuchiMean(1.0, 0.0, 10.0), PiecewiseMean(1.0, 0.0, 10.0)])
@pytest.mark.parametrize(
    ("values", "requirement"),
    [
        ([1.0, 10.5], "must lie in"),
        ([-0.1], "must lie in"),
        ([1.0, math.nan], "finite"),
        ([math.inf], "finite"),
        ([], "at least one"),
        (["a"], "real numbers"),
        ([True, False], "real numbers"),
    ],
)
def test_bad_values_are_refused_without_echoing_them(
    mech: DuchiMean | PiecewiseMean, values: list[object], requirement: str
) -> None:
    with pytest.raises(InvalidParameterError, match=requirement) as info:
        mech.privatize(values, source=InsecureSeededSource(0))
    assert info.value.name == "values"
    assert "10.5" not in str(info.value.value)  # a device's value is never in the message


@pytest.mark.parametrize("mech", [DuchiMean(1.0, 0.0, 1.0), PiecewiseMean(1.0, 0.0, 1.0)])
@pytest.mark.parametrize("reports", [[], [math.nan], ["x"], [True]])
def test_bad_reports_are_refused(mech: DuchiMean | PiecewiseMean, reports: list[object]) -> None:
    with pytest.raises(InvalidParameterError, match=r"^reports "):
        mech.estimate(reports)


def test_reports_are_flat_floats_in_range_and_integers_accepted() -> None:
    source = InsecureSeededSource(1)
    duchi = DuchiMean(1.0, 0, 10)
    values = np.array([[0, 10, 5], [3, 3, 7]])  # ints, 2-D
    reports = duchi.privatize(values, source=source)
    assert reports.shape == (6,) and reports.dtype == np.float64
    c = duchi.scale
    assert set(np.round(reports, 9)) <= {round(5 + 5 * c, 9), round(5 - 5 * c, 9)}
    pm = PiecewiseMean(1.0, 0, 10, cells=16)
    reports = pm.privatize(values, source=source)
    assert reports.shape == (6,)
    assert np.all(np.abs(reports - 5) <= 5 * pm.scale)
    assert pm.event == PureDPEvent(pm.epsilon_used) and duchi.event.epsilon <= 1.0
    assert "DuchiMean(epsilon=1" in repr(duchi)


# ---- exact laws: privacy by enumeration -------------------------------------------------------


def _inputs(lower: float, upper: float) -> list[float]:
    """Both ends, interior points, and values whose unit position is tiny (u < 2^-11)."""
    inner = [lower + (upper - lower) * k / 7 for k in range(1, 7)]
    tiny = [lower + 1e-300, lower + 3e-20 * (upper - lower), math.nextafter(upper, -math.inf)]
    return [lower, upper, *inner, *tiny]


def _max_ratio(laws: list[list[tuple[float, Fraction]]]) -> Fraction:
    """max over outputs y and inputs x, x' of P[y | x] / P[y | x']."""
    outputs = [y for y, _ in laws[0]]
    worst = Fraction(0)
    for j, y in enumerate(outputs):
        probs = [law[j][1] for law in laws]
        assert all(law[j][0] == y for law in laws)  # the outputs do not depend on the input
        assert min(probs) > 0
        worst = max(worst, max(probs) / min(probs))
    return worst


@pytest.mark.parametrize("epsilon", [0.01, 0.5, 1.0, math.log(3), 4.0, 50.0])
def test_duchi_law_is_exactly_epsilon_ldp_and_tight(epsilon: float) -> None:
    mech = DuchiMean(epsilon, -3.0, 5.0)
    laws = [mech.output_distribution(x) for x in _inputs(-3.0, 5.0)]
    for law in laws:
        assert len(law) == 2 and sum(p for _, p in law) == 1
    r, _ = _ratio_at_most(epsilon)
    worst = _max_ratio(laws)
    assert worst == r  # attained by the two ends of the range ...
    assert _mp(worst) <= _exp(epsilon)  # ... and within e^eps
    assert mpmath.log(_mp(worst)) <= mech.event.epsilon <= epsilon


@pytest.mark.parametrize("epsilon", [0.01, 1.0, 4.0])
def test_duchi_law_is_exactly_unbiased(epsilon: float) -> None:
    mech = DuchiMean(epsilon, 0.0, 1.0)
    c = mech._scale_exact()
    for x in _inputs(0.0, 1.0):
        (_, p_plus), _ = mech.output_distribution(x)
        # E[Y] on the [-1, 1] scale equals t = 2u - 1 exactly (u = x here: lower 0, upper 1).
        assert c * (2 * p_plus - 1) == 2 * Fraction(x) - 1


@pytest.mark.parametrize(("epsilon", "cells"), [(0.5, 6), (1.0, 9), (3.0, 16), (10.0, 12)])
def test_piecewise_law_is_exactly_epsilon_ldp_and_tight(epsilon: float, cells: int) -> None:
    mech = PiecewiseMean(epsilon, -1.0, 2.0, cells=cells)
    span = cells - mech.band
    inputs = _inputs(-1.0, 2.0) + [-1.0 + 3.0 * k / span for k in range(span + 1)]
    laws = [mech.output_distribution(x) for x in inputs]
    for law in laws:
        assert len(law) == cells and sum(p for _, p in law) == 1
    r, _ = _ratio_at_most(epsilon)
    worst = _max_ratio(laws)
    assert worst == r  # a cell inside the band at one end and outside it at the other
    assert _mp(worst) <= _exp(epsilon)
    assert mechanism_outputs_are_sorted(laws[0])


def mechanism_outputs_are_sorted(law: list[tuple[float, Fraction]]) -> bool:
    outputs = [y for y, _ in law]
    return outputs == sorted(outputs) and len(set(outputs)) == len(outputs)


@pytest.mark.parametrize(("epsilon", "cells"), [(0.5, 6), (2.0, 11), (6.0, 32)])
def test_piecewise_law_is_exactly_unbiased(epsilon: float, cells: int) -> None:
    mech = PiecewiseMean(epsilon, 0.0, 1.0, cells=cells)
    c = mech._scale_exact()
    span = cells - mech.band
    for x in _inputs(0.0, 1.0):
        law = mech.output_distribution(x)
        mean = sum(p * c * (2 * j + 1 - cells) / cells for j, (_, p) in enumerate(law))
        sigma = Fraction(float(x) * span)  # the float band position the device rounds
        assert mean == 2 * sigma / span - 1


def test_piecewise_variance_approaches_the_continuous_mechanism() -> None:
    # Wang et al. (ICDE 2019): Var = t^2/(z - 1) + (z + 3)/(3 (z - 1)^2), z = e^{eps/2}.
    for epsilon in (0.5, 1.0, 2.0, 4.0):
        z = math.exp(epsilon / 2)
        mech = PiecewiseMean(epsilon, -1.0, 1.0)
        for t in (-1.0, -0.3, 0.0, 0.8):
            continuous = t * t / (z - 1) + (z + 3) / (3 * (z - 1) ** 2)
            assert mech.variance([t]) == pytest.approx(continuous, rel=2e-4)


def test_piecewise_beats_duchi_above_the_crossover() -> None:
    # Wang et al.: worst-case variance of PM is below Duchi's iff eps > about 1.29.
    for epsilon, pm_wins in ((0.5, False), (1.0, False), (1.25, False), (1.35, True), (4.0, True)):
        duchi = DuchiMean(epsilon, -1.0, 1.0).worst_case_variance(1)
        pm = PiecewiseMean(epsilon, -1.0, 1.0).worst_case_variance(1)
        assert (pm < duchi) is pm_wins, epsilon


def test_variances_in_the_values_units() -> None:
    duchi = DuchiMean(1.0, 10.0, 30.0)  # half-width 10
    c = duchi.scale
    values = [10.0, 20.0, 30.0, 25.0]
    t = np.array([-1.0, 0.0, 1.0, 0.5])
    assert duchi.variance(values) == pytest.approx(100 * float(np.sum(c * c - t * t)) / 16)
    assert duchi.worst_case_variance(4) == pytest.approx(100 * c * c / 4)
    with pytest.raises(InvalidParameterError, match=r"^n "):
        duchi.worst_case_variance(0)


# ---- the samplers follow the exact laws --------------------------------------------------------


@pytest.mark.statistical
def test_duchi_sampler_matches_its_law() -> None:
    # Counts of +C over n draws are binomial(n, p_exact): |z| < 4.5 for every input.
    # Negative control: the law of the same inputs at epsilon 1.2 is rejected.
    mech = DuchiMean(1.0, 0.0, 1.0)
    wrong = DuchiMean(1.2, 0.0, 1.0)
    n = 100_000
    source = InsecureSeededSource(11)
    rejected = 0
    for x in (0.0, 0.2, 0.5, 0.9, 1.0):
        reports = mech.privatize(np.full(n, x), source=source)
        hits = int(np.count_nonzero(reports > 0.5))
        for law_of, must_fit in ((mech, True), (wrong, False)):
            p = float(law_of.output_distribution(x)[0][1])
            z = (hits - n * p) / math.sqrt(n * p * (1 - p))
            if must_fit:
                assert abs(z) < 4.5, (x, z)
            else:
                rejected += abs(z) >= 4.5
    assert rejected >= 4  # x = 0.5 has the same law under both (p = 1/2)


@pytest.mark.statistical
@pytest.mark.parametrize(("epsilon", "cells"), [(1.0, 8), (4.0, 10)])
def test_piecewise_sampler_matches_its_law(epsilon: float, cells: int) -> None:
    # Chi-square goodness of fit of the cell counts, p-value > 1e-4 per input.
    # Negative control: the law of a different input (the band shifted) gives p < 1e-6.
    mech = PiecewiseMean(epsilon, 0.0, 1.0, cells=cells)
    n = 60_000
    source = InsecureSeededSource(12)
    for x, other in ((0.0, 0.5), (0.37, 1.0), (1.0, 0.0)):
        reports = mech.privatize(np.full(n, x), source=source)
        law = mech.output_distribution(x)
        outputs = np.array([y for y, _ in law])
        cell = np.abs(reports[:, None] - outputs[None, :]).argmin(axis=1)
        counts = np.bincount(cell, minlength=cells)
        expected = n * np.array([float(p) for _, p in law])
        assert stats.chisquare(counts, expected).pvalue > 1e-4, x
        shifted = n * np.array([float(p) for _, p in mech.output_distribution(other)])
        assert stats.chisquare(counts, shifted).pvalue < 1e-6, x


# ---- empirical audit (research note B.6) -------------------------------------------------------


@pytest.mark.statistical
def test_audits_stay_below_epsilon_and_catch_a_false_claim() -> None:
    # Clopper-Pearson lower bound on epsilon over the events {Y = y}, inputs at both ends of
    # the range (the extreme pair). It must not exceed the claim (alpha = 0.05); a mechanism
    # run at epsilon 2 but claimed at 1 must be caught.
    n = 100_000
    source = InsecureSeededSource(13)
    for mech in (DuchiMean(1.0, 0.0, 1.0), PiecewiseMean(1.0, 0.0, 1.0, cells=8)):
        outputs = [y for y, _ in mech.output_distribution(0.0)]
        events = value_events(outputs)
        low = mech.privatize(np.zeros(n), source=source)
        high = mech.privatize(np.ones(n), source=source)
        result = audit(low, high, events)
        assert result.epsilon_lower_bound <= mech.event.epsilon
        assert result.epsilon_lower_bound > 0.85  # the audit is nearly tight at 1
    loud = DuchiMean(2.0, 0.0, 1.0)
    events = value_events([y for y, _ in loud.output_distribution(0.0)])
    result = audit(
        loud.privatize(np.zeros(n), source=source),
        loud.privatize(np.ones(n), source=source),
        events,
    )
    assert result.epsilon_lower_bound > 1.0  # negative control: the claim "1" is refuted


# ---- estimators: unbiased, with the closed-form variance ---------------------------------------


def _replicate(
    mech: DuchiMean | PiecewiseMean, values: NDArray[np.float64], reps: int, seed: int
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """``reps`` independent estimates (and their standard errors) from the same devices."""
    reports = mech.privatize(np.tile(values, reps), source=InsecureSeededSource(seed))
    rows = reports.reshape(reps, values.size)
    results = [mech.estimate(row) for row in rows]
    return np.array([m for m, _ in results]), np.array([s for _, s in results])


def _variance_fits(estimates: NDArray[np.float64], variance: float) -> bool:
    """Chi-square test: (R - 1) s^2 / sigma^2 ~ chi2(R - 1) (estimates are near normal)."""
    reps = estimates.size
    statistic = (reps - 1) * float(np.var(estimates, ddof=1)) / variance
    lo, hi = stats.chi2.ppf([0.0005, 0.9995], reps - 1)
    return bool(lo < statistic < hi)


def _mean_fits(estimates: NDArray[np.float64], truth: float, variance: float) -> bool:
    """z-test of the average of R estimates, 4.5 standard errors."""
    return abs(float(estimates.mean()) - truth) < 4.5 * math.sqrt(variance / estimates.size)


@pytest.mark.statistical
@pytest.mark.parametrize(
    ("mech", "seed"),
    [
        (DuchiMean(0.5, 0.0, 100.0), 21),
        (DuchiMean(3.0, 0.0, 100.0), 22),
        (PiecewiseMean(1.0, 0.0, 100.0), 23),
        (PiecewiseMean(4.0, 0.0, 100.0), 24),
    ],
    ids=["duchi-0.5", "duchi-3", "pm-1", "pm-4"],
)
def test_estimators_are_unbiased_with_the_closed_form_variance(
    mech: DuchiMean | PiecewiseMean, seed: int
) -> None:
    # Skewed devices (most near the bottom of the range, a few at the top), R = 400 repetitions
    # of n = 1,000 devices: the average of the estimates is within 4.5 standard errors of the
    # true mean, the sample variance fits the exact variance (chi-square, two-sided 1e-3), and
    # at least 90 % of the 95 % intervals cover (binomial(400, 0.95): mean 380, sd 4.4).
    values = np.concatenate([np.full(800, 5.0), np.linspace(0.0, 100.0, 150), np.full(50, 100.0)])
    truth = float(values.mean())
    variance = mech.variance(values)
    estimates, stds = _replicate(mech, values, reps=400, seed=seed)
    assert _mean_fits(estimates, truth, variance)
    assert _variance_fits(estimates, variance)
    covered = np.abs(estimates - truth) <= 1.959964 * stds
    assert covered.mean() >= 0.9
    assert np.all(stds**2 >= 0.8 * variance)  # the reported std is never badly optimistic
    # Negative controls: the estimates refute a mean off by 3 standard errors of one estimate,
    # and a variance 1.6 times too large or too small.
    assert not _mean_fits(estimates, truth + 3 * math.sqrt(variance), variance)
    assert not _variance_fits(estimates, variance * 1.6)
    assert not _variance_fits(estimates, variance * 0.6)


@pytest.mark.statistical
def test_negative_controls_catch_textbook_mistakes() -> None:
    # (1) Duchi's variance without its -t^2 term (Var = C^2/n): far too large for devices at
    #     the ends at eps = 3 (C^2 = 1.22 vs C^2 - 1 = 0.22), and the test must say so.
    mech = DuchiMean(3.0, -1.0, 1.0)
    values = np.tile([-1.0, 1.0], 500)
    estimates, _ = _replicate(mech, values, reps=400, seed=31)
    assert _variance_fits(estimates, mech.variance(values))
    assert not _variance_fits(estimates, mech.worst_case_variance(values.size))
    # (2) Rounding t to its sign instead of at random (a biased "simplification").
    c = mech.scale
    q = mech.keep_probability
    source = InsecureSeededSource(32)
    devices = np.full(1000, 0.3)
    naive = []
    for _ in range(400):
        keep = bernoulli(q, devices.size, source=source)
        naive.append(float(np.mean(np.where(keep, c, -c))))  # every device rounds 0.3 to +1
    variance = mech.variance(devices)
    assert not _mean_fits(np.array(naive), 0.3, variance)
    honest, _ = _replicate(mech, devices, reps=400, seed=33)
    assert _mean_fits(honest, 0.3, variance)


def test_mean_estimate_unpacks_and_gives_intervals() -> None:
    estimate = MeanEstimate(3.0, 0.5)
    mean, std = estimate
    assert (mean, std) == (3.0, 0.5)
    lo, hi = estimate.confidence_interval(0.9)
    assert lo == pytest.approx(3.0 - 1.644854 * 0.5) and hi == pytest.approx(3.0 + 1.644854 * 0.5)
    with pytest.raises(InvalidParameterError, match=r"^level "):
        estimate.confidence_interval(1.0)
