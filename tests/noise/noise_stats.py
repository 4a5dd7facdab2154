"""Shared statistics for the noise tests: exact pmfs, binned chi-square tests, scripted sources.

Significance: every goodness-of-fit test uses ALPHA = 1e-4. Under the null hypothesis (the
sampler is exact) a test fails with probability 1e-4 for a random seed; the seeds are fixed, so
the suite is deterministic. Each test is paired with a negative control (a wrong distribution)
that must give a p-value below ALPHA.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np
from numpy.typing import NDArray
from scipy import stats

from dpcurator.noise import InsecureSeededSource, RandomSource

ALPHA = 1e-4
MIN_EXPECTED = 20.0


def dlap_pmf(scale: float, support: NDArray[np.int64]) -> NDArray[np.float64]:
    """P[X = x] = (1 - p) / (1 + p) p^|x|, p = exp(-1/scale) (CKS20 Definition 28)."""
    p = math.exp(-1.0 / scale)
    return (-math.expm1(-1.0 / scale) / (1.0 + p)) * np.exp(-np.abs(support) / scale)


def dlap_cdf(scale: float, k: NDArray[np.float64]) -> NDArray[np.float64]:
    """P[X <= k] for integer k: p^-k / (1 + p) for k < 0 and 1 - p^(k+1) / (1 + p) for k >= 0."""
    p = math.exp(-1.0 / scale)
    k = np.asarray(k, dtype=np.float64)
    neg = np.exp(np.minimum(k, 0.0) / scale) / (1.0 + p)
    pos = 1.0 - np.exp(-(np.maximum(k, 0.0) + 1.0) / scale) / (1.0 + p)
    return np.where(k < 0, neg, pos)


def dgauss_pmf(sigma: float, support: NDArray[np.int64]) -> NDArray[np.float64]:
    """exp(-x^2 / (2 sigma^2)) / Z with Z summed directly over |x| <= 40 sigma + 10.

    The omitted tail is below 2 exp(-800) relative: negligible in float64.
    """
    k = int(40 * sigma) + 10
    xs = np.arange(-k, k + 1, dtype=np.float64)
    z = float(np.sum(np.exp(-(xs**2) / (2.0 * sigma**2))))
    return np.exp(-(support.astype(np.float64) ** 2) / (2.0 * sigma**2)) / z


def dgauss_moments(sigma: float) -> tuple[float, float]:
    """(E[X^2], E[X^4]) of the discrete Gaussian by direct summation."""
    k = int(40 * sigma) + 10
    xs = np.arange(-k, k + 1)
    pmf = dgauss_pmf(sigma, xs)
    x2 = xs.astype(np.float64) ** 2
    return float(np.sum(pmf * x2)), float(np.sum(pmf * x2 * x2))


def dlap_moments(scale: float) -> tuple[float, float]:
    """(E[X^2], E[X^4]) of the discrete Laplace law by direct summation (tail < e^-60)."""
    k = int(60 * scale) + 10
    xs = np.arange(-k, k + 1)
    pmf = dlap_pmf(scale, xs)
    x2 = xs.astype(np.float64) ** 2
    return float(np.sum(pmf * x2)), float(np.sum(pmf * x2 * x2))


def pmf_bins(
    pmf: Callable[[NDArray[np.int64]], NDArray[np.float64]], lo: int, hi: int, n: int
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Bins with expected count >= MIN_EXPECTED from a pmf on [lo, hi] (tails pooled).

    Returns (edges, probs): bin i is the integers in [edges[i], edges[i + 1]), the first and
    last bins extend to -inf and +inf, and probs are exact bin probabilities (the tail mass
    outside [lo, hi] goes to the outer bins).
    """
    support = np.arange(lo, hi + 1)
    mass = pmf(support)
    outside = max(0.0, 1.0 - float(mass.sum()))  # split the outside mass over both ends
    edges: list[float] = [-math.inf]
    probs: list[float] = []
    acc = outside / 2.0
    for x, m in zip(support.tolist(), mass.tolist(), strict=True):
        acc += m
        if acc * n >= MIN_EXPECTED:
            edges.append(x + 1.0)
            probs.append(acc)
            acc = 0.0
    acc += outside / 2.0
    if probs:
        probs[-1] += acc
        edges[-1] = math.inf
    else:
        edges.append(math.inf)
        probs.append(acc)
    return np.asarray(edges), np.asarray(probs)


def chi_square_p(
    samples: NDArray[np.int64], edges: NDArray[np.float64], probs: NDArray[np.float64]
) -> float:
    """p-value of Pearson's chi-square goodness-of-fit test for the given bins."""
    n = samples.size
    idx = np.searchsorted(edges, samples.astype(np.float64), side="right") - 1
    observed = np.bincount(idx, minlength=probs.size)[: probs.size]
    if observed.sum() != n:
        raise AssertionError("samples outside the bins")
    expected = probs / probs.sum() * n
    stat = float(np.sum((observed - expected) ** 2 / expected))
    return float(stats.chi2.sf(stat, probs.size - 1))


def pmf_chi_square_p(
    samples: NDArray[np.int64],
    pmf: Callable[[NDArray[np.int64]], NDArray[np.float64]],
    half_width: int,
) -> float:
    """Goodness of fit of integer samples to a pmf, support truncated at +-half_width."""
    edges, probs = pmf_bins(pmf, -half_width, half_width, samples.size)
    return chi_square_p(samples, edges, probs)


def cdf_chi_square_p(
    samples: NDArray[np.int64],
    cdf: Callable[[NDArray[np.float64]], NDArray[np.float64]],
    inner_edges: Sequence[float],
) -> float:
    """Goodness of fit with bins (-inf, e0], (e0, e1], ... from an exact CDF at integer edges."""
    inner = np.asarray(sorted(set(inner_edges)), dtype=np.float64)
    cdf_vals = np.concatenate([[0.0], cdf(inner), [1.0]])
    probs = np.diff(cdf_vals)
    # bin i holds x with inner[i-1] < x <= inner[i]: searchsorted on inner + 1 (integers)
    edges = np.concatenate([[-math.inf], inner + 1.0, [math.inf]])
    return chi_square_p(samples, edges, probs)


def two_sample_p(a: NDArray[np.int64], b: NDArray[np.int64]) -> float:
    """p-value of the chi-square test of homogeneity of two integer samples (pooled bins)."""
    values = np.concatenate([a, b])
    lo, hi = int(values.min()), int(values.max())
    ca = np.bincount(a - lo, minlength=hi - lo + 1).astype(np.float64)
    cb = np.bincount(b - lo, minlength=hi - lo + 1).astype(np.float64)
    rows_a: list[float] = []
    rows_b: list[float] = []
    acc_a = acc_b = 0.0
    frac_small = min(a.size, b.size) / (a.size + b.size)
    for x, y in zip(ca.tolist(), cb.tolist(), strict=True):
        acc_a += x
        acc_b += y
        if (acc_a + acc_b) * frac_small >= MIN_EXPECTED:
            rows_a.append(acc_a)
            rows_b.append(acc_b)
            acc_a = acc_b = 0.0
    if rows_a:
        rows_a[-1] += acc_a
        rows_b[-1] += acc_b
    table = np.array([rows_a, rows_b])
    result = stats.chi2_contingency(table, correction=False)
    return float(result.pvalue)


def binomial_p(successes: int, n: int, p: float) -> float:
    """Two-sided exact binomial test p-value."""
    return float(stats.binomtest(successes, n, p).pvalue)


class ScriptedSource(RandomSource):
    """Replays given words, then continues with a seeded PCG64 stream; counts words drawn."""

    def __init__(self, words: Sequence[int], seed: int = 0) -> None:
        self._script = [int(w) for w in words]
        self._fallback = InsecureSeededSource(seed)
        self.drawn = 0

    @property
    def secure(self) -> bool:
        return False

    def words(self, n: int) -> NDArray[np.uint64]:
        head = self._script[:n]
        self._script = self._script[n:]
        rest = self._fallback.words(n - len(head))
        self.drawn += n
        return np.concatenate([np.array(head, dtype=np.uint64), rest]).astype(np.uint64)

    @property
    def remaining_script(self) -> int:
        return len(self._script)
