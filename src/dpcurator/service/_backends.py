"""The two databases a ledger store runs on: SQLite (one host) and PostgreSQL (several).

Each backend is a connection with the few operations the store needs: run a statement, begin a
transaction (taking the write lock of one table's charges when asked), commit, roll back. The
SQL is shared: it is written with ``?`` placeholders and ``ON CONFLICT ... DO NOTHING`` and
``RETURNING``, which both databases understand (PostgreSQL's driver gets ``%s``).

How writers are serialised
--------------------------
SQLite: every write transaction is ``BEGIN IMMEDIATE`` (the database's one write lock), in WAL
mode with ``synchronous=FULL``: a commit is on disk when it returns. PostgreSQL: a charge locks
its table's row of global budget (``SELECT ... FOR UPDATE``) before it reads the charges, so
that charges to one table are decided one after another, in the order of their ids; commits are
durable (``synchronous_commit`` is on by default).

A transaction begun with ``durable=False`` commits without waiting for the disk (SQLite's
``synchronous=NORMAL``, PostgreSQL's ``synchronous_commit = off`` for that transaction). Both
databases write their log in order, so the next commit that waits for the disk makes it durable
too: the store relies on this for a charge, whose answer's commit waits.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, Protocol

from dpcurator.errors import MissingDependencyError

__all__ = [
    "Backend",
    "BackendPool",
    "PostgresBackend",
    "SQLiteBackend",
    "StoreUnavailable",
    "open_backend",
]

_BUSY_TIMEOUT_S = 60.0

Row = tuple[Any, ...]
Statement = tuple[str, Sequence[Any]]


class StoreUnavailable(Exception):  # noqa: N818 - an internal signal, turned into a 503
    """The database could not be reached, or the connection broke during a statement."""


class Backend(Protocol):
    """A connection to the ledger's database (used under the store's lock, one thread at once)."""

    kind: str
    id_column: str

    def execute(self, sql: str, params: Sequence[Any] = ()) -> list[Row]:
        """Run one statement; return its rows (empty for statements without a result)."""

    def execute_many(self, statements: Sequence[Statement]) -> list[list[Row]]:
        """Run statements in order (one round trip where the database allows); their rows."""

    def begin(
        self, lock_table: str | None = None, *, durable: bool = True, read_only: bool = False
    ) -> None:
        """Begin a transaction; with ``lock_table``, hold that table's charge lock.

        ``read_only``: the transaction only reads (SQLite then takes no write lock).

        ``durable=False`` (for records that decide nothing, such as refusals): the commit may
        return before it reaches the disk.
        """

    def commit(self) -> None:
        """Commit (durable on return); nothing if the transaction was committed already."""

    def execute_and_commit(self, sql: str, params: Sequence[Any] = ()) -> list[Row]:
        """Run the transaction's last statement and commit (one round trip where possible)."""

    def rollback(self) -> None:
        """Roll back whatever the transaction did (no error if none is open)."""

    def close(self) -> None:
        """Close the connection."""


class SQLiteBackend:
    """A SQLite file in WAL mode, ``synchronous=FULL`` (one host; several processes may share it).

    Parameters
    ----------
    path : str
        The file (created if missing).
    """

    kind = "sqlite"
    id_column = "id INTEGER PRIMARY KEY AUTOINCREMENT"

    def __init__(self, path: str) -> None:
        self.path = path
        self._conn = sqlite3.connect(
            path, timeout=_BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False
        )
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute("PRAGMA synchronous=FULL")
        self._relaxed = False

    def execute(self, sql: str, params: Sequence[Any] = ()) -> list[Row]:
        """Run one statement."""
        return [tuple(row) for row in self._conn.execute(sql, tuple(params)).fetchall()]

    def execute_many(self, statements: Sequence[Statement]) -> list[list[Row]]:
        """Run statements in order (in process: no round trips to save)."""
        return [self.execute(sql, params) for sql, params in statements]

    def begin(
        self, lock_table: str | None = None, *, durable: bool = True, read_only: bool = False
    ) -> None:
        """``BEGIN IMMEDIATE`` (SQLite's one write lock covers every table), or ``BEGIN``."""
        self._relaxed = not durable
        if self._relaxed:
            self._conn.execute("PRAGMA synchronous=NORMAL")
        self._conn.execute("BEGIN" if read_only else "BEGIN IMMEDIATE")

    def commit(self) -> None:
        """Commit (on disk when it returns: WAL with ``synchronous=FULL``)."""
        self._conn.commit()
        self._restore()

    def execute_and_commit(self, sql: str, params: Sequence[Any] = ()) -> list[Row]:
        """Run one statement, then commit."""
        rows = self.execute(sql, params)
        self.commit()
        return rows

    def _restore(self) -> None:
        if self._relaxed:
            self._relaxed = False
            self._conn.execute("PRAGMA synchronous=FULL")

    def rollback(self) -> None:
        """Roll back."""
        if self._conn.in_transaction:
            self._conn.rollback()
        self._restore()

    def close(self) -> None:
        """Close."""
        self._conn.close()


class PostgresBackend:
    """A PostgreSQL database (psycopg 3), for several server processes or hosts.

    A broken connection (the server restarted) raises :class:`StoreUnavailable` for the
    statement that found it, and is opened again on the next transaction.

    Parameters
    ----------
    url : str
        A ``postgresql://`` connection URL.
    """

    kind = "postgresql"
    id_column = "id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY"

    def __init__(self, url: str) -> None:
        try:
            import psycopg  # noqa: PLC0415 - optional: the 'service' extra
        except ImportError:  # pragma: no cover - the extra is installed with the tests
            raise MissingDependencyError("A PostgreSQL ledger", "psycopg", "service") from None
        self._psycopg = psycopg
        self.url = url
        self._conn: Any = None
        self._pending: list[Statement] = []  # a BEGIN not sent yet: it goes with the next one
        self._open = False
        self._connect()

    def _connect(self) -> Any:
        if self._conn is None or self._conn.closed:
            try:
                self._conn = self._psycopg.connect(self.url, autocommit=True, connect_timeout=10)
            except self._psycopg.OperationalError as exc:
                self._conn = None
                raise StoreUnavailable(str(exc)) from None
        return self._conn

    def execute(self, sql: str, params: Sequence[Any] = ()) -> list[Row]:
        """Run one statement (``?`` placeholders become ``%s``)."""
        if self._pending:
            return self.execute_many([(sql, params)])[0]
        conn = self._connect()
        try:
            cursor = conn.execute(sql.replace("?", "%s"), tuple(params))
            return [tuple(row) for row in cursor.fetchall()] if cursor.description else []
        except (self._psycopg.OperationalError, self._psycopg.InterfaceError) as exc:
            self._drop()
            raise StoreUnavailable(str(exc)) from None

    def execute_many(self, statements: Sequence[Statement]) -> list[list[Row]]:
        """Run statements in order in one pipeline: one round trip for all of them.

        A pending ``BEGIN`` (see :meth:`begin`) goes first in the same pipeline.
        """
        pending, self._pending = self._pending, []
        conn = self._connect()
        try:
            with conn.pipeline():
                cursors = [
                    conn.execute(sql.replace("?", "%s"), tuple(p))
                    for sql, p in [*pending, *statements]
                ]
            return [
                [tuple(row) for row in cursor.fetchall()] if cursor.description else []
                for cursor in cursors[len(pending) :]
            ]
        except (self._psycopg.OperationalError, self._psycopg.InterfaceError) as exc:
            self._drop()
            raise StoreUnavailable(str(exc)) from None

    def _drop(self) -> None:
        if self._conn is not None:
            try:
                self._conn.close()
            finally:
                self._conn = None

    def begin(
        self, lock_table: str | None = None, *, durable: bool = True, read_only: bool = False
    ) -> None:
        """``BEGIN``; with ``lock_table``, lock its global-budget row (``FOR UPDATE``).

        Nothing is sent yet: the statements go with the transaction's first ones, in one round
        trip (the lock is taken before those run).
        """
        self._pending = [("BEGIN", ())]
        lazy = "set_config('synchronous_commit', 'off', true)" if not durable else "1"
        if lock_table is not None:  # one statement: the lock, and a commit that does not wait
            self._pending.append(
                (
                    f"SELECT {lazy} FROM budgets WHERE analyst = '*' AND table_name = ? FOR UPDATE",
                    (lock_table,),
                )
            )
        elif not durable:
            self._pending.append((f"SELECT {lazy}", ()))
        self._open = True

    def commit(self) -> None:
        """``COMMIT``; raises :class:`StoreUnavailable` if its outcome is unknown."""
        if self._open:
            self._open = False
            self.execute_many([("COMMIT", ())])

    def execute_and_commit(self, sql: str, params: Sequence[Any] = ()) -> list[Row]:
        """Run one statement and ``COMMIT`` in one round trip (nothing commits if it fails)."""
        self._open = False
        return self.execute_many([(sql, params), ("COMMIT", ())])[0]

    def rollback(self) -> None:
        """``ROLLBACK`` (a broken connection has nothing to roll back)."""
        self._pending, self._open = [], False
        if self._conn is None or self._conn.closed:
            return
        try:
            self._conn.execute("ROLLBACK")
        except (self._psycopg.OperationalError, self._psycopg.InterfaceError):
            self._drop()

    def close(self) -> None:
        """Close."""
        self._drop()


def open_backend(ledger: str) -> SQLiteBackend | PostgresBackend:
    """Open ``ledger``: a ``postgresql://`` URL, else a SQLite file path."""
    if ledger.startswith(("postgresql://", "postgres://")):
        return PostgresBackend(ledger)
    return SQLiteBackend(ledger)


class BackendPool:
    """Up to ``size`` connections to one ledger, each used by one thread at a time.

    A thread takes a connection for one transaction (or one statement) and gives it back, so
    that transactions of different requests overlap: while one waits for its commit to reach
    the disk, another reads or commits on its own connection (PostgreSQL then flushes several
    commits together). Charges to one table are still decided one after another by the
    database's lock (:meth:`Backend.begin`), not by the pool.

    Parameters
    ----------
    ledger : str
        A SQLite file path or a ``postgresql://`` URL.
    size : int or None
        The most connections open at once (> 0); None: ``defaults[kind]``. The first is opened
        now, so that a ledger that cannot be opened fails here; the others when first needed.
    defaults : mapping of str to int
        The size by kind of database (``"sqlite"``, ``"postgresql"``) when ``size`` is None.
    """

    def __init__(self, ledger: str, size: int | None, defaults: Mapping[str, int]) -> None:
        self.ledger = ledger
        first = open_backend(ledger)
        self.kind = first.kind
        self.size = defaults[first.kind] if size is None else size
        self._slots = threading.BoundedSemaphore(self.size)
        self._lock = threading.Lock()
        self._free: list[Backend] = [first]
        self._closed = False

    @contextmanager
    def connection(self) -> Iterator[Backend]:
        """Hold one connection for the length of a ``with`` block (waits while all are taken)."""
        with self._slots:
            with self._lock:
                if self._closed:
                    raise RuntimeError("The ledger store is closed.")  # a bug of the caller's
                backend = self._free.pop() if self._free else None
            if backend is None:
                backend = open_backend(self.ledger)
            try:
                yield backend
            finally:
                self._give_back(backend)

    def _give_back(self, backend: Backend) -> None:
        with self._lock:
            if self._closed:
                backend.close()
            else:
                self._free.append(backend)

    def close(self) -> None:
        """Close every connection (those in use close when given back)."""
        with self._lock:
            self._closed = True
            idle, self._free = self._free, []
        for backend in idle:
            backend.close()
