"""Exponential mechanism and report-noisy-max (permute-and-flip): exact laws and utility."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from numpy.typing import NDArray
from scipy import stats

from dpcurator.accounting import PureDPEvent
from dpcurator.errors import InvalidParameterError
from dpcurator.mechanisms import exponential_mechanism, report_noisy_max, selection_error_bound
from dpcurator.mechanisms._exponential import (
    _dyadic_floor,
    _exponential_indices,
    _permute_and_flip_indices,
)
from dpcurator.noise import InsecureSeededSource

N = 200_000
LEVEL = 1e-4  # chi-square goodness-of-fit level: the tolerance of the distribution tests


def _em_law(utilities: list[float], coefficient: float) -> NDArray[np.float64]:
    """``P[r] ∝ exp(coefficient u_r)`` (McSherry and Talwar 2007)."""
    u = np.array(utilities)
    w = np.exp(coefficient * (u - u.max()))
    return w / w.sum()


def _pf_law(utilities: list[float], coefficient: float) -> NDArray[np.float64]:
    """Permute-and-flip by enumeration: ``P[r] = p_r E[1 / (1 + #heads among the others)]``."""
    u = np.array(utilities)
    p = np.exp(coefficient * (u - u.max()))
    out = np.zeros(u.size)
    for r in range(u.size):
        others = [j for j in range(u.size) if j != r]
        total = 0.0
        for heads in itertools.product([0, 1], repeat=len(others)):
            weight = math.prod(p[j] if h else 1 - p[j] for j, h in zip(others, heads, strict=True))
            total += weight / (1 + sum(heads))
        out[r] = p[r] * total
    return out


def _chi_square_pvalue(indices: NDArray[np.int64], law: NDArray[np.float64]) -> float:
    counts = np.bincount(indices, minlength=law.size)
    return float(stats.chisquare(counts, law * indices.size).pvalue)


@pytest.mark.statistical
@pytest.mark.parametrize("monotonic", [False, True])
def test_exponential_mechanism_samples_the_softmax(monotonic: bool) -> None:
    utilities = [0.0, 1.0, 2.5, -1.0, 3.0]
    eps, sensitivity = 1.0, 1.5
    draws = _exponential_indices(
        utilities,
        epsilon=eps,
        sensitivity=sensitivity,
        monotonic=monotonic,
        size=N,
        source=InsecureSeededSource(41),
    )
    coefficient = eps / (sensitivity if monotonic else 2 * sensitivity)
    assert _chi_square_pvalue(draws, _em_law(utilities, coefficient)) > LEVEL
    # Negative control: the law of a mechanism 20 % less private is rejected.
    assert _chi_square_pvalue(draws, _em_law(utilities, 1.2 * coefficient)) < LEVEL


@pytest.mark.statistical
@pytest.mark.parametrize("monotonic", [False, True])
def test_permute_and_flip_samples_its_exact_law(monotonic: bool) -> None:
    scores = [3.0, 1.0, 2.5, 0.0]
    eps = 1.0
    draws = _permute_and_flip_indices(
        scores,
        epsilon=eps,
        sensitivity=1.0,
        monotonic=monotonic,
        size=N,
        source=InsecureSeededSource(42),
    )
    coefficient = eps if monotonic else eps / 2
    assert _chi_square_pvalue(draws, _pf_law(scores, coefficient)) > LEVEL
    # Negative control: the exponential mechanism's law (a different mechanism) is rejected.
    assert _chi_square_pvalue(draws, _em_law(scores, coefficient)) < LEVEL


@pytest.mark.statistical
def test_gaps_beyond_two_to_the_32_grid_units_are_exact() -> None:
    # Utilities 2e5 apart on a grid of 2**-16: gaps of 1.3e10 units (> 2**32), so the weight
    # exp(-c n) is drawn as exp(-c n_lo) exp(-c 2**32 n_hi). eps u / 2 = 1: P = (e^-1, 1) / Z.
    utilities = [0.0, 2e5]
    draws = _exponential_indices(
        utilities,
        epsilon=1e-5,
        sensitivity=1.0,
        monotonic=False,
        size=N,
        source=InsecureSeededSource(43),
    )
    assert _chi_square_pvalue(draws, _em_law(utilities, 0.5e-5)) > LEVEL
    assert _chi_square_pvalue(draws, _em_law(utilities, 0.6e-5)) < LEVEL


@pytest.mark.statistical
@pytest.mark.parametrize("sampler", [_exponential_indices, _permute_and_flip_indices])
def test_utility_guarantee(sampler: object) -> None:
    # McSherry-Talwar: P[u <= OPT - (2 Delta/eps)(ln|R| + ln(1/beta))] <= beta. The worst case:
    # every other candidate exactly at that gap, where the guarantee is nearly tight.
    candidates, eps, beta, draws = 300, 1.0, 0.05, 20_000
    gap = selection_error_bound(candidates, epsilon=eps, sensitivity=1.0, beta=beta)
    utilities = [0.0] + [-gap] * (candidates - 1)
    picks = sampler(  # type: ignore[operator]
        utilities,
        epsilon=eps,
        sensitivity=1.0,
        monotonic=False,
        size=draws,
        source=InsecureSeededSource(44),
    )
    tolerance = 5 * math.sqrt(beta * (1 - beta) / draws)
    assert np.mean(picks != 0) <= beta + tolerance
    # Negative control: a claim that forgets the ln|R| term is violated.
    naive_gap = 2.0 / eps * math.log(1 / beta)
    naive = [0.0] + [-naive_gap] * (candidates - 1)
    picks = sampler(  # type: ignore[operator]
        naive,
        epsilon=eps,
        sensitivity=1.0,
        monotonic=False,
        size=draws,
        source=InsecureSeededSource(45),
    )
    assert np.mean(picks != 0) > beta + tolerance


def test_selection_error_bound_formula() -> None:
    ideal = 2.0 * (math.log(100) + math.log(20))
    bound = selection_error_bound(100, epsilon=1.0, sensitivity=1.0, beta=0.05)
    assert ideal < bound < ideal * (1 + 2**-14) + 2**-14
    monotone = selection_error_bound(100, epsilon=1.0, sensitivity=1.0, beta=0.05, monotonic=True)
    assert monotone == pytest.approx(bound / 2, rel=1e-4)


@given(
    numerator=st.integers(1, 10**30),
    denominator=st.integers(1, 10**30),
)
def test_dyadic_floor_has_21_bits_and_is_just_below(numerator: int, denominator: int) -> None:
    x = Fraction(numerator, denominator)
    c = _dyadic_floor(x)
    assert Fraction(c) <= x
    assert Fraction(c) >= x * (1 - Fraction(1, 2**20))
    mantissa, _ = math.frexp(c)
    assert (mantissa * 2**21) == int(mantissa * 2**21)  # at most 21 significant bits


def test_public_functions_are_the_batch_samplers_with_one_draw() -> None:
    utilities = [1.0, 4.0, 2.0, 3.5]
    for seed in range(5):
        release = exponential_mechanism(
            ["a", "b", "c", "d"],
            utilities,
            epsilon=0.8,
            sensitivity=1.0,
            source=InsecureSeededSource(seed),
        )
        index = _exponential_indices(
            utilities,
            epsilon=0.8,
            sensitivity=1.0,
            monotonic=False,
            size=1,
            source=InsecureSeededSource(seed),
        )
        assert release.value == "abcd"[int(index[0])]
        noisy_max = report_noisy_max(utilities, epsilon=0.8, source=InsecureSeededSource(seed))
        pf = _permute_and_flip_indices(
            utilities,
            epsilon=0.8,
            sensitivity=1.0,
            monotonic=True,
            size=1,
            source=InsecureSeededSource(seed),
        )
        assert noisy_max.value == int(pf[0])


def test_outputs_and_events() -> None:
    src = InsecureSeededSource(3)
    pairs = [("x", 1), ("y", 2)]
    release = exponential_mechanism(pairs, [0.0, 1.0], epsilon=2.0, sensitivity=1.0, source=src)
    assert release.value in pairs and release.event == PureDPEvent(2.0) and release.error is None
    array_candidates = np.array([10, 20, 30])
    picked = exponential_mechanism(array_candidates, [0, 0, 0], epsilon=1.0, sensitivity=1.0)
    assert picked.value in array_candidates
    # A very large epsilon picks the best candidate.
    best = report_noisy_max([10.0, 50.0, 20.0], epsilon=50.0, source=src)
    assert best.value == 1 and isinstance(best.value, int) and best.event == PureDPEvent(50.0)
    assert report_noisy_max([7.0], epsilon=1.0).value == 0


@pytest.mark.parametrize(
    ("call", "name"),
    [
        (lambda: exponential_mechanism([], [], epsilon=1.0, sensitivity=1.0), "candidates"),
        (
            lambda: exponential_mechanism("abc", [1, 2, 3], epsilon=1.0, sensitivity=1.0),
            "candidates",
        ),
        (lambda: exponential_mechanism([1, 2], [1.0], epsilon=1.0, sensitivity=1.0), "utilities"),
        (
            lambda: exponential_mechanism([1, 2], [1.0, math.nan], epsilon=1.0, sensitivity=1.0),
            "utilities",
        ),
        (
            lambda: exponential_mechanism([1, 2], [1.0, 2.0], epsilon=0.0, sensitivity=1.0),
            "epsilon",
        ),
        (
            lambda: exponential_mechanism([1, 2], [1.0, 2.0], epsilon=1.0, sensitivity=math.inf),
            "sensitivity",
        ),
        (lambda: report_noisy_max([], epsilon=1.0), "scores"),
        (lambda: report_noisy_max([[1.0, 2.0]], epsilon=1.0), "scores"),
        (lambda: report_noisy_max([1.0, math.inf], epsilon=1.0), "scores"),
        (lambda: report_noisy_max([1.0, 2.0], epsilon=-1.0), "epsilon"),
        (lambda: report_noisy_max([1.0, 2.0], epsilon=1.0, sensitivity=0.0), "sensitivity"),
        (
            lambda: selection_error_bound(10, epsilon=1.0, sensitivity=1.0, beta=1.0),
            "beta",
        ),
        (lambda: selection_error_bound(0, epsilon=1.0, sensitivity=1.0, beta=0.1), "candidates"),
    ],
)
def test_bad_parameters_name_the_argument(call: object, name: str) -> None:
    with pytest.raises(InvalidParameterError) as info:
        call()  # type: ignore[operator]
    assert info.value.name == name
    assert name in str(info.value)
