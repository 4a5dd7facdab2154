"""Regression test: the floating-point attack on textbook Laplace (Mironov 2012).

Research note A.2. A textbook float Laplace ``M(x) = x + lambda * log(...)`` of a uniform on the
grid ``k 2**-53`` can only produce a porous set of doubles, and that set depends on ``x``: an
output of ``M(0)`` is often impossible under ``M(1)``, which identifies the input with certainty
(no finite epsilon). The attack replays the sampler: ``k -> M_x(k)`` is monotone, so a binary
search over ``k`` decides exactly whether an observed output is reachable from ``x``.

The same attack, run against dpcurator's :func:`laplace_mechanism` (whose output is a monotone
function of its integer noise: ``from_grid(to_grid(x) + z)``), must find nothing: both inputs
produce the same set of outputs, the grid. So must the precision-based attack (Haney et al.
2022), which flags outputs with ``|y| < 1`` that are not multiples of ``2**-53``.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable

import numpy as np
import pytest

from dpcurator.mechanisms import laplace_mechanism
from dpcurator.noise import InsecureSeededSource, from_grid, to_grid, uniform_integers

SAMPLES = 2000
LAMBDA = 1.0
TOP = 2**53  # U = k 2**-53 with k uniform in [1, 2**53)


def textbook_laplace(x: float, k: int) -> float:
    """numpy's ``Generator.laplace(x, LAMBDA)`` as a function of its 53 random bits ``k``.

    ``U = k 2**-53``; ``x - lambda log((2 - U) - U)`` if ``U >= 1/2`` else
    ``x + lambda log(U + U)`` (numpy ``random_laplace``; research note A.2). Python's
    ``math.log`` is the same correctly rounded libm log numpy uses.
    """
    u = k * 2.0**-53
    if u >= 0.5:
        return x - LAMBDA * math.log(2.0 - u - u)
    return x + LAMBDA * math.log(u + u)


def reachable(output: Callable[[int], float], y: float, lo: int, hi: int) -> bool:
    """Whether ``y`` is in the image of the monotone ``output`` on ``[lo, hi]`` (binary search)."""
    if not output(lo) <= y <= output(hi):
        return False
    while lo < hi:  # smallest k with output(k) >= y
        mid = (lo + hi) // 2
        if output(mid) >= y:
            hi = mid
        else:
            lo = mid + 1
    return output(lo) == y


def precision_flags(y: np.ndarray) -> np.ndarray:
    """Haney et al. 2022: for input 1, |y| < 1 implies y = fl(1 + z) is a multiple of 2**-53."""
    scaled = y * 2.0**53  # exact: a power-of-two scaling
    return (np.abs(y) < 1.0) & (scaled != np.floor(scaled))


@pytest.fixture(scope="module")
def textbook_outputs() -> list[float]:
    ks = uniform_integers(TOP - 1, SAMPLES, source=InsecureSeededSource(2012)) + 1
    return [textbook_laplace(0.0, int(k)) for k in ks]


def test_textbook_output_map_is_monotone_so_the_search_is_exact() -> None:
    ks = np.sort(uniform_integers(TOP - 1, 2000, source=InsecureSeededSource(1)) + 1)
    values = [textbook_laplace(0.0, int(k)) for k in ks]
    assert all(a <= b for a, b in itertools.pairwise(values))


@pytest.mark.statistical
def test_attack_breaks_textbook_laplace(textbook_outputs: list[float]) -> None:
    def from_zero(k: int) -> float:
        return textbook_laplace(0.0, k)

    def from_one(k: int) -> float:
        return textbook_laplace(1.0, k)

    # Positive control of the search: every output of M(0) is reachable from 0.
    assert all(reachable(from_zero, y, 1, TOP - 1) for y in textbook_outputs[:200])
    impossible = sum(not reachable(from_one, y, 1, TOP - 1) for y in textbook_outputs)
    # Research note A.2 measured 80-86 % at lambda = 1; each such output proves "input was 0".
    assert impossible / SAMPLES > 0.5
    # The precision attack also fires on the textbook mechanism (about 27 % at lambda = 1).
    assert precision_flags(np.array(textbook_outputs)).mean() > 0.1


@pytest.mark.statistical
def test_attack_finds_nothing_against_dpcurator() -> None:
    release = laplace_mechanism(
        np.zeros(SAMPLES),
        epsilon=1.0 / LAMBDA,
        sensitivity=1.0,
        changed_coordinates=1,
        source=InsecureSeededSource(2012),
    )
    assert release.error is not None
    bits = -math.frexp(release.error.unit)[1] + 1  # unit = 2**-bits
    assert math.ldexp(1.0, -bits) == release.error.unit
    limit = 2**52

    def replay(x: float) -> Callable[[int], float]:
        start = int(to_grid([x], bits)[0])
        return lambda z: float(from_grid([start + z], bits)[0])

    from_zero, from_one = replay(0.0), replay(1.0)
    outputs = [float(y) for y in release.value]
    assert all(reachable(from_zero, y, -limit, limit) for y in outputs[:200])
    impossible = sum(not reachable(from_one, y, -limit, limit) for y in outputs)
    assert impossible == 0
    assert not precision_flags(release.value).any()
