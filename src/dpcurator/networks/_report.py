"""The steward's evaluation: CBDP against plain noise, measured against the true data.

These functions read the true data (they measure errors), so their output is confidential: it is
what the data steward, a researcher or a benchmark looks at, never a release.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace
from typing import Any

import numpy as np

from dpcurator._validation import check_epsilon, check_positive
from dpcurator.errors import InvalidParameterError
from dpcurator.networks._power import (
    DEFAULT_SEGMENTS,
    LoadRelease,
    PowerCase,
    add_load_noise,
    postprocess_loads,
    release_opf_cost,
)
from dpcurator.networks._transit import ODCounts, fleet_problem, release_od_counts
from dpcurator.noise import RandomSource

__all__ = ["PowerComparison", "TransitComparison", "compare_power", "compare_transit"]


def _relative(value: float, truth: float) -> float:
    return abs(value - truth) / abs(truth) if math.isfinite(value) and truth else math.nan


@dataclass(frozen=True)
class PowerComparison:
    """Plain Laplace noise (all of epsilon on the loads) against CBDP, on one case.

    Errors are in MW (L2 norm of the load error, and its L1 norm); ``*_opf_gap`` is
    ``|OPF(released) - OPF(true)| / OPF(true)`` (``nan`` when the OPF is infeasible);
    ``*_negative`` counts negative loads. ``clipped_l2``: plain noise clipped at zero (the
    simplest post-processing). ``noisy_*``: CBDP's own noise step before post-processing
    (epsilon split with the cost). ``cbdp_*``: program #2 (one-sided, ``bilevel=False``);
    ``bilevel_*``: the bilevel program on the same noisy releases. ``*_in_window``: whether
    ``|OPF(released) - f~*| <= beta`` (relative tolerance 1e-6). ``truth_in_window``: whether
    ``|OPF(true) - f~*| <= beta`` (the hypothesis of the lecture's factor-2 bound);
    ``bilevel_factor``: ``||D^ - D|| / ||D~ - D||`` for the bilevel release (the bound says
    ``<= 2`` under that hypothesis). ``reference_*``: the bilevel program fed the *true*
    optimum (lecture 003's program #2 as written, with ``f*`` rather than ``f~*``) and
    ``beta = reference_share * f*``: a diagnostic of what a public optimum would give, not a
    private release (``nan`` unless ``reference_share`` is given).
    """

    case: str
    epsilon: float
    alpha: float
    true_cost: float
    released_cost: float
    beta: float
    plain_l2: float
    plain_l1: float
    plain_negative: int
    plain_feasible: bool
    plain_opf_gap: float
    clipped_l2: float
    noisy_l2: float
    cbdp_l2: float
    cbdp_l1: float
    cbdp_negative: int
    cbdp_feasible: bool
    cbdp_opf_gap: float
    cbdp_in_window: bool
    bilevel_l2: float
    bilevel_l1: float
    bilevel_negative: int
    bilevel_feasible: bool
    bilevel_opf_gap: float
    bilevel_in_window: bool
    bilevel_beta: float
    bilevel_iterations: int
    bilevel_factor: float
    truth_in_window: bool
    reference_l2: float
    reference_opf_gap: float

    def as_dict(self) -> dict[str, Any]:
        """Return the fields as a JSON-ready dict (``nan`` and infinities become ``None``)."""
        return {
            k: (None if isinstance(v, float) and not math.isfinite(v) else v)
            for k, v in asdict(self).items()
        }


def _in_window(value: float, optimum: float, beta: float) -> bool:
    slack = 1e-6 * (abs(optimum) + beta + 1.0)
    return math.isfinite(value) and abs(value - optimum) <= beta + slack


def compare_power(
    case: PowerCase,
    *,
    epsilon: float,
    alpha: float,
    cost_share: float = 0.2,
    beta: float | None = None,
    segments: int = DEFAULT_SEGMENTS,
    reference_share: float | None = None,
    source: RandomSource | None = None,
) -> PowerComparison:
    """Release one case three ways and measure them against the true loads (confidential).

    Plain Laplace noise (all of epsilon), and CBDP as :func:`~dpcurator.networks.release_loads`
    does it (``(1 - cost_share) epsilon`` on the loads, ``cost_share epsilon`` on the optimal
    cost, same draws in the same order), post-processed by program #2 and by the bilevel
    program. With ``reference_share``, also the bilevel program fed the true optimum with
    ``beta = reference_share * OPF(true)`` (a diagnostic, not a release).

    Examples
    --------
    >>> from dpcurator.networks import load_case
    >>> from dpcurator.noise import InsecureSeededSource
    >>> row = compare_power(load_case("ieee14"), epsilon=1.0, alpha=1.0,
    ...                     source=InsecureSeededSource(0))
    >>> row.cbdp_feasible, row.cbdp_negative, row.bilevel_in_window
    (True, 0, True)
    """
    network, loads = case.network, case.loads
    eps = check_epsilon(epsilon)
    share = check_positive(cost_share, "cost_share")
    if share >= 1:
        raise InvalidParameterError("cost_share", cost_share, "must be in (0, 1)")
    truth = network.opf(loads, segments=segments).value
    plain = add_load_noise(loads, epsilon=eps, alpha=alpha, source=source).values
    plain_opf = network.opf(plain, segments=segments)
    noisy = add_load_noise(loads, epsilon=eps * (1 - share), alpha=alpha, source=source)
    cost = release_opf_cost(
        network, loads, epsilon=eps * share, alpha=alpha, segments=segments, source=source
    )
    one = postprocess_loads(network, noisy, cost, beta=beta, segments=segments, bilevel=False)
    two = postprocess_loads(network, noisy, cost, beta=beta, segments=segments, bilevel=True)
    reference: LoadRelease | None = None
    if reference_share is not None:
        window = check_positive(reference_share, "reference_share") * abs(truth)
        public = replace(cost, value=truth)  # the true optimum: a diagnostic, not a release
        reference = postprocess_loads(network, noisy, public, beta=window, segments=segments)
    noise_l2 = float(np.linalg.norm(noisy.values - loads))
    two_l2 = float(np.linalg.norm(two.values - loads))
    return PowerComparison(
        case=network.name,
        epsilon=float(epsilon),
        alpha=float(alpha),
        true_cost=truth,
        released_cost=cost.value,
        beta=one.beta,
        plain_l2=float(np.linalg.norm(plain - loads)),
        plain_l1=float(np.abs(plain - loads).sum()),
        plain_negative=int((plain < 0).sum()),
        plain_feasible=plain_opf.feasible,
        plain_opf_gap=_relative(plain_opf.value, truth),
        clipped_l2=float(np.linalg.norm(np.maximum(plain, 0.0) - loads)),
        noisy_l2=noise_l2,
        cbdp_l2=float(np.linalg.norm(one.values - loads)),
        cbdp_l1=float(np.abs(one.values - loads).sum()),
        cbdp_negative=int((one.values < 0).sum()),
        cbdp_feasible=one.opf.feasible,
        cbdp_opf_gap=_relative(one.opf.value, truth),
        cbdp_in_window=_in_window(one.opf.value, cost.value, one.beta),
        bilevel_l2=two_l2,
        bilevel_l1=float(np.abs(two.values - loads).sum()),
        bilevel_negative=int((two.values < 0).sum()),
        bilevel_feasible=two.opf.feasible,
        bilevel_opf_gap=_relative(two.opf.value, truth),
        bilevel_in_window=_in_window(two.opf.value, cost.value, two.beta),
        bilevel_beta=two.beta,
        bilevel_iterations=two.projection.iterations,
        bilevel_factor=two_l2 / noise_l2 if noise_l2 > 0 else math.nan,
        truth_in_window=_in_window(truth, cost.value, two.beta),
        reference_l2=(float(np.linalg.norm(reference.values - loads)) if reference else math.nan),
        reference_opf_gap=(_relative(reference.opf.value, truth) if reference else math.nan),
    )


@dataclass(frozen=True)
class TransitComparison:
    """The noisy OD counts against the CBDP release, on the leaves (slot, origin, destination).

    ``*_l1`` is the leaves' L1 error (trips); ``noisy_inconsistent`` the internal nodes whose
    noisy count differs from the sum of their children's; ``*_plan_gap`` the relative gap of
    the fleet plan's optimum (``nan`` for noisy counts with a negative leaf: no plan moves a
    negative number of vehicles).
    """

    epsilon: float
    leaves: int
    true_plan: float
    released_plan_cost: float
    beta: float
    noisy_l1: float
    noisy_negative: int
    noisy_inconsistent: int
    noisy_plan_gap: float
    cbdp_l1: float
    cbdp_negative: int
    cbdp_inconsistent: int
    cbdp_plan_gap: float

    def as_dict(self) -> dict[str, Any]:
        """Return the fields as a JSON-ready dict (``nan`` and infinities become ``None``)."""
        return {
            k: (None if isinstance(v, float) and not math.isfinite(v) else v)
            for k, v in asdict(self).items()
        }


def _inconsistent(data: ODCounts, values: np.ndarray[Any, Any]) -> int:
    from dpcurator.hierarchy import consistency_matrix  # noqa: PLC0415

    return int(np.count_nonzero(np.abs(consistency_matrix(data.tree) @ values) > 1e-9))


def compare_transit(
    data: ODCounts,
    *,
    epsilon: float,
    cost_share: float = 0.1,
    beta: float | None = None,
    source: RandomSource | None = None,
) -> TransitComparison:
    """Release OD counts by CBDP and measure them and their noisy input against the truth.

    Examples
    --------
    >>> from dpcurator.networks import load_flights_od
    >>> from dpcurator.noise import InsecureSeededSource
    >>> row = compare_transit(load_flights_od(1), epsilon=1.0, source=InsecureSeededSource(0))
    >>> row.cbdp_negative, row.cbdp_inconsistent, row.cbdp_l1 <= row.noisy_l1
    (0, 0, True)
    """
    problem = fleet_problem(data.tree, data.distance)
    truth = problem.solve(data.counts).value
    out = release_od_counts(data, epsilon=epsilon, cost_share=cost_share, beta=beta, source=source)
    leaf = data.tree.is_leaf
    noisy = np.concatenate([np.asarray(v, dtype=np.float64) for v in out.noisy.values])
    noisy_plan = problem.solve(noisy) if noisy[leaf].min() >= 0 else None
    return TransitComparison(
        epsilon=float(epsilon),
        leaves=int(leaf.sum()),
        true_plan=truth,
        released_plan_cost=out.cost.value,
        beta=out.beta,
        noisy_l1=float(np.abs(noisy - data.counts)[leaf].sum()),
        noisy_negative=int((noisy < 0).sum()),
        noisy_inconsistent=_inconsistent(data, noisy),
        noisy_plan_gap=_relative(noisy_plan.value, truth) if noisy_plan else math.nan,
        cbdp_l1=float(np.abs(out.values - data.counts)[leaf].sum()),
        cbdp_negative=int((out.values < 0).sum()),
        cbdp_inconsistent=_inconsistent(data, out.values.astype(np.float64)),
        cbdp_plan_gap=_relative(out.plan.value, truth),
    )
