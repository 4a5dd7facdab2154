"""Private power loads: the noise step's privacy, feasible and faithful releases, the bound."""

from __future__ import annotations

import dataclasses
import inspect
import math
import typing

import numpy as np
import pytest
from numpy.typing import NDArray

from dpcurator.accounting import BasicAccountant
from dpcurator.errors import DPError, InvalidParameterError
from dpcurator.networks import (
    CASES,
    FaithfulProjection,
    NoisyCost,
    NoisyLoads,
    PowerNetwork,
    _power,
    add_load_noise,
    load_case,
    postprocess_loads,
    release_loads,
    release_opf_cost,
)
from dpcurator.noise import InsecureSeededSource

TRIALS = 20_000


def _log_ratio_bound(low: NDArray[np.float64], high: NDArray[np.float64], cut: float) -> float:
    """Estimated privacy loss on the event {output >= cut} between two output samples."""
    return float(math.log(np.mean(high >= cut) / np.mean(low >= cut)))


def _tolerance(p_low: float, p_high: float, n: int, sigmas: float = 5.0) -> float:
    """Delta-method standard deviation of log(p_high_hat / p_low_hat), times ``sigmas``."""
    return sigmas * math.sqrt((1 - p_low) / (n * p_low) + (1 - p_high) / (n * p_high))


@pytest.mark.parametrize("epsilon", [0.5, 1.0])
def test_noise_step_is_alpha_indistinguishable(epsilon: float) -> None:
    """Loads 30 and 30 + alpha: on {y >= 30 + alpha} the loss is epsilon (Laplace's tail).

    For y >= 30 + alpha both densities are in their right tails, so the ratio of the
    probabilities is exactly exp(epsilon alpha / b) = exp(epsilon): the worst case. The
    tolerance is 5 delta-method standard deviations of the estimated log ratio.
    """
    alpha = 2.0
    low = add_load_noise(
        np.full(TRIALS, 30.0), epsilon=epsilon, alpha=alpha, source=InsecureSeededSource(11)
    ).values
    high = add_load_noise(
        np.full(TRIALS, 30.0 + alpha), epsilon=epsilon, alpha=alpha, source=InsecureSeededSource(12)
    ).values
    cut = 30.0 + alpha
    p_high, p_low = 0.5, 0.5 * math.exp(-epsilon)
    tol = _tolerance(p_low, p_high, TRIALS)
    estimate = _log_ratio_bound(low, high, cut)
    assert estimate <= epsilon + tol
    assert estimate >= epsilon - tol  # the bound is tight on this event: the test has power
    # the other side: {y <= 30}
    reverse = float(math.log(np.mean(low <= 30.0) / np.mean(high <= 30.0)))
    assert reverse <= epsilon + tol


def test_noise_step_spreads_alpha_over_several_loads() -> None:
    """Neighbours within alpha in L1, split over two loads: the loss is still epsilon."""
    epsilon, alpha = 1.0, 2.0
    low = add_load_noise(
        np.full(2 * TRIALS, 30.0), epsilon=epsilon, alpha=alpha, source=InsecureSeededSource(21)
    ).values.reshape(TRIALS, 2)
    high = add_load_noise(
        np.full(2 * TRIALS, 30.0 + alpha / 2),
        epsilon=epsilon,
        alpha=alpha,
        source=InsecureSeededSource(22),
    ).values.reshape(TRIALS, 2)
    cut = 30.0 + alpha / 2
    p_low = float(np.mean((low >= cut).all(axis=1)))
    p_high = float(np.mean((high >= cut).all(axis=1)))
    tol = _tolerance(0.25 * math.exp(-epsilon), 0.25, TRIALS)
    assert abs(math.log(p_high / p_low) - epsilon) <= tol  # exp(eps/2) per load, eps in all


def test_negative_control_too_little_noise_is_caught() -> None:
    """Noise calibrated for alpha/2 gives loss 2 epsilon for alpha-neighbours: flagged."""
    epsilon, alpha = 1.0, 2.0
    low = add_load_noise(
        np.full(TRIALS, 30.0), epsilon=epsilon, alpha=alpha / 2, source=InsecureSeededSource(13)
    ).values
    high = add_load_noise(
        np.full(TRIALS, 30.0 + alpha),
        epsilon=epsilon,
        alpha=alpha / 2,
        source=InsecureSeededSource(14),
    ).values
    tol = _tolerance(0.5 * math.exp(-epsilon), 0.5, TRIALS)
    assert _log_ratio_bound(low, high, 30.0 + alpha) > epsilon + tol


def test_noise_scale_and_event() -> None:
    noisy = add_load_noise([10.0, 20.0], epsilon=0.5, alpha=3.0, source=InsecureSeededSource(0))
    assert noisy.scale == 6.0
    accountant = BasicAccountant()
    accountant.compose(noisy.event)
    assert accountant.get_epsilon(0.0) <= 0.5 + 1e-12


@pytest.mark.parametrize("name", CASES[:3])
@pytest.mark.parametrize(("epsilon", "alpha"), [(1.0, 1.0), (0.1, 10.0)])
def test_released_loads_are_feasible_and_faithful(name: str, epsilon: float, alpha: float) -> None:
    case = load_case(name)
    out = release_loads(
        case.network, case.loads, epsilon=epsilon, alpha=alpha, source=InsecureSeededSource(5)
    )
    assert out.values.min() >= 0
    assert out.opf.feasible  # the DC-OPF (generation and line limits) on the released loads
    problem = case.network.opf_problem()
    z = np.concatenate([out.values, out.projection.decisions])
    tol = 1e-5 * (1 + np.abs(problem.b_ub).max(initial=0.0))
    assert np.all(problem.A_ub @ z <= problem.b_ub + tol)  # line limits with this dispatch
    assert np.allclose(problem.A_eq @ z, problem.b_eq, atol=1e-5)  # power balance
    assert out.cost is not None
    slack = 1e-6 * (abs(out.cost.value) + out.beta + 1.0)
    assert abs(out.projection.objective - out.cost.value) <= out.beta + slack
    # the bilevel program (default) holds the optimal cost itself within beta, both sides
    assert out.bilevel
    assert abs(out.opf.value - out.cost.value) <= out.beta + slack
    assert out.epsilon == pytest.approx(epsilon)


@pytest.mark.parametrize(("name", "seed"), [("ieee57", 7), ("ieee118", 1007)])
def test_bilevel_holds_the_lower_side_where_program_2_misses_it(name: str, seed: int) -> None:
    """A narrow window (beta = scale / 4): program #2's OPF falls below f~* - beta, the
    bilevel release's OPF, checked by solving the DC-OPF on it, stays inside (both sides)."""
    case = load_case(name)
    source = InsecureSeededSource(seed)
    noisy = add_load_noise(case.loads, epsilon=0.8, alpha=1.0, source=source)
    cost = release_opf_cost(case.network, case.loads, epsilon=0.2, alpha=1.0, source=source)
    beta = cost.scale / 4
    one = postprocess_loads(case.network, noisy, cost, beta=beta, bilevel=False)
    two = postprocess_loads(case.network, noisy, cost, beta=beta)
    assert one.beta == two.beta == beta  # no widening: the same window
    slack = 1e-6 * (abs(cost.value) + beta + 1.0)
    assert one.opf.value < cost.value - beta - slack  # the one-sided program misses it
    assert two.projection.iterations > 0
    assert cost.value - beta - slack <= two.opf.value <= cost.value + beta + slack
    assert two.values.min() >= 0 and two.opf.feasible


@pytest.mark.parametrize("name", CASES[:3])
def test_projection_accuracy_bound_when_truth_is_feasible(name: str) -> None:
    """||D^ - D|| <= ||D~ - D|| whenever D is feasible and |f(D) - f~*| <= beta."""
    case = load_case(name)
    truth = case.network.opf(case.loads).value
    for seed in range(8):
        noisy = add_load_noise(
            case.loads, epsilon=0.2, alpha=5.0, source=InsecureSeededSource(100 + seed)
        )
        cost = release_opf_cost(
            case.network, case.loads, epsilon=0.2, alpha=5.0, source=InsecureSeededSource(seed)
        )
        beta = abs(truth - cost.value) + 1.0  # the truth is inside the window
        out = postprocess_loads(case.network, noisy, cost, beta=beta)
        assert out.beta == beta
        before = np.linalg.norm(noisy.values - case.loads)
        after = np.linalg.norm(out.values - case.loads)
        assert after <= before + 1e-6


def test_postprocessing_cannot_reach_the_true_loads() -> None:
    """Its parameters are public or noisy; none of their fields holds the true loads."""
    hints = typing.get_type_hints(postprocess_loads)
    assert set(inspect.signature(postprocess_loads).parameters) == {
        "network",
        "noisy",
        "cost",
        "beta",
        "segments",
        "bilevel",
    }
    assert hints["network"] is PowerNetwork
    assert hints["noisy"] is NoisyLoads
    assert hints["cost"] == NoisyCost | None
    for kind in (NoisyLoads, NoisyCost):
        assert "loads" not in {f.name for f in dataclasses.fields(kind)}
    case = load_case("ieee14")
    network = case.network
    for value in vars(network).values():
        array = np.asarray(value)
        assert not (array.shape == case.loads.shape and np.allclose(array, case.loads))
    # The same noisy releases give the same output, whatever the (unreachable) truth.
    noisy = add_load_noise(case.loads, epsilon=1.0, alpha=1.0, source=InsecureSeededSource(0))
    cost = release_opf_cost(
        network, case.loads, epsilon=1.0, alpha=1.0, source=InsecureSeededSource(0)
    )
    first = postprocess_loads(network, noisy, cost).values
    case.loads[:] = 0.0  # the steward's data change; the release does not depend on them
    assert np.array_equal(postprocess_loads(network, noisy, cost).values, first)
    assert "loads" not in {f.name for f in dataclasses.fields(FaithfulProjection)}


def test_feasibility_only_without_a_released_cost() -> None:
    case = load_case("ieee30")
    noisy = add_load_noise(case.loads, epsilon=0.1, alpha=10.0, source=InsecureSeededSource(2))
    out = postprocess_loads(case.network, noisy, None)
    assert out.opf.feasible and out.values.min() >= 0 and math.isinf(out.beta)
    assert out.epsilon == pytest.approx(0.1)


def test_opf_and_network_checks() -> None:
    case = load_case("ieee14")
    assert case.network.opf(case.loads).feasible
    assert not case.network.opf(case.loads * 10).feasible  # beyond total generation
    shed = case.network.opf_problem(voll=100.0).solve(case.loads * 10)
    assert shed.feasible  # shedding makes every load vector feasible
    with pytest.raises(InvalidParameterError, match="case"):
        load_case("ieee9999")
    with pytest.raises(InvalidParameterError, match="cost_share"):
        release_loads(case.network, case.loads, epsilon=1.0, alpha=1.0, cost_share=1.0)
    with pytest.raises(DPError, match="alpha"):
        add_load_noise(case.loads, epsilon=1.0, alpha=-1.0)
    with pytest.raises(InvalidParameterError, match="connect"):
        PowerNetwork(
            "split",
            bus_ids=[1, 2, 3],
            line_from=[1],
            line_to=[2],
            line_reactance=[0.1],
            line_limit=[10.0],
            gen_bus=[1],
            gen_min=[0.0],
            gen_max=[10.0],
            gen_cost=[[0.0, 1.0, 0.0]],
            load_buses=[3],
        )
    assert _power.UNLIMITED == 9900.0


def test_cost_sensitivity_is_voll_per_mw() -> None:
    """|f(D) - f(D')| <= VOLL ||D - D'||_1 for the shedding-priced OPF (the release's premise)."""
    case = load_case("ieee30")
    voll = case.network.max_marginal_cost()
    problem = case.network.opf_problem(voll=voll)
    base = problem.solve(case.loads).value
    for i in range(case.network.n_loads):
        for delta in (-5.0, 5.0):
            moved = case.loads.copy()
            moved[i] = max(moved[i] + delta, 0.0)
            change = abs(problem.solve(moved).value - base)
            assert change <= voll * abs(moved[i] - case.loads[i]) + 1e-6
