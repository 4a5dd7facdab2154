"""The noise step of hierarchical releases (src/dpcurator/hierarchy/_noise.py).

hierarchy.md (c).12 and worked example D4: the scale, ratio and variance helpers; the pmf ratio of
neighbouring tables; seeded moments against theory; and an empirical privacy check of the whole
noise step on neighbouring tables (tests/privacy_check.py) with a negative control.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from numpy.typing import NDArray

from dpcurator.accounting import DiscreteGaussianEvent, DiscreteLaplaceEvent
from dpcurator.errors import InvalidParameterError
from dpcurator.hierarchy._noise import (
    add_level_noise,
    geometric_alpha,
    geometric_pmf,
    geometric_scale,
    geometric_variance,
    split_budget,
)
from dpcurator.hierarchy._release import count_hierarchy
from dpcurator.hierarchy._spec import HierarchySpec
from dpcurator.noise import InsecureSeededSource
from tests.privacy_check import Event, audit

# -- D4: the helpers ---------------------------------------------------------------------------


def test_d4_histogram_encoding_m_h() -> None:
    scale = geometric_scale(1.0, 3, sensitivity=2)
    assert scale == 6.0
    assert round(geometric_alpha(scale), 6) == 0.846482
    assert round(geometric_variance(scale), 2) == 71.83


def test_d4_cumulative_encoding_m_c() -> None:
    scale = geometric_scale(1.0, 3)
    assert scale == 3.0
    assert round(geometric_alpha(scale), 6) == 0.716531
    assert round(geometric_variance(scale), 2) == 17.83


def test_d4_small_epsilon() -> None:
    scale = geometric_scale(0.1, 3, sensitivity=2)
    assert math.isclose(scale, 60.0)
    assert round(geometric_variance(scale), 2) == 7199.83


def test_variance_matches_the_pmf() -> None:
    z = np.arange(-2000, 2001)
    p = geometric_pmf(z, 6.0)
    assert math.isclose(float(p.sum()), 1.0, rel_tol=1e-12)
    assert math.isclose(float((p * z**2).sum()), geometric_variance(6.0), rel_tol=1e-9)


@pytest.mark.parametrize("scale", [0.5, 3.0, 60.0])
def test_pmf_ratio_of_neighbouring_tables_is_exactly_alpha(scale: float) -> None:
    # Tables c and c + 1: P[c + Z = y] / P[c + 1 + Z = y] is 1/alpha for every y <= c and
    # alpha for every y >= c + 1; never further from 1 (so each level is (1/scale)-DP).
    c = 10
    y = np.arange(c - 30, c + 31)
    ratio = geometric_pmf(y - c, scale) / geometric_pmf(y - c - 1, scale)
    alpha = geometric_alpha(scale)
    np.testing.assert_allclose(ratio[y <= c], 1.0 / alpha, rtol=1e-12)
    np.testing.assert_allclose(ratio[y > c], alpha, rtol=1e-12)
    assert math.isclose(math.log(float(ratio.max())), 1.0 / scale, rel_tol=1e-12)


def test_split_budget() -> None:
    assert split_budget(1.0, [1, 1, 2]) == (0.25, 0.25, 0.5)
    assert math.fsum(split_budget(0.3, [1, 1, 1])) <= 0.3 + 1e-15
    with pytest.raises(InvalidParameterError, match="level_weights"):
        split_budget(1.0, [0, 0])
    with pytest.raises(InvalidParameterError, match="budget must be > 0"):
        split_budget(-1.0, [1])


# -- events and accounting -----------------------------------------------------------------------


def test_geometric_levels_compose_to_the_budget() -> None:
    step = add_level_noise(
        [[5], [2, 3], [1, 1, 3]],
        mechanism="geometric",
        budget=0.9,
        weights=[1, 1, 1],
        source=InsecureSeededSource(0),
    )
    assert all(isinstance(e, DiscreteLaplaceEvent) for e in step.events)
    assert all(e.sensitivity == 1 for e in step.events)  # type: ignore[attr-defined]
    assert step.epsilon is not None
    assert step.epsilon <= 0.9
    assert math.isclose(step.epsilon, 0.9, rel_tol=1e-12)
    assert step.rho is None
    assert [v.shape for v in step.values] == [(1,), (2,), (3,)]


def test_discrete_gaussian_levels_add_up_in_zcdp() -> None:
    step = add_level_noise([[5], [2, 3]], mechanism="discrete_gaussian", budget=0.5, weights=[1, 4])
    assert all(isinstance(e, DiscreteGaussianEvent) for e in step.events)
    assert [round(level.share, 12) for level in step.levels] == [0.1, 0.4]
    assert step.rho is not None
    assert step.rho <= 0.5 + 1e-12
    assert step.epsilon is None


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"mechanism": "laplace"}, "mechanism must be one of"),
        ({"budget": 0.0}, "budget must be > 0"),
        ({"weights": [1.0]}, "one weight per measured level"),
        ({"weights": [1.0, -1.0]}, "must all be > 0"),
    ],
)
def test_bad_parameters_are_named(kwargs: dict[str, object], match: str) -> None:
    options: dict[str, object] = {"mechanism": "geometric", "budget": 1.0} | kwargs
    with pytest.raises(InvalidParameterError, match=match):
        add_level_noise([[1], [1]], **options)  # type: ignore[arg-type]


# -- statistics -------------------------------------------------------------------------------

N = 20_000  # noise draws per level


def _within(sample: NDArray[np.int64], variance: float, sigmas: float = 5.0) -> bool:
    """Sample mean ~ 0 and variance ~ theory, within ``sigmas`` standard errors.

    Standard errors: ``sqrt(var / N)`` for the mean; for the variance, ``var sqrt(5 / N)``
    (the Laplace law has fourth moment ``6 var^2``, so ``Var(s^2) ~ 5 var^2 / N``; the
    discrete Laplace's is smaller, so this is conservative).
    """
    mean_ok = abs(float(sample.mean())) <= sigmas * math.sqrt(variance / sample.size)
    var_ok = abs(float(sample.var()) - variance) <= sigmas * variance * math.sqrt(5 / sample.size)
    return mean_ok and var_ok


@pytest.mark.statistical
def test_seeded_mean_and_variance_match_theory() -> None:
    epsilon, levels = 1.0, 3
    step = add_level_noise(
        [np.zeros(N, dtype=np.int64)] * levels,
        mechanism="geometric",
        budget=epsilon,
        source=InsecureSeededSource(2024),
    )
    theory = geometric_variance(geometric_scale(epsilon, levels))
    for values, level in zip(step.values, step.levels, strict=True):
        assert math.isclose(level.variance, theory, rel_tol=1e-12)
        assert _within(values, theory)
    # Negative control: the variance of noise calibrated for 2 levels is rejected.
    wrong = geometric_variance(geometric_scale(epsilon, 2))
    assert not any(_within(values, wrong) for values in step.values)


# -- privacy of the noise step on neighbouring tables -------------------------------------------

EPSILON = 1.0
SAMPLES = 30_000


def _path_counts(frame: pd.DataFrame) -> NDArray[np.int64]:
    """True counts of the 3 measured levels (total, state, county) on the path of (IL, Cook)."""
    spec = HierarchySpec(data=frame, levels=("state", "county"), epsilon=EPSILON)
    counts = count_hierarchy(spec)
    tree = counts.tree
    path = [tree.index(()), tree.index(("IL",)), tree.index(("IL", "Cook"))]
    return counts.values[path]


def _histograms(frame: pd.DataFrame) -> list[NDArray[np.int64]]:
    """Each level's histogram restricted to the path of (IL, Cook), repeated SAMPLES times."""
    return [np.full(SAMPLES, c, dtype=np.int64) for c in _path_counts(frame)]


def _events(center: NDArray[np.int64]) -> list[Event]:
    """Outputs above the larger table's counts on k levels or more (fixed before sampling)."""

    def above(k: int, shift: int) -> Event:
        return Event(
            f"{k}+ levels >= c+{shift}",
            lambda y: (y >= center + shift).sum(axis=1) >= k,
        )

    return [above(k, s) for k in (2, 3) for s in (1, 2)]


@pytest.fixture(scope="module")
def neighbours() -> tuple[pd.DataFrame, pd.DataFrame]:
    people = pd.DataFrame(
        {
            "state": ["IL"] * 6 + ["WI"] * 4,
            "county": ["Cook"] * 4 + ["Lake"] * 2 + ["Dane"] * 4,
        }
    )
    extra = pd.concat([people, pd.DataFrame({"state": ["IL"], "county": ["Cook"]})])
    return people, extra.reset_index(drop=True)


def _samples(frame: pd.DataFrame, seed: int, *, levels_assumed: int) -> NDArray[np.int64]:
    """Noisy path counts, shape (SAMPLES, 3), with each level's budget for ``levels_assumed``."""
    histograms = _histograms(frame)
    budget = EPSILON * len(histograms) / levels_assumed
    step = add_level_noise(
        histograms, mechanism="geometric", budget=budget, source=InsecureSeededSource(seed)
    )
    return np.stack(step.values, axis=1)


@pytest.mark.statistical
@pytest.mark.slow
def test_noise_step_is_epsilon_dp_on_neighbouring_tables(
    neighbours: tuple[pd.DataFrame, pd.DataFrame],
) -> None:
    small, large = neighbours
    assert (_path_counts(large) - _path_counts(small)).tolist() == [1, 1, 1]
    events = _events(_path_counts(large))
    honest = audit(
        _samples(small, 1, levels_assumed=3), _samples(large, 2, levels_assumed=3), events
    )
    assert honest.epsilon_lower_bound <= EPSILON
    # Negative control: noise calibrated for one level (each level gets the whole epsilon, so
    # the three together are 3-epsilon-DP) must be caught.
    broken = audit(
        _samples(small, 3, levels_assumed=1), _samples(large, 4, levels_assumed=1), events
    )
    assert broken.epsilon_lower_bound > EPSILON
