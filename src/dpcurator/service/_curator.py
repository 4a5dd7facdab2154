"""The curator behind the HTTP interface: plan, charge, answer; what an analyst may see.

:class:`ServiceCurator` holds one :class:`~dpcurator.curator.Session` per served table (each
knows only its own table, so an error about a query can name nothing of another table) and the
:class:`~dpcurator.service.LedgerStore`. A query goes:

1. checked as a request (types, lengths) and its table found in the SQL; a table the analyst
   has no budget on is refused (403) before anything else;
2. planned by the table's session (:meth:`Session.plan`: no data read, nothing spent; a query
   the curator refuses is a 400 and is recorded as a refusal);
3. charged by the store, to the analyst's and the table's budget at once (a query that would
   exceed either is refused, 403, nothing written);
4. answered: the session reads the data and adds noise (:func:`answer_charged`: the store's
   charge is the one that counts; the session keeps no ledger of its own for the service).
   Anything that fails from here on -- after the data was read -- is one fixed answer,
   :data:`~dpcurator.service.FAILED_TEXT`;
5. the answer is stored with the charge, durably (which makes the charge durable too, see
   :meth:`LedgerStore.charge`), before it is returned (the same answer for a repeated request
   id).

The sessions never expose noiseless SQL: the service calls only ``plan`` and ``answer_charged``.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import sqlglot
import sqlglot.errors
from sqlglot import exp

from dpcurator.accounting import Budget, event_to_dict
from dpcurator.client._errors import FAILED_TEXT, BadRequestError, PermissionDeniedError
from dpcurator.client._wire import budget_to_json, release_to_dict
from dpcurator.curator import (
    LedgerEntry,
    Measurement,
    Plan,
    Session,
    Table,
    measurement_noise,
)
from dpcurator.curator._session import answer_charged
from dpcurator.errors import BudgetExceededError, DPError
from dpcurator.noise import uniform_integers
from dpcurator.service._config import ServerConfig, check_name
from dpcurator.service._store import STEWARD, Charge, Identity, LedgerStore

__all__ = ["MAX_DUMMY_ROWS", "QueryRequest", "ServiceCurator", "noise_std", "table_metadata"]

MAX_DUMMY_ROWS = 10_000
"""Most rows of a dummy table."""

_DUMMY_GRID = 1_000_000
_MAX_REQUEST_ID = 64


@dataclasses.dataclass(frozen=True)
class QueryRequest:
    """A checked query request: the SQL, its budget, and the client's request id."""

    query: str
    epsilon: float
    delta: float
    request_id: str | None


def _number(raw: Mapping[str, Any], name: str, default: float | None) -> float:
    value = raw.get(name, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise BadRequestError(f"'{name}' must be a finite number; got {value!r}.")
    return float(value)


def parse_request(body: object, *, max_query_chars: int, needs_epsilon: bool) -> QueryRequest:
    """Check a request body: ``{"query": str, "epsilon": number, "delta"?, "request_id"?}``.

    Raises
    ------
    BadRequestError
        With a message that names the field and says what it must be.
    """
    if not isinstance(body, dict):
        raise BadRequestError("The request body must be a JSON object.")
    extra = set(body) - {"query", "epsilon", "delta", "request_id"}
    if extra:
        raise BadRequestError(
            f"Unknown fields {sorted(extra)}; allowed: query, epsilon, delta, request_id."
        )
    query = body.get("query")
    if not isinstance(query, str) or not query.strip():
        raise BadRequestError("'query' must be a non-empty string of SQL.")
    if len(query) > max_query_chars:
        raise BadRequestError(
            f"'query' has {len(query)} characters; at most {max_query_chars} are accepted."
        )
    if "\x00" in query:
        raise BadRequestError("'query' must not contain NUL characters.")
    request_id = body.get("request_id")
    if request_id is not None and (
        not isinstance(request_id, str)
        or not 0 < len(request_id) <= _MAX_REQUEST_ID
        or not request_id.isascii()
        or not request_id.isprintable()
    ):
        raise BadRequestError(
            f"'request_id' must be 1 to {_MAX_REQUEST_ID} printable ASCII characters."
        )
    epsilon = _number(body, "epsilon", None if needs_epsilon else 1.0)
    delta = _number(body, "delta", 0.0)
    return QueryRequest(query, epsilon, delta, request_id)


def noise_std(m: Measurement) -> float | None:
    """Return the std of a measurement's noise in the column's units (None: it has none).

    The exact std of the geometric mechanism's noise (:func:`dpcurator.curator.measurement_noise`);
    the exponential mechanism (quantiles) has none.
    """
    error = measurement_noise(m)
    return None if error is None else error.std * m.unit_value


def table_metadata(table: Table) -> dict[str, Any]:
    """Return the public metadata of a table: what an analyst may know without any budget."""
    return {
        "name": table.name,
        "privacy_unit": table.privacy_unit,
        "max_rows_per_unit": table.max_rows_per_unit,
        "max_groups_per_unit": table.max_groups_per_unit,
        "max_rows_per_group": table.max_rows_per_group,
        "columns": [
            {
                "name": c.name,
                "lower": c.lower,
                "upper": c.upper,
                "domain": None if c.domain is None else list(c.domain),
                "bins": None if c.bins is None else list(c.bins),
                "nullable": c.nullable,
            }
            for c in table.columns
        ],
    }


@functools.lru_cache(maxsize=1024)
def _tables_in(query: str) -> frozenset[str] | None:
    """Return the table names a query reads (CTE names aside); None if it does not parse.

    Remembered by query text (it depends on nothing else): analysts repeat their queries, and
    parsing is a good part of a request's work.
    """
    try:
        tree = sqlglot.parse_one(query, read="duckdb")
    except (sqlglot.errors.SqlglotError, ValueError, RecursionError):
        return None
    ctes = {cte.alias for cte in tree.find_all(exp.CTE)}
    return frozenset(t.name for t in tree.find_all(exp.Table)) - ctes


class ServiceCurator:
    """The service's curator: tables, sessions and the ledger store (see the module's notes).

    Parameters
    ----------
    config : ServerConfig
        The server's configuration.
    store : LedgerStore, optional
        Default: opened on ``config.ledger``; tables and analysts of the configuration are added
        to it (never lowering a budget).
    """

    def __init__(self, config: ServerConfig, store: LedgerStore | None = None) -> None:
        self.config = config
        self.store = store or LedgerStore(config.ledger, accountant=config.accountant)
        for table in config.tables:
            self.store.add_table(table.name, table.budget, actor="config")
        known = {name for name, _ in self.store.analysts()}
        for analyst in config.analysts:
            if analyst.name not in known:
                self.store.add_analyst(analyst.name, actor="config")
            for table_name, budget in analyst.budgets:
                self.store.seed_budget(analyst.name, table_name, budget)
        self._sessions: dict[str, Session] = {}
        for table in config.tables:
            self._sessions[table.name] = Session(
                table.table, Budget.unlimited(), ledger=":memory:", confidence=config.confidence
            )

    def close(self) -> None:
        """Close the sessions and the store."""
        for session in self._sessions.values():
            session.close()
        self.store.close()

    # -- reading what one may see ----------------------------------------------------------------
    def _granted(self, who: Identity) -> list[str]:
        if who.is_steward:
            return [t.name for t in self.config.tables]
        served = {t.name for t in self.config.tables}
        grants = self.store.grants(who.owner) if who.grants is None else who.grants
        return [t for t in grants if t in served]

    def tables(self, who: Identity) -> list[dict[str, Any]]:
        """Public metadata of the tables ``who`` may query."""
        return [table_metadata(self.config.table(name).table) for name in self._granted(who)]

    def _table_for(self, who: Identity, query: str) -> str:
        granted = self._granted(who)
        if not granted:
            raise PermissionDeniedError("You have no budget on any table; ask the steward.")
        names = _tables_in(query)
        if names is None or not names:
            return granted[0]  # the session explains what is wrong with the query
        refused = sorted(n for n in names if n not in granted)
        if refused:
            raise PermissionDeniedError(
                f"Table {refused[0]!r} is not one you may query; yours: {', '.join(granted)}."
            )
        return sorted(names)[0]

    def standing(self, who: Identity) -> dict[str, Any]:
        """``who``'s budget, spent and remaining per table, and each table's remaining."""
        out = []
        for name in self._granted(who):
            owner = None if who.is_steward else who.owner
            budget, spent, remaining = self.store.standing(owner, name)
            table_budget, _, table_left = self.store.standing(None, name)
            out.append(
                {
                    "table": name,
                    "budget": budget_to_json(budget),
                    "spent": budget_to_json(spent),
                    "remaining": budget_to_json(remaining),
                    "table_budget": budget_to_json(table_budget),
                    "table_remaining": budget_to_json(table_left),
                }
            )
        return {"analyst": who.owner, "accountant": self.config.accountant, "tables": out}

    def history(self, who: Identity, limit: int = 1000) -> list[dict[str, Any]]:
        """``who``'s own charges (everyone's for the steward), newest first."""
        rows = self.store.history(None if who.is_steward else who.owner, limit=limit)
        return [
            {
                "id": r.id,
                "time": r.time,
                "analyst": r.analyst,
                "table": r.table,
                "query": r.query,
                "epsilon": r.epsilon,
                "delta": r.delta,
                "charged": budget_to_json(r.charged),
                "answered": r.answered,
            }
            for r in rows
        ]

    # -- explain, query, dummy ---------------------------------------------------------------
    def _plan(self, who: Identity, request: QueryRequest) -> tuple[str, Plan]:
        """Plan a query (no data read; the table's session keeps its plans)."""
        table = self._table_for(who, request.query)
        try:
            plan = self._sessions[table].plan(
                request.query, epsilon=request.epsilon, delta=request.delta
            )
        except DPError as exc:
            self.store.refuse(who.owner, table, request.query, str(exc))
            raise
        return table, plan

    def explain(self, who: Identity, request: QueryRequest) -> dict[str, Any]:
        """Plan a query and say what it would charge and whether it would be answered (free)."""
        table, plan = self._plan(who, request)
        verdict: dict[str, Any]
        try:
            if who.is_steward:
                raise PermissionDeniedError("The steward has no budget; explain as an analyst.")
            charge = self.store.check(who.owner, table, plan.events)
            verdict = {
                "answered": True,
                "charged": budget_to_json(charge.charged),
                "remaining_after": budget_to_json(charge.remaining),
                "table_remaining_after": budget_to_json(charge.table_remaining),
            }
        except (BudgetExceededError, PermissionDeniedError) as exc:
            verdict = {"answered": False, "reason": str(exc)}
        return {
            "table": table,
            "query": request.query,
            "epsilon": plan.epsilon,
            "delta": plan.delta,
            "split": [{**m.summary(), "noise_std": noise_std(m)} for m in plan.measurements],
            "events": [event_to_dict(e) for e in plan.events],
            "threshold": plan.threshold,
            "bounded_sql": plan.sql,
            "verdict": verdict,
        }

    def query(self, who: Identity, request: QueryRequest, request_id: str) -> tuple[bool, str]:
        """Answer a query: ``(ok, body)``, body the JSON text sent (stored with the charge).

        ``ok`` is False for a failure after the charge (the body then holds
        :data:`FAILED_TEXT`). Refusals raise, having spent nothing.
        """
        if who.is_steward:
            raise PermissionDeniedError("Steward keys cannot query; use an analyst's key.")
        table, plan = self._plan(who, request)
        try:
            charge = self.store.charge(
                who.owner,
                table,
                request_id=request_id,
                query=request.query,
                epsilon=request.epsilon,
                delta=request.delta,
                events=plan.events,
                answer=lambda charged: self._answer(table, plan, request, charged),
            )
        except (BudgetExceededError, PermissionDeniedError) as exc:
            self.store.refuse(who.owner, table, request.query, str(exc))
            raise
        assert charge.answer is not None  # charge answers when given ``answer``
        return _is_ok(charge.answer), charge.answer

    def _answer(self, table: str, plan: Plan, request: QueryRequest, charge: Charge) -> str:
        """Read the data, add noise, serialise; one fixed failure whatever goes wrong."""
        body = _released(self._sessions[table], plan, request, charge)
        if body is None:  # decided outside any handler: no exception chain anywhere
            return json.dumps(
                {"error": "QueryFailedError", "message": FAILED_TEXT, "entry_id": charge.id}
            )
        return body

    def dummy(self, who: Identity, table: str, rows: int) -> dict[str, Any]:
        """Return a table with the declared columns and values drawn uniformly from the metadata.

        Made from the declaration only (domains, bounds, the unit's column): it reads no data,
        costs nothing and says nothing about the rows.
        """
        if table not in self._granted(who):
            raise PermissionDeniedError(f"Table {table!r} is not one you may query.")
        if not 1 <= rows <= MAX_DUMMY_ROWS:
            raise BadRequestError(f"'rows' must be between 1 and {MAX_DUMMY_ROWS}; got {rows}.")
        declared = self.config.table(table).table
        columns: dict[str, list[Any]] = {}
        for column in declared.columns:
            if column.domain is not None:
                picks = uniform_integers(len(column.domain), size=rows)
                columns[column.name] = [column.domain[int(i)] for i in picks]
            elif column.lower is not None and column.upper is not None:
                steps = uniform_integers(_DUMMY_GRID + 1, size=rows)
                width = column.upper - column.lower
                columns[column.name] = [column.lower + width * int(s) / _DUMMY_GRID for s in steps]
            else:
                columns[column.name] = [int(i) + 1 for i in uniform_integers(rows, size=rows)]
        return {"table": table, "columns": list(columns), "data": list(columns.values())}


def _is_ok(body: str) -> bool:
    return not body.startswith('{"error"')


def _released(session: Session, plan: Plan, request: QueryRequest, charge: Charge) -> str | None:
    """Return the release's JSON, or None for any failure (after the charge: data read)."""
    entry = LedgerEntry(
        id=charge.id,
        time=datetime.now(UTC),
        query=request.query,
        events=plan.events,
        charged=charge.charged,
        spent=charge.spent,
        remaining=charge.remaining,
    )
    try:
        release = answer_charged(session, plan, entry)
        if release is None:
            return None
        payload = {
            "release": release_to_dict(release),
            "table_remaining": budget_to_json(charge.table_remaining),
        }
        return json.dumps(payload, allow_nan=False, separators=(",", ":"))
    except Exception:  # every failure after the charge is answered the same way
        return None


def steward_identity() -> Identity:
    """Return an identity for steward tools run on the server's machine (no key)."""
    return Identity(STEWARD, "local")


def check_table_name(value: str) -> str:
    """Check a table name from a URL path."""
    return check_name(value, "table")
