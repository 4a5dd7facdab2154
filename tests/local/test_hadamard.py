"""Hadamard response: the transform, the supports, decoding and statistics."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pytest
from numpy.typing import NDArray
from scipy.linalg import hadamard

from dpcurator.errors import InvalidParameterError
from dpcurator.local._hadamard import HadamardResponse, walsh_hadamard_transform
from dpcurator.noise import InsecureSeededSource, uniform_integers
from tests.local.test_grr import check_estimator


def test_k_is_the_smallest_power_of_two_above_d() -> None:
    for d, k in [(2, 4), (3, 4), (4, 8), (7, 8), (8, 16), (1000, 1024), (1023, 1024)]:
        assert k == HadamardResponse(1.0, d).K


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
