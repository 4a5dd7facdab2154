"""Sessions: the trusted curator answering aggregate queries under a budget, with a ledger.

A query's way through a :class:`Session`: parse and check (refusals cost nothing and read no
data) -> plan (measurements, budget split, privacy events, bounded SQL) -> the engine binds the
SQL without running it (errors here depend on the schema only, and are refusals) -> the ledger
charges the query and commits its entry (a query over budget is refused here, having read
nothing) -> the engine runs the bounded SQL -> noise on the small aggregated result -> the
:class:`~dpcurator.curator.QueryRelease` is returned.

What an analyst receives is a function of the noisy release alone:

- every read of private data is charged *before* it happens, so neither its result nor its
  failure can reach the analyst uncharged, and nothing is ever refunded;
- a failure after the charge (the engine or the noise stage raised) becomes one fixed message,
  :class:`~dpcurator.errors.QueryFailedError`, raised outside the handler so that neither
  ``__cause__`` nor ``__context__`` holds the engine's error;
- the analyst's row filter is evaluated with TRY semantics (a row on which it fails is not
  selected), so evaluation errors that depend on a value do not happen in the first place;
- released groups come back in an order fixed by their keys (sorted), never the engine's.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self, cast

import duckdb
import pandas as pd
from sqlglot import exp

from dpcurator._validation import check_probability
from dpcurator.accounting import Budget, DiscreteGaussianEvent, PrivacyEvent
from dpcurator.accounting._registry import make_accountant
from dpcurator.curator._accuracy import Predicted, Target, epsilon_for, predicted_errors
from dpcurator.curator._aggregates import Quantile
from dpcurator.curator._cache import Recent
from dpcurator.curator._consistent import Answers
from dpcurator.curator._duckdb import DuckDBEngine
from dpcurator.curator._engine import SOURCE_TABLE, Engine, declared_tables, render
from dpcurator.curator._estimates import quantile_rank_error
from dpcurator.curator._ledger import Ledger, LedgerEntry
from dpcurator.curator._measure import Exact, compute, fetch
from dpcurator.curator._measures import QuantileCounts
from dpcurator.curator._plan import NOISES, Noise, Plan, make_plan
from dpcurator.curator._release import QueryRelease
from dpcurator.curator._sampling import (
    one_pass_pays,
    prefix_rows,
    prefix_statement,
)
from dpcurator.curator._sql import parse_query
from dpcurator.curator._statements import (
    all_pairs,
    quantile_buckets,
    with_over,
    without_heavy,
)
from dpcurator.curator._steward import ChargedMeasurements, check_covers
from dpcurator.curator._table import Table, read_declaration
from dpcurator.curator._types import check_key_types, check_where_types
from dpcurator.errors import InvalidParameterError, QueryError, QueryFailedError
from dpcurator.noise import RandomSource, resolve_source

if TYPE_CHECKING:
    from dpcurator.curator._cache import Recent
from dpcurator.curator._builder import QueryBuilder

__all__ = ["DEFAULT_ACCOUNTANT", "Session"]

_PROBE = DiscreteGaussianEvent(sigma=1.0, sensitivity=2.0, dimension=4)
"""A discrete Gaussian on a vector: accountants that compose it compose the session's."""

DEFAULT_ACCOUNTANT = "basic"
"""The session's default accountant. Queries are pure epsilon-DP measurements (plus (epsilon,
delta) partition selection); among the accountants valid when every query and its budget are
chosen adaptively (fully adaptive composition, Rogers et al. 2016), basic composition is exact
for such a sequence up to the first few dozen queries; ``"zcdp"`` (also fully adaptive) is
tighter for long sessions of many small queries without partition selection."""


def _default_ledger(tables: Mapping[str, Table]) -> str:
    for table in tables.values():
        if table.path is not None:
            p = Path(table.path)
            return str(p.with_name(p.stem + ".ledger.sqlite"))
    for table in tables.values():
        if isinstance(table.source, str | os.PathLike):
            p = Path(table.source)
            return str(p.with_name(f"{table.name}.ledger.sqlite"))
    raise InvalidParameterError(
        "ledger",
        None,
        "is needed for tables held in memory: give a file path for the ledger (or ':memory:' "
        "for one that is not kept, e.g. in simulations)",
    )


class Session:
    """Answer aggregate queries over declared private tables under a privacy budget.

    Every answer is epsilon-DP (or (epsilon, delta)-DP with partition selection) for
    add/remove of one privacy unit of the table it reads, with the unit's contribution bounded
    as declared (see :class:`Table` and :func:`~dpcurator.curator._plan.make_plan`); the
    session's ledger composes the answers with its accountant and refuses any query that would
    exceed the budget, before reading data.

    Parameters
    ----------
    tables : Table or sequence of Table
        The declared private tables (each query reads one of them).
    budget : Budget
        The total budget of the ledger.
    accountant : str, optional
        One of the accountant names of :mod:`dpcurator.accounting`; default
        :data:`DEFAULT_ACCOUNTANT`. Accountants whose theorem needs the queries fixed in advance
        are refused unless ``adaptive_parameters=False``.
    ledger : str or path, optional
        The SQLite ledger. Default: next to the table's TOML declaration
        (``<name>.ledger.sqlite``), else next to its source file; required for tables held in
        memory (``":memory:"`` keeps nothing, for simulations).
    ledger_key : str or path, optional
        The steward's key file: the ledger's entries are then chained by an HMAC under its
        secret and anchored in it, so that an edited, truncated or replaced ledger is refused on
        open (see :class:`Ledger`). Sessions opened from a TOML declaration always have one.
    adaptive_parameters : bool, default True
        False declares that all queries and their budgets are fixed in advance.
    source : RandomSource, optional
        Randomness (secure by default; a seeded source only for tests and simulations).
    confidence : float, default 0.95
        Level of the released intervals.
    connection : duckdb.DuckDBPyConnection, optional
        The DuckDB connection to run in (default: a new in-process one; a table whose source
        is a connection runs in that one). Only for the default engine.
    noise : {"auto", "laplace", "gaussian"}, default "auto"
        The noise of counts and sums. ``"auto"``: the discrete Gaussian where its std is the
        smaller at the query's (epsilon, delta) share (only with delta > 0: many groups per
        unit), else the geometric (Laplace); each measurement says which and why
        (``release.split[i].why``). A zCDP query (``rho=``) is always Gaussian.
    engine : Engine, optional
        Where the rows live and the bounded SQL runs: a
        :class:`~dpcurator.curator.DuckDBEngine` (the default, in-process) or a
        :class:`~dpcurator.curator.SparkEngine`. The session registers the tables in it and
        closes it with the session.

    Examples
    --------
    >>> import pandas as pd
    >>> from dpcurator.accounting import Budget, DiscreteGaussianEvent
    >>> from dpcurator.curator import Column, Session, Table
    >>> from dpcurator.noise import InsecureSeededSource
    >>> df = pd.DataFrame({"pid": [1, 1, 2, 3], "state": ["CA", "CA", "NY", "NY"],
    ...                    "income": [10.0, 20.0, 30.0, 40.0]})
    >>> people = Table("people", df, privacy_unit="pid", max_rows_per_unit=2,
    ...                columns=[Column("state", domain=["CA", "NY"]),
    ...                         Column("income", lower=0, upper=100)])
    >>> session = Session(people, Budget(1.0), ledger=":memory:", source=InsecureSeededSource(1))
    >>> r = session.sql("SELECT state, COUNT(*) AS n FROM people GROUP BY state", epsilon=0.5)
    >>> r.table["state"].tolist(), r.remaining
    (['CA', 'NY'], Budget(epsilon=0.5, delta=0.0))
    >>> session.close()
    """

    def __init__(
        self,
        tables: Table | Sequence[Table],
        budget: Budget,
        *,
        accountant: str | None = None,
        ledger: str | os.PathLike[str] | None = None,
        ledger_key: str | os.PathLike[str] | None = None,
        adaptive_parameters: bool = True,
        source: RandomSource | None = None,
        confidence: float = 0.95,
        connection: duckdb.DuckDBPyConnection | None = None,
        engine: Engine | None = None,
        noise: Noise = "auto",
    ) -> None:
        declared = declared_tables(tables)
        if not isinstance(budget, Budget):
            raise InvalidParameterError("budget", budget, "must be a Budget(epsilon, delta)")
        name = DEFAULT_ACCOUNTANT if accountant is None else accountant
        # Refuses a name no accountant has (nothing opened yet); asks whether it composes
        # multi-dimensional discrete Gaussians (zCDP, RDP) or needs their (epsilon, delta).
        self._gaussian_events = make_accountant(name).supports(_PROBE)
        if noise not in NOISES:
            raise InvalidParameterError("noise", noise, f"must be one of {', '.join(NOISES)}")
        self._noise: Noise = noise
        self._confidence = check_probability(
            confidence, "confidence", open_left=True, open_right=True
        )
        self._source = resolve_source(source)
        path = _default_ledger(declared) if ledger is None else ledger
        self._lock = threading.RLock()
        self._engine = _engine(declared, engine, connection)
        self._over: dict[tuple[object, ...], _Over] = {}
        self._passes: dict[tuple[object, ...], tuple[Hashable, bool]] = {}
        # Kept for repeated queries: plans (functions of the query and the declarations), the
        # statements reading cached units, and exact aggregates per version of the rows.
        self._plans: Recent[Plan] = Recent(_KEPT)
        self._runnables: Recent[tuple[exp.Query, _Over, exp.Query]] = Recent(_KEPT)
        self._results: Recent[Mapping[str, Sequence[object]]] = Recent(_KEPT)
        self._answers = Answers()  # the COUNT(*) answers a consistent estimate combines
        try:
            self._ledger = Ledger(
                path,
                budget=budget,
                accountant=name,
                adaptive_parameters=adaptive_parameters,
                key=ledger_key,
            )
        except BaseException:
            self._engine.close()
            raise

    @classmethod
    def from_toml(
        cls,
        path: str | os.PathLike[str],
        *,
        budget: Budget | None = None,
        ledger: str | os.PathLike[str] | None = None,
        source: RandomSource | None = None,
        confidence: float = 0.95,
    ) -> Session:
        """Open a session on a TOML declaration (budget from its ``[budget]``, unless given).

        The ledger and the steward's key file are the declaration's (its ``[ledger]`` section;
        by default ``<name>.ledger.sqlite`` and ``<name>.ledger.key`` next to the TOML file).
        """
        declaration = read_declaration(path)
        chosen = budget if budget is not None else declaration.budget
        if chosen is None:
            raise InvalidParameterError(
                "budget", None, f"must be given, or declared in a [budget] section of {path}"
            )
        return cls(
            declaration.table,
            chosen,
            accountant=declaration.accountant,
            ledger=declaration.ledger_path if ledger is None else ledger,
            ledger_key=declaration.ledger_key,
            source=source,
            confidence=confidence,
            noise=cast("Noise", declaration.noise),
        )

    # -- queries -----------------------------------------------------------------------------
    def plan(
        self,
        query: str,
        *,
        epsilon: float | None = None,
        delta: float = 0.0,
        rho: float | None = None,
    ) -> Plan:
        """Check and plan ``query`` without reading data or spending (what :meth:`sql` would do).

        Raises
        ------
        QueryError
            If the query is not a supported aggregate over a declared table.
        """
        return self._prepared(query, epsilon=epsilon, delta=delta, rho=rho)

    def _prepared(
        self, query: str, *, epsilon: float | None, delta: float, rho: float | None = None
    ) -> Plan:
        """Plan ``query`` and bind its statements in the engine (no rows read, nothing spent)."""
        if rho is not None and not self._gaussian_events:
            raise InvalidParameterError(
                "rho",
                rho,
                f"needs an accountant that composes zCDP: open the session with "
                f"accountant='zcdp' (this one has {self._ledger.accountant!r})",
            )
        key = (query, epsilon, delta, rho)
        plan = self._plans.get(key)
        if plan is None:  # a function of the query, the declarations and the public schema
            parsed = parse_query(query, self._engine.tables)
            plan = make_plan(
                parsed,
                epsilon=epsilon,
                delta=delta,
                rho=rho,
                noise=self._noise,
                gaussian_events=self._gaussian_events,
                integer_columns=self._engine.integer_columns(parsed.table.name),
            )
            self._plans.put(key, plan)
        parsed = plan.query
        kinds = self._engine.kinds(parsed.table.name)
        check_where_types(parsed.where, kinds)
        for computed in parsed.computed.values():
            check_key_types(computed.expression, kinds)
        for statement in plan.statements.all:
            self._engine.prepare(statement, parsed.table.name)
        return plan

    def _read(self, plan: Plan) -> Callable[[exp.Query], Mapping[str, Sequence[object]]]:
        """How this plan's statements read the rows: with what the session already computed.

        While the engine's version token of the table is unchanged (never without a token):

        - the units beyond a bound depend on the table's rows, its unit, the group-key columns
          and the bounds only (never on the query's filter), so they are computed once and
          reused (see :mod:`dpcurator.curator._statements`); when none is beyond its bounds,
          the statements skip the bounding steps;
        - where most units are beyond their bounds (:meth:`_one_pass`), a scaled statement
          with one group per unit runs in one aggregation per unit instead
          (:attr:`~dpcurator.curator._statements.Statements.single`: the same aggregates);
        - the exact aggregates of a statement already run are reused (the same SQL on the same
          rows gives the same integers). Only the exact values are reused: every answer gets
          fresh noise and is charged in full. What a repeated statement's shorter latency
          tells is that the same statement ran before in this session (a fact about the
          questions asked, not about the rows).
        """
        table = plan.query.table.name
        version = self._engine.version(table)
        if version is None:
            return lambda statement: self._engine.run(statement, table)
        if plan.statements.build_single is not None and self._one_pass(plan, version):
            main, single = plan.statements.main, plan.statements.single
            assert single is not None
            return lambda statement: self._exact(
                table, version, single if statement is main else statement
            )
        over = None if plan.statements.over is None else self._over_for(plan, version)

        def read(statement: exp.Query) -> Mapping[str, Sequence[object]]:
            runnable = statement if over is None else self._runnable(statement, over)
            return self._exact(table, version, runnable)

        return read

    def _over_for(self, plan: Plan, version: Hashable) -> _Over:
        """Return the units beyond the plan's bounds, computed once per table version."""
        table = plan.query.table.name
        key = _over_key(plan)
        cached = self._over.get(key)
        if cached is None or cached.version != version:
            assert plan.statements.over is not None
            units = self._engine.materialize(plan.statements.over, table)
            count = self._engine.run(exp.select("COUNT(*) AS n").from_(units), table)
            cached = _Over(version, units, int(count["n"][0]))
            self._over[key] = cached
        return cached

    def _one_pass(self, plan: Plan, version: Hashable) -> bool:
        """Whether this table's scaled statements run in one pass per unit (decided once).

        From the units beyond their bounds when the session has them (one pass where they are
        many, :data:`_PAIRS_FROM`), else from the table's first rows where the engine reads
        them cheaply (:mod:`dpcurator.curator._sampling`); the aggregates are the same either
        way.
        """
        key = _over_key(plan)
        cached = self._over.get(key)
        if cached is not None and cached.version == version:
            return cached.count >= _PAIRS_FROM
        chosen = self._passes.get(key)
        if chosen is None or chosen[0] != version:
            chosen = (version, self._prefix_says(plan))
            self._passes[key] = chosen
        return chosen[1]

    def _prefix_says(self, plan: Plan) -> bool:
        """Whether the table's first rows suggest that most of its units exceed the bound.

        False where the engine does not know the table's size cheaply.
        """
        table = plan.query.table
        total = self._engine.row_count(table.name)
        if total is None or table.unit_column is None:
            return False
        rows = prefix_rows(total)
        found = self._engine.run(prefix_statement(table.unit_column, rows), table.name)
        return one_pass_pays(
            total=total,
            rows=rows,
            pairs=int(found["__pairs"][0] or 0),
            quarter_pairs=int(found["__quarter"][0] or 0),
            bound=plan.contribution.per_group,
        )

    def _exact(
        self, table: str, version: Hashable, statement: exp.Query
    ) -> Mapping[str, Sequence[object]]:
        """Return the exact aggregates of ``statement`` on this version of the rows (run once)."""
        key = (table, version, self._engine.render(statement, table))
        result = self._results.get(key)
        if result is None:
            result = self._engine.run(statement, table)
            self._results.put(key, result)
        return result

    def _runnable(self, statement: exp.Query, over: _Over) -> exp.Query:
        """Return ``statement`` reading the cached units beyond their bounds (kept per pair).

        Without such units, the rows as they are; with many (:data:`_PAIRS_FROM`), a scaled
        statement aggregates every unit per group without splitting the rows by a join with
        them (:func:`~dpcurator.curator._statements.all_pairs`: the same result).
        """
        key = (id(statement), id(over))
        kept = self._runnables.get(key)
        if kept is None or kept[0] is not statement or kept[1] is not over:
            if over.count == 0:
                tree = without_heavy(statement)
            elif over.count >= _PAIRS_FROM:
                tree = all_pairs(with_over(statement, over.units))
            else:
                tree = with_over(statement, over.units)
            kept = (statement, over, tree)
            self._runnables.put(key, kept)
        return kept[2]

    def predicted_errors(
        self, query: str, *, epsilon: float, delta: float = 0.0
    ) -> list[Predicted]:
        """Return the errors ``query`` would have at ``epsilon`` (nothing read, nothing spent).

        Counts and sums only: their noise does not depend on the data, so the standard
        deviation and the interval's half-width (at the session's confidence) are known before
        reading. Averages, variances and quantiles depend on the data and are not listed.

        Examples
        --------
        >>> import pandas as pd
        >>> from dpcurator.accounting import Budget, DiscreteGaussianEvent
        >>> from dpcurator.curator import Column, Table
        >>> t = Table("t", pd.DataFrame({"x": [1.0]}), columns=[Column("x", lower=0, upper=10)])
        >>> with Session(t, Budget(1.0), ledger=":memory:") as s:
        ...     [(p.alias, p.half_width) for p in s.predicted_errors(
        ...         "SELECT COUNT(*) AS n FROM t", epsilon=0.5)]
        [('n', 6.0)]
        """
        plan = self._prepared(query, epsilon=epsilon, delta=delta)
        return predicted_errors(plan, self._confidence)

    def epsilon_for(
        self,
        query: str,
        *,
        target_ci: float | None = None,
        target_std: float | None = None,
        delta: float = 0.0,
    ) -> float:
        """Return the smallest epsilon at which ``query``'s counts and sums meet a target.

        ``target_ci``: the half-width of each interval (at the session's confidence);
        ``target_std``: each standard deviation. The epsilon is rounded up to 3 significant
        digits; nothing is read and nothing is spent.

        Raises
        ------
        QueryError
            For a query with averages, variances or quantiles (their error depends on the data)
            or a target no epsilon meets.
        InvalidParameterError
            Unless exactly one target is given, positive and finite.

        Examples
        --------
        >>> import pandas as pd
        >>> from dpcurator.accounting import Budget, DiscreteGaussianEvent
        >>> from dpcurator.curator import Column, Table
        >>> t = Table("t", pd.DataFrame({"x": [1.0]}), columns=[Column("x", lower=0, upper=10)])
        >>> with Session(t, Budget(1.0), ledger=":memory:") as s:
        ...     s.epsilon_for("SELECT COUNT(*) FROM t", target_ci=10)
        0.285
        """
        goal = _target(target_ci, target_std)
        return epsilon_for(
            lambda eps: self._prepared(query, epsilon=eps, delta=delta), goal, self._confidence
        )

    def sql(
        self,
        query: str,
        *,
        epsilon: float | None = None,
        delta: float = 0.0,
        rho: float | None = None,
        target_ci: float | None = None,
        target_std: float | None = None,
    ) -> QueryRelease:
        """Answer an aggregate SQL query with differential privacy.

        Parameters
        ----------
        query : str
            ``SELECT <group keys>, <aggregates> FROM <table> [WHERE ...] [GROUP BY ...]
            [ORDER BY ...] [LIMIT n]`` over one declared table. Aggregates: COUNT(*),
            COUNT(column), COUNT(DISTINCT <privacy unit>), SUM, AVG, VARIANCE/VAR_SAMP/VAR_POP,
            STDDEV/STDDEV_SAMP/STDDEV_POP, MEDIAN, QUANTILE(column, q), PERCENTILE_CONT,
            HISTOGRAM(column [, edges...]). The WHERE clause has TRY semantics: a row on which it
            cannot be evaluated (a failing CAST, an overflow, a division by zero) is not selected.
        epsilon : float
            The query's budget, split evenly over its measurements (the split is reported).
        delta : float, default 0
            Needed (> 0) when group keys have no declared domain (partition selection); with
            it the session's ``noise="auto"`` may choose the discrete Gaussian.
        rho : float, optional
            Instead of ``epsilon``: a zCDP budget for the query (discrete Gaussian noise on its
            counts and sums); needs a session with ``accountant="zcdp"``.
        target_ci, target_std : float, optional
            Instead of ``epsilon``: the accuracy wanted for the query's counts and sums (see
            :meth:`epsilon_for`), which decides the epsilon charged.

        Returns
        -------
        QueryRelease

        Raises
        ------
        QueryError
            The query is not supported (nothing read, nothing spent).
        BudgetExceededError
            The query would exceed the budget (nothing read, nothing spent).
        QueryFailedError
            The query was charged, read the data and failed; the message is the same whatever
            the reason (it could depend on the data), and nothing is refunded.
        """
        if target_ci is not None or target_std is not None:
            if epsilon is not None:
                raise InvalidParameterError(
                    "epsilon", epsilon, "must not be given with a target: the target decides it"
                )
            epsilon = self.epsilon_for(
                query, target_ci=target_ci, target_std=target_std, delta=delta
            )
        if epsilon is None and rho is None:
            raise InvalidParameterError(
                "epsilon", None, "is required (or give rho, target_ci or target_std)"
            )
        with self._lock:
            plan = self._prepared(query, epsilon=epsilon, delta=delta, rho=rho)
            entry = self._ledger.record(query, plan.events)  # charged before any read
            released = _answer(self, plan)
            if released is None:  # raised here, outside any handler: no exception chain
                raise QueryFailedError(
                    f"The query failed while running. It was charged before it read the data "
                    f"(ledger entry {entry.id}) and nothing is refunded; the reason is not "
                    "shown because it could depend on the data."
                )
        release = _release(self, plan, entry, released)
        self._answers.add(plan, release, self._engine.version(plan.query.table.name))
        return release

    def combined(self, release: QueryRelease) -> pd.DataFrame:
        """Return an answer of this session combined with its others (free).

        Every noisy count and sum the session measured over the same table and filter, grouped
        by keys with public domains, is combined by noise-aware least squares
        (:mod:`dpcurator.curator._consistent`): ``COUNT(*)`` and ``HISTOGRAM`` answers, the
        counts and centred sums inside ``AVG``/``VARIANCE`` and the sums of ``SUM`` over
        columns declared NOT NULL. The combined counts and sums are consistent with each other
        (a total equals the sum of its groups) and never less accurate than the raw ones; an
        ``AVG`` is recombined from its combined sum and count. Post-processing: nothing is read
        or spent.

        Returns
        -------
        pandas.DataFrame
            The release's keys, then per ``COUNT``, ``SUM`` or ``AVG`` column ``v``: the raw
            value and its std (``v``, ``v_std``), the combined value and its std
            (``v_combined``, ``v_combined_std``); ``attrs["answers"]`` says how many answers
            were combined.

        Raises
        ------
        QueryError
            If ``release`` is not such an answer of this session.
        """
        return self._answers.combined(release)

    # -- steward-side measurements (mechanisms outside the session, e.g. dpcurator.synth) ----
    def charged_measurements(
        self, text: str, events: Sequence[PrivacyEvent], rho: float
    ) -> ChargedMeasurements:
        """Charge ``events`` (at least ``rho``-zCDP) now; return measurements that spend ``rho``.

        For a mechanism the session does not run itself (see :mod:`dpcurator.curator._steward`):
        it plans its ``COUNT(*)`` queries with :meth:`plan`, and then measures them through the
        returned :class:`ChargedMeasurements` (discrete Gaussian counts, exponential-mechanism
        choices), each step taking its share of ``rho``. The entry is committed before this
        returns, so every read is charged before anything about it can reach the caller, and
        nothing exact ever leaves the session; nothing is refunded.

        Parameters
        ----------
        text : str
            What the ledger records as the query.
        events : sequence of PrivacyEvent
            The mechanism's privacy event: a ``ZCDPEvent`` with at least ``rho``, or an
            ``ApproxDPEvent(epsilon, delta)`` that ``rho``-zCDP implies (for accountants that
            do not take zCDP).
        rho : float
            The zCDP budget the measurements may spend in all.

        Returns
        -------
        ChargedMeasurements

        Raises
        ------
        InvalidParameterError
            If ``events`` do not cover ``rho`` (nothing recorded).
        BudgetExceededError
            If the events would exceed the budget (nothing recorded, nothing read).

        Examples
        --------
        >>> import pandas as pd
        >>> from dpcurator.accounting import Budget, ZCDPEvent
        >>> from dpcurator.curator import Column, Session, Table
        >>> from dpcurator.noise import InsecureSeededSource
        >>> t = Table("t", pd.DataFrame({"id": [1, 2, 3], "sex": ["F", "M", "F"]}),
        ...           privacy_unit="id", max_rows_per_unit=1,
        ...           columns=[Column("sex", domain=["F", "M"])])
        >>> with Session(t, Budget(10.0, 1e-6), accountant="zcdp", ledger=":memory:",
        ...              source=InsecureSeededSource(0)) as s:
        ...     plan = s.plan("SELECT sex, COUNT(*) AS n FROM t GROUP BY sex", epsilon=1.0)
        ...     steps = s.charged_measurements("my mechanism", [ZCDPEvent(rho=0.5)], 0.5)
        ...     noisy = steps.gaussian(plan, [("F",), ("M",)], sigma=1.0)  # rho 1/2 spent
        >>> steps.entry.id, noisy.shape, steps.rho_left
        (1, (2,), Fraction(0, 1))
        """
        check_covers(events, rho)
        with self._lock:
            entry = self._ledger.record(text, events)  # charged before any read

        def read(plan: Plan) -> Exact | None:
            with self._lock:
                try:
                    return fetch(plan, self._read(plan))
                except Exception:  # any failure reads the same (ChargedMeasurements says so)
                    return None

        return ChargedMeasurements(entry, rho, read, self._source)

    def query(self, table: str) -> QueryBuilder:
        """Start a query on ``table`` with the builder (see :class:`QueryBuilder`)."""
        from dpcurator.curator._builder import QueryBuilder  # noqa: PLC0415 - a cycle otherwise

        if table not in self._engine.tables:
            raise QueryError(
                f"Table {table!r} is not declared in this session; declared: "
                f"{', '.join(sorted(self._engine.tables))}."
            )
        return QueryBuilder(self, table)

    # -- state ---------------------------------------------------------------------------------
    @property
    def tables(self) -> dict[str, Table]:
        """The declared tables, by name."""
        return self._engine.tables

    @property
    def ledger(self) -> Ledger:
        """The session's ledger."""
        return self._ledger

    @property
    def budget(self) -> Budget:
        """The total budget."""
        return self._ledger.budget

    @property
    def spent(self) -> Budget:
        """What the ledger has spent (all processes sharing it included)."""
        return self._ledger.spent

    @property
    def remaining(self) -> Budget:
        """What is left of the budget."""
        return self._ledger.remaining

    def close(self) -> None:
        """Close the ledger and the engine (idempotent)."""
        with self._lock:
            self._ledger.close()
            self._engine.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return (
            f"Session(tables={list(self._engine.tables)}, budget={self.budget!r}, "
            f"remaining={self.remaining!r}, ledger={self._ledger.path!r})"
        )


@dataclass(frozen=True)
class _Over:
    """The units beyond their bounds of a table, cached: the table's version, where, how many."""

    version: Hashable
    units: exp.Table
    count: int

    @property
    def empty(self) -> bool:
        """True when no unit is beyond its bounds."""
        return self.count == 0


def _over_key(plan: Plan) -> tuple[object, ...]:
    """Return what a table's units beyond their bounds (and the choice of one pass) depend on."""
    return (plan.query.table.name, *plan.statements.over_key)


_PAIRS_FROM = 1 << 16
"""From this many units beyond their bounds, a scaled statement aggregates all the rows per
(unit, group) pair instead of joining the rows with those units (two joins of every row against
a hash table of that size cost more than the one aggregation)."""


_KEPT = 256
"""Entries of each cache a session keeps for repeated queries."""


def _target(target_ci: float | None, target_std: float | None) -> Target:
    if (target_ci is None) == (target_std is None):
        raise InvalidParameterError(
            "target", (target_ci, target_std), "give exactly one of target_ci and target_std"
        )
    if target_ci is not None:
        return Target(target_ci, "ci")
    assert target_std is not None
    return Target(target_std, "std")


def _engine(
    tables: Mapping[str, Table], engine: Engine | None, connection: duckdb.DuckDBPyConnection | None
) -> Engine:
    """Register ``tables`` in ``engine`` (default: a new DuckDB engine on ``connection``)."""
    if engine is None:
        return DuckDBEngine(list(tables.values()), connection=connection)
    if not isinstance(engine, Engine):
        raise InvalidParameterError("engine", engine, "must be a DuckDBEngine or a SparkEngine")
    if connection is not None:
        raise InvalidParameterError(
            "connection", connection, "is for the default DuckDB engine: give it to the engine"
        )
    for table in tables.values():
        engine.register(table)
    return engine


def _answer(
    session: Session, plan: Plan
) -> tuple[pd.DataFrame, dict[str, str], tuple[Any, ...]] | None:
    """Read the data and add noise; None if anything failed (the caller says so, fixed text)."""
    exact = _exact_of(session, plan)
    return None if exact is None else _noised(session, plan, exact)


def _exact_of(session: Session, plan: Plan) -> Exact | None:
    """Read the plan's exact aggregates (the caller holds the session's lock); None on failure."""
    try:
        return fetch(plan, session._read(plan), groups=False)
    except Exception:  # any failure after reading is reported the same way
        return None


def _noised(
    session: Session, plan: Plan, exact: Exact
) -> tuple[pd.DataFrame, dict[str, str], tuple[Any, ...]] | None:
    """Add noise to exact aggregates (no lock: the source is thread-safe); None on failure."""
    try:
        return compute(plan, exact, source=session._source, confidence=session._confidence)
    except Exception:  # any failure after reading is reported the same way
        return None


def answer_charged(session: Session, plan: Plan, entry: LedgerEntry) -> QueryRelease | None:
    """Answer ``plan`` of ``session``, charged as ``entry`` to a ledger outside the session.

    For the service (:mod:`dpcurator.service`), whose store charges every query to the
    analyst's and the table's budgets, durably, before it calls this; the session's own ledger
    and its consistency records are not involved (the service releases each answer alone).
    ``plan`` must come from ``session.plan`` with the events that ``entry`` charged. Returns
    None if anything failed after the data was read (the caller answers with a fixed text).
    Only the read holds the session's lock: requests on one table add noise concurrently.
    """
    with session._lock:
        exact = _exact_of(session, plan)
    released = None if exact is None else _noised(session, plan, exact)
    return None if released is None else _release(session, plan, entry, released)


def _release(
    session: Session,
    plan: Plan,
    entry: LedgerEntry,
    released: tuple[pd.DataFrame, Mapping[str, str], tuple[Any, ...]],
) -> QueryRelease:
    table, intervals, measured = released
    confidence = session._confidence
    return QueryRelease(
        query=plan.query.text,
        table=table,
        value_columns=tuple(a.alias for a in plan.query.aggregates),
        intervals=dict(intervals),
        split=plan.measurements,
        events=plan.events,
        charged=entry.charged,
        spent=entry.spent,
        remaining=entry.remaining,
        entry_id=entry.id,
        confidence=confidence,
        bounded_sql=render(plan.statements.main, SOURCE_TABLE, session._engine.dialect),
        threshold=plan.threshold,
        rank_errors=_rank_errors(plan, confidence),
        measured=measured,
    )


def _rank_errors(plan: Plan, confidence: float) -> dict[str, float]:
    """Each quantile column's rank-error bound at ``confidence`` (see QueryRelease)."""
    errors = {}
    for aggregate in plan.query.aggregates:
        if isinstance(aggregate, Quantile):
            m = next(
                m
                for m in plan.measurements
                if m.measure == QuantileCounts(aggregate.column, aggregate.level)
            )
            per_group = plan.per_group(m.epsilon)  # each group's choice (see _quantiles)
            spec = next(v for v in plan.values if v.column == aggregate.column)
            errors[aggregate.alias] = quantile_rank_error(
                per_group, m.sensitivity, quantile_buckets(spec) + 1, confidence
            )
    return errors
