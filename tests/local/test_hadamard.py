"""Hadamard response: the transform, the supports, decoding and statistics.

Both schemes: one block (``B = 1``, Acharya-Sun-Zhang Section 3) and the general block scheme
(Section 4), chosen automatically by the closed-form ``Var*``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from fractions import Fraction

import numpy as np
import pytest
from numpy.typing import NDArray
from scipy import stats
from scipy.linalg import hadamard

from dpcurator.errors import InvalidParameterError
from dpcurator.local._hadamard import HadamardResponse, hadamard_blocks, walsh_hadamard_transform
from dpcurator.noise import InsecureSeededSource, uniform_integers
from tests.local.test_grr import (
    check_estimator,
    mean_matches,
    replicate,
    skewed_values,
    variance_matches,
)


def test_k_is_the_smallest_power_of_two_above_d() -> None:
    for d, k in [(2, 4), (3, 4), (4, 8), (7, 8), (8, 16), (1000, 1024), (1023, 1024)]:
        assert k == HadamardResponse(1.0, d).K
        assert k == HadamardResponse(5.0, d, blocks=1).K


def test_transform_is_the_sylvester_matrix_product() -> None:
    x = uniform_integers(1000, 64, source=InsecureSeededSource(0))
    np.testing.assert_array_equal(walsh_hadamard_transform(x), hadamard(64) @ x)
    # H H = K I
    np.testing.assert_array_equal(walsh_hadamard_transform(walsh_hadamard_transform(x)), 64 * x)
    with pytest.raises(InvalidParameterError) as info:
        walsh_hadamard_transform(np.zeros(6, dtype=np.int64))
    assert info.value.name == "x"


def test_supports_are_hadamard_rows_and_overlap_by_a_quarter() -> None:
    hr = HadamardResponse(1.0, 15)  # K = 16
    matrix = hadamard(16)
    columns = np.arange(16)
    supports = []
    for v in range(15):
        inside = hr.in_support(columns, np.full(16, v))
        np.testing.assert_array_equal(inside, matrix[v + 1] == 1)
        assert inside.sum() == 8
        supports.append(inside)
    for v in range(15):
        for w in range(v):
            assert np.sum(supports[v] & supports[w]) == 4  # q = 1/2 exactly


def test_support_counts_match_brute_force() -> None:
    hr = HadamardResponse(0.8, 20)
    source = InsecureSeededSource(1)
    values = uniform_integers(20, 5000, source=source)
    reports = hr.privatize(values, source=source)
    brute = [int(hr.in_support(reports, np.full(reports.size, v)).sum()) for v in range(20)]
    assert hr.support_counts(reports).tolist() == brute
    est = hr.aggregate(reports)
    p = float(hr.p)
    np.testing.assert_allclose(est.counts, (np.array(brute) - 2500) / (p - 0.5))


def test_variance_closed_form() -> None:
    e = math.e
    hr = HadamardResponse(1.0, 9)
    assert hr.variance(100)[0] == pytest.approx(100 * (e + 1) ** 2 / (e - 1) ** 2, rel=1e-9)
    counts = np.arange(9, dtype=np.float64)
    np.testing.assert_allclose(hr.variance(100, counts), hr.variance(100) - counts, rtol=1e-12)


def test_bad_parameters() -> None:
    with pytest.raises(InvalidParameterError) as info:
        HadamardResponse(1.0, 2**26)
    assert info.value.name == "domain_size"
    with pytest.raises(InvalidParameterError) as info:
        HadamardResponse(-1.0, 4)
    assert info.value.name == "epsilon"
    hr = HadamardResponse(1.0, 5)  # K = 8
    with pytest.raises(InvalidParameterError) as info:
        hr.aggregate([0, 8])
    assert info.value.name == "reports"
    with pytest.raises(InvalidParameterError) as info:
        hr.privatize([5])
    assert info.value.name == "values"
    for blocks in (0, 6, 2.5):
        with pytest.raises(InvalidParameterError) as info:
            HadamardResponse(3.0, 5, blocks=blocks)  # type: ignore[arg-type]
        assert info.value.name == "blocks"
    with pytest.raises(InvalidParameterError) as info:
        hadamard_blocks(3.0, 1)
    assert info.value.name == "domain_size"


def _grr_variance(d: int, eps: float) -> Callable[[int, NDArray[np.float64]], NDArray[np.float64]]:
    e = math.exp(eps)
    p, q = e / (e + d - 1), 1 / (e + d - 1)

    def variance(n: int, counts: NDArray[np.float64]) -> NDArray[np.float64]:
        return n * q * (1 - q) / (p - q) ** 2 + counts * (1 - p - q) / (p - q)

    return variance


@pytest.mark.statistical
def test_unbiased_with_exact_variance() -> None:
    # d = 31 (K = 32): GRR's variance at d = 31 is more than twice HR's and must be rejected.
    check_estimator(
        lambda: HadamardResponse(1.0, 31), _grr_variance(31, 1.0), domain_size=31, seed=9
    )


# --------------------------------------------------------------------------------------------
# the general (block) scheme


def _relative_var_star(blocks: int, eps: float) -> float:
    """Paper's general scheme, B blocks of equal mass: Var* / n."""
    e = math.exp(eps)
    return (2 * blocks - 1 + e) ** 2 / (blocks * (e - 1) ** 2)


def test_block_layout_and_supports() -> None:
    hr = HadamardResponse(3.0, 7, blocks=2)  # ceil(7/2) = 4 values a block: b = 8, K = 16
    assert (hr.blocks, hr.block_size, hr.K) == (2, 8, 16)
    matrix = hadamard(8)
    columns = np.arange(16)
    for v in range(7):
        inside = hr.in_support(columns, np.full(16, v))
        block, row = v % 2, v // 2 + 1
        expected = np.zeros(16, dtype=bool)
        expected[8 * block : 8 * block + 8] = matrix[row] == 1
        np.testing.assert_array_equal(inside, expected)
    # p, q and the other-block probability are the sums of report_probability over C_v
    v, same, other = 2, 4, 1  # 2 and 4 share block 0, 1 is in block 1
    c_v = [j for j in range(16) if hr.in_support([j], [v])[0]]
    assert sum(hr.report_probability(j, v) for j in c_v) == hr.p
    assert sum(hr.report_probability(j, same) for j in c_v) == hr.q
    assert sum(hr.report_probability(j, other) for j in c_v) == hr.alpha / 4
    assert hr.p - hr.q == (1 - hr.alpha) / 2


EXACT_CASES = [(0.5, 5, None), (2.5, 6, 1), (3.0, 7, 2), (3.0, 7, 3), (3.0, 10, None), (4.0, 9, 4)]


@pytest.mark.parametrize(("eps", "d", "blocks"), EXACT_CASES)
def test_exact_ldp_ratio_both_schemes(eps: float, d: int, blocks: int | None) -> None:
    hr = HadamardResponse(eps, d, blocks=blocks)
    table = [[hr.report_probability(j, v) for v in range(d)] for j in range(hr.K)]
    for v in range(d):
        assert sum(row[v] for row in table) == 1
    worst = max(max(row) / min(row) for row in table)
    assert worst == 1 + 2 * hr.blocks * (1 - hr.alpha) / hr.alpha
    assert worst <= Fraction(math.exp(eps)) * (1 + Fraction(1, 10**12))
    assert math.log(worst) >= eps * (1 - 1e-9)  # tight
    event = hr.event
    assert event.epsilon >= math.log(worst) * (1 - 1e-15)  # never understated
    assert event.epsilon == pytest.approx(math.log(worst), rel=1e-12)
    assert event.categories == 2 * hr.blocks


def test_automatic_choice_minimises_var_star() -> None:
    # One block up to e^eps = 1 + 2 sqrt(2) (eps = 1.342), blocks above.
    threshold = math.log(1 + 2 * math.sqrt(2))
    assert hadamard_blocks(threshold - 1e-6, 1000) == 1
    assert hadamard_blocks(threshold + 1e-6, 1000) == 2
    for eps in (0.5, 1.0):
        assert HadamardResponse(eps, 1000).blocks == 1
    for eps, d in [(2.0, 10), (3.0, 50), (4.0, 1000), (6.0, 30), (8.0, 5000)]:
        chosen = HadamardResponse(eps, d)
        best = min(range(1, d + 1), key=lambda b: _relative_var_star(b, eps))
        assert chosen.blocks == best
        assert chosen.variance(1)[0] == pytest.approx(_relative_var_star(best, eps), rel=1e-9)
        for b in {1, 2, max(1, min(d, round(math.exp(eps))))}:
            assert chosen.variance(1)[0] <= HadamardResponse(eps, d, blocks=b).variance(1)[0]


def test_eps4_d1000_beats_one_block_and_pure_ldp_regime() -> None:
    # eps = 4, d = 1000: B = 27 (Var*/n = 0.1493), one block 1.0762 (7.2x), and pure-LDP 1.2.0's
    # B = 2^floor(log2 min(e^4, 2000)) = 32 blocks: Var*/n = 0.1504 with our layout. Pure-LDP
    # packs b - 1 = 63 values a block (16 of its 32 blocks used), so on uniform data its mean
    # variance is (alpha/B + (63/1000)(1 - alpha))/(1 - alpha)^2 = 0.2201 n (1.48x ours).
    eps, d, n = 4.0, 1000, 1
    auto = HadamardResponse(eps, d)
    one = HadamardResponse(eps, d, blocks=1)
    assert auto.blocks == 27
    var_auto = float(auto.variance(n)[0])
    assert var_auto == pytest.approx(0.1493, abs=5e-4)
    assert float(one.variance(n)[0]) == pytest.approx(1.0762, abs=5e-4)
    assert var_auto <= float(one.variance(n)[0]) / 7
    e = math.exp(eps)
    pure_blocks = 2 ** math.floor(math.log2(min(e, 2 * d)))
    assert pure_blocks == 32
    assert var_auto <= float(HadamardResponse(eps, d, blocks=32).variance(n)[0])
    alpha = 2 * pure_blocks / (2 * pure_blocks - 1 + e)
    pure_mean = (alpha / pure_blocks + 63 / 1000 * (1 - alpha)) / (1 - alpha) ** 2
    assert pure_mean == pytest.approx(0.2201, abs=5e-4)
    # our exact mean variance on uniform data (counts 1/d each) is Var* up to the n_v term
    uniform = np.full(d, n / d)
    exact_mean = float(auto.variance(n, uniform).mean())
    assert exact_mean == pytest.approx(var_auto - n / d, rel=0.02)  # 1000 = 37 * 27 + 1
    assert exact_mean < pure_mean / 1.4


def test_block_transforms_match_brute_force() -> None:
    hr = HadamardResponse(3.0, 13, blocks=3)  # 5 values a block: b = 8, K = 24
    source = InsecureSeededSource(3)
    values = uniform_integers(13, 4000, source=source)
    reports = hr.privatize(values, source=source)
    brute = np.array(
        [int(hr.in_support(reports, np.full(reports.size, v)).sum()) for v in range(13)]
    )
    assert hr.support_counts(reports).tolist() == brute.tolist()
    block_total = np.bincount(reports // hr.block_size, minlength=3)[np.arange(13) % 3]
    est = hr.aggregate(reports)
    np.testing.assert_allclose(est.counts, (2 * brute - block_total) / float(1 - hr.alpha))
    assert est.n == 4000


def test_block_variance_closed_form() -> None:
    hr = HadamardResponse(3.0, 6, blocks=2)
    e = math.exp(3.0)
    alpha = float(hr.alpha)
    assert alpha == pytest.approx(4 / (3 + e), rel=1e-12)
    counts = np.array([10.0, 0.0, 30.0, 5.0, 20.0, 35.0])  # block 0: 60, block 1: 40
    mass = np.array([60.0, 40.0, 60.0, 40.0, 60.0, 40.0])
    expected = (100 * alpha / 2 + mass * (1 - alpha)) / (1 - alpha) ** 2 - counts
    np.testing.assert_allclose(hr.variance(100, counts), expected, rtol=1e-12)
    # Var* = n (2B - 1 + e^eps)^2 / (B (e^eps - 1)^2) = the exact one at equal block masses
    assert hr.variance(100)[0] == pytest.approx(100 * (3 + e) ** 2 / (2 * (e - 1) ** 2), rel=1e-9)
    balanced = np.full(6, 100 / 6)
    np.testing.assert_allclose(hr.variance(100, balanced) + balanced, hr.variance(100), rtol=1e-12)


@pytest.mark.statistical
def test_block_reports_follow_the_stated_probabilities() -> None:
    # Chi-square goodness of fit (level 1e-4) of 20 000 reports of one value over the K = 16
    # columns; negative control: the probabilities of eps = 3.3 (same layout) are rejected.
    hr = HadamardResponse(3.0, 7, blocks=2)
    n = 20_000
    observed = np.bincount(
        hr.privatize(np.full(n, 3), source=InsecureSeededSource(17)), minlength=hr.K
    )
    expected = np.array([float(hr.report_probability(j, 3)) for j in range(hr.K)])
    assert stats.chisquare(observed, expected * n).pvalue > 1e-4
    wrong_hr = HadamardResponse(3.3, 7, blocks=2)
    wrong = np.array([float(wrong_hr.report_probability(j, 3)) for j in range(hr.K)])
    assert stats.chisquare(observed, wrong * n).pvalue < 1e-6


@pytest.mark.statistical
def test_block_scheme_unbiased_with_exact_variance() -> None:
    # eps = 3, d = 12, automatic B (> 1). Zipf data, so block masses differ (block 0 holds the
    # heaviest value): the exact variance must match, the equal-mass Var* and the one-block
    # variance must not (chi-square interval, research note D), and the raw W_t[r] (debiasing
    # left out) must be biased.
    eps, d, n, reps = 3.0, 12, 3000, 300
    hr = HadamardResponse(eps, d)
    assert hr.blocks > 1
    values, truth = skewed_values(d, n)
    estimates = replicate(hr, values, reps, seed=21)
    exact = hr.variance(n, truth)
    assert mean_matches(estimates, truth, exact)
    assert variance_matches(estimates, exact)
    assert not mean_matches(estimates * float(1 - hr.alpha), truth, exact)
    assert not variance_matches(estimates, hr.variance(n))
    assert not variance_matches(estimates, HadamardResponse(eps, d, blocks=1).variance(n, truth))
