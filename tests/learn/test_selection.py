"""Private model selection: it finds the best candidate at large epsilon, and it is accounted."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from numpy.typing import NDArray

from dpcurator.accounting import (
    ApproxDPEvent,
    BasicAccountant,
    Budget,
    ComposedEvent,
    PureDPEvent,
)
from dpcurator.errors import InvalidParameterError
from dpcurator.learn import DPLinearRegression, DPLinearSVC, DPLogisticRegression, DPModelSelector
from dpcurator.learn._selection import random_permutation
from dpcurator.noise import InsecureSeededSource


def _data(n: int = 600) -> tuple[NDArray[np.float64], NDArray[np.int64]]:
    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, size=(n, 2))
    y = (X[:, 0] > 0).astype(np.int64)
    return X, y


def _good_and_bad() -> list[Any]:
    # The good candidate learns the sign of x_0 (about 97% accuracy at epsilon 20); the bad one
    # has so little budget that its model is noise (about 50%).
    return [
        DPLogisticRegression(classes=[0, 1], epsilon=1e-4, alpha=0.01),
        DPLogisticRegression(classes=[0, 1], epsilon=20.0, alpha=0.01),
        DPLogisticRegression(classes=[0, 1], epsilon=1e-4, alpha=0.1),
    ]


def _picks(epsilon: float, runs: int, mechanism: str) -> int:
    X, y = _data()
    best = 0
    for seed in range(runs):
        selector = DPModelSelector(
            _good_and_bad(), epsilon=epsilon, mechanism=mechanism, source=InsecureSeededSource(seed)
        ).fit(X, y)
        best += selector.best_index_ == 1
    return best


@pytest.mark.statistical
@pytest.mark.parametrize("mechanism", ["report_noisy_max", "exponential"])
def test_selection_finds_the_best_candidate_at_large_epsilon(mechanism: str) -> None:
    # 150 validation rows: the good candidate scores 144-148, the bad ones 47-96 on these seeds
    # (gap >= 48). Exponential mechanism and permute-and-flip pick a candidate 48 below the best
    # with probability <= 2 exp(-eps 48 / 2) < 1e-10 at eps = 1 (McSherry-Talwar and
    # McKenna-Sheldon tails), so 20 of 20 runs must pick the good one.
    assert _picks(1.0, 20, mechanism) == 20


@pytest.mark.statistical
def test_selection_negative_control_at_tiny_epsilon() -> None:
    # At epsilon = 1e-4 the choice is nearly uniform over 3 candidates: P[best] <= 1/3 e^(2e-4 150)
    # ~ 0.34, so 20 of 20 picks (the positive assertion) fails; more than 15 has probability
    # < 1e-4.
    assert _picks(1e-4, 20, "report_noisy_max") <= 15


def test_disjoint_strategy_is_parallel_composition() -> None:
    X, y = _data()
    candidates = [
        DPLogisticRegression(classes=[0, 1], epsilon=0.5),
        DPLinearSVC(classes=[0, 1], epsilon=0.8, delta=1e-6),
        DPLogisticRegression(classes=[0, 1], epsilon=0.3, method="output"),
    ]
    selector = DPModelSelector(candidates, epsilon=0.6, source=InsecureSeededSource(1)).fit(X, y)
    assert selector.budget_ == Budget(0.8, 1e-6)
    assert BasicAccountant().compose(selector.privacy_event_).get_epsilon(1e-6) <= 0.8 + 1e-12
    assert isinstance(selector.privacy_event_, ApproxDPEvent)
    # Each candidate trained on its own quarter of the rows (validation: the last quarter).
    for model in (selector.best_estimator_,):
        assert model.n_features_in_ == 2


def test_shared_strategy_and_refit_compose() -> None:
    X, y = _data()
    candidates = [
        DPLogisticRegression(classes=[0, 1], epsilon=0.5),
        DPLogisticRegression(classes=[0, 1], epsilon=0.25),
    ]
    shared = DPModelSelector(
        candidates, epsilon=0.3, strategy="shared", source=InsecureSeededSource(2)
    ).fit(X, y)
    assert shared.budget_.epsilon == pytest.approx(0.75)
    refit = DPModelSelector(
        candidates, epsilon=1.0, refit=True, source=InsecureSeededSource(3)
    ).fit(X, y)
    chosen = candidates[refit.best_index_].epsilon
    assert refit.budget_.epsilon == pytest.approx(1.0 + chosen)
    assert isinstance(refit.privacy_event_, ComposedEvent)
    spent = BasicAccountant().compose(refit.privacy_event_).get_epsilon(0.0)
    assert spent == pytest.approx(1.0 + chosen)
    assert refit.best_estimator_.n_features_in_ == 2
    assert refit.score(X, y) >= 0.0


def test_regressor_selection_uses_declared_label_bounds() -> None:
    rng = np.random.default_rng(4)
    x = rng.uniform(0, 1, size=(900, 1))
    y = 2 * x[:, 0]
    candidates = [
        DPLinearRegression(epsilon=5.0, label_bounds=(0, 2), alpha=a) for a in (0.001, 0.01)
    ]
    with pytest.raises(InvalidParameterError) as info:
        DPModelSelector(candidates).fit(x, y)
    assert info.value.name == "label_bounds"
    selector = DPModelSelector(
        candidates, epsilon=2.0, label_bounds=(0, 2), source=InsecureSeededSource(5)
    ).fit(x, y)
    assert selector.budget_ == Budget(5.0)
    assert selector.predict(x[:3]).shape == (3,)
    assert isinstance(PureDPEvent(2.0), PureDPEvent)


def test_selection_bad_input() -> None:
    X, y = _data(60)
    with pytest.raises(InvalidParameterError) as info:
        DPModelSelector([DPLogisticRegression(classes=[0, 1])], epsilon=0.0).fit(X, y)
    assert info.value.name == "epsilon"
    with pytest.raises(InvalidParameterError) as info:
        DPModelSelector([], epsilon=1.0).fit(X, y)
    assert info.value.name == "estimators"
    with pytest.raises(InvalidParameterError) as info:
        DPModelSelector([DPLogisticRegression(classes=[0, 1])], mechanism="gumbel").fit(X, y)
    assert info.value.name == "mechanism"
    with pytest.raises(InvalidParameterError) as info:
        DPModelSelector([DPLogisticRegression(classes=[0, 1])], strategy="all").fit(X, y)
    assert info.value.name == "strategy"
    with pytest.raises(InvalidParameterError) as info:
        DPModelSelector([DPLogisticRegression(classes=[0, 1])], validation_fraction=1.5).fit(X, y)
    assert info.value.name == "validation_fraction"
    with pytest.raises(InvalidParameterError) as info:
        DPModelSelector(
            [DPLogisticRegression(classes=[0, 1]), DPLinearRegression(label_bounds=(0, 1))]
        ).fit(X, y)
    assert info.value.name == "estimators"
    with pytest.raises(InvalidParameterError) as info:
        DPModelSelector([DPLogisticRegression(classes=[0, 1])]).fit(X, y[:-1])
    assert info.value.name == "y"
    with pytest.raises(InvalidParameterError) as info:
        DPModelSelector([DPLogisticRegression(classes=[0, 1])] * 40).fit(X, y)
    assert info.value.name == "X"


@pytest.mark.statistical
def test_random_permutation_is_uniform() -> None:
    # Chi-square over the 6 permutations of 3 items, 6,000 draws: p > 1e-3 (df = 5, critical
    # value 20.5). Negative control: a permutation that never moves item 0 fails.
    counts: dict[tuple[int, ...], int] = {}
    source = InsecureSeededSource(9)
    for _ in range(6000):
        key = tuple(random_permutation(3, source).tolist())
        counts[key] = counts.get(key, 0) + 1
    assert len(counts) == 6
    chi2 = sum((c - 1000) ** 2 / 1000 for c in counts.values())
    assert chi2 < 20.5
    broken = [c if k[0] == 0 else 0 for k, c in counts.items()]
    assert sum((c - 1000) ** 2 / 1000 for c in broken) > 20.5
    assert math.isfinite(chi2)
