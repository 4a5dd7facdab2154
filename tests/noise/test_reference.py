"""Tests of the literal CKS20 reference samplers (src/dpcurator/noise/_reference.py).

They are the oracle the fast samplers are compared with (tests/noise/test_samplers.py), so they
are checked here against exact probabilities, with negative controls.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from noise_stats import ALPHA, binomial_p, dgauss_pmf, dlap_pmf, pmf_chi_square_p
from scipy import stats

from dpcurator.noise import InsecureSeededSource
from dpcurator.noise._reference import (
    WordStream,
    bernoulli_exp_ref,
    bernoulli_rational_ref,
    discrete_gaussian_ref,
    discrete_laplace_ref,
    uniform_below_ref,
)


def stream(seed: int) -> WordStream:
    return WordStream(InsecureSeededSource(seed))


@pytest.mark.statistical
def test_uniform_below_ref() -> None:
    s = stream(1)
    small = [uniform_below_ref(10, s) for _ in range(20_000)]
    counts = np.bincount(small, minlength=10)
    assert counts.size == 10
    assert stats.chisquare(counts).pvalue > ALPHA
    big_b = 10**30 + 7  # several words per draw; top bucket check on 8 equal ranges
    big = [uniform_below_ref(big_b, s) for _ in range(8000)]
    buckets = np.bincount([8 * v // big_b for v in big], minlength=8)
    assert stats.chisquare(buckets).pvalue > ALPHA
    assert stats.chisquare(buckets + np.array([400, 0, 0, 0, 0, 0, 0, 0])).pvalue < ALPHA
    assert uniform_below_ref(1, s) == 0
    with pytest.raises(ValueError, match="b must be >= 1"):
        uniform_below_ref(0, s)


@pytest.mark.statistical
def test_bernoulli_rational_ref() -> None:
    s = stream(2)
    n = 30_000
    hits = sum(bernoulli_rational_ref(Fraction(2, 7), s) for _ in range(n))
    assert binomial_p(hits, n, 2 / 7) > ALPHA
    assert binomial_p(hits, n, 0.3) < ALPHA  # negative control (about 5 sd)


@pytest.mark.statistical
@pytest.mark.parametrize("gamma", [Fraction(0), Fraction(1, 3), Fraction(1), Fraction(5, 2)])
def test_bernoulli_exp_ref(gamma: Fraction) -> None:
    s = stream(3)
    n = 30_000
    hits = sum(bernoulli_exp_ref(gamma, s) for _ in range(n))
    value = math.exp(-float(gamma))
    assert binomial_p(hits, n, value) > ALPHA
    if gamma > 0:
        assert binomial_p(hits, n, math.exp(-1.1 * float(gamma))) < ALPHA
    with pytest.raises(ValueError, match="gamma must be >= 0"):
        bernoulli_exp_ref(Fraction(-1), s)


@pytest.mark.statistical
@pytest.mark.parametrize("scale", [Fraction(7, 3), Fraction(1, 2)])
def test_discrete_laplace_ref(scale: Fraction) -> None:
    s = stream(4)
    x = np.array([discrete_laplace_ref(scale, s) for _ in range(20_000)])
    t = float(scale)
    assert pmf_chi_square_p(x, lambda v: dlap_pmf(t, v), int(60 * t) + 20) > ALPHA
    assert pmf_chi_square_p(x, lambda v: dlap_pmf(1.15 * t, v), int(60 * t) + 20) < ALPHA


@pytest.mark.statistical
def test_discrete_gaussian_ref() -> None:
    s = stream(5)
    x = np.array([discrete_gaussian_ref(Fraction(3, 2), s) for _ in range(20_000)])
    assert pmf_chi_square_p(x, lambda v: dgauss_pmf(1.5, v), 40) > ALPHA
    assert pmf_chi_square_p(x, lambda v: dgauss_pmf(1.65, v), 40) < ALPHA
