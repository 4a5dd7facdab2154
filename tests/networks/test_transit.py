"""Private OD counts for transit planning: consistent, non-negative, integral and faithful."""

from __future__ import annotations

import dataclasses
import inspect

import numpy as np
import pytest

from dpcurator.errors import InvalidParameterError
from dpcurator.hierarchy import NoisyLevels, consistency_matrix
from dpcurator.networks import (
    NoisyPlanCost,
    fleet_problem,
    load_flights_od,
    postprocess_od,
    release_od_counts,
)
from dpcurator.noise import InsecureSeededSource


@pytest.fixture(scope="module")
def january():  # type: ignore[no-untyped-def]
    return load_flights_od(months=1)


@pytest.mark.parametrize("epsilon", [0.1, 1.0])
def test_release_is_consistent_nonnegative_integral_and_faithful(january, epsilon: float) -> None:  # type: ignore[no-untyped-def]
    out = release_od_counts(january, epsilon=epsilon, source=InsecureSeededSource(7))
    values = out.values
    assert values.dtype == np.int64 and values.min() >= 0
    assert not np.any(consistency_matrix(january.tree) @ values)
    # the continuous CBDP solution keeps a plan within beta of the released optimum
    assert abs(out.projection.objective - out.cost.value) <= out.beta * (1 + 1e-6)
    # and the plan on the integer counts stays close to the true one
    truth = fleet_problem(january.tree, january.distance).solve(january.counts).value
    assert out.plan.feasible
    assert abs(out.plan.value - truth) <= 3 * out.beta
    assert out.epsilon == pytest.approx(epsilon)


def test_fleet_problem_and_checks(january) -> None:  # type: ignore[no-untyped-def]
    problem = fleet_problem(january.tree, january.distance)
    assert problem.n_data == january.tree.n_nodes
    solution = problem.solve(january.counts)
    assert solution.feasible and solution.value > 0
    with pytest.raises(InvalidParameterError, match="months"):
        load_flights_od(months=13)
    with pytest.raises(InvalidParameterError, match="cost_share"):
        release_od_counts(january, epsilon=1.0, cost_share=1.5)
    with pytest.raises(InvalidParameterError, match="distance"):
        fleet_problem(january.tree, {})


def test_postprocessing_reads_no_true_counts(january) -> None:  # type: ignore[no-untyped-def]
    """postprocess_od takes the public tree and LP and the noisy releases only."""
    assert list(inspect.signature(postprocess_od).parameters) == [
        "tree",
        "problem",
        "noisy",
        "cost",
        "beta",
    ]
    for kind in (NoisyLevels, NoisyPlanCost):
        assert "counts" not in {f.name for f in dataclasses.fields(kind)}
    out = release_od_counts(january, epsilon=1.0, source=InsecureSeededSource(9))
    problem = fleet_problem(january.tree, january.distance)
    values, _, beta = postprocess_od(january.tree, problem, out.noisy, out.cost)
    assert np.array_equal(values, out.values) and beta == out.beta
