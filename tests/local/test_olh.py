"""Local hashing (OLH, BLH): the hash family, exact collision probability, decoding, statistics."""

from __future__ import annotations

import math
from collections.abc import Callable
from fractions import Fraction

import numpy as np
import pytest
from numpy.typing import NDArray
from scipy import stats

from dpcurator.errors import InvalidParameterError
from dpcurator.local._olh import (
    PRIME,
    SEED_COUNT,
    LocalHashReports,
    OptimizedLocalHashing,
    collision_probability,
)
from dpcurator.noise import InsecureSeededSource, uniform_integers
from tests.local.test_grr import check_estimator


def test_default_g_is_round_e_eps_plus_one() -> None:
    for eps, g in [(0.1, 2), (1.0, 4), (2.0, 8), (3.0, 21)]:
        assert OptimizedLocalHashing(eps, 100).g == g == max(2, round(math.exp(eps) + 1))
    assert OptimizedLocalHashing(1.0, 100, g=2).g == 2  # BLH


def test_hash_matches_its_definition() -> None:
    source = InsecureSeededSource(1)
    seeds = uniform_integers(SEED_COUNT, 500, source=source)
    values = uniform_integers(1000, 500, source=source)
    for g in (2, 5, 1000):
        olh = OptimizedLocalHashing(1.0, 1000, g=g)
        hashed = olh.hash(seeds, values)
        expected = [
            (((int(s) // PRIME + 1) * int(v) + int(s) % PRIME) % PRIME * g) >> 31
            for s, v in zip(seeds, values, strict=True)
        ]
        assert hashed.tolist() == expected


@pytest.mark.parametrize("bits", [5, 7, 10])
def test_collision_probability_is_exact(bits: int) -> None:
    prime = 2**bits - 1
    residues = np.arange(prime)
    for g in (2, 3, 4, 6, 9):
        sizes = np.bincount((residues * g) >> bits, minlength=g)
        expected = Fraction(int(np.sum(sizes * (sizes - 1))), prime * (prime - 1))
        assert collision_probability(g, bits) == expected
    if bits == 5:  # brute force over the whole family for one pair of values
        for g in (2, 3, 5):
            hits = sum(
                ((a * 2 + b) % prime * g) >> bits == ((a * 7 + b) % prime * g) >> bits
                for a in range(1, prime)
                for b in range(prime)
            )
            assert Fraction(hits, (prime - 1) * prime) == collision_probability(g, bits)


@pytest.mark.statistical
def test_collision_rate_of_random_seeds() -> None:
    # Over uniformly drawn seeds, H(v) = H(v') with probability kappa ~ 1/g (binomial test),
    # and the protocol's q is p kappa + q_g (1 - kappa).
    olh = OptimizedLocalHashing(1.0, 10)
    seeds = uniform_integers(SEED_COUNT, 200_000, source=InsecureSeededSource(2))
    same = olh.hash(seeds, np.full(seeds.size, 3)) == olh.hash(seeds, np.full(seeds.size, 8))
    kappa = olh.collision_probability
    assert abs(float(kappa) - 1 / olh.g) < 1e-8
    assert stats.binomtest(int(same.sum()), same.size, float(kappa)).pvalue > 1e-4
    assert stats.binomtest(int(same.sum()), same.size, 0.3).pvalue < 1e-6  # negative control
    assert olh.q == olh.p * kappa + olh.q_bucket * (1 - kappa)


def test_support_counts_match_brute_force() -> None:
    source = InsecureSeededSource(4)
    for g in (None, 2, 7):
        olh = OptimizedLocalHashing(1.5, 37, g=g)
        values = uniform_integers(37, 70_000, source=source)  # several aggregation chunks
        reports = olh.privatize(values, source=source)
        brute = [
            np.count_nonzero(olh.hash(reports.seeds, np.full(values.size, v)) == reports.values)
            for v in range(37)
        ]
        assert olh.support_counts(reports).tolist() == brute


def test_aggregate_debiases_the_supports() -> None:
    olh = OptimizedLocalHashing(2.0, 5)
    reports = olh.privatize([0, 1, 1, 4], source=InsecureSeededSource(0))
    assert isinstance(reports, LocalHashReports)
    est = olh.aggregate(reports)
    p, q = float(olh.p), float(olh.q)
    np.testing.assert_allclose(est.counts, (olh.support_counts(reports) - 4 * q) / (p - q))
    # plain tuples are accepted too
    np.testing.assert_array_equal(olh.aggregate(tuple(reports)).counts, est.counts)


def test_variance_closed_forms() -> None:
    e = math.e
    olh = OptimizedLocalHashing(1.0, 50)  # g = 4
    g = 4
    approx = 100 * (e - 1 + g) ** 2 / ((e - 1) ** 2 * (g - 1))
    assert olh.variance(100)[0] == pytest.approx(approx, rel=1e-8)
    blh = OptimizedLocalHashing(1.0, 50, g=2)
    assert blh.variance(100)[0] == pytest.approx(100 * (e + 1) ** 2 / (e - 1) ** 2, rel=1e-8)


def test_bad_parameters() -> None:
    for kwargs, name in [
        ({"g": 1}, "g"),
        ({"g": 2**31}, "g"),
        ({"g": 2.0}, "g"),
        ({"epsilon": 0.0}, "epsilon"),
        ({"domain_size": 2**31 - 1}, "domain_size"),
    ]:
        args = {"epsilon": 1.0, "domain_size": 10} | kwargs
        with pytest.raises(InvalidParameterError) as info:
            OptimizedLocalHashing(**args)  # type: ignore[arg-type]
        assert info.value.name == name
    olh = OptimizedLocalHashing(1.0, 10)
    with pytest.raises(InvalidParameterError) as info:
        olh.aggregate(np.array([1, 2]))
    assert info.value.name == "reports"
    with pytest.raises(InvalidParameterError) as info:
        olh.aggregate(LocalHashReports(np.array([1, 2]), np.array([0, olh.g])))
    assert info.value.name == "reports.values"
    with pytest.raises(InvalidParameterError) as info:
        olh.aggregate(LocalHashReports(np.array([SEED_COUNT]), np.array([0])))
    assert info.value.name == "seeds"
    with pytest.raises(InvalidParameterError) as info:
        olh.aggregate(LocalHashReports(np.array([1, 2]), np.array([0])))
    assert info.value.name == "reports"


def _grr_variance(d: int, eps: float) -> Callable[[int, NDArray[np.float64]], NDArray[np.float64]]:
    e = math.exp(eps)
    p, q = e / (e + d - 1), 1 / (e + d - 1)

    def variance(n: int, counts: NDArray[np.float64]) -> NDArray[np.float64]:
        return n * q * (1 - q) / (p - q) ** 2 + counts * (1 - p - q) / (p - q)

    return variance


@pytest.mark.statistical
@pytest.mark.parametrize("g", [None, 2], ids=["olh", "blh"])
def test_unbiased_with_exact_variance(g: int | None) -> None:
    # d = 32 > 3e + 2: GRR's variance (about 3 times larger) must be rejected.
    check_estimator(
        lambda: OptimizedLocalHashing(1.0, 32, g=g), _grr_variance(32, 1.0), domain_size=32, seed=8
    )
