"""Unary encodings (SUE = basic one-time RAPPOR, OUE): parameters, formats, memory, statistics."""

from __future__ import annotations

import math
import tracemalloc
from collections.abc import Callable

import mpmath
import numpy as np
import pytest
from numpy.typing import NDArray

from dpcurator.errors import InvalidParameterError
from dpcurator.local._unary import OptimizedUnaryEncoding, SymmetricUnaryEncoding
from dpcurator.noise import InsecureSeededSource
from tests.local.test_grr import check_estimator


def test_parameters_round_towards_privacy() -> None:
    mpmath.mp.dps = 50
    for eps in (0.05, 1.0, 4.0):
        e = mpmath.exp(mpmath.mpf(eps))
        oue = OptimizedUnaryEncoding(eps, 10)
        assert oue.p == 0.5
        assert mpmath.mpf(oue.q.numerator) / oue.q.denominator >= 1 / (e + 1)
        assert float(oue.q) == pytest.approx(float(1 / (e + 1)), rel=1e-11)
        sue = SymmetricUnaryEncoding(eps, 10)
        assert sue.p + sue.q == 1
        exact_q = 1 / (mpmath.exp(mpmath.mpf(eps) / 2) + 1)
        assert mpmath.mpf(sue.q.numerator) / sue.q.denominator >= exact_q
        assert float(sue.q) == pytest.approx(float(exact_q), rel=1e-11)
        for ue in (oue, sue):
            assert ue.event.epsilon <= eps
            assert ue.event.epsilon == pytest.approx(eps, rel=1e-9)


def test_variance_closed_forms() -> None:
    e = math.e
    oue = OptimizedUnaryEncoding(1.0, 5)
    sue = SymmetricUnaryEncoding(1.0, 5)
    assert oue.variance(100)[0] == pytest.approx(100 * 4 * e / (e - 1) ** 2, rel=1e-9)
    counts = np.array([50.0, 20, 10, 10, 10])
    # OUE's exact variance adds n_v (1 - p - q)/(p - q) = n_v
    np.testing.assert_allclose(oue.variance(100, counts), oue.variance(100) + counts, rtol=1e-9)
    half = math.exp(0.5)
    assert sue.variance(100)[0] == pytest.approx(100 * half / (half - 1) ** 2, rel=1e-9)
    np.testing.assert_allclose(sue.variance(100, counts), sue.variance(100), rtol=1e-12)


def test_report_formats_agree() -> None:
    oue = OptimizedUnaryEncoding(1.0, 13)
    values = np.arange(13).repeat(7)
    bits = oue.privatize(values, source=InsecureSeededSource(3))
    packed = oue.privatize_packed(values, source=InsecureSeededSource(3))
    assert bits.shape == (91, 13) and bits.dtype == np.bool_
    assert packed.shape == (91, 2) and packed.dtype == np.uint8
    np.testing.assert_array_equal(np.packbits(bits, axis=1), packed)
    from_bits = oue.aggregate(bits)
    np.testing.assert_array_equal(from_bits.counts, oue.aggregate(packed).counts)
    np.testing.assert_array_equal(from_bits.counts, oue.aggregate(bits.astype(np.int64)).counts)
    # streaming in chunks draws the same bits as privatize: the same estimate
    streamed = oue.estimate(values, source=InsecureSeededSource(3))
    np.testing.assert_array_equal(streamed.counts, from_bits.counts)
    np.testing.assert_array_equal(streamed.variances, from_bits.variances)


def test_aggregate_is_the_debiased_column_sums() -> None:
    sue = SymmetricUnaryEncoding(2.0, 3)
    bits = np.array([[1, 0, 0], [1, 1, 0], [0, 0, 1], [1, 0, 0]], dtype=bool)
    est = sue.aggregate(bits)
    p, q = float(sue.p), float(sue.q)
    np.testing.assert_allclose(est.counts, (np.array([3, 1, 1]) - 4 * q) / (p - q))


def test_streaming_memory_stays_small() -> None:
    # 100 000 devices over d = 1000 would be 100 MB of bits (10**8 bytes); estimate() streams.
    oue = OptimizedUnaryEncoding(1.0, 1000)
    values = np.arange(100_000) % 1000
    tracemalloc.start()
    try:
        est = oue.estimate(values, source=InsecureSeededSource(0))
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        oue.privatize(values[:30_000], source=InsecureSeededSource(0))
        _, control = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert est.n == 100_000
    assert peak < 25_000_000, peak
    assert control > 25_000_000  # negative control: materialising 30 000 reports is too big
    # sanity: every value holds 100 devices, estimated within 5 standard errors
    assert np.all(np.abs(est.counts - 100) <= 5 * est.std)


def test_bad_inputs() -> None:
    oue = OptimizedUnaryEncoding(1.0, 4)
    for reports in (
        np.zeros((3, 5), dtype=bool),  # wrong width
        np.zeros(4, dtype=bool),  # not 2-D
        np.full((2, 4), 2),  # not bits
        np.zeros((2, 1), dtype=np.int64),  # packed width but not uint8
        np.zeros((0, 4), dtype=bool),  # empty
    ):
        with pytest.raises(InvalidParameterError) as info:
            oue.aggregate(reports)
        assert info.value.name == "reports"
    with pytest.raises(InvalidParameterError) as info:
        oue.privatize([4])
    assert info.value.name == "values"
    with pytest.raises(InvalidParameterError) as info:
        oue.report_probability([0, 1], 0)
    assert info.value.name == "report"
    for bad in (0.0, -2.0, float("inf"), 1e-300):
        with pytest.raises(InvalidParameterError) as info:
            SymmetricUnaryEncoding(bad, 4)
        assert info.value.name == "epsilon"
    with pytest.raises(InvalidParameterError) as info:
        OptimizedUnaryEncoding(1.0, 1)
    assert info.value.name == "domain_size"


def _grr_variance(d: int, eps: float) -> Callable[[int, NDArray[np.float64]], NDArray[np.float64]]:
    """Exact variance of GRR over d values: the negative control for the unary encodings."""
    e = math.exp(eps)
    p, q = e / (e + d - 1), 1 / (e + d - 1)

    def variance(n: int, counts: NDArray[np.float64]) -> NDArray[np.float64]:
        return n * q * (1 - q) / (p - q) ** 2 + counts * (1 - p - q) / (p - q)

    return variance


@pytest.mark.statistical
@pytest.mark.parametrize("cls", [SymmetricUnaryEncoding, OptimizedUnaryEncoding])
def test_unbiased_with_exact_variance(cls: type) -> None:
    # d = 32 > 3e + 2: GRR's variance (about 3 times larger) must be rejected.
    check_estimator(lambda: cls(1.0, 32), _grr_variance(32, 1.0), domain_size=32, seed=7)
