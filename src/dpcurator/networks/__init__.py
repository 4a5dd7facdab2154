"""Constraint-based DP for the problems data are used for: power flow and transit planning.

DP noise is oblivious to the structure of the data and to the optimisation problem that will be
solved on them. Constraint-based DP (CBDP; lecture 003; Fioretto, Van Hentenryck et al., CPAIOR
2018, AAMAS 2018, IEEE TPS 2020, IEEE TSG 2020) releases noisy data, then post-processes them
by an optimisation that keeps them feasible for the downstream problem and keeps its optimal
value faithful to a privately released optimum (program #2). Everything after the noise reads
only noisy values and public constraints, so it costs no privacy.

API map
-------
The general tool
    :class:`LinearProblem` (a downstream LP parameterised by data; ``.solve`` with HiGHS),
    :func:`faithful_project` (program #2: the closest data with a feasible plan within
    ``beta`` of a released optimum; Clarabel or OSQP, :data:`SOLVERS`),
    :func:`bilevel_project` (the bilevel version: the *optimal* value within ``beta`` on both
    sides, by dual cuts :class:`LinearBound` from :meth:`LinearProblem.lower_bound`),
    :class:`FaithfulProjection`, :class:`ProblemSolution`.
Power loads for the DC optimal power flow
    :class:`PowerNetwork` (public: buses, lines, generators, costs; ``.opf``,
    ``.opf_problem``, ``.ptdf``), :func:`load_case` (the bundled IEEE cases, :data:`CASES`) ->
    :class:`PowerCase`; :func:`add_load_noise` (alpha-indistinguishable loads,
    :class:`NoisyLoads`), :func:`release_opf_cost` (:class:`NoisyCost`),
    :func:`postprocess_loads` (bilevel by default), :func:`release_loads` ->
    :class:`LoadRelease`.
Origin-destination counts for transit planning
    :func:`load_flights_od` (NYC flights 2013: month > origin > destination) ->
    :class:`ODCounts`; :func:`fleet_problem` (vehicle repositioning, a min-cost flow);
    :func:`release_od_counts` (consistent, non-negative, integral, faithful) ->
    :class:`TransitRelease`; :func:`postprocess_od`, :class:`NoisyPlanCost`.
The steward's evaluation (reads the true data: confidential)
    :func:`compare_power` (:class:`PowerComparison`: plain noise against program #2 and the
    bilevel program),
    :func:`compare_transit` (:class:`TransitComparison`). ``dpcurator power`` and
    ``dpcurator transit`` print them; ``scripts/reproduce_cbdp.py`` runs the grid.

Optional dependencies: Clarabel (or OSQP) from the ``optimize`` extra for the projection;
HiGHS comes with SciPy.

Examples
--------
>>> from dpcurator.networks import load_case, release_loads
>>> from dpcurator.noise import InsecureSeededSource
>>> case = load_case("ieee14")
>>> out = release_loads(case.network, case.loads, epsilon=1.0, alpha=1.0,
...                     source=InsecureSeededSource(0))
>>> out.opf.feasible, bool(out.values.min() >= 0)
(True, True)
>>> bool(abs(out.opf.value - out.cost.value) <= out.beta * (1 + 1e-6))  # both sides
True
"""

from __future__ import annotations

from dpcurator.networks._faithful import (
    SOLVERS,
    FaithfulProjection,
    LinearBound,
    LinearProblem,
    ProblemSolution,
    bilevel_project,
    faithful_project,
)
from dpcurator.networks._power import (
    CASES,
    LoadRelease,
    NoisyCost,
    NoisyLoads,
    PowerCase,
    PowerNetwork,
    add_load_noise,
    load_case,
    postprocess_loads,
    release_loads,
    release_opf_cost,
)
from dpcurator.networks._report import (
    PowerComparison,
    TransitComparison,
    compare_power,
    compare_transit,
)
from dpcurator.networks._transit import (
    NoisyPlanCost,
    ODCounts,
    TransitRelease,
    fleet_problem,
    load_flights_od,
    postprocess_od,
    release_od_counts,
)

__all__ = [
    "CASES",
    "SOLVERS",
    "FaithfulProjection",
    "LinearBound",
    "LinearProblem",
    "LoadRelease",
    "NoisyCost",
    "NoisyLoads",
    "NoisyPlanCost",
    "ODCounts",
    "PowerCase",
    "PowerComparison",
    "PowerNetwork",
    "ProblemSolution",
    "TransitComparison",
    "TransitRelease",
    "add_load_noise",
    "bilevel_project",
    "compare_power",
    "compare_transit",
    "faithful_project",
    "fleet_problem",
    "load_case",
    "load_flights_od",
    "postprocess_loads",
    "postprocess_od",
    "release_loads",
    "release_od_counts",
    "release_opf_cost",
]
