"""The ledger: every release the curator makes, durably written before the answer leaves.

A :class:`Ledger` is an SQLite file holding one row per release (time in UTC, the query text,
the privacy events as JSON, what the release charged, what was spent and what remains after it)
and the budget and accountant the file was created with. It holds a
:class:`~dpcurator.accounting._filters.PrivacyFilter` rebuilt from the recorded events when the
file is opened, so a restarted curator resumes the spent budget instead of starting afresh.

:meth:`Ledger.record` is the only way to spend: it checks the budget (refusing with
:class:`~dpcurator.errors.BudgetExceededError`, having written and spent nothing), writes the
entry and *commits* it (WAL journal, ``synchronous=FULL``: the commit is on disk) and only then
spends in memory and returns. A curator releases an answer only after ``record`` returns, so a
crash can lose an answer but never the record of a released one.

Several threads and several processes may share one file: a lock serialises threads, and every
``record`` runs inside ``BEGIN IMMEDIATE`` (SQLite's write lock), first reading the entries other
processes recorded since, so that together they never exceed the budget.

Examples
--------
>>> import os, tempfile
>>> from dpcurator.accounting import Budget, LaplaceEvent
>>> from dpcurator.curator import Ledger
>>> folder = tempfile.mkdtemp()
>>> path = os.path.join(folder, "ledger.sqlite")
>>> with Ledger(path, budget=Budget(1.0)) as ledger:
...     entry = ledger.record("SELECT COUNT(*) FROM t", [LaplaceEvent(scale=4.0)])
>>> entry.charged, entry.remaining
(Budget(epsilon=0.25, delta=0.0), Budget(epsilon=0.75, delta=0.0))
>>> with Ledger(path, budget=Budget(1.0)) as again:  # reopened: the spent budget resumes
...     again.spent
Budget(epsilon=0.25, delta=0.0)
"""

from __future__ import annotations

import json
import math
import os
import sqlite3
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from types import TracebackType
from typing import Self

from dpcurator.accounting._budget import Budget
from dpcurator.accounting._events import ComposedEvent, PrivacyEvent
from dpcurator.accounting._filters import PrivacyFilter
from dpcurator.accounting._registry import ACCOUNTANT_NAMES, make_accountant
from dpcurator.accounting._serialize import event_from_dict, event_to_dict
from dpcurator.errors import InternalError, InvalidParameterError

__all__ = ["Ledger", "LedgerEntry"]

FORMAT_VERSION = "1"
"""Version of the file layout, recorded in the metadata table."""

_BUSY_TIMEOUT_S = 60.0

_SCHEMA = """
CREATE TABLE IF NOT EXISTS metadata (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS entries (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    time TEXT NOT NULL,
    query TEXT NOT NULL,
    events TEXT NOT NULL,
    epsilon_charged REAL NOT NULL,
    delta_charged REAL NOT NULL,
    epsilon_spent REAL NOT NULL,
    delta_spent REAL NOT NULL,
    epsilon_remaining REAL NOT NULL,
    delta_remaining REAL NOT NULL
);
"""

_COLUMNS = (
    "id, time, query, events, epsilon_charged, delta_charged, epsilon_spent, delta_spent, "
    "epsilon_remaining, delta_remaining"
)


@dataclass(frozen=True, slots=True)
class LedgerEntry:
    """One recorded release.

    Attributes
    ----------
    id : int
        Position in the ledger (increasing, never reused).
    time : datetime
        When the entry was committed (timezone-aware, UTC).
    query : str
        The query text as the analyst wrote it.
    events : tuple of PrivacyEvent
        What the release did; the accountant composes them as one
        :class:`~dpcurator.accounting.ComposedEvent` (or the event itself if there is one).
    charged : Budget
        ``spent`` after minus ``spent`` before (for basic composition, the events' own epsilon
        and delta; for tighter accountants, the increase of epsilon at the budget's delta).
    spent : Budget
        Total spent after this release, as the filter reports it.
    remaining : Budget
        What remained after this release.
    """

    id: int
    time: datetime
    query: str
    events: tuple[PrivacyEvent, ...]
    charged: Budget
    spent: Budget
    remaining: Budget


class Ledger:
    """A durable record of releases that refuses any release that would exceed the budget.

    The file (created if missing) has two tables: ``entries`` (``id``, ``time`` as UTC ISO 8601,
    ``query``, ``events`` as a JSON list of :func:`~dpcurator.accounting._serialize.event_to_dict`
    dicts, ``epsilon_charged``, ``delta_charged``, ``epsilon_spent``, ``delta_spent``,
    ``epsilon_remaining``, ``delta_remaining``) and ``metadata`` (the budget, the accountant's
    name, ``adaptive_parameters`` and the layout version). A file is bound to its budget and
    accountant: reopening it with others raises, since the recorded spending was accounted under
    them.

    Guarantee: the releases recorded in one file compose, under the recorded accountant's
    composition theorem, to at most the budget (:class:`~dpcurator.accounting._filters.
    PrivacyFilter` decides each release; see it for which accountants allow adaptively chosen
    parameters). Every entry returned by :meth:`record` is committed to disk first.

    Parameters
    ----------
    path : str or os.PathLike
        The SQLite file (conventionally next to the table's declaration).
    budget : Budget
        The total budget of everything ever recorded in this file.
    accountant : str, default "basic"
        An accountant name from :data:`~dpcurator.accounting.ACCOUNTANT_NAMES`.
    adaptive_parameters : bool, default True
        Passed to the filter: ``False`` declares that every release's privacy parameters are
        fixed in advance (required for accountants that are not fully adaptive).

    Raises
    ------
    InvalidParameterError
        For a bad argument, or if the file was created with a different budget, accountant or
        ``adaptive_parameters`` (the message says what is recorded), or holds malformed entries.

    Examples
    --------
    >>> import os, tempfile
    >>> from dpcurator.accounting import Budget, PureDPEvent
    >>> from dpcurator.curator import Ledger
    >>> path = os.path.join(tempfile.mkdtemp(), "ledger.sqlite")
    >>> ledger = Ledger(path, budget=Budget(1.0))
    >>> ledger.record("SELECT AVG(age) FROM people", [PureDPEvent(0.5)]).spent
    Budget(epsilon=0.5, delta=0.0)
    >>> ledger.record("SELECT MAX(age) FROM people", [PureDPEvent(0.75)])  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    dpcurator.errors.BudgetExceededError: Refused: ... Nothing was spent.
    >>> [entry.query for entry in ledger.entries()]
    ['SELECT AVG(age) FROM people']
    >>> ledger.close()
    >>> Ledger(path, budget=Budget(2.0))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    dpcurator.errors.InvalidParameterError: budget must match the one recorded in ...
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        budget: Budget,
        accountant: str = "basic",
        adaptive_parameters: bool = True,
    ) -> None:
        if not isinstance(path, str | os.PathLike):
            raise InvalidParameterError("path", path, "must be a file path (str or PathLike)")
        if not isinstance(budget, Budget):
            raise InvalidParameterError("budget", budget, "must be a Budget")
        if not isinstance(accountant, str) or accountant not in ACCOUNTANT_NAMES:
            raise InvalidParameterError(
                "accountant", accountant, f"must be one of {', '.join(map(repr, ACCOUNTANT_NAMES))}"
            )
        if not isinstance(adaptive_parameters, bool):
            raise InvalidParameterError(
                "adaptive_parameters", adaptive_parameters, "must be True or False"
            )
        self._path = os.fspath(path)
        self._budget = budget
        self._accountant_name = accountant
        self._adaptive = adaptive_parameters
        self._lock = threading.RLock()
        # A fresh filter checks the accountant against adaptive_parameters before any file work.
        self._filter = PrivacyFilter(
            budget, make_accountant(accountant), adaptive_parameters=adaptive_parameters
        )
        self._last_id = 0
        self._conn: sqlite3.Connection | None = None
        conn = sqlite3.connect(
            self._path, timeout=_BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False
        )
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=FULL")
            self._bind_metadata(conn)
            self._conn = conn
            self._catch_up(conn)
        except BaseException:
            conn.close()
            self._conn = None
            raise

    @classmethod
    def open(cls, path: str | os.PathLike[str]) -> Ledger:
        """Open an existing ledger with the budget and accountant recorded in it.

        Parameters
        ----------
        path : str or PathLike
            An existing ledger file.

        Raises
        ------
        InvalidParameterError
            If the file does not exist or is not a ledger.

        Examples
        --------
        >>> import os, tempfile
        >>> from dpcurator.accounting import Budget
        >>> path = os.path.join(tempfile.mkdtemp(), "ledger.sqlite")
        >>> Ledger(path, budget=Budget(2.0), accountant="zcdp").close()
        >>> with Ledger.open(path) as ledger:
        ...     ledger.budget, ledger.accountant
        (Budget(epsilon=2.0, delta=0.0), 'zcdp')
        """
        if not isinstance(path, str | os.PathLike):
            raise InvalidParameterError("path", path, "must be a file path (str or PathLike)")
        file = os.fspath(path)
        if not os.path.isfile(file):
            raise InvalidParameterError("path", file, "is not an existing ledger file")
        try:
            conn = sqlite3.connect(f"file:{file}?mode=ro", uri=True, timeout=_BUSY_TIMEOUT_S)
            try:
                recorded = dict(conn.execute("SELECT key, value FROM metadata").fetchall())
            finally:
                conn.close()
            budget = Budget(float(recorded["budget_epsilon"]), float(recorded["budget_delta"]))
            accountant = str(recorded["accountant"])
            adaptive = recorded["adaptive_parameters"] == "True"
        except (sqlite3.DatabaseError, KeyError, ValueError) as exc:
            raise InvalidParameterError(
                "path", file, f"is not a dpcurator ledger ({exc})"
            ) from None
        return cls(file, budget=budget, accountant=accountant, adaptive_parameters=adaptive)

    # -- opening ---------------------------------------------------------------------------
    def _expected_metadata(self) -> dict[str, str]:
        return {
            "format_version": FORMAT_VERSION,
            "budget_epsilon": repr(self._budget.epsilon),
            "budget_delta": repr(self._budget.delta),
            "accountant": self._accountant_name,
            "adaptive_parameters": repr(self._adaptive),
        }

    def _bind_metadata(self, conn: sqlite3.Connection) -> None:
        """Record this ledger's metadata in a new file, or check it against an existing one.

        Creates the tables if missing, in one ``BEGIN IMMEDIATE`` transaction (so that two
        processes creating the file at once agree on its metadata).
        """
        conn.execute("BEGIN IMMEDIATE")
        try:
            for statement in _SCHEMA.split(";"):
                if statement.strip():
                    conn.execute(statement)
            expected = self._expected_metadata()
            conn.executemany(
                "INSERT OR IGNORE INTO metadata (key, value) VALUES (?, ?)", expected.items()
            )
            recorded = dict(conn.execute("SELECT key, value FROM metadata").fetchall())
            conn.commit()
        except BaseException:
            conn.rollback()
            raise
        if recorded.get("format_version") != FORMAT_VERSION:
            raise InvalidParameterError(
                "path",
                self._path,
                f"must be a ledger of layout version {FORMAT_VERSION} "
                f"(it records {recorded.get('format_version')!r})",
            )
        try:
            budget = Budget(float(recorded["budget_epsilon"]), float(recorded["budget_delta"]))
        except (KeyError, ValueError) as exc:
            raise InvalidParameterError(
                "path", self._path, f"must hold a valid budget in its metadata ({exc})"
            ) from exc
        if budget != self._budget:
            raise InvalidParameterError(
                "budget",
                self._budget,
                f"must match the one recorded in {self._path!r}: {budget!r}",
            )
        if recorded.get("accountant") != self._accountant_name:
            raise InvalidParameterError(
                "accountant",
                self._accountant_name,
                f"must match the one recorded in {self._path!r}: {recorded.get('accountant')!r}",
            )
        if recorded.get("adaptive_parameters") != repr(self._adaptive):
            raise InvalidParameterError(
                "adaptive_parameters",
                self._adaptive,
                f"must match the value recorded in {self._path!r}: "
                f"{recorded.get('adaptive_parameters')}",
            )

    # -- reading ---------------------------------------------------------------------------
    @staticmethod
    def _combined(events: tuple[PrivacyEvent, ...]) -> PrivacyEvent:
        """Return the one event an entry charges (the same on record and on reopen)."""
        return events[0] if len(events) == 1 else ComposedEvent(events)

    def _parse(self, row: tuple[object, ...]) -> LedgerEntry:
        try:
            (id_, time, query, events_json, e_c, d_c, e_s, d_s, e_r, d_r) = row
            raw = json.loads(str(events_json))
            if not isinstance(raw, list):
                raise InvalidParameterError("events", raw, "must be a JSON list")
            events = tuple(event_from_dict(item) for item in raw)
            return LedgerEntry(
                id=int(str(id_)),
                time=datetime.fromisoformat(str(time)),
                query=str(query),
                events=events,
                charged=Budget(_real(e_c), _real(d_c)),
                spent=Budget(_real(e_s), _real(d_s)),
                remaining=Budget(_real(e_r), _real(d_r)),
            )
        except (ValueError, TypeError) as exc:  # InvalidParameterError is both
            raise InvalidParameterError(
                "path",
                self._path,
                f"must hold well-formed ledger entries (entry {row[0]!r}: {exc})",
            ) from exc

    def _catch_up(self, conn: sqlite3.Connection) -> None:
        """Compose the entries recorded since the last one seen (by any process)."""
        rows = conn.execute(
            f"SELECT {_COLUMNS} FROM entries WHERE id > ? ORDER BY id", (self._last_id,)
        ).fetchall()
        if not rows:
            return
        entries = [self._parse(row) for row in rows]
        accountant = self._filter.accountant.copy()
        for entry in entries:
            accountant.compose(self._combined(entry.events))
        self._filter = PrivacyFilter(self._budget, accountant, adaptive_parameters=self._adaptive)
        self._last_id = entries[-1].id

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            raise InvalidParameterError("ledger", self._path, "must be open (it was closed)")
        return self._conn

    # -- the API ---------------------------------------------------------------------------
    @property
    def path(self) -> str:
        """The SQLite file."""
        return self._path

    @property
    def budget(self) -> Budget:
        """The total budget recorded in the file."""
        return self._budget

    @property
    def accountant(self) -> str:
        """The accountant's name recorded in the file."""
        return self._accountant_name

    @property
    def spent(self) -> Budget:
        """Everything recorded so far, by any process, as the filter reports it."""
        with self._lock:
            self._catch_up(self._connection())
            return self._filter.spent

    @property
    def remaining(self) -> Budget:
        """``budget - spent`` (see :attr:`PrivacyFilter.remaining`), including other processes."""
        with self._lock:
            self._catch_up(self._connection())
            return self._filter.remaining

    def entries(self) -> list[LedgerEntry]:
        """Every entry in the file, oldest first (including other processes' entries)."""
        with self._lock:
            rows = self._connection().execute(f"SELECT {_COLUMNS} FROM entries ORDER BY id")
            return [self._parse(row) for row in rows.fetchall()]

    def check(self, events: Sequence[PrivacyEvent]) -> Budget:
        """Return what recording ``events`` would leave spent, or refuse; writes nothing.

        Includes the entries other processes recorded meanwhile. A later :meth:`record` checks
        again (the budget may have been spent in between).

        Raises
        ------
        BudgetExceededError
            If the release would exceed the budget.
        UnsupportedEventError
            If the accountant cannot account for an event.
        """
        combined = self._combined(_check_events(events))
        with self._lock:
            conn = self._connection()
            self._catch_up(conn)
            trial = PrivacyFilter(
                self._budget, self._filter.accountant.copy(), adaptive_parameters=self._adaptive
            )
            trial.spend(combined)
            return trial.spent

    def record(self, query: str, events: Sequence[PrivacyEvent]) -> LedgerEntry:
        """Charge a release to the budget and commit its entry; return the entry.

        Steps, under the thread lock and SQLite's write lock (``BEGIN IMMEDIATE``): compose the
        entries other processes recorded meanwhile; try the release on a copy of the filter
        (refusing it if over budget); insert the entry and commit it (durable once this
        returns); only then spend in memory.

        Parameters
        ----------
        query : str
            The query text, recorded as given.
        events : sequence of PrivacyEvent
            What the release did (an empty sequence records a release that cost nothing).

        Returns
        -------
        LedgerEntry
            The committed entry.

        Raises
        ------
        BudgetExceededError
            If the release would exceed the budget; nothing is written and nothing is spent.
        UnsupportedEventError
            If the accountant cannot account for an event (nothing is written or spent).
        InvalidParameterError
            For a query that is not a string, or events that are not privacy events.
        """
        if not isinstance(query, str):
            raise InvalidParameterError("query", query, "must be a string")
        event_list = _check_events(events)
        events_json = json.dumps(
            [event_to_dict(e) for e in event_list], separators=(",", ":"), allow_nan=False
        )
        combined = self._combined(event_list)
        with self._lock:
            conn = self._connection()
            conn.execute("BEGIN IMMEDIATE")
            try:
                self._catch_up(conn)
                before = self._filter.spent
                trial = PrivacyFilter(
                    self._budget,
                    self._filter.accountant.copy(),
                    adaptive_parameters=self._adaptive,
                )
                trial.spend(combined)  # raises BudgetExceededError: nothing written
                spent, remaining = trial.spent, trial.remaining
                charged = Budget(
                    _increase(spent.epsilon, before.epsilon),
                    _increase(spent.delta, before.delta),
                )
                time = datetime.now(UTC)
                cursor = conn.execute(
                    "INSERT INTO entries (time, query, events, epsilon_charged, delta_charged, "
                    "epsilon_spent, delta_spent, epsilon_remaining, delta_remaining) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (
                        time.isoformat(),
                        query,
                        events_json,
                        charged.epsilon,
                        charged.delta,
                        spent.epsilon,
                        spent.delta,
                        remaining.epsilon,
                        remaining.delta,
                    ),
                )
                entry_id = cursor.lastrowid
                if entry_id is None:  # pragma: no cover - sqlite always sets it on INSERT
                    raise InternalError("SQLite did not report the new entry's id.")
                conn.commit()  # durable from here: WAL with synchronous=FULL
            except BaseException:
                if conn.in_transaction:
                    conn.rollback()
                raise
            self._filter = trial
            self._last_id = entry_id
            return LedgerEntry(
                id=entry_id,
                time=time,
                query=query,
                events=event_list,
                charged=charged,
                spent=spent,
                remaining=remaining,
            )

    def close(self) -> None:
        """Close the file (idempotent). Every recorded entry is already committed."""
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return (
            f"Ledger({self._path!r}, budget={self._budget}, accountant={self._accountant_name!r},"
            f" spent={self._filter.spent})"
        )


def _check_events(events: object) -> tuple[PrivacyEvent, ...]:
    if isinstance(events, PrivacyEvent | str | bytes) or not isinstance(events, Iterable):
        raise InvalidParameterError(
            "events", events, "must be a sequence of PrivacyEvent (wrap one event in a list)"
        )
    out = tuple(events)
    for i, event in enumerate(out):
        if not isinstance(event, PrivacyEvent):
            raise InvalidParameterError(f"events[{i}]", event, "must be a PrivacyEvent")
    return out


def _real(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidParameterError("value", value, "must be a number")
    return float(value)


def _increase(after: float, before: float) -> float:
    """``after - before`` clamped at 0; ``inf`` once ``after`` is infinite."""
    if math.isinf(after):
        return math.inf
    return max(after - before, 0.0)
