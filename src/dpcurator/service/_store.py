"""The ledger store: analysts, keys, budgets and every charge, in SQLite or PostgreSQL.

One database holds the service's books:

- ``analysts`` and ``keys`` (an id, the analyst or the steward, a salt and the scrypt hash of
  the key, when it was revoked);
- ``budgets``: one row per analyst and table, and one global row per table (analyst ``'*'``):
  what all analysts together may spend on it;
- ``charges``: one row per query charged (time, analyst, table, the request id the client chose,
  the query, its privacy events as JSON, what it charged) and, once computed, its answer;
- ``refusals`` (queries refused, with why) and ``audit`` (every steward action: analysts added
  or removed, keys issued or revoked, budgets raised; who, when, what).

:meth:`LedgerStore.charge` is the only way to spend. Under the table's write lock it reads the
charges other processes recorded since it last looked, composes the query's events with the
analyst's and with the table's under the accountant, refuses (writing nothing) if either budget
would be exceeded, and otherwise inserts the charge and commits it: the charge is durable before
any data is read. The answer is then stored with the charge (durably, and only if none is stored
yet) before it is sent, so a request repeated with the same request id -- a client that lost
its connection, a server killed and restarted -- gets the same answer and is charged once: a
charge is never made twice for one request id and never yields two different answers.

The decisions follow :class:`~dpcurator.curator.Ledger`'s (whose ideas this reuses): a
:class:`~dpcurator.accounting.PrivacyFilter` over the recorded events decides each charge
exactly; nothing is refunded.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from fractions import Fraction
from typing import Any, TypeVar

from dpcurator._validation import ceil_float
from dpcurator.accounting import (
    Accountant,
    Budget,
    PrivacyEvent,
    PrivacyFilter,
    event_from_dict,
    event_to_dict,
    make_accountant,
)
from dpcurator.client._errors import (
    AuthenticationError,
    BadRequestError,
    PermissionDeniedError,
    ServiceError,
    StoreUnavailableError,
)
from dpcurator.errors import BudgetExceededError, InvalidParameterError
from dpcurator.service._backends import Backend, BackendPool, Row, Statement, StoreUnavailable
from dpcurator.service._keys import IssuedKey, VerifiedKeys, hash_token, new_key, parse_key
from dpcurator.service._records import (
    STEWARD,
    AuditRecord,
    Charge,
    ChargeRecord,
    Identity,
    Refusal,
    charge_record,
    combined,
)

__all__ = [
    "STEWARD",
    "AuditRecord",
    "Charge",
    "ChargeRecord",
    "Identity",
    "LedgerStore",
    "Refusal",
    "combined",
]

CONNECTIONS = {"sqlite": 1, "postgresql": 4}
"""Connections a store keeps to its database by default, by kind.

PostgreSQL: transactions of several requests overlap (and their commits are flushed together).
SQLite: one, because its writers take one lock for the whole file and wait for it by sleeping
(in steps of up to 100 ms), which a lock in the process does better.
"""

TABLE_SCOPE = "*"
"""The ``analyst`` of a table's global budget row."""

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS analysts (name TEXT PRIMARY KEY, created TEXT NOT NULL, "
    "active INTEGER NOT NULL)",
    "CREATE TABLE IF NOT EXISTS keys (id TEXT PRIMARY KEY, owner TEXT NOT NULL, salt TEXT NOT "
    "NULL, hash TEXT NOT NULL, created TEXT NOT NULL, revoked TEXT)",
    "CREATE TABLE IF NOT EXISTS budgets (analyst TEXT NOT NULL, table_name TEXT NOT NULL, "
    "epsilon DOUBLE PRECISION NOT NULL, delta DOUBLE PRECISION NOT NULL, "
    "PRIMARY KEY (analyst, table_name))",
    "CREATE TABLE IF NOT EXISTS charges ({id}, time TEXT NOT NULL, analyst TEXT NOT NULL, "
    "table_name TEXT NOT NULL, request_id TEXT NOT NULL, query TEXT NOT NULL, "
    "epsilon DOUBLE PRECISION NOT NULL, delta DOUBLE PRECISION NOT NULL, events TEXT NOT NULL, "
    "charged_epsilon DOUBLE PRECISION NOT NULL, charged_delta DOUBLE PRECISION NOT NULL, "
    "answer TEXT, answered TEXT, UNIQUE (analyst, request_id))",
    "CREATE INDEX IF NOT EXISTS charges_table ON charges (table_name, id)",
    "CREATE TABLE IF NOT EXISTS refusals ({id}, time TEXT NOT NULL, analyst TEXT NOT NULL, "
    "table_name TEXT NOT NULL, query TEXT NOT NULL, reason TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS audit ({id}, time TEXT NOT NULL, actor TEXT NOT NULL, "
    "action TEXT NOT NULL, detail TEXT NOT NULL)",
)

T = TypeVar("T")


_REPEATED = (
    "SELECT id, table_name, query, epsilon, delta, charged_epsilon, charged_delta, answer FROM "
    "charges WHERE analyst = ? AND request_id = ?"
)
_BUDGETS = (
    "SELECT analyst, epsilon, delta FROM budgets WHERE table_name = ? AND analyst IN (?, '*')"
)


def _since(table: str, books: _Books) -> Statement:
    """Return the statement reading the charges on ``table`` that ``books`` has not composed."""
    return (
        "SELECT id, analyst, events FROM charges WHERE table_name = ? AND id > ? ORDER BY id",
        (table, books.last_id),
    )


def _repeated(
    rows: Sequence[Row], request_id: str, *, table: str, query: str, epsilon: float, delta: float
) -> tuple[int, Budget, str | None] | None:
    """Return the earlier charge of a request id, ``(id, charged, answer)``, or None.

    Raises
    ------
    BadRequestError
        If the request id was used for another query.
    """
    if not rows:
        return None
    id_, table_name, old_query, eps, dlt, c_eps, c_dlt, answer = rows[0]
    if (table_name, old_query, float(eps), float(dlt)) != (table, query, epsilon, delta):
        raise BadRequestError(
            f"request_id {request_id!r} was used before for another query; use a new one."
        )
    return int(id_), Budget(float(c_eps), float(c_dlt)), None if answer is None else str(answer)


def _now() -> str:
    return datetime.now(UTC).isoformat()


@dataclass
class _Books:
    """What this process has composed of one table's charges (up to ``last_id``)."""

    last_id: int
    table: Accountant
    analysts: dict[str, Accountant] = field(default_factory=dict)


class LedgerStore:
    """The service's books in one database (see the module's notes).

    Parameters
    ----------
    ledger : str
        A SQLite file path or a ``postgresql://`` URL.
    accountant : str, default "basic"
        The accountant of every budget (``"basic"`` or ``"zcdp"``); recorded in the database on
        first use, and a database created with another is refused.

    Examples
    --------
    >>> import os, tempfile
    >>> from dpcurator.accounting import Budget, PureDPEvent
    >>> store = LedgerStore(os.path.join(tempfile.mkdtemp(), "books.sqlite"))
    >>> store.add_table("t", Budget(1.0), actor="doc")
    >>> store.add_analyst("ann", actor="doc")
    >>> store.set_budget("ann", "t", Budget(0.5), actor="doc")
    >>> def ask(request_id):
    ...     return store.charge("ann", "t", request_id=request_id, query="SELECT COUNT(*) FROM t",
    ...                         epsilon=0.3, delta=0.0, events=[PureDPEvent(0.3)])
    >>> ask("req-1").remaining
    Budget(epsilon=0.2, delta=0.0)
    >>> ask("req-1").repeated  # the same request id: charged once
    True
    >>> ask("req-2")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    dpcurator.errors.BudgetExceededError: Refused: ... Nothing was spent.
    >>> store.close()
    """

    def __init__(
        self, ledger: str, *, accountant: str = "basic", connections: int | None = None
    ) -> None:
        self._books_lock = threading.Lock()
        self._accountant = accountant
        self._pool = BackendPool(ledger, connections, CONNECTIONS)
        self._books: dict[str, _Books] = {}
        self._verified = VerifiedKeys()
        self.location = ledger
        try:
            self._write(self._create)
        except BaseException:
            self._pool.close()
            raise

    # -- plumbing ----------------------------------------------------------------------------
    @property
    def kind(self) -> str:
        """``"sqlite"`` or ``"postgresql"``."""
        return self._pool.kind

    @property
    def accountant(self) -> str:
        """The accountant's name."""
        return self._accountant

    def _run(
        self,
        work: Callable[[Backend], T],
        *,
        lock_table: str | None = None,
        durable: bool = True,
        read_only: bool = False,
    ) -> T:
        """Run ``work`` in one transaction on a connection of the pool; commit, or roll back."""
        try:
            with self._pool.connection() as backend:
                try:
                    backend.begin(lock_table, durable=durable, read_only=read_only)
                    out = work(backend)
                    backend.commit()
                except BaseException:
                    backend.rollback()
                    raise
        except StoreUnavailable:
            raise StoreUnavailableError(
                "The ledger store is unavailable; nothing was read or spent by this request "
                "unless it was charged already. Retry with the same request id."
            ) from None
        return out

    def _write(self, work: Callable[[Backend], T]) -> T:
        return self._run(work)

    def _one(self, sql: str, params: Sequence[Any] = ()) -> list[Row]:
        """Run one statement as its own transaction (one round trip on PostgreSQL).

        A write is durable when this returns, as a committed transaction is.
        """
        try:
            with self._pool.connection() as backend:
                return backend.execute(sql, params)
        except StoreUnavailable:
            raise StoreUnavailableError(
                "The ledger store is unavailable; nothing was read or spent by this request. "
                "Retry with the same request id."
            ) from None

    def _read(self, work: Callable[[Backend], T]) -> T:
        return self._run(work, read_only=True)

    def _create(self, db: Backend) -> None:
        for statement in _SCHEMA:
            db.execute(statement.format(id=db.id_column))
        db.execute(
            "INSERT INTO meta (key, value) VALUES ('accountant', ?) ON CONFLICT (key) DO NOTHING",
            (self._accountant,),
        )
        recorded = db.execute("SELECT value FROM meta WHERE key = 'accountant'")[0][0]
        if recorded != self._accountant:
            raise InvalidParameterError(
                "accountant",
                self._accountant,
                f"must match the one recorded in the ledger store: {recorded!r}",
            )

    def close(self) -> None:
        """Close the connections."""
        self._pool.close()

    @staticmethod
    def _audit(db: Backend, actor: str, action: str, detail: str) -> None:
        db.execute(
            "INSERT INTO audit (time, actor, action, detail) VALUES (?, ?, ?, ?)",
            (_now(), actor, action, detail),
        )

    # -- tables, analysts, budgets -----------------------------------------------------------
    def add_table(self, table: str, budget: Budget, *, actor: str) -> None:
        """Give ``table`` its global budget if it has none; raise it if ``budget`` is higher."""
        self._ensure_budget(TABLE_SCOPE, table, budget, actor)

    def seed_budget(self, analyst: str, table: str, budget: Budget) -> None:
        """Give ``analyst`` a budget on ``table`` if none; raise it if ``budget`` is higher."""
        self._ensure_budget(analyst, table, budget, "config")

    def add_analyst(self, name: str, *, actor: str) -> None:
        """Add (or reactivate) analyst ``name``; audited."""
        if name.startswith("*"):
            raise InvalidParameterError("analyst", name, "must not start with '*'")

        def work(db: Backend) -> None:
            row = db.execute("SELECT active FROM analysts WHERE name = ?", (name,))
            if row and row[0][0]:
                return
            if row:
                db.execute("UPDATE analysts SET active = 1 WHERE name = ?", (name,))
            elif not db.execute(  # another process may have added it meanwhile
                "INSERT INTO analysts (name, created, active) VALUES (?, ?, 1) "
                "ON CONFLICT (name) DO NOTHING RETURNING name",
                (name, _now()),
            ):
                return
            self._audit(db, actor, "add_analyst", name)

        self._write(work)

    def remove_analyst(self, name: str, *, actor: str) -> int:
        """Deactivate ``name`` and revoke every key of theirs; their charges stay. Audited.

        Returns the number of keys revoked.
        """

        def work(db: Backend) -> int:
            if not db.execute("SELECT 1 FROM analysts WHERE name = ? AND active = 1", (name,)):
                raise InvalidParameterError("analyst", name, "is not an active analyst")
            db.execute("UPDATE analysts SET active = 0 WHERE name = ?", (name,))
            revoked = db.execute(
                "UPDATE keys SET revoked = ? WHERE owner = ? AND revoked IS NULL RETURNING id",
                (_now(), name),
            )
            self._audit(db, actor, "remove_analyst", f"{name} ({len(revoked)} keys revoked)")
            return len(revoked)

        return self._write(work)

    def analysts(self) -> list[tuple[str, bool]]:
        """Every analyst ever added, with whether they are active, by name."""
        rows = self._read(lambda db: db.execute("SELECT name, active FROM analysts ORDER BY name"))
        return [(str(name), bool(active)) for name, active in rows]

    def _ensure_budget(self, analyst: str, table: str, budget: Budget, actor: str) -> None:
        def work(db: Backend) -> None:
            row = db.execute(
                "SELECT epsilon, delta FROM budgets WHERE analyst = ? AND table_name = ?",
                (analyst, table),
            )
            if not row:
                if db.execute(  # another process may have set it meanwhile
                    "INSERT INTO budgets (analyst, table_name, epsilon, delta) VALUES (?, ?, ?, ?)"
                    " ON CONFLICT (analyst, table_name) DO NOTHING RETURNING analyst",
                    (analyst, table, budget.epsilon, budget.delta),
                ):
                    self._audit(db, actor, "set_budget", f"{analyst} on {table}: {budget}")
                return
            old = Budget(float(row[0][0]), float(row[0][1]))
            if budget.epsilon >= old.epsilon and budget.delta >= old.delta and budget != old:
                self._raise(
                    db, analyst=analyst, table=table, old=old, new=budget, actor=actor, reason=""
                )

        self._write(work)

    def _raise(
        self,
        db: Backend,
        *,
        analyst: str,
        table: str,
        old: Budget,
        new: Budget,
        actor: str,
        reason: str,
    ) -> None:
        db.execute(
            "UPDATE budgets SET epsilon = ?, delta = ? WHERE analyst = ? AND table_name = ?",
            (new.epsilon, new.delta, analyst, table),
        )
        note = f" ({reason})" if reason else ""
        self._audit(db, actor, "raise_budget", f"{analyst} on {table}: {old} -> {new}{note}")

    def set_budget(
        self, analyst: str | None, table: str, budget: Budget, *, actor: str, reason: str = ""
    ) -> None:
        """Set or raise a budget (``analyst=None``: the table's global one); never lowers it.

        Raises
        ------
        InvalidParameterError
            If the analyst is unknown, the table has no global budget, or ``budget`` is lower
            than the current one in epsilon or delta (spending is never taken back, so a budget
            is only raised).
        """
        scope = TABLE_SCOPE if analyst is None else analyst

        def work(db: Backend) -> None:
            if analyst is not None and not db.execute(
                "SELECT 1 FROM analysts WHERE name = ?", (analyst,)
            ):
                raise InvalidParameterError("analyst", analyst, "is not a known analyst")
            if analyst is not None and not db.execute(
                "SELECT 1 FROM budgets WHERE analyst = '*' AND table_name = ?", (table,)
            ):
                raise InvalidParameterError("table", table, "has no global budget (not served)")
            row = db.execute(
                "SELECT epsilon, delta FROM budgets WHERE analyst = ? AND table_name = ?",
                (scope, table),
            )
            if not row:
                db.execute(
                    "INSERT INTO budgets (analyst, table_name, epsilon, delta) VALUES (?, ?, ?, ?)",
                    (scope, table, budget.epsilon, budget.delta),
                )
                self._audit(db, actor, "set_budget", f"{scope} on {table}: {budget} ({reason})")
                return
            old = Budget(float(row[0][0]), float(row[0][1]))
            if budget.epsilon < old.epsilon or budget.delta < old.delta:
                raise InvalidParameterError(
                    "budget",
                    budget,
                    f"must be at least the current {old} in epsilon and delta: budgets are only "
                    "raised (what was spent is never taken back)",
                )
            self._raise(
                db, analyst=scope, table=table, old=old, new=budget, actor=actor, reason=reason
            )

        self._write(work)

    def budget(self, analyst: str | None, table: str) -> Budget | None:
        """Return the budget of ``analyst`` on ``table`` (None: the table's), or None."""
        scope = TABLE_SCOPE if analyst is None else analyst
        rows = self._read(
            lambda db: db.execute(
                "SELECT epsilon, delta FROM budgets WHERE analyst = ? AND table_name = ?",
                (scope, table),
            )
        )
        return Budget(float(rows[0][0]), float(rows[0][1])) if rows else None

    def grants(self, analyst: str) -> list[str]:
        """Return the tables ``analyst`` has a budget on, by name."""
        rows = self._one(
            "SELECT table_name FROM budgets WHERE analyst = ? ORDER BY table_name", (analyst,)
        )
        return [str(r[0]) for r in rows]

    # -- keys ----------------------------------------------------------------------------------
    def issue_key(self, owner: str, *, actor: str) -> IssuedKey:
        """Issue a key for an active analyst or for :data:`STEWARD`; return it (shown once)."""
        key = new_key()
        parsed = parse_key(key.text)
        assert parsed is not None  # new_key's shape
        salt, digest = hash_token(parsed[1])

        def work(db: Backend) -> None:
            if owner != STEWARD and not db.execute(
                "SELECT 1 FROM analysts WHERE name = ? AND active = 1", (owner,)
            ):
                raise InvalidParameterError("analyst", owner, "is not an active analyst")
            db.execute(
                "INSERT INTO keys (id, owner, salt, hash, created) VALUES (?, ?, ?, ?, ?)",
                (key.id, owner, salt, digest, _now()),
            )
            self._audit(db, actor, "issue_key", f"{key.id} for {owner}")

        self._write(work)
        return key

    def revoke_key(self, key_id: str, *, actor: str) -> None:
        """Revoke a key at once (every process reads revocations on every request). Audited."""

        def work(db: Backend) -> None:
            done = db.execute(
                "UPDATE keys SET revoked = ? WHERE id = ? AND revoked IS NULL RETURNING owner",
                (_now(), key_id),
            )
            if not done:
                raise InvalidParameterError("key", key_id, "is not a key in use")
            self._audit(db, actor, "revoke_key", f"{key_id} of {done[0][0]}")

        self._write(work)

    def list_keys(self) -> list[tuple[str, str, str, str | None]]:
        """Every key: ``(id, owner, created, revoked)`` (no hashes)."""
        rows = self._read(
            lambda db: db.execute("SELECT id, owner, created, revoked FROM keys ORDER BY created")
        )
        return [(str(a), str(b), str(c), None if d is None else str(d)) for a, b, c, d in rows]

    def authenticate(self, text: str | None) -> Identity:
        """Return who ``text`` (a presented key) belongs to.

        Raises
        ------
        AuthenticationError
            For a missing, malformed, unknown or revoked key, or one of a removed analyst (one
            message for all, so that it tells nothing about which keys exist).
        """
        refused = AuthenticationError(
            "A valid API key is required (Authorization: Bearer dpk_...); this one is missing, "
            "unknown or revoked. Ask the steward for a key."
        )
        parsed = None if text is None else parse_key(text)
        if parsed is None:
            raise refused
        key_id, token = parsed
        rows = self._one(  # the key and its owner's grants, in one statement
            "SELECT k.owner, k.salt, k.hash, k.revoked, a.active, b.table_name FROM keys k "
            "LEFT JOIN analysts a ON a.name = k.owner LEFT JOIN budgets b ON b.analyst = k.owner "
            "WHERE k.id = ? ORDER BY b.table_name",
            (key_id,),
        )
        if not rows:
            raise refused
        owner, salt, digest, revoked, active, _ = rows[0]
        valid = self._verified.check(key_id, str(digest), token, str(salt))
        if not valid or revoked is not None or (owner != STEWARD and not active):
            raise refused
        grants = tuple(str(row[5]) for row in rows if row[5] is not None)
        return Identity(str(owner), key_id, grants)

    # -- charges -------------------------------------------------------------------------------
    def _catch_up(
        self, db: Backend, table: str, analyst: str | None
    ) -> tuple[Accountant, Accountant]:
        """Read the charges on ``table`` since this process last looked; see :meth:`_accounts`."""
        return self._accounts(table, db.execute(*_since(table, self._books_of(table))), analyst)

    def _books_of(self, table: str) -> _Books:
        with self._books_lock:
            books = self._books.get(table)
            if books is None:
                books = self._books[table] = _Books(0, make_accountant(self._accountant))
            return books

    def _accounts(
        self, table: str, since: Sequence[Row], analyst: str | None
    ) -> tuple[Accountant, Accountant]:
        """Compose new charges (rows of :func:`_since`) into the table's books; return copies.

        Returns copies of the analyst's accountant (a fresh one when ``analyst`` is None or has
        no charge) and of the table's. Threads of this process compose under one lock, each
        charge once (rows already composed by another thread are skipped): a charge's rows are
        committed in the order of their ids, as charges to one table are decided one after
        another under the database's lock.
        """
        books = self._books_of(table)
        with self._books_lock:
            for id_, name, events in since:
                if int(id_) <= books.last_id:
                    continue
                event = combined([event_from_dict(e) for e in json.loads(str(events))])
                books.table.compose(event)
                mine = books.analysts.get(str(name))
                if mine is None:
                    mine = books.analysts[str(name)] = make_accountant(self._accountant)
                mine.compose(event)
                books.last_id = int(id_)
            own = None if analyst is None else books.analysts.get(analyst)
            return (
                make_accountant(self._accountant) if own is None else own.copy(),
                books.table.copy(),
            )

    def _filters(
        self, db: Backend, analyst: str, table: str, *first: Statement
    ) -> tuple[list[list[Row]], PrivacyFilter, PrivacyFilter]:
        """Return the rows of ``first`` statements, then the analyst's and the table's filters.

        ``first``, the budgets and the charges since this process last looked are read in one
        round trip (a pipeline on PostgreSQL).
        """
        *rows, budgets, since = db.execute_many(
            [*first, (_BUDGETS, (table, analyst)), _since(table, self._books_of(table))]
        )
        found = {str(a): Budget(float(e), float(d)) for a, e, d in budgets}
        if TABLE_SCOPE not in found or analyst not in found:
            raise PermissionDeniedError(
                f"Table {table!r} is not one you may query (no budget of yours on it)."
            )
        own, whole = self._accounts(table, since, analyst)
        return rows, PrivacyFilter(found[analyst], own), PrivacyFilter(found[TABLE_SCOPE], whole)

    def check(self, analyst: str, table: str, events: Sequence[PrivacyEvent]) -> Charge:
        """Return what charging ``events`` would charge and leave; refuse as :meth:`charge` would.

        Writes nothing (the explain endpoint). ``id`` is 0.
        """
        event = combined(events)

        def work(db: Backend) -> Charge:
            _, own, whole = self._filters(db, analyst, table)
            return self._try(own, whole, event, 0)

        return self._read(work)

    @staticmethod
    def _try(own: PrivacyFilter, whole: PrivacyFilter, event: PrivacyEvent, id_: int) -> Charge:
        before = own.spent
        own.spend(event)  # raises BudgetExceededError with what the analyst has left
        try:
            whole.spend(event)
        except BudgetExceededError as exc:
            raise BudgetExceededError(
                "Refused: the table's global budget (all analysts together) would be exceeded "
                f"by this query; the table has {exc.remaining} left. Nothing was spent.",
                remaining=exc.remaining,
                requested=exc.requested,
            ) from None
        after = own.spent
        charged = Budget(
            ceil_float(max(Fraction(after.epsilon) - Fraction(before.epsilon), Fraction(0))),
            ceil_float(max(Fraction(after.delta) - Fraction(before.delta), Fraction(0))),
        )
        return Charge(id_, charged, after, own.remaining, whole.remaining)

    def charge(
        self,
        analyst: str,
        table: str,
        *,
        request_id: str,
        query: str,
        epsilon: float,
        delta: float,
        events: Sequence[PrivacyEvent],
        answer: Callable[[Charge], str] | None = None,
    ) -> Charge:
        """Charge a query to the analyst's and the table's budget, atomically and durably.

        With ``answer``, the query is also answered: ``answer(charge)`` reads the data and
        returns the text to send (it must not raise), which is stored with the charge before
        this returns. The charge is decided and written under the table's lock before any row is
        read, but its commit does not wait for the disk; the answer's commit does, and as both
        databases write their log in order (PostgreSQL's WAL, SQLite's WAL file), it makes the
        charge durable too. So nothing about the data leaves before its charge is on disk, one
        commit per query waits for the disk, and the table's lock is not held while the data is
        read. A crash before the answer's commit loses at most charges whose answers were never
        sent. A request id charged before is not charged again: its charge and stored answer
        are returned with ``repeated=True``, provided it was the same query (an earlier charge
        without an answer, from a process that stopped before answering, is answered now, once:
        of two answers computed at once, the first stored is the one both return).

        Raises
        ------
        BudgetExceededError
            If either budget would be exceeded (nothing is written).
        PermissionDeniedError
            If the analyst has no budget on the table.
        BadRequestError
            If the request id was used before for another query.
        StoreUnavailableError
            If the database cannot be reached (retry with the same request id).
        """
        event = combined(events)
        events_json = json.dumps([event_to_dict(e) for e in events], allow_nan=False)

        def work(db: Backend) -> Charge:
            (earlier,), own, whole = self._filters(
                db, analyst, table, (_REPEATED, (analyst, request_id))
            )
            found = _repeated(
                earlier, request_id, table=table, query=query, epsilon=epsilon, delta=delta
            )
            if found is None:
                trial = self._try(own, whole, event, 0)
                rows = db.execute_and_commit(
                    "INSERT INTO charges (time, analyst, table_name, request_id, query, epsilon, "
                    "delta, events, charged_epsilon, charged_delta) VALUES (?, ?, ?, ?, ?, ?, ?, "
                    "?, ?, ?) RETURNING id",
                    (
                        _now(),
                        analyst,
                        table,
                        request_id,
                        query,
                        epsilon,
                        delta,
                        events_json,
                        trial.charged.epsilon,
                        trial.charged.delta,
                    ),
                )
                return replace(trial, id=int(rows[0][0]))
            id_, charged, stored = found
            return Charge(
                id_, charged, own.spent, own.remaining, whole.remaining, stored, repeated=True
            )

        if answer is None:
            return self._run(work, lock_table=table)
        made = self._run(work, lock_table=table, durable=False)  # made durable just below
        if made.answer is not None:
            return made
        stored = self._one(  # durable: and so are the charge and all before it in the log
            "UPDATE charges SET answered = COALESCE(answered, ?), answer = COALESCE(answer, ?) "
            "WHERE id = ? RETURNING answer",
            (_now(), answer(made), made.id),
        )
        return replace(made, answer=str(stored[0][0]))

    def refuse(self, analyst: str, table: str, query: str, reason: str) -> None:
        """Record a refused query (for the steward's view); never raises."""
        try:
            self._run(
                lambda db: db.execute(
                    "INSERT INTO refusals (time, analyst, table_name, query, reason) VALUES "
                    "(?, ?, ?, ?, ?)",
                    (_now(), analyst, table, query[:2000], reason[:2000]),
                ),
                durable=False,  # a refusal decides nothing: no need to wait for the disk
            )
        except ServiceError:
            return

    # -- reading -------------------------------------------------------------------------------
    def standing(self, analyst: str | None, table: str) -> tuple[Budget, Budget, Budget]:
        """``(budget, spent, remaining)`` of ``analyst`` (None: all together) on ``table``."""

        def work(db: Backend) -> tuple[Budget, Budget, Budget]:
            scope = TABLE_SCOPE if analyst is None else analyst
            rows = db.execute(
                "SELECT epsilon, delta FROM budgets WHERE analyst = ? AND table_name = ?",
                (scope, table),
            )
            if not rows:
                raise PermissionDeniedError(f"No budget of {scope!r} on table {table!r}.")
            budget = Budget(float(rows[0][0]), float(rows[0][1]))
            own, whole = self._catch_up(db, table, analyst)
            spent_filter = PrivacyFilter(budget, whole if analyst is None else own)
            return budget, spent_filter.spent, spent_filter.remaining

        return self._read(work)

    def history(self, analyst: str | None = None, *, limit: int = 1000) -> list[ChargeRecord]:
        """Charges, newest first: ``analyst``'s only, or everyone's (``None``, the steward's)."""
        where, params = ("WHERE analyst = ?", (analyst,)) if analyst is not None else ("", ())
        rows = self._read(
            lambda db: db.execute(
                "SELECT id, time, analyst, table_name, query, epsilon, delta, charged_epsilon, "
                f"charged_delta, answer IS NOT NULL FROM charges {where} ORDER BY id DESC "
                "LIMIT ?",
                (*params, limit),
            )
        )
        return [charge_record(row) for row in rows]

    def refusals(self, analyst: str | None = None, *, limit: int = 100) -> list[Refusal]:
        """Refused queries, newest first (``analyst``'s only, or everyone's)."""
        where, params = ("WHERE analyst = ?", (analyst,)) if analyst is not None else ("", ())
        rows = self._read(
            lambda db: db.execute(
                "SELECT id, time, analyst, table_name, query, reason FROM refusals "
                f"{where} ORDER BY id DESC LIMIT ?",
                (*params, limit),
            )
        )
        return [Refusal(int(r[0]), *(str(v) for v in r[1:])) for r in rows]

    def audit(self, *, limit: int = 1000) -> list[AuditRecord]:
        """Return the steward's actions, newest first."""
        rows = self._read(
            lambda db: db.execute(
                "SELECT id, time, actor, action, detail FROM audit ORDER BY id DESC LIMIT ?",
                (limit,),
            )
        )
        return [AuditRecord(int(r[0]), *(str(v) for v in r[1:])) for r in rows]

    def answer(self, analyst: str, charge_id: int) -> str | None:
        """Return the stored answer of one of ``analyst``'s charges (None if none is stored)."""
        rows = self._read(
            lambda db: db.execute(
                "SELECT answer FROM charges WHERE id = ? AND analyst = ?", (charge_id, analyst)
            )
        )
        return None if not rows or rows[0][0] is None else str(rows[0][0])

    def __enter__(self) -> LedgerStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@contextmanager
def opened(ledger: str, *, accountant: str = "basic") -> Iterator[LedgerStore]:
    """Open a store for the length of a ``with`` block."""
    store = LedgerStore(ledger, accountant=accountant)
    try:
        yield store
    finally:
        store.close()
