"""Bernoulli draws with one float probability per draw (each float an exact dyadic rational)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from numpy.typing import NDArray

from dpcurator.noise import InsecureSeededSource, RandomSource, bernoulli


class ScriptedSource(RandomSource):
    """First hands out scripted words, then words from a seeded generator."""

    def __init__(self, script: list[int], seed: int) -> None:
        self._script = list(script)
        self._rest = InsecureSeededSource(seed)

    @property
    def secure(self) -> bool:
        return False

    def words(self, n: int) -> NDArray[np.uint64]:
        head, self._script = self._script[:n], self._script[n:]
        tail = self._rest.words(n - len(head))
        return np.concatenate([np.array(head, dtype=np.uint64), tail])


def test_float_bernoulli_ends_and_threshold() -> None:
    source = InsecureSeededSource(5)
    assert not bernoulli(np.zeros(1000), source=source).any()
    assert bernoulli(np.ones(1000), source=source).all()
    assert not bernoulli(np.full(1000, 1e-300), source=source).any()
    # p = 1/2: the word 2^63 - 1 is below the threshold 2^63, the word 2^63 is not.
    out = bernoulli(np.array([0.5, 0.5]), source=ScriptedSource([2**63 - 1, 2**63], 0))
    assert out.tolist() == [True, False]


@pytest.mark.statistical
def test_float_bernoulli_settles_ties_exactly() -> None:
    # p = 3 * 2^-70: floor(p 2^64) = 0, so the word 0 is a tie, settled by Bernoulli(3/64).
    # Tolerance: binomial, 4.5 standard deviations; negative control: p = 3/64 * 1.5.
    n = 20_000
    p = np.array([3 * 2.0**-70])
    hits = sum(bool(bernoulli(p, source=ScriptedSource([0], seed))[0]) for seed in range(n))
    sd = math.sqrt(n * 3 / 64 * (1 - 3 / 64))
    assert abs(hits - n * 3 / 64) < 4.5 * sd
    assert abs(hits - n * 4.5 / 64) > 4.5 * sd
