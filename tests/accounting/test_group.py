"""Tests of group privacy (lecture 002)."""

from __future__ import annotations

import math

import mpmath
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpcurator.accounting import Budget
from dpcurator.accounting._group import group_privacy
from dpcurator.errors import InvalidParameterError


def test_lecture_examples() -> None:
    # Lecture 002: (k eps, delta (e^{k eps} - 1) / (e^eps - 1)).
    eps, delta = 0.5, 1e-6
    three = group_privacy(eps, delta, 3)
    assert three.epsilon == 1.5
    assert three.delta == pytest.approx(
        delta * (math.exp(1.5) - 1) / (math.exp(0.5) - 1), rel=1e-14
    )
    assert three.delta == pytest.approx(delta * (1 + math.exp(0.5) + math.exp(1.0)), rel=1e-14)
    two = group_privacy(eps, delta, 2)
    assert two.epsilon == 1.0
    assert two.delta == pytest.approx(delta * (1 + math.exp(0.5)), rel=1e-14)


def test_k_one_returns_the_input_and_pure_dp_scales() -> None:
    assert group_privacy(0.7, 1e-5, 1) == Budget(0.7, 1e-5)
    pure = group_privacy(0.7, 0.0, 4)
    assert (pure.epsilon, pure.delta) == (pytest.approx(2.8, rel=1e-15), 0.0)
    flat = group_privacy(0.0, 1e-6, 4)
    assert (flat.epsilon, flat.delta) == (0.0, pytest.approx(4e-6, rel=1e-15))


@mpmath.workdps(40)
def test_small_epsilon_is_accurate() -> None:
    # (e^{k eps} - 1)/(e^eps - 1) -> k as eps -> 0; naive exp() - 1 loses all digits at 1e-12.
    eps, k = 1e-12, 5
    exact = mpmath.expm1(k * mpmath.mpf(eps)) / mpmath.expm1(mpmath.mpf(eps))
    got = group_privacy(eps, 1e-6, k).delta / 1e-6
    assert got == pytest.approx(float(exact), rel=1e-12)


def test_large_groups_do_not_overflow() -> None:
    g = group_privacy(5.0, 1e-300, 100)
    assert g.epsilon == 500.0
    assert 0.0 < g.delta < 1.0
    assert math.log(g.delta) == pytest.approx(
        math.log(1e-300) + 99 * 5.0 - math.log(-math.expm1(-5.0)), rel=1e-12
    )


@settings(max_examples=60, deadline=None)
@given(
    eps=st.floats(0.0, 3.0),
    delta=st.floats(0.0, 1e-3),
    k=st.integers(1, 30),
)
def test_matches_the_chain_of_neighbours(eps: float, delta: float, k: int) -> None:
    # Independent recursion: one more neighbour step maps (E, D) to (E + eps, e^eps D + delta).
    chain_eps, chain_delta = eps, delta
    for _ in range(k - 1):
        chain_eps, chain_delta = chain_eps + eps, math.exp(eps) * chain_delta + delta
    if chain_delta >= 1.0 * (1 + 1e-12):
        with pytest.raises(InvalidParameterError, match="k "):
            group_privacy(eps, delta, k)
        return
    if chain_delta >= 1.0 * (1 - 1e-12):
        return  # on the boundary, either answer is right
    g = group_privacy(eps, delta, k)
    assert g.epsilon == pytest.approx(chain_eps, rel=1e-12)
    assert g.delta == pytest.approx(chain_delta, rel=1e-10, abs=1e-300)


def test_pure_group_epsilon_is_tight_for_laplace() -> None:
    # Laplace(scale b) on a count: datasets k apart shift the mean by k, and far in the tail the
    # density ratio is exactly e^{k/b}, so no smaller group epsilon is possible.
    b, k = 2.0, 3
    x = -10.0
    ratio = math.exp(-abs(x - 0.0) / b) / math.exp(-abs(x - k) / b)
    assert ratio == pytest.approx(math.exp(group_privacy(1 / b, 0.0, k).epsilon), rel=1e-12)


def test_vacuous_guarantee_is_refused() -> None:
    with pytest.raises(InvalidParameterError, match=r"k makes the group delta.* reach 1 .*got 20"):
        group_privacy(1.0, 1e-6, 20)


@pytest.mark.parametrize(
    ("args", "pattern"),
    [
        ((-0.5, 1e-6, 2), r"epsilon must be >= 0; got -0\.5"),
        ((math.nan, 1e-6, 2), "epsilon must be a number, not NaN"),
        ((math.inf, 1e-6, 2), "epsilon must be finite; got inf"),
        ((0.5, 1.0, 2), r"delta must be in \[0, 1\); got 1\.0"),
        ((0.5, -1e-9, 2), r"delta must be in \[0, 1\)"),
        ((0.5, 1e-6, 0), "k must be >= 1; got 0"),
        ((0.5, 1e-6, 2.0), "k must be an integer; got 2.0"),
        ((0.5, 1e-6, True), "k must be an integer; got True"),
    ],
)
def test_bad_parameters(args: tuple[object, object, object], pattern: str) -> None:
    with pytest.raises(InvalidParameterError, match=pattern):
        group_privacy(*args)  # type: ignore[arg-type]
