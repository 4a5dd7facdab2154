r"""Private power loads for the DC optimal power flow: alpha-indistinguishable loads, then CBDP.

An energy operator declares a network (:class:`PowerNetwork`: buses, lines with reactances and
limits, generators with limits and costs; public) and holds private active loads ``D`` (MW) at
its load buses. The release (Fioretto, Van Hentenryck, Mak et al., "Constrained-based
differential privacy: releasing optimal power flow benchmarks privately", CPAIOR 2018; Mak,
Fioretto and Van Hentenryck, "Bilevel optimization for differentially private optimization in
energy systems", arXiv 2001.09508, 2020, the lecture's "BiLevel-DP"; the same
alpha-indistinguishability applied to line parameters in Fioretto, Mak and Van Hentenryck,
"Differential privacy for power grid obfuscation", IEEE TSG 11(2), 2020; lecture 003, "Energy
optimization", "Protecting loads"):

1. :func:`add_load_noise`: ``D~ = D + Lap(alpha/epsilon_D)`` per load (alpha-indistinguishability;
   in one dimension the polar Laplace mechanism is the Laplace mechanism).
2. :func:`release_opf_cost`: ``f~* = f(D) + Lap(VOLL alpha/epsilon_f)``, where ``f`` is the DC-OPF
   cost with load shedding priced at ``VOLL`` (``VOLL``-Lipschitz in each load, so
   ``|f(D) - f(D')| <= VOLL ||D - D'||_1``).
3. :func:`postprocess_loads`: the bilevel CBDP program
   (:func:`~dpcurator.networks.bilevel_project`, the default): the loads closest to ``D~``
   that are non-negative, on which the DC-OPF is feasible and its optimal cost is within
   ``beta`` of ``f~*`` on both sides; or program #2 (``bilevel=False``,
   :func:`~dpcurator.networks.faithful_project`): a dispatch of cost within ``beta`` of
   ``f~*`` exists, so the optimal cost is at most ``f~* + beta``. It reads the public network
   and the noisy releases only.

The DC-OPF (:meth:`PowerNetwork.opf`) is a linear program: generation costs are MATPOWER's
quadratics ``c2 p^2 + c1 p + c0`` replaced by their piecewise-linear interpolation on
``segments`` equal pieces (exact at the breakpoints), flows are ``PTDF (Cg p - D)``, solved with
HiGHS. Losses, reactive power and bus shunts are ignored (the usual DC approximation).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from functools import cached_property
from importlib import resources
from typing import Final

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import sparse

from dpcurator._validation import check_epsilon, check_integer, check_positive
from dpcurator.accounting import PrivacyEvent
from dpcurator.errors import InfeasibleConstraintsError, InvalidParameterError
from dpcurator.mechanisms import laplace_mechanism
from dpcurator.networks._faithful import (
    FaithfulProjection,
    LinearProblem,
    ProblemSolution,
    bilevel_project,
    faithful_project,
)
from dpcurator.noise import RandomSource

__all__ = [
    "CASES",
    "LoadRelease",
    "NoisyCost",
    "NoisyLoads",
    "PowerCase",
    "PowerNetwork",
    "add_load_noise",
    "load_case",
    "postprocess_loads",
    "release_loads",
    "release_opf_cost",
]

CASES: Final = ("ieee14", "ieee30", "ieee39", "ieee57", "ieee118")
"""The bundled IEEE test cases (MATPOWER via PYPOWER, BSD 3-clause; see DATASETS.md)."""

UNLIMITED: Final = 9900.0
"""PYPOWER's rating for an unconstrained line (MATPOWER writes 0); read as no limit."""

DEFAULT_SEGMENTS: Final = 4
DEFAULT_CONFIDENCE: Final = 0.05
"""Default ``beta``: the released cost is within ``beta`` of ``f(D)`` with probability 0.95."""

_WIDENINGS: Final = 30


def _ints(value: ArrayLike, name: str) -> NDArray[np.int64]:
    out = np.asarray(value)
    if out.ndim != 1 or not np.issubdtype(out.dtype, np.integer):
        raise InvalidParameterError(name, value, "must be a 1-D sequence of integer bus ids")
    return out.astype(np.int64)


def _floats(value: ArrayLike, name: str, size: int | None = None) -> NDArray[np.float64]:
    out = np.asarray(value, dtype=np.float64)
    if out.ndim != 1 or (size is not None and out.size != size) or np.any(np.isnan(out)):
        raise InvalidParameterError(name, value, f"must be a 1-D array of {size or 'n'} numbers")
    return out


@dataclass(frozen=True, eq=False)
class PowerNetwork:
    """A public power network for the DC optimal power flow.

    Parameters
    ----------
    name : str
        A label.
    bus_ids : array_like of int
        Bus numbers.
    line_from, line_to : array_like of int
        End buses of each line (bus numbers).
    line_reactance : array_like of float
        Series reactance in p.u. (times the transformer tap ratio), > 0.
    line_limit : array_like of float
        Thermal limit in MW, > 0 (``inf`` for none).
    gen_bus : array_like of int
        Bus of each generator.
    gen_min, gen_max : array_like of float
        Output limits in MW, ``0 <= min <= max``.
    gen_cost : array_like of float, shape (n_gen, 3)
        Cost ``c2 p^2 + c1 p + c0`` ($/h, p in MW), convex (``c2 >= 0``).
    load_buses : array_like of int
        Buses with a private load (the data), in the order of the load vector.
    slack : int, optional
        The reference bus (default the first).

    Examples
    --------
    Two buses, a cheap generator at bus 1, a dear one at bus 2 where the load sits, a 60 MW line:

    >>> net = PowerNetwork("two", bus_ids=[1, 2], line_from=[1], line_to=[2],
    ...                    line_reactance=[0.1], line_limit=[60.0], gen_bus=[1, 2],
    ...                    gen_min=[0, 0], gen_max=[100, 100],
    ...                    gen_cost=[[0, 10, 0], [0, 30, 0]], load_buses=[2])
    >>> net.opf([80.0]).value  # 60 MW over the line at 10 $/MWh, 20 MW locally at 30 $/MWh
    1200.0
    """

    name: str
    bus_ids: NDArray[np.int64]
    line_from: NDArray[np.int64]
    line_to: NDArray[np.int64]
    line_reactance: NDArray[np.float64]
    line_limit: NDArray[np.float64]
    gen_bus: NDArray[np.int64]
    gen_min: NDArray[np.float64]
    gen_max: NDArray[np.float64]
    gen_cost: NDArray[np.float64]
    load_buses: NDArray[np.int64]
    slack: int = field(default=-1)

    def __repr__(self) -> str:
        return (
            f"PowerNetwork({self.name!r}, buses={self.bus_ids.size}, "
            f"lines={self.line_from.size}, generators={self.gen_bus.size}, loads={self.n_loads})"
        )

    def __init__(
        self,
        name: str,
        *,
        bus_ids: ArrayLike,
        line_from: ArrayLike,
        line_to: ArrayLike,
        line_reactance: ArrayLike,
        line_limit: ArrayLike,
        gen_bus: ArrayLike,
        gen_min: ArrayLike,
        gen_max: ArrayLike,
        gen_cost: ArrayLike,
        load_buses: ArrayLike,
        slack: int | None = None,
    ) -> None:
        ids = _ints(bus_ids, "bus_ids")
        if ids.size < 1 or np.unique(ids).size != ids.size:
            raise InvalidParameterError("bus_ids", bus_ids, "must be distinct and non-empty")
        index = {int(b): i for i, b in enumerate(ids)}

        def where(values: ArrayLike, name: str) -> NDArray[np.int64]:
            buses = _ints(values, name)
            unknown = [int(b) for b in buses if int(b) not in index]
            if unknown:
                raise InvalidParameterError(name, unknown[:5], "must name buses in bus_ids")
            return np.array([index[int(b)] for b in buses], dtype=np.int64)

        f, t = where(line_from, "line_from"), where(line_to, "line_to")
        x = _floats(line_reactance, "line_reactance", f.size)
        limit = _floats(line_limit, "line_limit", f.size)
        if t.size != f.size or np.any(x <= 0) or np.any(limit <= 0):
            raise InvalidParameterError(
                "lines", f.size, "need as many ends, reactances > 0 and limits > 0 as lines"
            )
        g = where(gen_bus, "gen_bus")
        lo, hi = _floats(gen_min, "gen_min", g.size), _floats(gen_max, "gen_max", g.size)
        cost = np.asarray(gen_cost, dtype=np.float64)
        if g.size < 1 or np.any(lo < 0) or np.any(lo > hi) or not np.all(np.isfinite(hi)):
            raise InvalidParameterError(
                "gen_min/gen_max", (lo, hi), "must be finite with 0 <= min <= max (MW)"
            )
        if cost.shape != (g.size, 3) or not np.all(np.isfinite(cost)) or np.any(cost[:, 0] < 0):
            raise InvalidParameterError(
                "gen_cost", gen_cost, "must be finite (c2, c1, c0) rows with c2 >= 0, one a unit"
            )
        loads = where(load_buses, "load_buses")
        ref = 0 if slack is None else int(where([slack], "slack")[0])
        for key, value in (
            ("name", str(name)),
            ("bus_ids", ids),
            ("line_from", f),
            ("line_to", t),
            ("line_reactance", x),
            ("line_limit", limit),
            ("gen_bus", g),
            ("gen_min", lo),
            ("gen_max", hi),
            ("gen_cost", cost),
            ("load_buses", loads),
            ("slack", ref),
        ):
            object.__setattr__(self, key, value)
        self.ptdf  # noqa: B018 (checks that the network is connected)

    @property
    def n_loads(self) -> int:
        """Number of private loads."""
        return int(self.load_buses.size)

    @cached_property
    def ptdf(self) -> NDArray[np.float64]:
        """Power transfer distribution factors: line flows (MW) per bus injection (MW)."""
        n = self.bus_ids.size
        lines = self.line_from.size
        incidence = sparse.csr_array(
            (
                np.concatenate([np.ones(lines), -np.ones(lines)]),
                (np.tile(np.arange(lines), 2), np.concatenate([self.line_from, self.line_to])),
            ),
            shape=(lines, n),
        ).toarray()
        branch = incidence / self.line_reactance[:, None]
        keep = np.flatnonzero(np.arange(n) != self.slack)
        reduced = (incidence.T @ branch)[np.ix_(keep, keep)]
        try:
            angles = np.linalg.solve(reduced, np.eye(keep.size))
        except np.linalg.LinAlgError:
            raise InvalidParameterError(
                "lines", self.name, "must connect every bus to the slack (singular network)"
            ) from None
        out = np.zeros((lines, n))
        out[:, keep] = branch[:, keep] @ angles
        return out

    def _segments(self, segments: int) -> tuple[NDArray[np.float64], NDArray[np.float64], float]:
        """Widths and slopes of the piecewise-linear costs, and the cost at ``gen_min``."""
        k = check_integer(segments, "segments", minimum=1)
        c2, c1, c0 = self.gen_cost.T
        width = np.repeat((self.gen_max - self.gen_min) / k, k)
        start = np.repeat(self.gen_min, k) + width * np.tile(np.arange(k), self.gen_min.size)
        slope = np.repeat(c1, k) + np.repeat(c2, k) * (2 * start + width)
        base = float(np.sum(c2 * self.gen_min**2 + c1 * self.gen_min + c0))
        return width, slope, base

    def max_marginal_cost(self, segments: int = DEFAULT_SEGMENTS) -> float:
        """Return the largest slope of the piecewise-linear generation costs ($/MWh)."""
        return float(self._segments(segments)[1].max())

    def opf_problem(
        self, segments: int = DEFAULT_SEGMENTS, *, voll: float | None = None
    ) -> LinearProblem:
        """Return the DC-OPF as a :class:`LinearProblem` in the loads (data) and segment outputs.

        With ``voll``, every bus also gets load shedding and spillage variables priced at
        ``voll`` $/MWh, so the problem is feasible for every load vector and its value is
        ``voll``-Lipschitz in each load (the function whose optimum is released).
        """
        width, slope, base = self._segments(segments)
        k = width.size // self.gen_bus.size
        n_bus, n_load = self.bus_ids.size, self.n_loads
        gen_of_segment = np.repeat(self.gen_bus, k)
        limited = np.flatnonzero(np.isfinite(self.line_limit))
        ptdf = self.ptdf[limited]
        flow_data = -ptdf[:, self.load_buses]
        flow_gen = ptdf[:, gen_of_segment]
        flow_const = ptdf[:, self.gen_bus] @ self.gen_min
        limit = self.line_limit[limited]
        blocks_eq = [-np.ones((1, n_load)), np.ones((1, width.size))]
        blocks_ub = [flow_data, flow_gen]
        cost = [np.zeros(n_load), slope]
        lower, upper = [np.zeros(width.size)], [width]
        if voll is not None:
            price = check_positive(voll, "voll")
            blocks_eq += [np.ones((1, n_bus)), -np.ones((1, n_bus))]
            blocks_ub += [ptdf, -ptdf]
            cost += [np.full(2 * n_bus, price)]
            lower.append(np.zeros(2 * n_bus))
            upper.append(np.full(2 * n_bus, np.inf))
        flows = np.hstack(blocks_ub)
        return LinearProblem(
            n_load,
            cost=np.concatenate(cost),
            A_eq=np.hstack(blocks_eq),
            b_eq=[-float(self.gen_min.sum())],
            A_ub=np.vstack([flows, -flows]),
            b_ub=np.concatenate([limit - flow_const, limit + flow_const]),
            lower=np.concatenate(lower),
            upper=np.concatenate(upper),
            constant=base,
        )

    def opf(self, loads: ArrayLike, *, segments: int = DEFAULT_SEGMENTS) -> ProblemSolution:
        """Solve the DC-OPF for these loads (MW) with HiGHS: feasibility, cost, dispatch."""
        return self.opf_problem(segments).solve(_floats(loads, "loads", self.n_loads))


@dataclass(frozen=True, eq=False)
class PowerCase:
    """A bundled network with its loads: the public :class:`PowerNetwork` and the private data.

    Attributes
    ----------
    network : PowerNetwork
        Public.
    loads : numpy.ndarray
        Private active loads (MW) at ``network.load_buses``.
    source : str
        Where the case comes from.
    """

    network: PowerNetwork
    loads: NDArray[np.float64] = field(repr=False)
    source: str


def load_case(name: str) -> PowerCase:
    """Load a bundled IEEE test case by name (one of :data:`CASES`, e.g. ``"ieee14"``).

    MATPOWER's cases via PYPOWER 5.1.21 (BSD 3-clause; DATASETS.md). Lines rated 9900 MVA by
    PYPOWER (MATPOWER's 0) are unconstrained; reactances include the transformer tap ratio.

    Examples
    --------
    >>> case = load_case("ieee14")
    >>> case.network.n_loads, float(case.loads.sum())
    (11, 259.0)
    >>> solution = case.network.opf(case.loads)
    >>> solution.feasible, round(solution.value, 1)
    (True, 7708.2)
    """
    key = str(name).lower().replace("case", "ieee")
    if key not in CASES:
        raise InvalidParameterError("case", name, f"must be one of {', '.join(CASES)}")
    text = resources.files("dpcurator.networks").joinpath("data", f"{key}.json").read_text()
    data = json.loads(text)
    bus = np.asarray(data["bus"], dtype=np.float64)
    branch = np.asarray(data["branch"], dtype=np.float64)
    gen = np.asarray(data["gen"], dtype=np.float64)
    tap = np.where(branch[:, 3] == 0, 1.0, branch[:, 3])
    rating = np.where((branch[:, 4] <= 0) | (branch[:, 4] >= UNLIMITED), np.inf, branch[:, 4])
    has_load = bus[:, 2] > 0
    network = PowerNetwork(
        key,
        bus_ids=bus[:, 0].astype(np.int64),
        line_from=branch[:, 0].astype(np.int64),
        line_to=branch[:, 1].astype(np.int64),
        line_reactance=branch[:, 2] * tap,
        line_limit=rating,
        gen_bus=gen[:, 0].astype(np.int64),
        gen_min=gen[:, 2],
        gen_max=gen[:, 1],
        gen_cost=data["gencost"],
        load_buses=bus[has_load, 0].astype(np.int64),
        slack=int(bus[bus[:, 1] == 3, 0][0]),
    )
    return PowerCase(network=network, loads=bus[has_load, 2].copy(), source=str(data["source"]))


@dataclass(frozen=True, eq=False)
class NoisyLoads:
    """Loads released under alpha-indistinguishability (the output of :func:`add_load_noise`).

    Attributes
    ----------
    values : numpy.ndarray
        ``D~`` (MW).
    epsilon, alpha : float
        The guarantee: ``epsilon`` for loads within ``alpha`` MW in L1.
    scale : float
        The Laplace scale ``alpha/epsilon`` (MW).
    event : PrivacyEvent
        What the mechanism did, in grid units.
    """

    values: NDArray[np.float64]
    epsilon: float
    alpha: float
    scale: float
    event: PrivacyEvent


@dataclass(frozen=True)
class NoisyCost:
    """A privately released optimal cost ``f~*`` (the output of :func:`release_opf_cost`).

    Attributes
    ----------
    value : float
        ``f~*`` ($/h).
    epsilon, alpha : float
        The guarantee, as for :class:`NoisyLoads`.
    voll : float
        The price of shed load in ``f``; the sensitivity is ``voll * alpha``.
    scale : float
        The Laplace scale ``voll alpha / epsilon``.
    segments : int
        The piecewise-linear cost model.
    event : PrivacyEvent
        What the mechanism did.
    """

    value: float
    epsilon: float
    alpha: float
    voll: float
    scale: float
    segments: int
    event: PrivacyEvent


def add_load_noise(
    loads: ArrayLike, *, epsilon: float, alpha: float, source: RandomSource | None = None
) -> NoisyLoads:
    r"""Release loads under alpha-indistinguishability with the (polar) Laplace mechanism.

    .. math:: \tilde D = D + Z, \qquad Z_i \sim \mathrm{Lap}(\alpha/\epsilon) \text{ i.i.d.}

    (on a public grid of width ``2**-k``, discrete Laplace noise from :mod:`dpcurator.noise`:
    :func:`dpcurator.mechanisms.laplace_mechanism` with sensitivity ``alpha``).

    Guarantee: for load vectors with ``||D - D'||_1 <= alpha`` (neighbours: loads within
    ``alpha`` MW of each other),
    ``P[M(D) in S] <= exp(epsilon) P[M(D') in S]``; for any two load vectors, by chaining
    neighbours, the loss is at most ``epsilon ceil(||D - D'||_1 / alpha)``
    (alpha-indistinguishability, a generalised DP: Chatzikokolakis, Andres, Bordenabe and
    Palamidessi, PETS 2013; Fioretto, Mak and Van Hentenryck, IEEE TSG 2020, Theorem 1; the
    polar Laplace mechanism of Andres et al., CCS 2013, is the Laplace mechanism in one
    dimension, and a DC network has one (active) load per bus).

    Parameters
    ----------
    loads : array_like of float
        The true loads ``D`` (MW).
    epsilon : float
        > 0.
    alpha : float
        The indistinguishability radius (MW), > 0.
    source : RandomSource, optional
        Randomness (secure by default; ``InsecureSeededSource`` for tests).

    Returns
    -------
    NoisyLoads

    Examples
    --------
    >>> from dpcurator.noise import InsecureSeededSource
    >>> noisy = add_load_noise([20.0, 35.5], epsilon=1.0, alpha=0.5,
    ...                        source=InsecureSeededSource(0))
    >>> noisy.values.shape, noisy.scale, noisy.event.epsilon <= 1.0
    ((2,), 0.5, True)
    """
    eps = check_epsilon(epsilon)
    radius = check_positive(alpha, "alpha")
    values = _floats(loads, "loads")
    if values.size < 1 or not np.all(np.isfinite(values)):
        raise InvalidParameterError("loads", loads, "must be a non-empty array of finite MW")
    release = laplace_mechanism(values, epsilon=eps, sensitivity=radius, source=source)
    return NoisyLoads(
        values=np.asarray(release.value, dtype=np.float64),
        epsilon=eps,
        alpha=radius,
        scale=radius / eps,
        event=release.event,
    )


def release_opf_cost(
    network: PowerNetwork,
    loads: ArrayLike,
    *,
    epsilon: float,
    alpha: float,
    voll: float | None = None,
    segments: int = DEFAULT_SEGMENTS,
    source: RandomSource | None = None,
) -> NoisyCost:
    r"""Release the optimal DC-OPF cost privately: ``f~* = f(D) + Lap(VOLL alpha / epsilon)``.

    ``f(D)`` is the DC-OPF cost with load shedding and spillage at every bus priced at
    ``voll`` (:meth:`PowerNetwork.opf_problem`); it equals the OPF cost whenever no bus's
    marginal price exceeds ``voll`` (no shedding is then worth it). Moving one load by
    ``delta`` changes ``f`` by at most ``voll |delta|`` (shed or spill the difference at that
    bus), so ``|f(D) - f(D')| <= voll ||D - D'||_1``, and the release is epsilon-DP for loads
    within ``alpha`` in L1 (Laplace mechanism, Dwork et al. 2006; the sensitivity argument is
    the one of Fioretto, Mak and Van Hentenryck, IEEE TSG 2020, for the released optimum).
    The LP is solved in floating point: its value carries HiGHS's relative error (about
    1e-9), not covered by the noise.

    Parameters
    ----------
    network : PowerNetwork
    loads : array_like of float
        The true loads (MW).
    epsilon, alpha : float
        The guarantee (> 0).
    voll : float, optional
        Value of lost load ($/MWh, public); default the largest marginal generation cost.
    segments : int, default 4
        Pieces of the piecewise-linear costs.
    source : RandomSource, optional

    Returns
    -------
    NoisyCost

    Examples
    --------
    >>> from dpcurator.noise import InsecureSeededSource
    >>> case = load_case("ieee14")
    >>> cost = release_opf_cost(case.network, case.loads, epsilon=1.0, alpha=1.0,
    ...                         source=InsecureSeededSource(0))
    >>> round(cost.scale, 2) == round(case.network.max_marginal_cost(), 2)
    True
    """
    eps = check_epsilon(epsilon)
    radius = check_positive(alpha, "alpha")
    price = network.max_marginal_cost(segments) if voll is None else check_positive(voll, "voll")
    values = _floats(loads, "loads", network.n_loads)
    solution = network.opf_problem(segments, voll=price).solve(values)
    if not solution.feasible:  # pragma: no cover (shedding makes every load feasible)
        raise InfeasibleConstraintsError(f"the DC-OPF with shedding failed: {solution.status}")
    release = laplace_mechanism(
        solution.value, epsilon=eps, sensitivity=price * radius, source=source
    )
    return NoisyCost(
        value=float(release.value),
        epsilon=eps,
        alpha=radius,
        voll=price,
        scale=price * radius / eps,
        segments=segments,
        event=release.event,
    )


@dataclass(frozen=True, eq=False)
class LoadRelease:
    """Released loads (CBDP) and what they guarantee.

    Attributes
    ----------
    values : numpy.ndarray
        ``D^`` (MW), non-negative, DC-OPF feasible.
    noisy : NoisyLoads
        The noisy loads it was computed from.
    cost : NoisyCost or None
        The released optimum it is faithful to.
    beta : float
        The faithfulness window finally used ($/h; widened from the requested one, by
        doubling, when the program was infeasible).
    projection : FaithfulProjection
        The solver's output (a dispatch of cost within ``beta`` of ``cost.value``).
    opf : ProblemSolution
        The DC-OPF solved on ``values``.
    bilevel : bool
        Whether the optimal cost was held within ``beta`` on both sides (the bilevel program)
        or only from above (program #2).
    """

    values: NDArray[np.float64]
    noisy: NoisyLoads
    cost: NoisyCost | None
    beta: float
    projection: FaithfulProjection = field(repr=False)
    opf: ProblemSolution = field(repr=False)
    bilevel: bool = False

    @property
    def epsilon(self) -> float:
        """Total epsilon for alpha-neighbours (basic composition of loads and cost)."""
        return self.noisy.epsilon + (self.cost.epsilon if self.cost is not None else 0.0)

    @property
    def events(self) -> tuple[PrivacyEvent, ...]:
        """The privacy events, for an accountant."""
        return (self.noisy.event,) + ((self.cost.event,) if self.cost is not None else ())


def postprocess_loads(
    network: PowerNetwork,
    noisy: NoisyLoads,
    cost: NoisyCost | None,
    *,
    beta: float | None = None,
    segments: int | None = None,
    bilevel: bool = True,
) -> LoadRelease:
    r"""CBDP for loads: closest non-negative loads with a feasible DC-OPF of faithful cost.

    Bilevel (default; lecture 003's "BiLevel-DP", Mak, Fioretto and Van Hentenryck, arXiv
    2001.09508, 2020; :func:`~dpcurator.networks.bilevel_project`):

    .. math:: \hat D = \arg\min_{D' \ge 0} \|D' - \tilde D\|_2^2 \quad \text{s.t.} \quad
              |\mathrm{OPF}(D') - \tilde f^\star| \le \beta

    with ``OPF(D')`` the optimal DC-OPF cost (``+inf`` when infeasible), solved by convex QPs
    with the lower side linearised by the OPF's dual (the locational marginal prices).
    Guarantee: ``f~* - beta <= OPF(D^) <= f~* + beta`` (up to solver tolerance, about 1e-8
    relative; ``out.opf.value`` is the check). ``bilevel=False``: program #2 (lecture 003;
    Fioretto et al., CPAIOR 2018),

    .. math:: \hat D = \arg\min_{D' \ge 0,\, p} \|D' - \tilde D\|_2^2 \quad \text{s.t.} \quad
              |c(p) - \tilde f^\star| \le \beta,\; \text{DC-OPF constraints on } (D', p),

    which guarantees only ``OPF(D^) <= f~* + beta``. Both read the public network and the
    noisy releases only, never the true loads (its arguments cannot reach them):
    post-processing, so ``D^`` is as private as ``(D~, f~*)``, i.e.
    ``(noisy.epsilon + cost.epsilon)``-DP for alpha-neighbours. Accuracy: program #2 gives
    ``||D^ - D||_2 <= ||D~ - D||_2`` when the true loads have a dispatch within ``beta`` of
    ``f~*``; the bilevel program gives the lecture's ``||D^ - D||_2 <= 2 ||D~ - D||_2`` when
    ``|OPF(D) - f~*| <= beta`` and ``projection.iterations == 0`` (then ``D^`` is the exact
    projection onto the bilevel set), and the factor 1 when ``D`` satisfies the last
    linearisation (:func:`~dpcurator.networks.bilevel_project`).

    Parameters
    ----------
    network : PowerNetwork
    noisy : NoisyLoads
    cost : NoisyCost or None
        ``None``: feasibility only (no faithfulness constraint).
    beta : float, optional
        The window ($/h); default ``cost.scale * ln(1/0.05)`` (the true ``f`` is inside with
        probability 0.95). Doubled until the program is feasible.
    segments : int, optional
        Cost model (default: ``cost.segments``, else 4).
    bilevel : bool, default True
        Hold the optimal cost within ``beta`` on both sides (else program #2). Ignored
        without a released cost.

    Returns
    -------
    LoadRelease

    Examples
    --------
    >>> from dpcurator.noise import InsecureSeededSource
    >>> case = load_case("ieee14")
    >>> source = InsecureSeededSource(1)
    >>> noisy = add_load_noise(case.loads, epsilon=0.5, alpha=10.0, source=source)
    >>> cost = release_opf_cost(case.network, case.loads, epsilon=0.5, alpha=10.0, source=source)
    >>> out = postprocess_loads(case.network, noisy, cost)
    >>> bool(out.values.min() >= 0), out.opf.feasible, out.epsilon
    (True, True, 1.0)
    >>> bool(abs(out.opf.value - cost.value) <= out.beta * (1 + 1e-6))
    True
    """
    pieces = segments if segments is not None else (cost.segments if cost else DEFAULT_SEGMENTS)
    problem = network.opf_problem(pieces)
    if cost is None:
        window = math.inf
    elif beta is None:
        window = cost.scale * math.log(1 / DEFAULT_CONFIDENCE)
    else:
        window = check_positive(beta, "beta", allow_zero=True)
    two_sided = bilevel and cost is not None
    for _ in range(_WIDENINGS):
        try:
            if two_sided and cost is not None:
                projection = bilevel_project(
                    noisy.values, problem, optimum=cost.value, beta=window, data_lower=0.0
                )
            else:
                projection = faithful_project(
                    noisy.values,
                    problem,
                    optimum=None if cost is None else cost.value,
                    beta=window,
                    data_lower=0.0,
                )
            break
        except InfeasibleConstraintsError:
            if not math.isfinite(window):
                raise
            window = max(2 * window, 1.0)
    else:
        raise InfeasibleConstraintsError(
            "no non-negative loads make the DC-OPF feasible within the widened beta "
            f"({window:g}); check the network's generation limits against its lines"
        )
    values = np.maximum(projection.values, 0.0)
    return LoadRelease(
        values=values,
        noisy=noisy,
        cost=cost,
        beta=window,
        projection=projection,
        opf=problem.solve(values),
        bilevel=two_sided,
    )


def release_loads(
    network: PowerNetwork,
    loads: ArrayLike,
    *,
    epsilon: float,
    alpha: float,
    cost_share: float = 0.2,
    beta: float | None = None,
    voll: float | None = None,
    segments: int = DEFAULT_SEGMENTS,
    bilevel: bool = True,
    source: RandomSource | None = None,
) -> LoadRelease:
    r"""Release loads by CBDP: noise, a private optimum, then the bilevel program.

    Spends ``(1 - cost_share) epsilon`` on the loads (:func:`add_load_noise`) and
    ``cost_share epsilon`` (default 0.2: on the bundled cases a larger share costs the loads
    more accuracy than the faithfulness constraint gives back; BENCHMARKS.md) on the optimal
    cost (:func:`release_opf_cost`), then post-processes (:func:`postprocess_loads`: the
    bilevel program by default, program #2 with ``bilevel=False``). Guarantee:
    ``epsilon``-DP for loads within ``alpha`` MW in L1 (basic composition; Dwork and Roth
    2014, Theorem 3.16), generalised to ``epsilon ceil(||D - D'||_1/alpha)`` for any pair.

    Examples
    --------
    >>> from dpcurator.noise import InsecureSeededSource
    >>> case = load_case("ieee30")
    >>> out = release_loads(case.network, case.loads, epsilon=1.0, alpha=1.0,
    ...                     source=InsecureSeededSource(3))
    >>> out.opf.feasible, out.epsilon
    (True, 1.0)
    """
    eps = check_epsilon(epsilon)
    share = check_positive(cost_share, "cost_share", allow_zero=True)
    if share >= 1:
        raise InvalidParameterError("cost_share", cost_share, "must be in [0, 1)")
    noisy = add_load_noise(loads, epsilon=eps * (1 - share), alpha=alpha, source=source)
    cost = None
    if share > 0:
        cost = release_opf_cost(
            network,
            loads,
            epsilon=eps * share,
            alpha=alpha,
            voll=voll,
            segments=segments,
            source=source,
        )
    return postprocess_loads(network, noisy, cost, beta=beta, segments=segments, bilevel=bilevel)
