"""AboveThreshold: halting, its accuracy theorem, and agreement with the batch sampler."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpcurator.accounting import PureDPEvent
from dpcurator.errors import BudgetExceededError, DPError, InvalidParameterError
from dpcurator.mechanisms import AboveThreshold
from dpcurator.mechanisms._sparse_vector import _above_threshold_runs
from dpcurator.noise import InsecureSeededSource


def test_halts_after_the_first_true_and_refuses_further_queries() -> None:
    svt = AboveThreshold(10.0, epsilon=1.0, source=InsecureSeededSource(0))
    assert svt.event == PureDPEvent(epsilon=1.0)
    answers = [svt.test(q) for q in (-1e6, -1e6, 1e6)]
    assert answers == [False, False, True]
    assert svt.halted and svt.queries_answered == 3
    with pytest.raises(BudgetExceededError, match="halted") as info:
        svt.test(0.0)
    assert isinstance(info.value, DPError)
    assert svt.queries_answered == 3
    assert "halted=True" in repr(svt)


def test_class_and_batch_sampler_draw_the_same_noise() -> None:
    # The audits use the batch sampler; with one run and the same seed it must give exactly
    # the answers of the public class.
    queries = [-3.0, 1.5, -0.5, 2.0, 0.25, 4.0, -2.0, 3.0]
    for seed in range(20):
        svt = AboveThreshold(1.0, epsilon=0.5, sensitivity=2.0, source=InsecureSeededSource(seed))
        first = len(queries)
        for i, q in enumerate(queries):
            if svt.test(q):
                first = i
                break
        batch = _above_threshold_runs(
            1.0, queries, epsilon=0.5, sensitivity=2.0, size=1, source=InsecureSeededSource(seed)
        )
        assert int(batch[0]) == first


@pytest.mark.statistical
def test_accuracy_theorem() -> None:
    # Dwork and Roth, Theorem 3.24: with probability 1 - beta, no query below T - alpha is
    # reported above, and a query above T + alpha is never missed (k queries).
    k, beta, eps, runs = 10, 0.05, 1.0, 20_000
    alpha = AboveThreshold(0.0, epsilon=eps).accuracy_bound(k, beta)
    assert alpha == pytest.approx(8 * (math.log(k) + math.log(2 / beta)) / eps, rel=2**-14)
    tolerance = 5 * math.sqrt(beta * (1 - beta) / runs)

    def runs_for(queries: list[float], seed: int) -> np.ndarray:
        return _above_threshold_runs(
            0.0, queries, epsilon=eps, sensitivity=1.0, size=runs, source=InsecureSeededSource(seed)
        )

    low = runs_for([-alpha] * k, 51)
    assert np.mean(low < k) <= beta + tolerance  # a false "above" among k low queries
    high = runs_for([-alpha] * (k - 1) + [alpha], 52)
    assert np.mean(high != k - 1) <= beta + tolerance  # any error on the sequence
    # Negative control: at a quarter of alpha, false "above" answers are frequent.
    near = runs_for([-alpha / 4] * k, 53)
    assert np.mean(near < k) > beta + tolerance


@pytest.mark.parametrize(
    ("call", "name"),
    [
        (lambda: AboveThreshold(math.nan, epsilon=1.0), "threshold"),
        (lambda: AboveThreshold(math.inf, epsilon=1.0), "threshold"),
        (lambda: AboveThreshold(0.0, epsilon=0.0), "epsilon"),
        (lambda: AboveThreshold(0.0, epsilon=math.inf), "epsilon"),
        (lambda: AboveThreshold(0.0, epsilon=1e-9), "epsilon"),
        (lambda: AboveThreshold(0.0, epsilon=1.0, sensitivity=math.inf), "sensitivity"),
        (lambda: AboveThreshold(0.0, epsilon=1.0, sensitivity=-1.0), "sensitivity"),
        (lambda: AboveThreshold(0.0, epsilon=1.0).test(math.nan), "query_value"),
        (lambda: AboveThreshold(0.0, epsilon=1.0).test([1.0, 2.0]), "query_value"),
        (lambda: AboveThreshold(0.0, epsilon=1.0).accuracy_bound(0, 0.1), "queries"),
        (lambda: AboveThreshold(0.0, epsilon=1.0).accuracy_bound(3, 0.0), "beta"),
    ],
)
def test_bad_parameters_name_the_argument(call: object, name: str) -> None:
    with pytest.raises(InvalidParameterError) as info:
        call()  # type: ignore[operator]
    assert info.value.name == name
    assert name in str(info.value)
