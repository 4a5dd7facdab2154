r"""Private mobility for transit planning: origin-destination counts by time slot, then a fleet LP.

A transit operator holds trips (the bundled NYC flights of 2013, :func:`load_flights_od`:
slot (month) > origin (EWR, JFK, LGA) > destination) and plans on their counts. The planning
problem (:func:`fleet_problem`) is a min-cost flow: in every slot, the vehicles that arrive at
each destination are repositioned to the origins that need them (as many as depart there),
at a cost per vehicle equal to the distance (miles); its optimum ``f(n)`` is the repositioning
mileage.

The release (Fioretto, Lee and Van Hentenryck, "Constraint-based differential privacy for
mobility services", AAMAS 2018; lecture 003, "Transportation application", "Mobility"):

1. geometric noise on every level of the hierarchy
   (:func:`dpcurator.hierarchy.add_level_noise`; epsilon-DP for add/remove one trip);
2. ``f~* = f(n) + Lap(C/epsilon_f)``, ``C`` the largest repositioning cost (one trip more or
   less changes the optimum by at most ``C``: route the extra vehicle directly, or reroute one);
3. CBDP program #2 (:func:`~dpcurator.networks.faithful_project`): the consistent
   non-negative counts closest to the noisy ones (inverse-variance weights) whose fleet LP has
   a plan within ``beta`` of ``f~*``; then the hierarchy's exact integer post-processing
   (:func:`dpcurator.hierarchy.postprocess`, ``method="exact"``) rounds them to consistent,
   non-negative integers within one trip of the continuous solution where possible.

Privacy unit: one trip (a flight), as in ``examples/flights.toml``; an aircraft flies up to
575 of them, so this protects single trips, not vehicles. The (slot, origin, destination)
routes present in the data are treated as public (published schedules).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Final

import numpy as np
from numpy.typing import NDArray
from scipy import sparse

from dpcurator._validation import check_epsilon, check_positive
from dpcurator.accounting import PrivacyEvent
from dpcurator.errors import InfeasibleConstraintsError, InvalidParameterError
from dpcurator.hierarchy import (
    NoisyLevels,
    Tree,
    add_level_noise,
    consistency_matrix,
    postprocess,
)
from dpcurator.mechanisms import laplace_mechanism
from dpcurator.networks._faithful import (
    FaithfulProjection,
    LinearProblem,
    ProblemSolution,
    faithful_project,
)
from dpcurator.noise import RandomSource

__all__ = [
    "NoisyPlanCost",
    "ODCounts",
    "TransitRelease",
    "fleet_problem",
    "load_flights_od",
    "postprocess_od",
    "release_od_counts",
]

HOPS: Final = {("EWR", "JFK"): 21.0, ("EWR", "LGA"): 17.0, ("JFK", "LGA"): 11.0}
"""Distances (miles) between the NYC airports, for repositioning to another origin."""

DEFAULT_CONFIDENCE: Final = 0.05
_WIDENINGS: Final = 30


@dataclass(frozen=True, eq=False)
class ODCounts:
    """Origin-destination counts by slot: a public hierarchy and costs, and the private counts.

    Attributes
    ----------
    tree : dpcurator.hierarchy.Tree
        Root > slot > origin > destination (public).
    counts : numpy.ndarray of int64
        Private counts in node order (consistent).
    distance : dict
        Public repositioning cost (miles) from a destination back to an origin,
        ``{(destination, origin): miles}``.
    """

    tree: Tree
    counts: NDArray[np.int64] = field(repr=False)
    distance: dict[tuple[str, str], float] = field(repr=False)


def _aggregate(tree: Tree, leaves: NDArray[np.int64]) -> NDArray[np.int64]:
    counts = np.zeros(tree.n_nodes, dtype=np.int64)
    counts[tree.is_leaf] = leaves
    for v in range(tree.n_nodes - 1, 0, -1):
        counts[tree.parent[v]] += counts[v]
    return counts


def load_flights_od(months: int = 12) -> ODCounts:
    """Count the bundled NYC flights of 2013 by month > origin > destination.

    Parameters
    ----------
    months : int, default 12
        Keep the first ``months`` months (time slots), 1 to 12.

    Examples
    --------
    >>> od = load_flights_od(months=1)
    >>> int(od.counts[0]), od.tree.labels[1]
    (27004, ('01',))
    """
    from dpcurator.datasets import load_flights  # noqa: PLC0415 (pandas, when used)

    if not isinstance(months, int) or not 1 <= months <= 12:
        raise InvalidParameterError("months", months, "must be an int from 1 to 12")
    frame = load_flights()
    frame = frame[frame["month"] <= months]
    grouped = frame.groupby(["month", "origin", "dest"]).size()
    paths = [(f"{m:02d}", str(o), str(d)) for m, o, d in grouped.index.to_list()]
    tree = Tree.from_paths(paths)
    by_path: dict[tuple[str, ...], np.int64] = dict(
        zip(paths, grouped.to_numpy(dtype=np.int64), strict=True)
    )
    leaves = np.array(
        [
            by_path[tuple(map(str, lab))]
            for lab, leaf in zip(tree.labels, tree.is_leaf, strict=True)
            if leaf
        ]
    )
    routes = frame.groupby(["origin", "dest"])["distance"].mean()
    miles = {(str(o), str(d)): float(v) for (o, d), v in routes.items()}
    origins = sorted({o for o, _ in miles})
    dests = sorted({d for _, d in miles})

    def hop(a: str, b: str) -> float:
        return 0.0 if a == b else HOPS.get((min(a, b), max(a, b)), 25.0)

    distance = {
        (d, o): min(miles[(k, d)] + hop(k, o) for k in origins if (k, d) in miles)
        for d in dests
        for o in origins
    }
    return ODCounts(tree=tree, counts=_aggregate(tree, leaves), distance=distance)


def fleet_problem(tree: Tree, distance: dict[tuple[str, str], float]) -> LinearProblem:
    r"""Build the repositioning LP on the counts of every node (data) and the flows (decisions).

    .. math:: f(n) = \min_{y \ge 0} \sum_{s,j,i} c_{ji} y_{sji} \quad \text{s.t.} \quad
              \sum_i y_{sji} = \sum_i n_{sij},\; \sum_j y_{sji} = \sum_j n_{sij}

    for every slot ``s``, destination ``j`` and origin ``i`` (a transportation problem; always
    feasible for non-negative counts). Only leaves (``(slot, origin, dest)``) enter it.

    Examples
    --------
    >>> from dpcurator.hierarchy import Tree
    >>> tree = Tree.from_paths([("01", "EWR", "BOS"), ("01", "JFK", "BOS")])
    >>> lp = fleet_problem(tree, {("BOS", "EWR"): 200.0, ("BOS", "JFK"): 187.0})
    >>> lp.solve([5, 5, 3, 2, 3, 2]).value  # 3 back to EWR, 2 back to JFK
    974.0
    """
    labels = [tuple(str(part) for part in label) for label in tree.labels]
    leaves = np.flatnonzero(tree.is_leaf)
    slots = sorted({labels[v][0] for v in leaves})
    columns: list[tuple[str, str, str]] = []
    for s in slots:
        here = [labels[v] for v in leaves if labels[v][0] == s]
        origins = sorted({lab[1] for lab in here})
        dests = sorted({lab[2] for lab in here})
        columns += [(s, j, i) for j in dests for i in origins]
    index = {col: k for k, col in enumerate(columns)}
    missing = sorted({(j, i) for _, j, i in columns} - set(distance))
    if missing:
        raise InvalidParameterError("distance", missing[:3], "must give every (dest, origin)")
    n, m = tree.n_nodes, len(columns)
    rows: dict[tuple[str, str, str], int] = {}
    data_r, data_c, data_v = [], [], []
    for v in leaves:
        s, i, j = labels[v]
        for key in ((s, "dest", j), (s, "origin", i)):
            r = rows.setdefault(key, len(rows))
            data_r.append(r)
            data_c.append(int(v))
            data_v.append(-1.0)
    for (s, j, i), k in index.items():
        for key in ((s, "dest", j), (s, "origin", i)):
            data_r.append(rows[key])
            data_c.append(n + k)
            data_v.append(1.0)
    A = sparse.csr_array((data_v, (data_r, data_c)), shape=(len(rows), n + m))
    cost = np.concatenate([np.zeros(n), [distance[(j, i)] for _, j, i in columns]])
    return LinearProblem(
        n,
        cost=cost,
        A_eq=A,
        b_eq=np.zeros(len(rows)),
        lower=np.zeros(m),
        upper=np.full(m, np.inf),
    )


@dataclass(frozen=True)
class NoisyPlanCost:
    """A privately released optimal planning cost ``f~*``.

    Attributes
    ----------
    value : float
        ``f~*`` (miles).
    epsilon : float
        epsilon-DP for add/remove one trip.
    scale : float
        The Laplace scale ``C / epsilon``.
    event : PrivacyEvent
    """

    value: float
    epsilon: float
    scale: float
    event: PrivacyEvent


@dataclass(frozen=True, eq=False)
class TransitRelease:
    """Released OD counts (consistent, non-negative, integral) and their plan.

    Attributes
    ----------
    values : numpy.ndarray of int64
        Released counts in node order.
    noisy : dpcurator.hierarchy.NoisyLevels
        The noisy levels.
    cost : NoisyPlanCost
        The released optimum.
    beta : float
        The faithfulness window used (miles).
    projection : FaithfulProjection
        The continuous CBDP solution.
    plan : ProblemSolution
        The fleet LP solved on ``values``.
    """

    values: NDArray[np.int64]
    noisy: NoisyLevels = field(repr=False)
    cost: NoisyPlanCost
    beta: float
    projection: FaithfulProjection = field(repr=False)
    plan: ProblemSolution = field(repr=False)

    @property
    def epsilon(self) -> float:
        """Total epsilon (basic composition of the levels and the cost)."""
        return float(self.noisy.epsilon or 0.0) + self.cost.epsilon


def _levels(tree: Tree, counts: NDArray[np.int64]) -> list[NDArray[np.int64]]:
    return [counts[s] for s in tree.level_slices]


def postprocess_od(
    tree: Tree,
    problem: LinearProblem,
    noisy: NoisyLevels,
    cost: NoisyPlanCost,
    *,
    beta: float | None = None,
) -> tuple[NDArray[np.int64], FaithfulProjection, float]:
    r"""CBDP for OD counts: consistent, non-negative, faithful, then integral.

    Reads the public tree and LP and the noisy releases only (post-processing). Returns the
    integer counts, the continuous projection and the ``beta`` used (default
    ``cost.scale ln(1/0.05)``, doubled until feasible).

    Examples
    --------
    >>> from dpcurator.noise import InsecureSeededSource
    >>> od = load_flights_od(months=1)
    >>> lp = fleet_problem(od.tree, od.distance)
    >>> out = release_od_counts(od, epsilon=1.0, source=InsecureSeededSource(0))
    >>> values, _, _ = postprocess_od(od.tree, lp, out.noisy, out.cost)
    >>> bool((values == out.values).all())
    True
    """
    y = np.concatenate([np.asarray(v, dtype=np.float64) for v in noisy.values])
    weights = np.concatenate(
        [
            np.full(len(v), 1.0 / level.variance)
            for v, level in zip(noisy.values, noisy.levels, strict=True)
        ]
    )
    weights = weights / weights.max()
    window = (
        cost.scale * math.log(1 / DEFAULT_CONFIDENCE)
        if beta is None
        else check_positive(beta, "beta", allow_zero=True)
    )
    consistency = consistency_matrix(tree)
    extended = LinearProblem(
        problem.n_data,
        cost=problem.cost,
        A_eq=sparse.vstack(
            [
                problem.A_eq,
                sparse.hstack(
                    [consistency, sparse.csr_array((consistency.shape[0], problem.n_decisions))]
                ),
            ],
            format="csr",
        ),
        b_eq=np.concatenate([problem.b_eq, np.zeros(consistency.shape[0])]),
        lower=problem.lower,
        upper=problem.upper,
        constant=problem.constant,
    )
    for _ in range(_WIDENINGS):
        try:
            projection = faithful_project(
                y, extended, optimum=cost.value, beta=window, weights=weights, data_lower=0.0
            )
            break
        except InfeasibleConstraintsError:
            window = max(2 * window, 1.0)
    else:  # pragma: no cover (a wide enough window always fits)
        raise InfeasibleConstraintsError("no consistent counts fit the released plan cost")
    continuous = np.maximum(projection.values, 0.0)
    try:
        solution = postprocess(tree, continuous, weights=weights, window=1.0, method="exact")
    except InfeasibleConstraintsError:
        solution = postprocess(tree, continuous, weights=weights, method="exact")
    return np.asarray(solution.values, dtype=np.int64), projection, window


def release_od_counts(
    data: ODCounts,
    *,
    epsilon: float,
    cost_share: float = 0.1,
    beta: float | None = None,
    source: RandomSource | None = None,
) -> TransitRelease:
    r"""Release OD counts by CBDP, faithful to the fleet-repositioning plan.

    Spends ``(1 - cost_share) epsilon`` on geometric noise over the levels (equal split) and
    ``cost_share epsilon`` on ``f~*``; the total is epsilon-DP for add/remove one trip (basic
    composition; Dwork and Roth 2014, Theorem 3.16). Sources: Fioretto, Lee and Van
    Hentenryck, AAMAS 2018; lecture 003.

    Parameters
    ----------
    data : ODCounts
    epsilon : float
    cost_share : float, default 0.1
        Share of epsilon for the released optimum, in (0, 1).
    beta : float, optional
        Faithfulness window (miles); default ``scale ln(1/0.05)``.
    source : RandomSource, optional

    Returns
    -------
    TransitRelease

    Examples
    --------
    >>> from dpcurator.noise import InsecureSeededSource
    >>> od = load_flights_od(months=1)
    >>> out = release_od_counts(od, epsilon=1.0, source=InsecureSeededSource(0))
    >>> bool(out.values.min() >= 0), out.plan.feasible, round(out.epsilon, 6)
    (True, True, 1.0)
    """
    eps = check_epsilon(epsilon)
    share = check_positive(cost_share, "cost_share")
    if share >= 1:
        raise InvalidParameterError("cost_share", cost_share, "must be in (0, 1)")
    problem = fleet_problem(data.tree, data.distance)
    noisy = add_level_noise(
        _levels(data.tree, data.counts),
        mechanism="geometric",
        budget=eps * (1 - share),
        source=source,
    )
    truth = problem.solve(data.counts)
    sensitivity = float(problem.cost.max())
    released = laplace_mechanism(
        truth.value, epsilon=eps * share, sensitivity=sensitivity, source=source
    )
    cost = NoisyPlanCost(
        value=float(released.value),
        epsilon=eps * share,
        scale=sensitivity / (eps * share),
        event=released.event,
    )
    values, projection, window = postprocess_od(data.tree, problem, noisy, cost, beta=beta)
    return TransitRelease(
        values=values,
        noisy=noisy,
        cost=cost,
        beta=window,
        projection=projection,
        plan=problem.solve(values.astype(np.float64)),
    )
