r"""Differentially private synthetic data from a declared table, charged to the session's ledger.

:func:`synthesize` measures marginals of the table in the curator's engine (bounded GROUP BYs, a
few for all the marginals when the bounds allow, see :mod:`dpcurator.synth._measure`), adds
discrete Gaussian noise (exact sampler), fits a graphical model to the noisy marginals
(:mod:`dpcurator.synth._model`) and draws the synthetic rows from it.

Guarantee. The whole synthesis is ``rho``-zCDP (Bun and Steinke 2016) for add/remove of one
privacy unit of the table, with the unit's contribution bounded as declared: each Gaussian
measurement of a marginal with L2 sensitivity ``Delta_2`` and noise ``sigma`` is
``Delta_2^2 / (2 sigma^2)``-zCDP (Canonne, Kamath and Steinke 2020, Theorem 14), each
selection by the exponential mechanism at ``epsilon`` is ``epsilon^2 / 8``-zCDP (it is
``epsilon``-bounded-range: Cesar and Rogers 2021, "Bounding, concentrating, and truncating",
Section 3), zCDP composes adaptively by adding ``rho`` (BS16, Lemma 1.7), and the model, its
fit and the rows drawn are post-processing. ``rho`` is the largest whose zCDP implies
``(epsilon, delta)``-DP (CKS20, Corollary 13). Every step's share is checked in exact
rationals, so the shares add up to at most ``rho``.

Methods
-------
- ``"aim"`` (McKenna, Mullins, Sheldon and Miklau 2022, "AIM: an adaptive and iterative
  mechanism for differentially private synthetic data", PVLDB 15(11), Algorithm 1): measure all
  one-way marginals, then repeatedly select (exponential mechanism) the candidate marginal of
  the workload's downward closure worst approximated by the current model, weighted by its
  overlap with the workload and penalised by its expected noise, measure it, refit; the noise
  is halved when a measurement barely moves the model; the model's size is capped.
- ``"mst"`` (McKenna, Miklau and Sheldon 2021, "Winning the NIST contest: a scalable and
  general approach to differentially private synthetic data", JPC 11(3), Section 4): a third of
  ``rho`` on all one-way marginals, a third to select a maximum spanning tree of pairs (one
  exponential mechanism per edge, scored by the pair's L1 error under independence), a third on
  the tree's two-way marginals.
- ``"independent"``: all of ``rho`` on the one-way marginals; columns drawn independently (the
  baseline).

Accounting: the synthesis is charged before any read, as one ledger entry: a
``ZCDPEvent(rho)`` with an accountant that takes zCDP (``"zcdp"``, ``"rdp"``), else an
``ApproxDPEvent(epsilon, delta)``. Refusals (unknown columns, no domain, a model that cannot
fit, no budget) happen before the charge and read nothing. The marginals are measured, and
AIM's and MST's choices made, inside the session
(:meth:`~dpcurator.curator.Session.charged_measurements`): the session meters each step's
``rho`` against the charge, takes the sensitivities from its own plans, and never hands an
exact count to the synthesis.
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Literal

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from dpcurator._validation import check_delta, check_epsilon
from dpcurator.accounting import (
    ApproxDPEvent,
    PrivacyEvent,
    ZCDPEvent,
    zcdp_rho_for,
    zcdp_to_epsilon,
)
from dpcurator.curator import ChargedMeasurements, Session, Table
from dpcurator.errors import (
    InvalidParameterError,
    QueryError,
    QueryFailedError,
    UnsupportedEventError,
)
from dpcurator.noise import RandomSource, resolve_source, uniform_integers
from dpcurator.synth._measure import Attribute, MarginalQuery, attributes, plan_marginals, sigma_for
from dpcurator.synth._model import Marginal, Model, fit_model, junction_tree_size
from dpcurator.synth._progress import Reporter
from dpcurator.synth._threads import threads

__all__ = ["METHODS", "MeasuredMarginal", "SyntheticData", "synthesize"]

METHODS = ("aim", "mst", "independent")
"""The synthesis methods."""

Method = Literal["aim", "mst", "independent"]
_SQRT_2_PI = math.sqrt(2.0 / math.pi)
_TOLERANCE = 0.01
"""The final fit's convergence test (see :func:`fit_model`): 1 % of the loss over 50 steps."""
_DISCREPANCY = 1.0
"""AIM's round fits run accelerated until the loss is at its expected value at the truth."""
_FINAL_DISCREPANCY = 0.8
"""AIM's final fit runs accelerated down to this multiple of that value, then plain steps.

The plain steps and their 1 % rule end the fit near the plain path's best model wherever the
accelerated phase hands over between 0.7 and 1 times the level (session 18: the models' errors
within 0.0001 on 15 inputs, Adult epsilon <= 3 and CPS); from 0.8 fewer plain steps are left:
at Adult epsilon 3 and 10, about 0.6x the final fit's time (see BENCHMARKS.md, "AIM's final
fit hands over to plain steps at 0.8 of the discrepancy level")."""
_INNER = 10
"""AIM's fits between rounds run at most ``iterations / _INNER`` steps (100 of the default 1,000).

Each starts afresh from uniform potentials and runs accelerated steps until the loss reaches
the discrepancy level, and stops there. A warm start from the previous round's model for 50
steps was cheaper but fitted each new measurement too little: the test that halves the noise
(the marginal moved less than its noise) fired early, AIM took fewer rounds, and both errors
rose; 50 fresh steps underfit at large epsilon. Plain steps past the discrepancy level (100 in
all) took 66 % more time at Adult epsilon 3 for no gain in either error at epsilon <= 3; at
epsilon 10 they lowered the target workload's error, for 6 % more time (see BENCHMARKS.md,
"AIM's round fits stop at the discrepancy level")."""


@dataclass(frozen=True)
class MeasuredMarginal:
    """A marginal as measured: its columns, the noisy counts and their noise.

    Attributes
    ----------
    columns : tuple of str
    noisy : ndarray of float
        The released noisy counts over the product of the columns' values (C order).
    sigma : float
        The discrete Gaussian's parameter (its standard deviation is at most ``sigma``).
    l2_sensitivity : float
        ``Delta_2`` of the counts under the declared bounds.
    rho : float
        What this measurement cost in zCDP (``Delta_2^2 / (2 sigma^2)``).
    """

    columns: tuple[str, ...]
    noisy: NDArray[np.float64] = field(repr=False)
    sigma: float
    l2_sensitivity: float
    rho: float


@dataclass(frozen=True)
class SyntheticData:
    """A synthetic table and what its release did.

    Attributes
    ----------
    table : pandas.DataFrame
        The synthetic rows: the chosen columns, with values in their declared domains (bins:
        values drawn uniformly within the bin; integers when the edges are integers).
    method : str
    columns : tuple of str
    epsilon, delta : float
        The (epsilon, delta)-DP guarantee of this release alone (``epsilon`` is ``inf`` when
        only ``rho`` was given with ``delta = 0``).
    rho : float
        Its zCDP parameter.
    measurements : tuple of MeasuredMarginal
        Every noisy marginal measured, in order.
    errors : pandas.DataFrame
        Per marginal (measured ones and the workload's): ``noise_std`` and
        ``expected_noise_l1`` known from the mechanism (``sigma`` and ``cells sigma
        sqrt(2/pi)``, the continuous Gaussian's mean absolute value, within 1 % for
        ``sigma >= 1``), and ``synthetic_vs_noisy_l1``, observed on released data only (the
        L1 distance between the synthetic table's marginal and the noisy measurement).
    entry_id : int
        The ledger entry that charged it.
    charged, remaining : Budget
    rounds : int
        Marginals measured after the one-way ones (AIM: rounds; MST: tree edges).
    stopped_by_time_limit : bool
        True when the time limit ended the fit early (the charge is the full budget).
    """

    table: pd.DataFrame
    method: str
    columns: tuple[str, ...]
    epsilon: float
    delta: float
    rho: float
    measurements: tuple[MeasuredMarginal, ...]
    errors: pd.DataFrame
    entry_id: int
    charged: Any
    remaining: Any
    rounds: int
    stopped_by_time_limit: bool

    def __repr__(self) -> str:
        return (
            f"SyntheticData(method={self.method!r}, rows={len(self.table)}, "
            f"columns={list(self.columns)}, rho={self.rho:.4g}, "
            f"measurements={len(self.measurements)}, entry_id={self.entry_id})"
        )


class _Budget:
    """The zCDP budget of one synthesis, spent step by step in exact rationals."""

    def __init__(self, rho: float) -> None:
        self.total = Fraction(rho)
        self.used = Fraction(0)

    @property
    def left(self) -> Fraction:
        return self.total - self.used

    def gaussian(self, rho: Fraction) -> float:
        """Spend at most ``rho`` on a Gaussian of L2 sensitivity 1; return its sigma."""
        share = min(rho, self.left)
        sigma = sigma_for(1, share)
        self.used += 1 / (2 * Fraction(sigma) ** 2)
        return sigma

    def selection(self, rho: Fraction) -> float:
        """Spend at most ``rho`` on an exponential mechanism; return its epsilon."""
        share = min(rho, self.left)
        eps = math.sqrt(8.0 * float(share))
        while Fraction(eps) ** 2 / 8 > share:
            eps = math.nextafter(eps, 0.0)
        self.used += Fraction(eps) ** 2 / 8
        return eps


def _spent(sigma: float) -> Fraction:
    """Return what a Gaussian of L2 sensitivity 1 and noise ``sigma`` costs, ``1/(2 sigma^2)``."""
    return 1 / (2 * Fraction(sigma) ** 2)


@dataclass
class _Context:
    """What a method needs: the marginals' queries and the measurements charged for them."""

    steps: ChargedMeasurements
    table: Table
    attrs: list[Attribute]
    queries: dict[tuple[int, ...], MarginalQuery]
    source: RandomSource
    reporter: Reporter
    deadline: float | None
    budget: _Budget
    iterations: int
    measured: list[tuple[MarginalQuery, NDArray[np.float64], float]] = field(default_factory=list)
    stopped: bool = False

    @property
    def sizes(self) -> list[int]:
        return [a.size for a in self.attrs]

    @property
    def round_iterations(self) -> int:
        """Most steps of each of AIM's fits before the final one (see ``_INNER``)."""
        return max(1, self.iterations // _INNER)

    def measure(self, clique: tuple[int, ...], rho: Fraction) -> Marginal:
        """Measure ``clique`` at most at ``rho`` (zCDP, exact).

        The noise ``sigma`` has ``Delta_2^2 / (2 sigma^2) <= rho`` in exact rationals, so the
        shares of what the budget spent never add up to more than it.
        """
        query = self.queries[clique]
        sigma = sigma_for(query.l2sq, rho)
        noisy = query.noisy(self.steps, sigma)
        self.measured.append((query, noisy, sigma))
        return Marginal(clique, noisy, sigma)

    def select(
        self,
        cliques: Sequence[tuple[int, ...]],
        estimates: Sequence[NDArray[np.float64]],
        weights: Sequence[float],
        penalties: Sequence[float],
        epsilon: float,
    ) -> tuple[int, ...]:
        """Choose the clique whose weighted L1 error, less its penalty, is the largest (EM)."""
        queries = [self.queries[c] for c in cliques]
        chosen = self.steps.select(
            [q.measured for q in queries],
            [q.keys for q in queries],
            estimates,
            weights=weights,
            penalties=penalties,
            epsilon=epsilon,
        )
        return cliques[chosen]

    def timed_out(self) -> bool:
        return self.deadline is not None and time.monotonic() > self.deadline

    def progress(self, message: str) -> None:
        self.reporter.update(float(self.budget.used / self.budget.total), message)


def _workload(
    names: Sequence[str], workload: int | Sequence[Sequence[str]] | None, default: int
) -> list[tuple[tuple[int, ...], float]]:
    """Return the workload as (clique, weight): all k-way marginals, or the listed column sets."""
    index = {n: i for i, n in enumerate(names)}
    if workload is None:
        workload = default
    if isinstance(workload, (bool, str)):
        raise InvalidParameterError("workload", workload, "must be an int k or a list of columns")
    if isinstance(workload, int):
        if workload < 1:
            raise InvalidParameterError("workload", workload, "must be >= 1 (k-way marginals)")
        k = min(workload, len(names))
        return [(c, 1.0) for c in itertools.combinations(range(len(names)), k)]
    out: dict[tuple[int, ...], float] = {}
    for item in workload:
        if isinstance(item, str) or not isinstance(item, Sequence) or not item:
            raise InvalidParameterError(
                "workload", item, "items must be non-empty lists of column names"
            )
        missing = [c for c in item if c not in index]
        if missing:
            raise QueryError(
                f"Workload marginal {list(item)} names {missing}, which are not among the "
                f"columns synthesised ({', '.join(names)}): add them to columns."
            )
        clique = tuple(sorted({index[c] for c in item}))
        out[clique] = out.get(clique, 0.0) + 1.0
    if not out:
        raise InvalidParameterError("workload", workload, "must name at least one marginal")
    return list(out.items())


def _downward_closure(
    workload: Sequence[tuple[tuple[int, ...], float]],
) -> dict[tuple[int, ...], float]:
    """AIM's candidates: every non-empty subset of a workload clique, weighted by overlap."""
    out: dict[tuple[int, ...], float] = {}
    for clique, _ in workload:
        for k in range(1, len(clique) + 1):
            for sub in itertools.combinations(clique, k):
                out[sub] = 0.0
    for sub in out:
        out[sub] = sum(w * len(set(sub) & set(c)) for c, w in workload)
    return out


def _charge(
    session: Session,
    epsilon: float | None,
    delta: float | None,
    rho: float | None,
) -> tuple[float, float, float, list[PrivacyEvent]]:
    """Return ``(rho, epsilon, delta, events)`` of the synthesis (nothing charged yet)."""
    dlt = check_delta(session.budget.delta if delta is None else delta)
    if rho is not None:
        if epsilon is not None:
            raise InvalidParameterError("rho", rho, "give epsilon or rho, not both")
        r = check_epsilon(rho, "rho")
        eps = zcdp_to_epsilon(r, dlt)
    else:
        if epsilon is None:
            raise InvalidParameterError("epsilon", None, "is required (or give rho)")
        eps = check_epsilon(epsilon)
        if dlt == 0.0:
            raise InvalidParameterError(
                "delta",
                0.0,
                "must be > 0: Gaussian noise has no pure-DP guarantee. Pass delta=1e-9 (for "
                "example) within the session's budget, or give rho for a zCDP accountant",
            )
        r = zcdp_rho_for(eps, dlt)
    events: list[PrivacyEvent] = [ZCDPEvent(rho=r)]
    try:
        session.ledger.check(events)
    except UnsupportedEventError:
        if not math.isfinite(eps) or dlt == 0.0:
            raise InvalidParameterError(
                "delta",
                dlt,
                f"must be > 0 with the {session.ledger.accountant!r} accountant, which takes "
                "(epsilon, delta) guarantees only",
            ) from None
        events = [ApproxDPEvent(epsilon=eps, delta=dlt)]
        session.ledger.check(events)  # BudgetExceededError: nothing spent, nothing read
    return r, eps, dlt, events


def synthesize(
    session: Session,
    *,
    table: str | None = None,
    columns: Sequence[str] | None = None,
    epsilon: float | None = None,
    delta: float | None = None,
    rho: float | None = None,
    method: Method = "aim",
    workload: int | Sequence[Sequence[str]] | None = None,
    bins: Mapping[str, Sequence[float]] | None = None,
    rows: int | None = None,
    max_model_size: float = 80.0,
    rounds: int | None = None,
    iterations: int = 1000,
    time_limit: float | None = None,
    progress: bool = False,
    source: RandomSource | None = None,
) -> SyntheticData:
    r"""Release a differentially private synthetic table of a declared table.

    The release is ``rho``-zCDP, hence ``(epsilon, delta)``-DP, for add/remove of one privacy
    unit of the table with its contribution bounded as declared (see the module docstring of
    :mod:`dpcurator.synth._synthesize` for the proof's steps and sources); it is charged to the
    session's ledger before any row is read, like a query.

    Parameters
    ----------
    session : Session
        The curator session whose budget and ledger pay for the release.
    table : str, optional
        The declared table (default: the session's only table).
    columns : sequence of str, optional
        The columns to synthesise (default: every declared column with a public domain or
        bins, the privacy unit excepted).
    epsilon : float
        The release's epsilon; with ``delta`` it decides ``rho``.
    delta : float, optional
        Default: the session budget's delta (must be > 0 unless ``rho`` is given).
    rho : float, optional
        Instead of ``epsilon``: the zCDP parameter.
    method : {"aim", "mst", "independent"}
    workload : int or list of lists of str, optional
        What AIM optimises for: ``k`` for all k-way marginals of the columns (default 3), or
        the marginals as lists of column names. Also the marginals of the error report.
    bins : mapping, optional
        Public bin edges for numeric columns declared without ``bins``.
    rows : int, optional
        Rows to draw (default: the noisy total, rounded).
    max_model_size : float, default 80
        AIM: the largest model, in megabytes of float64 cells (AIM's default).
    rounds : int, optional
        AIM: the planned number of rounds ``T`` (default ``16 d``; AIM stops when its budget is
        spent).
    iterations : int, default 1000
        Most mirror-descent steps of the final fit, which stops earlier once 50 steps lowered
        the loss by less than 1 %. AIM's fit after each round runs at most a tenth of them:
        it starts afresh from the uniform distribution, with accelerated steps until the loss
        reaches its expected value at the true marginals (the discrepancy principle), and
        stops there (a fit continued from the previous round's model fits the newest
        measurement too little in a round's steps). The final fit starts afresh too, with
        accelerated steps down to 0.8 of that level and plain steps after them (AIM fits no
        model after its last round); with a ``time_limit`` it continues from the last round's
        model instead (fewer steps).
    time_limit : float, optional
        Seconds: AIM measures no new marginal after it (its unspent share is not refunded) and
        every fit stops at it; the final fit still runs 50 steps.
    progress : bool, default False
        Show progress (rich on a terminal, a plain line every 5 s otherwise).
    source : RandomSource, optional
        Randomness of the rows drawn from the model (default: the session's); the noise and
        the selections always use the session's.

    Returns
    -------
    SyntheticData

    Raises
    ------
    QueryError
        For columns that are not declared, have no public domain or bins, or marginals the
        curator refuses (nothing read, nothing spent).
    BudgetExceededError
        If the release would exceed the budget (nothing read, nothing spent).
    QueryFailedError
        If it failed after the charge (fixed message; nothing refunded).

    Examples
    --------
    >>> import pandas as pd
    >>> from dpcurator.accounting import Budget
    >>> from dpcurator.curator import Column, Session, Table
    >>> from dpcurator.noise import InsecureSeededSource
    >>> df = pd.DataFrame({"hh": [1, 1, 2, 3] * 50, "sex": ["F", "M", "F", "M"] * 50,
    ...                    "age": [30, 40, 50, 60] * 50})
    >>> t = Table("people", df, privacy_unit="hh", max_rows_per_unit=2, max_groups_per_unit=2,
    ...           columns=[Column("sex", domain=["F", "M"]),
    ...                    Column("age", lower=0, upper=100, bins=[0, 35, 55, 100])])
    >>> with Session(t, Budget(2.0, 1e-6), accountant="zcdp", ledger=":memory:",
    ...              source=InsecureSeededSource(1)) as s:
    ...     synth = synthesize(s, epsilon=1.0, method="mst")
    ...     s.ledger.entries()[0].query
    'SYNTHESIZE mst FROM people (sex, age) rho=0.024356'
    >>> synth.table.columns.tolist(), set(synth.table["sex"]) <= {"F", "M"}
    (['sex', 'age'], True)
    """
    if method not in METHODS:
        raise InvalidParameterError("method", method, f"must be one of {', '.join(METHODS)}")
    declared = _table(session, table)
    attrs = attributes(declared, columns, bins)
    names = [a.name for a in attrs]
    if iterations < 1 or isinstance(iterations, bool):
        raise InvalidParameterError("iterations", iterations, "must be a positive integer")
    if time_limit is not None and not time_limit > 0:
        raise InvalidParameterError("time_limit", time_limit, "must be > 0 seconds")
    if rows is not None and (isinstance(rows, bool) or not isinstance(rows, int) or rows < 0):
        raise InvalidParameterError("rows", rows, "must be a non-negative integer")
    threads()  # a bad DPCURATOR_THREADS is refused here, before anything is charged
    load = _workload(names, workload, 3)
    cliques = _cliques(method, len(attrs), load)
    queries = plan_marginals(session, declared, attrs, cliques)  # nothing read
    r, eps, dlt, events = _charge(session, epsilon, delta, rho)
    text = f"SYNTHESIZE {method} FROM {declared.name} ({', '.join(names)}) rho={r:.6g}"
    deadline = None if time_limit is None else time.monotonic() + time_limit
    steps = session.charged_measurements(text, events, r)  # charged before any read
    entry = steps.entry
    src = resolve_source(source if source is not None else steps.source)
    failed = False
    with Reporter(progress) as reporter:
        context = _Context(
            steps, declared, attrs, queries, src, reporter, deadline, _Budget(r), iterations
        )
        try:
            model, count = _run(method, context, load, max_model_size, rounds)
            synthetic, codes = _rows(model, attrs, declared, rows, src)
        except Exception:  # after the charge, any failure reads the same
            failed = True
        reporter.update(float(context.budget.used / context.budget.total), "done", force=True)
    if failed:
        raise QueryFailedError(
            f"The synthesis failed while running. It was charged before it read the data "
            f"(ledger entry {entry.id}) and nothing is refunded; the reason is not shown "
            "because it could depend on the data."
        )
    measured = tuple(
        MeasuredMarginal(
            tuple(names[i] for i in q.clique),
            noisy,
            sigma,
            math.sqrt(q.l2sq),
            float(Fraction(q.l2sq) / (2 * Fraction(sigma) ** 2)),
        )
        for q, noisy, sigma in context.measured
    )
    return SyntheticData(
        table=synthetic,
        method=method,
        columns=tuple(names),
        epsilon=eps,
        delta=dlt,
        rho=r,
        measurements=measured,
        errors=_errors(codes, attrs, measured, load),
        entry_id=entry.id,
        charged=entry.charged,
        remaining=entry.remaining,
        rounds=count,
        stopped_by_time_limit=context.stopped,
    )


def _table(session: Session, name: str | None) -> Table:
    if not isinstance(session, Session):
        raise InvalidParameterError("session", session, "must be a dpcurator.curator.Session")
    tables = session.tables
    if name is None:
        if len(tables) != 1:
            raise InvalidParameterError(
                "table", None, f"must name one of the session's tables: {', '.join(tables)}"
            )
        return next(iter(tables.values()))
    if name not in tables:
        raise QueryError(
            f"Table {name!r} is not declared in this session; declared: {', '.join(tables)}."
        )
    return tables[name]


def _cliques(
    method: str, d: int, load: Sequence[tuple[tuple[int, ...], float]]
) -> list[tuple[int, ...]]:
    """Every marginal the method may read (all planned before the charge)."""
    oneway: list[tuple[int, ...]] = [(i,) for i in range(d)]
    if method == "independent":
        return oneway
    if method == "mst":
        return oneway + list(itertools.combinations(range(d), 2))
    closure = _downward_closure(load)
    return oneway + [c for c in closure if len(c) > 1]


def _run(
    method: str,
    context: _Context,
    load: Sequence[tuple[tuple[int, ...], float]],
    max_model_size: float,
    rounds: int | None,
) -> tuple[Model, int]:
    if method == "independent":
        return _independent(context), 0
    if method == "mst":
        return _mst(context)
    return _aim(context, load, max_model_size, rounds)


def _oneways(context: _Context, rho: Fraction) -> list[Marginal]:
    """All one-way marginals at ``rho`` in all (each noised for the joint L2 sensitivity)."""
    d = len(context.attrs)
    share = _spent(context.budget.gaussian(rho)) / d
    context.progress("one-way marginals")
    return [context.measure((i,), share) for i in range(d)]


def _fit(
    context: _Context,
    measurements: Sequence[Marginal],
    iterations: int,
    *,
    final: bool = False,
    warm_start: Model | None = None,
    fresh: bool = False,
) -> Model:
    """Fit a model; ``fresh``: from uniform, fast to ``_FINAL_DISCREPANCY`` of the level first."""
    deadline = context.deadline
    if final and context.timed_out():
        deadline, iterations = None, min(iterations, 50)
    return fit_model(
        context.sizes,
        measurements,
        iterations=iterations,
        deadline=deadline,
        warm_start=warm_start,
        start="uniform" if fresh else "factorisation",
        discrepancy=_FINAL_DISCREPANCY if fresh else None,
        tolerance=_TOLERANCE if final else 0.0,
    )


def _round_fit(context: _Context, measurements: Sequence[Marginal]) -> Model:
    """AIM's fit after a round: from uniform, accelerated to the discrepancy level (see _INNER)."""
    return fit_model(
        context.sizes,
        measurements,
        iterations=context.round_iterations,
        deadline=context.deadline,
        start="uniform",
        discrepancy=_DISCREPANCY,
        plain_steps=0,
    )


def _independent(context: _Context) -> Model:
    measurements = _oneways(context, context.budget.left)
    return _fit(context, measurements, context.iterations, final=True)


def _mst(context: _Context) -> tuple[Model, int]:
    d = len(context.attrs)
    third = context.budget.total / 3
    measurements = _oneways(context, third)
    if d == 1:
        return _fit(context, measurements, context.iterations, final=True), 0
    # Selection: a maximum spanning tree of the pairs' L1 errors under independence.
    total = max(1.0, float(np.mean([m.values.sum() for m in measurements])))
    probs = [
        np.maximum(m.values, 0.0) / max(1.0, float(np.maximum(m.values, 0.0).sum()))
        for m in measurements
    ]
    pairs = list(itertools.combinations(range(d), 2))
    independent = {(a, b): total * np.outer(probs[a], probs[b]).reshape(-1) for a, b in pairs}
    component = list(range(d))

    def find(x: int) -> int:
        while component[x] != x:
            component[x] = component[component[x]]
            x = component[x]
        return x

    edges: list[tuple[int, int]] = []
    for i in range(d - 1):
        eps = context.budget.selection(third / (d - 1))
        candidates = [p for p in pairs if find(p[0]) != find(p[1])]
        found = context.select(
            candidates,
            [independent[p] for p in candidates],
            [1.0] * len(candidates),
            [0.0] * len(candidates),
            eps,
        )
        chosen = (found[0], found[1])
        edges.append(chosen)
        component[find(chosen[0])] = find(chosen[1])
        context.progress(f"tree edge {i + 1} of {d - 1}")
    sigma = context.budget.gaussian(context.budget.left)
    measurements += [context.measure(e, _spent(sigma) / len(edges)) for e in edges]
    context.progress("fitting the model")
    return _fit(context, measurements, context.iterations, final=True), len(edges)


def _aim(
    context: _Context,
    load: Sequence[tuple[tuple[int, ...], float]],
    max_model_size: float,
    planned: int | None,
) -> tuple[Model, int]:
    d = len(context.attrs)
    budget = context.budget
    T = 16 * d if planned is None else int(planned)
    if T < 1:
        raise InvalidParameterError("rounds", planned, "must be >= 1")
    rho = budget.total
    candidates = {c: w for c, w in _downward_closure(load).items()}
    for i in range(d):
        candidates.setdefault((i,), 0.0)
    # One-way marginals: each at 1 / (2 sigma^2) with sigma = sqrt(T / (2 * 0.9 rho)).
    sigma0 = math.sqrt(T / (2 * 0.9 * float(rho)))
    measurements = _oneways(context, Fraction(d) / (2 * Fraction(sigma0) ** 2))
    sigma = sigma0
    eps = math.sqrt(8 * 0.1 * float(rho) / T)
    model = _fit(context, measurements, context.round_iterations)
    cells_limit = max_model_size * 2**20 / 8
    rounds = 0
    terminate = False
    while not terminate:
        if context.timed_out():
            context.stopped = True
            break
        left = budget.left
        step = Fraction(1) / (2 * Fraction(sigma) ** 2) + Fraction(eps) ** 2 / 8
        if left < 2 * step:  # the last round takes what is left
            sigma = math.sqrt(1 / (2 * 0.9 * float(left)))
            eps = math.sqrt(8 * 0.1 * float(left))
            terminate = True
        used_after = float(budget.used + min(step, left)) if not terminate else float(rho)
        limit = cells_limit * used_after / float(rho)
        current = model.cliques
        allowed = [
            c
            for c in candidates
            if any(set(c) <= set(m) for m in current)
            or junction_tree_size(context.sizes, [*current, c]) <= limit
        ]
        share = Fraction(eps) ** 2 / 8 if not terminate else budget.left / 10
        model.keep_marginals(allowed)
        estimates = {c: model.marginal(c) for c in sorted(allowed, key=len, reverse=True)}
        chosen = context.select(
            allowed,
            [estimates[c] for c in allowed],
            [candidates[c] for c in allowed],
            [
                _SQRT_2_PI * sigma * math.sqrt(context.queries[c].l2sq) * context.queries[c].cells
                for c in allowed
            ],
            budget.selection(share),
        )
        gauss = Fraction(1) / (2 * Fraction(sigma) ** 2) if not terminate else budget.left
        unit = budget.gaussian(gauss)
        measurements.append(context.measure(chosen, _spent(unit)))
        rounds += 1
        if not terminate or context.deadline is not None:  # else the final fit starts afresh
            before = model.marginal(chosen)
            model = _round_fit(context, measurements)
            query = context.queries[chosen]
            moved = float(np.abs(model.marginal(chosen) - before).sum())
            if moved <= _SQRT_2_PI * unit * math.sqrt(query.l2sq) * query.cells:
                sigma, eps = sigma / 2, eps * 2
        context.progress(
            f"round {rounds}: measured {', '.join(context.attrs[i].name for i in chosen)}"
        )
    context.progress("final fit")
    if context.deadline is not None:  # a time limit: continue from the last round's model
        return _fit(context, measurements, context.iterations, final=True, warm_start=model), rounds
    # Afresh: continuing the last round's model was as fast and less accurate at epsilon 10.
    return _fit(context, measurements, context.iterations, final=True, fresh=True), rounds


def _rows(
    model: Model, attrs: Sequence[Attribute], table: Table, rows: int | None, source: RandomSource
) -> tuple[pd.DataFrame, NDArray[np.int64]]:
    """Draw the synthetic rows; return them decoded into the declared values, and as codes."""
    count = round(model.total) if rows is None else rows
    codes = model.sample(count, source)
    data: dict[str, Any] = {}
    for i, attr in enumerate(attrs):
        column = codes[:, i]
        if attr.edges is None:
            lookup = np.empty(attr.size, dtype=object)
            lookup[:] = list(attr.values)
            data[attr.name] = lookup[column]
        else:
            data[attr.name] = _in_bins(column, attr, table, source)
    return pd.DataFrame(data, columns=[a.name for a in attrs]), codes


def _in_bins(
    column: NDArray[np.int64], attr: Attribute, table: Table, source: RandomSource
) -> NDArray[Any]:
    """Values drawn uniformly within each row's bin (and the declared bounds)."""
    assert attr.edges is not None
    edges = np.array(attr.edges, dtype=np.float64)
    bounds = table.column(attr.name).bounds
    low, high = edges[column], edges[column + 1]
    if bounds is not None:
        low, high = np.clip(low, *bounds), np.clip(high, *bounds)
    n = column.size
    if n == 0:
        return np.zeros(0)
    if all(float(e).is_integer() for e in attr.edges) and (
        bounds is None or all(float(b).is_integer() for b in bounds)
    ):
        last = column == len(attr.edges) - 2
        top = np.where(last, high, high - 1).astype(np.int64)
        span = np.maximum(top - low.astype(np.int64) + 1, 1)
        draws = _uniform_by_span(span, source)  # one span per bin: a few draws
        return low.astype(np.int64) + draws
    fraction = uniform_integers(2**53, n, source=source) / float(2**53)
    return np.asarray(low + fraction * (high - low), dtype=np.float64)


def _uniform_by_span(span: NDArray[np.int64], source: RandomSource) -> NDArray[np.int64]:
    out = np.zeros(span.size, dtype=np.int64)
    for s in np.unique(span):
        where = span == s
        out[where] = uniform_integers(int(s), int(where.sum()), source=source)
    return out


def _errors(
    codes: NDArray[np.int64],
    attrs: Sequence[Attribute],
    measured: Sequence[MeasuredMarginal],
    load: Sequence[tuple[tuple[int, ...], float]],
) -> pd.DataFrame:
    """Return the error report: per marginal, noise known from the mechanism, and observed.

    ``codes`` are the synthetic rows as value indices (one column per attribute).
    """
    index = {a.name: i for i, a in enumerate(attrs)}
    records = []
    seen: set[tuple[str, ...]] = set()
    for m in measured:
        clique = tuple(index[c] for c in m.columns)
        synth = _counts(codes, clique, attrs)
        records.append(
            {
                "marginal": " x ".join(m.columns),
                "measured": True,
                "cells": int(m.noisy.size),
                "noise_std": m.sigma,
                "expected_noise_l1": m.noisy.size * m.sigma * _SQRT_2_PI,
                "synthetic_vs_noisy_l1": float(np.abs(synth - m.noisy).sum()),
            }
        )
        seen.add(m.columns)
    for clique, _ in load:
        columns = tuple(attrs[i].name for i in clique)
        if columns in seen:
            continue
        seen.add(columns)
        records.append(
            {
                "marginal": " x ".join(columns),
                "measured": False,
                "cells": math.prod(attrs[i].size for i in clique),
                "noise_std": math.nan,
                "expected_noise_l1": math.nan,
                "synthetic_vs_noisy_l1": math.nan,
            }
        )
    return pd.DataFrame.from_records(records)


def _counts(
    codes: NDArray[np.int64], clique: tuple[int, ...], attrs: Sequence[Attribute]
) -> NDArray[np.float64]:
    shape = tuple(attrs[i].size for i in clique)
    if codes.shape[0] == 0:
        return np.zeros(math.prod(shape))
    flat = np.ravel_multi_index(tuple(codes[:, i] for i in clique), shape)
    return np.bincount(flat, minlength=math.prod(shape)).astype(np.float64)
