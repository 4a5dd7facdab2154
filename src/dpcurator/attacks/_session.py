r"""The attacks against a curator :class:`~dpcurator.curator.Session`: adapters to its SQL.

The attacks of this package talk to generic interfaces (a subset-sum oracle for reconstruction,
an ``ask(query)`` callable for differencing and averaging). The adapters here route their
queries through :meth:`Session.sql <dpcurator.curator.Session.sql>`, so the same attack code runs
against an unprotected interface and against the curator, and the difference shows:

- :class:`SessionOracle`: the Dinur-Nissim query ``sum_{i in S} b_i`` as
  ``SELECT COUNT(*) FROM t WHERE <secret predicate> AND <row id> IN (<ids of S>)``, each answer
  at ``epsilon / m`` so that the attack's ``m`` queries spend at most ``epsilon`` together (no
  attack then recovers more than :func:`~dpcurator.attacks.dp_reconstruction_bound` of uniformly
  random bits, research note C.1);
- :class:`SessionInterface`: ``count(where)``, ``sum(column, where)`` and ``sql(query)`` at a
  fixed epsilon per answer: the session's ledger charges every repeat, and the
  :class:`~dpcurator.errors.BudgetExceededError` it raises once the budget is spent ends the
  differencing and averaging attacks, which report it (research note C.2; lecture 004).

Examples
--------
>>> import pandas as pd
>>> from dpcurator.accounting import Budget
>>> from dpcurator.attacks import averaging_attack
>>> from dpcurator.curator import Column, Session, Table
>>> from dpcurator.noise import InsecureSeededSource
>>> frame = pd.DataFrame({"pid": range(6), "hiv": [1, 0, 0, 1, 1, 0]})
>>> table = Table("clinic", frame, columns=[Column("pid"), Column("hiv", domain=[0, 1])])
>>> session = Session(table, Budget(1.0), ledger=":memory:", source=InsecureSeededSource(0))
>>> interface = SessionInterface(session, "clinic", epsilon=0.25)
>>> result = averaging_attack(interface.count, "hiv = 1", repeats=1000)
>>> result.repeats, result.refused, session.spent.epsilon
(4, True, 1.0)
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from fractions import Fraction
from typing import Any

import numpy as np
from numpy.typing import NDArray
from sqlglot import exp

from dpcurator._validation import check_delta, check_epsilon, check_integer
from dpcurator.attacks._reconstruction import _as_mask
from dpcurator.curator import QueryRelease, Session
from dpcurator.errors import BudgetExceededError, InvalidParameterError

__all__ = ["SessionInterface", "SessionOracle"]


def _identifier(name: object, argument: str) -> str:
    if not isinstance(name, str) or not name:
        raise InvalidParameterError(argument, name, "must be a non-empty name")
    return exp.to_identifier(name, quoted=True).sql(dialect="duckdb")


def _check_session(session: object, table: object) -> tuple[Session, str]:
    if not isinstance(session, Session):
        raise InvalidParameterError("session", session, "must be a curator Session")
    if not isinstance(table, str) or table not in session.tables:
        raise InvalidParameterError(
            "table", table, f"must name a table of the session ({', '.join(session.tables)})"
        )
    return session, table


def _check_where(where: object) -> str | None:
    if where is None:
        return None
    if not isinstance(where, str) or not where.strip():
        raise InvalidParameterError("where", where, "must be an SQL condition (or None)")
    return where


def _share(epsilon: float, parts: int) -> float:
    """Largest float ``e`` with ``parts * e <= epsilon`` in exact arithmetic.

    >>> _share(1.0, 3), 3 * Fraction(_share(1.0, 3)) <= 1
    (0.3333333333333333, True)
    """
    share = epsilon / parts
    while Fraction(share) * parts > Fraction(epsilon):
        share = math.nextafter(share, 0.0)
    return share


def _ids(ids: object) -> NDArray[Any]:
    array = np.asarray(ids)
    if array.ndim != 1 or array.size == 0:
        raise InvalidParameterError(
            "ids", f"<array of shape {array.shape}>", "must be a non-empty 1-D array of row ids"
        )
    if array.dtype.kind not in "iuUO" or (
        array.dtype.kind == "O" and not all(isinstance(v, str) for v in array.tolist())
    ):
        raise InvalidParameterError("ids", f"<{array.dtype} array>", "must hold integers or text")
    if np.unique(array).size != array.size:
        raise InvalidParameterError("ids", "<array>", "must not repeat a row id")
    return array


def _literal(value: Any) -> str:
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    return str(int(value))


def _value(release: QueryRelease, query: str) -> float:
    if len(release.value_columns) != 1 or len(release.table) != 1:
        raise InvalidParameterError(
            "query", query, "must release exactly one value (one aggregate, no GROUP BY)"
        )
    return float(release.table[release.value_columns[0]].iloc[0])


class SessionOracle:
    r"""A subset-count oracle answered by a curator session: reconstruction against the curator.

    Row ``i`` of the attack is the table's row whose ``row_id`` is ``ids[i]``; its secret bit is
    whether it satisfies the SQL predicate ``secret``. ``oracle(S)`` asks the session

    .. code-block:: sql

        SELECT COUNT(*) AS value FROM <table> WHERE (<secret>) AND <row_id> IN (<ids of S>)

    at ``epsilon_per_query = epsilon / queries`` (rounded down so that ``queries`` shares add up
    to at most ``epsilon`` exactly) and returns the released count: the subset sum
    ``sum_{i in S} b_i`` plus the curator's two-sided geometric noise of scale
    ``k / epsilon_per_query`` (``k`` the table's ``max_rows_per_unit``, 1 when each row is its
    own unit). After ``queries`` answers it refuses with
    :class:`~dpcurator.errors.BudgetExceededError`, as does the session once its own budget is
    spent.

    Guarantee: each answer is ``epsilon_per_query``-DP for add/remove of one privacy unit (the
    curator's guarantee, :meth:`Session.sql <dpcurator.curator.Session.sql>`), and the
    ``queries`` answers, chosen adaptively, compose to ``epsilon``-DP (basic composition,
    fully adaptive: Dwork and Roth 2014, Theorem 3.16; Rogers et al. 2016). Changing one unit's
    rows (its secret bit, say, keeping its id) moves each bounded count by at most ``k``, the
    sensitivity the noise is calibrated to, so the interaction is also ``epsilon``-DP for that
    change, and no attack recovers more than ``(e^eps) / (1 + e^eps)`` of uniformly random bits
    on average (:func:`~dpcurator.attacks.dp_reconstruction_bound`; research note C.1), however
    it picks its subsets.

    Parameters
    ----------
    session : Session
        The curator session (its budget must cover ``epsilon``, or it refuses earlier).
    table : str
        The declared table to query.
    row_id : str
        A declared column holding a public identifier of each row.
    ids : array_like of int or str
        The ids of the attacked rows, in the order of the attack's row positions; unique.
    secret : str
        An SQL predicate (the curator's WHERE syntax) that is true exactly for rows whose bit
        is 1, e.g. ``"income = '>50K'"``.
    epsilon : float
        Total budget of the ``queries`` answers, > 0.
    queries : int
        Answers the oracle gives, >= 1 (what the attack will ask: ``4 n`` for
        :func:`~dpcurator.attacks.lp_reconstruction` by default).

    Attributes
    ----------
    asked : int
        Answers given so far.
    spent : float
        Epsilon charged for them by the session's ledger.

    Raises
    ------
    InvalidParameterError
        For a bad argument.
    QueryError
        If the curator refuses the query shape (checked at construction, nothing spent).

    Notes
    -----
    Each answer runs through the curator's SQL front end (parse, check, plan, ledger entry),
    whose cost grows with the ``IN`` list: about 15 ms per query at ``n = 100`` rows and
    30 ms at ``n = 500`` on one core, so the ``4 n`` queries of the LP attack take about a
    minute at ``n = 500``.

    Examples
    --------
    >>> import pandas as pd
    >>> from dpcurator.accounting import Budget
    >>> from dpcurator.curator import Column, Session, Table
    >>> from dpcurator.noise import InsecureSeededSource
    >>> frame = pd.DataFrame({"pid": [10, 11, 12, 13], "rich": [1, 0, 1, 1]})
    >>> table = Table("t", frame, columns=[Column("pid"), Column("rich", domain=[0, 1])])
    >>> session = Session(table, Budget(2.0), ledger=":memory:",
    ...                   source=InsecureSeededSource(0))
    >>> oracle = SessionOracle(session, "t", row_id="pid", ids=[10, 11, 12, 13],
    ...                        secret="rich = 1", epsilon=2.0, queries=2)
    >>> oracle.epsilon_per_query
    1.0
    >>> print(oracle.to_sql([True, False, False, True]))
    SELECT COUNT(*) AS value FROM "t" WHERE (rich = 1) AND "pid" IN (10, 13)
    >>> answers = [oracle(np.array([0, 3])), oracle(np.array([1]))]
    >>> oracle.asked, oracle.spent, session.remaining.epsilon
    (2, 2.0, 0.0)
    >>> oracle(np.array([2]))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    dpcurator.errors.BudgetExceededError: Refused: this oracle's 2 answers ... are spent; ...
    """

    def __init__(
        self,
        session: Session,
        table: str,
        *,
        row_id: str,
        ids: Sequence[int] | Sequence[str] | NDArray[Any],
        secret: str,
        epsilon: float,
        queries: int,
    ) -> None:
        self._session, self._table = _check_session(session, table)
        self._row_id = _identifier(row_id, "row_id")
        self._ids = _ids(ids)
        if not isinstance(secret, str) or not secret.strip():
            raise InvalidParameterError("secret", secret, "must be an SQL predicate")
        self._secret = secret
        self.epsilon = check_epsilon(epsilon)
        self.queries = check_integer(queries, "queries", minimum=1)
        self.epsilon_per_query = _share(self.epsilon, self.queries)
        self._literals = [_literal(v) for v in self._ids.tolist()]
        self.asked = 0
        self.spent = 0.0
        # Refuses an unsupported shape (bad predicate or column) now: no data read, nothing spent.
        self._session.plan(
            self.to_sql(np.ones(self.rows, dtype=np.bool_)), epsilon=self.epsilon_per_query
        )

    @property
    def rows(self) -> int:
        """``n``: the attacked rows."""
        return int(self._ids.size)

    def to_sql(self, subset: Sequence[bool] | NDArray[Any]) -> str:
        """Return the query the oracle asks for ``subset`` (a boolean mask or row positions)."""
        mask = _as_mask(subset, self.rows)
        chosen = [self._literals[i] for i in np.flatnonzero(mask).tolist()]
        rows = f"{self._row_id} IN ({', '.join(chosen)})" if chosen else "FALSE"
        table = _identifier(self._table, "table")
        return f"SELECT COUNT(*) AS value FROM {table} WHERE ({self._secret}) AND {rows}"

    def __call__(self, subset: Sequence[bool] | NDArray[Any]) -> float:
        """Answer ``sum_{i in subset} b_i`` with the session's noise (one of ``queries``)."""
        if self.asked >= self.queries:
            raise BudgetExceededError(
                f"Refused: this oracle's {self.queries} answers (epsilon = {self.epsilon:g} in "
                f"all, {self.epsilon_per_query:.6g} each) are spent; nothing more is answered.",
                remaining=self._session.remaining,
            )
        query = self.to_sql(subset)
        release = self._session.sql(query, epsilon=self.epsilon_per_query)
        self.asked += 1
        self.spent += release.charged.epsilon
        return _value(release, query)

    def __repr__(self) -> str:
        return (
            f"SessionOracle(table={self._table!r}, rows={self.rows}, epsilon={self.epsilon:g}, "
            f"queries={self.queries}, asked={self.asked})"
        )


class SessionInterface:
    """Aggregate queries answered by a curator session: ``ask`` callables for the attacks.

    Each method asks :meth:`Session.sql <dpcurator.curator.Session.sql>` one single-value
    query at ``epsilon`` (and ``delta``) and returns the released number, so
    ``interface.count`` and ``interface.sum`` plug into
    :func:`~dpcurator.attacks.differencing_attack` and :func:`~dpcurator.attacks.averaging_attack`
    where an :class:`~dpcurator.attacks.AggregateInterface` would. Unlike a naive interface,
    the session charges every answer, repeats and rewritten-but-equivalent queries included
    (basic composition: ``k`` answers cost ``k epsilon``), and refuses with
    :class:`~dpcurator.errors.BudgetExceededError` once the budget is spent; the attacks stop
    there and report the refusal (:attr:`refusal` keeps its message too).

    Guarantee: every answer is ``epsilon``-DP for add/remove of one privacy unit (the
    curator's); everything the attacker learns through the session is ``B``-DP, ``B`` the
    session's budget (the ledger's filter, Rogers et al. 2016).

    Parameters
    ----------
    session : Session
    table : str
        The declared table that ``count`` and ``sum`` read.
    epsilon : float
        Budget of each answer, > 0.
    delta : float, default 0
        Delta of each answer (only queries with partition selection need one).

    Attributes
    ----------
    answered : int
        Answers given.
    spent : float
        Epsilon the session charged for them.
    refusal : str or None
        The message of the last refusal by the budget.

    Examples
    --------
    >>> import pandas as pd
    >>> from dpcurator.accounting import Budget
    >>> from dpcurator.attacks import differencing_attack
    >>> from dpcurator.curator import Column, Session, Table
    >>> from dpcurator.noise import InsecureSeededSource
    >>> staff = pd.DataFrame({"name": ["Ann", "Bo", "Cy"], "salary": [50., 60., 70.]})
    >>> table = Table("staff", staff, columns=[Column("name"),
    ...                                        Column("salary", lower=0, upper=100)])
    >>> session = Session(table, Budget(1.0), ledger=":memory:",
    ...                   source=InsecureSeededSource(0))
    >>> interface = SessionInterface(session, "staff", epsilon=0.5)
    >>> result = differencing_attack(lambda w: interface.sum("salary", w), None,
    ...                              "name <> 'Bo'", repeats=10)
    >>> result.repeats, result.refused, interface.answered, interface.spent
    (1, True, 2, 1.0)
    """

    def __init__(self, session: Session, table: str, *, epsilon: float, delta: float = 0.0) -> None:
        self._session, self._table = _check_session(session, table)
        self.epsilon = check_epsilon(epsilon)
        self.delta = check_delta(delta)
        self.answered = 0
        self.spent = 0.0
        self.refusal: str | None = None

    def sql(self, query: str) -> float:
        """Answer a single-value aggregate query (one aggregate, no GROUP BY).

        Raises
        ------
        InvalidParameterError
            The query would release more than one value (nothing spent).
        BudgetExceededError
            The session's budget refuses the answer (nothing spent).
        QueryError
            The curator does not answer the query (nothing spent).
        """
        if not isinstance(query, str):
            raise InvalidParameterError("query", query, "must be an SQL string")
        # Check the shape first (nothing read or spent): a refused answer must cost nothing.
        parsed = self._session.plan(query, epsilon=self.epsilon, delta=self.delta).query
        if parsed.group_by or parsed.histogram is not None or len(parsed.aggregates) != 1:
            raise InvalidParameterError(
                "query", query, "must release exactly one value (one aggregate, no GROUP BY)"
            )
        try:
            release = self._session.sql(query, epsilon=self.epsilon, delta=self.delta)
        except BudgetExceededError as error:
            self.refusal = str(error)
            raise
        self.answered += 1
        self.spent += release.charged.epsilon
        return _value(release, query)

    def _from(self, where: object) -> str:
        condition = _check_where(where)
        table = _identifier(self._table, "table")
        return f"FROM {table}" + (f" WHERE {condition}" if condition is not None else "")

    def count(self, where: str | None = None) -> float:
        """Count the rows satisfying the SQL condition ``where`` (None: all rows)."""
        return self.sql(f"SELECT COUNT(*) AS value {self._from(where)}")

    def sum(self, column: str, where: str | None = None) -> float:
        """Sum ``column`` (clamped into its declared bounds) over the rows satisfying ``where``."""
        name = _identifier(column, "column")
        return self.sql(f"SELECT SUM({name}) AS value {self._from(where)}")

    def __repr__(self) -> str:
        return (
            f"SessionInterface(table={self._table!r}, epsilon={self.epsilon:g}, "
            f"answered={self.answered}, spent={self.spent:g})"
        )
