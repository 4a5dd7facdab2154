"""The ledger: every release the curator makes, durably written before the answer leaves.

A :class:`Ledger` is an SQLite file holding one row per release (time in UTC, the query text,
the privacy events as JSON, what the release charged, what was spent and what remains after it)
and a header with the budget and accountant the file was created with. It holds a
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

Budgets an analyst cannot reset
-------------------------------
Given the steward's key file (``key=``; a session opened from a TOML declaration always uses
the one the declaration names), the ledger is tamper-evident: every entry carries an HMAC of
itself and of the entry before it, and the key file anchors the ledger's last entry. A file that
was edited, cut short, reordered, replaced or deleted is refused when opened, with a message
that says so and what the steward can do. Without a key the chain is unkeyed and catches
accidental edits only. :mod:`dpcurator.curator._ledger_key` describes the model and its limits
(whoever can read the key file can forge entries).

Examples
--------
>>> import os, tempfile
>>> from dpcurator.accounting import Budget, LaplaceEvent
>>> from dpcurator.curator import Ledger
>>> folder = tempfile.mkdtemp()
>>> path = os.path.join(folder, "ledger.sqlite")
>>> key = os.path.join(folder, "ledger.key")
>>> with Ledger(path, budget=Budget(1.0), key=key) as ledger:
...     entry = ledger.record("SELECT COUNT(*) FROM t", [LaplaceEvent(scale=4.0)])
>>> entry.charged, entry.remaining
(Budget(epsilon=0.25, delta=0.0), Budget(epsilon=0.75, delta=0.0))
>>> with Ledger(path, budget=Budget(1.0), key=key) as again:  # reopened: the spent budget resumes
...     again.spent
Budget(epsilon=0.25, delta=0.0)
>>> import sqlite3
>>> with sqlite3.connect(path) as raw:  # the analyst edits the file ...
...     _ = raw.execute("UPDATE entries SET epsilon_spent = 0.0")
>>> raw.close()
>>> Ledger(path, budget=Budget(1.0), key=key)  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
dpcurator.errors.InvalidParameterError: ledger was altered after it was written: entry 1 ...
"""

from __future__ import annotations

import json
import math
import os
import sqlite3
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from types import TracebackType
from typing import Self

from dpcurator._validation import ceil_float
from dpcurator.accounting._budget import Budget
from dpcurator.accounting._events import ComposedEvent, PrivacyEvent
from dpcurator.accounting._filters import PrivacyFilter
from dpcurator.accounting._registry import accountant_names, make_accountant
from dpcurator.accounting._serialize import event_from_dict, event_to_dict
from dpcurator.curator._ledger_amounts import brackets, exact_amounts, exact_text, increase, real
from dpcurator.curator._ledger_key import (
    KEYED,
    UNKEYED,
    Anchor,
    Chain,
    KeyFile,
    altered,
    default_key_path,
    missing,
    same_mac,
)
from dpcurator.errors import InternalError, InvalidParameterError
from dpcurator.noise import secret_bytes

__all__ = ["Ledger", "LedgerEntry", "default_key_path"]

FORMAT_VERSION = "2"
"""Version of the file layout, recorded in the metadata table (2: entries chained by MACs)."""

_BUSY_TIMEOUT_S = 60.0
_MEMORY = ":memory:"

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
    delta_remaining REAL NOT NULL,
    epsilon_charged_exact TEXT NOT NULL,
    delta_charged_exact TEXT NOT NULL,
    epsilon_spent_exact TEXT NOT NULL,
    delta_spent_exact TEXT NOT NULL,
    epsilon_remaining_exact TEXT NOT NULL,
    delta_remaining_exact TEXT NOT NULL,
    mac TEXT NOT NULL
);
"""

_FIELDS = (
    "id, time, query, events, epsilon_charged, delta_charged, epsilon_spent, delta_spent, "
    "epsilon_remaining, delta_remaining, epsilon_charged_exact, delta_charged_exact, "
    "epsilon_spent_exact, delta_spent_exact, epsilon_remaining_exact, delta_remaining_exact"
)
_COLUMNS = _FIELDS + ", mac"
_INSERT = f"INSERT INTO entries ({_COLUMNS}) VALUES ({', '.join('?' * 17)})"


@dataclass(frozen=True, slots=True)
class LedgerEntry:
    """One recorded release.

    Attributes
    ----------
    id : int
        Position in the ledger (1, 2, 3 ...: increasing, never reused).
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
    ``epsilon_remaining``, ``delta_remaining`` as REAL, the same six as exact rationals
    ``"numerator/denominator"`` in the ``*_exact`` TEXT columns, and ``mac``) and ``metadata``
    (the layout version, a random ``ledger_id``, the ``chain`` kind, the budget as REAL text and
    exact text, the accountant's name, ``adaptive_parameters``, ``created`` and the header's
    ``mac``). A file is bound to its budget and accountant: reopening it with others raises,
    since the recorded spending was accounted under them.

    Guarantee: the releases recorded in one file compose, under the recorded accountant's
    composition theorem, to at most the budget (:class:`~dpcurator.accounting._filters.
    PrivacyFilter` decides each release; see it for which accountants allow adaptively chosen
    parameters). Every entry returned by :meth:`record` is committed to disk first. With a key,
    a file that was edited, cut short, reordered, replaced or deleted since it was written is
    refused when opened (see the module's notes for what the key protects against).

    Parameters
    ----------
    path : str or os.PathLike
        The SQLite file (conventionally next to the table's declaration), or ``":memory:"`` for
        a ledger that is not kept (trusted simulations).
    budget : Budget
        The total budget of everything ever recorded in this file; finite for a file (an
        unlimited budget is accepted for a ``":memory:"`` ledger only).
    accountant : str, default "basic"
        An accountant name (built in, or registered with ``register_accountant``).
    adaptive_parameters : bool, default True
        Passed to the filter: ``False`` declares that every release's privacy parameters are
        fixed in advance (required for accountants that are not fully adaptive).
    key : str or os.PathLike, optional
        The steward's key file; created (mode ``0600``, 32 secret bytes) with a new ledger if it
        does not exist. A ledger created with a key must be opened with it; one created without
        cannot be opened with one. Ignored by a ``":memory:"`` ledger.

    Raises
    ------
    InvalidParameterError
        For a bad argument or an infinite budget; if the file was created with a different
        budget, accountant or ``adaptive_parameters`` (the message says what is recorded); if it
        was altered (the message says how, and what the steward can do); if it is of layout
        version 1, holds malformed entries, or needs a key it was not given.

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
    >>> Ledger(path + "2", budget=Budget.unlimited())  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    dpcurator.errors.InvalidParameterError: budget must be finite: a ledger enforces a finite ...
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        budget: Budget,
        accountant: str = "basic",
        adaptive_parameters: bool = True,
        key: str | os.PathLike[str] | None = None,
    ) -> None:
        if not isinstance(path, str | os.PathLike):
            raise InvalidParameterError("path", path, "must be a file path (str or PathLike)")
        if not isinstance(budget, Budget):
            raise InvalidParameterError("budget", budget, "must be a Budget")
        if not isinstance(accountant, str) or accountant not in accountant_names():
            raise InvalidParameterError(
                "accountant",
                accountant,
                f"must be one of {', '.join(map(repr, accountant_names()))}",
            )
        if not isinstance(adaptive_parameters, bool):
            raise InvalidParameterError(
                "adaptive_parameters", adaptive_parameters, "must be True or False"
            )
        if key is not None and not isinstance(key, str | os.PathLike):
            raise InvalidParameterError("key", key, "must be a file path (str or PathLike)")
        self._path = os.fspath(path)
        memory = self._path == _MEMORY
        if not memory and not (math.isfinite(budget.epsilon) and math.isfinite(budget.delta)):
            raise InvalidParameterError(
                "budget",
                budget,
                "must be finite: a ledger enforces a finite budget (Budget.unlimited() is for "
                "':memory:' ledgers in trusted simulations only)",
            )
        self._key: KeyFile | None = None
        if key is not None and not memory:
            key_path = os.fspath(key)
            if not key_path or os.path.abspath(key_path) == os.path.abspath(self._path):
                raise InvalidParameterError("key", key_path, "must be a file other than the ledger")
            self._key = KeyFile(key_path)
        self._budget = budget
        self._accountant_name = accountant
        self._adaptive = adaptive_parameters
        self._lock = threading.RLock()
        # A fresh filter checks the accountant against adaptive_parameters before any file work.
        self._filter = PrivacyFilter(
            budget, make_accountant(accountant), adaptive_parameters=adaptive_parameters
        )
        self._chain = Chain(None)
        self._ledger_id = ""
        self._header_mac = ""
        self._last_mac = ""
        self._last_id = 0
        self._count = 0
        self._conn: sqlite3.Connection | None = None
        if self._key is not None and not os.path.exists(self._path):
            anchor = self._key.anchor()
            if anchor is not None:  # do not even create an empty file in its place
                raise self._altered(missing(anchor))
        conn = sqlite3.connect(
            self._path, timeout=_BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False
        )
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=FULL")
            behind = self._open(conn)
            self._conn = conn
            if behind:
                self._advance_anchor(conn)
        except BaseException:
            conn.close()
            self._conn = None
            raise

    @classmethod
    def open(
        cls, path: str | os.PathLike[str], *, key: str | os.PathLike[str] | None = None
    ) -> Ledger:
        """Open an existing ledger with the budget and accountant recorded in it.

        Parameters
        ----------
        path : str or PathLike
            An existing ledger file.
        key : str or PathLike, optional
            Its key file; default :func:`default_key_path` of ``path`` if that file exists (a
            ledger created with a key cannot be opened without it, and one created without a
            key is refused when a key file sits where its key would be).

        Raises
        ------
        InvalidParameterError
            If the file does not exist, is not a ledger, was altered, or needs a key file that
            is not there.

        Examples
        --------
        >>> import os, tempfile
        >>> from dpcurator.accounting import Budget
        >>> path = os.path.join(tempfile.mkdtemp(), "people.ledger.sqlite")
        >>> key = default_key_path(path)
        >>> Ledger(path, budget=Budget(2.0), accountant="zcdp", key=key).close()
        >>> with Ledger.open(path) as ledger:  # finds people.ledger.key next to it
        ...     ledger.budget, ledger.accountant, ledger.key == key
        (Budget(epsilon=2.0, delta=0.0), 'zcdp', True)
        """
        if not isinstance(path, str | os.PathLike):
            raise InvalidParameterError("path", path, "must be a file path (str or PathLike)")
        file = os.fspath(path)
        if key is not None and not isinstance(key, str | os.PathLike):
            raise InvalidParameterError("key", key, "must be a file path (str or PathLike)")
        if not os.path.isfile(file):
            key_file = default_key_path(file) if key is None else os.fspath(key)
            anchor = KeyFile(key_file).anchor()
            if anchor is not None:  # the key file records a ledger here: it was deleted
                raise altered(file, key_file, missing(anchor))
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
        default = default_key_path(file)
        if key is None and os.path.isfile(default):  # (an unkeyed ledger beside it is refused)
            key = default
        elif key is None and recorded.get("chain") == KEYED:
            raise InvalidParameterError(
                "key",
                None,
                f"must name the key file of {file!r}: it is a tamper-evident ledger, and "
                f"there is no key file at the default {default!r}",
            )
        return cls(
            file, budget=budget, accountant=accountant, adaptive_parameters=adaptive, key=key
        )

    # -- opening ---------------------------------------------------------------------------
    def _altered(self, what: str) -> InvalidParameterError:
        return altered(self._path, self.key, what)

    def _expected_metadata(self) -> dict[str, str]:
        return {
            "format_version": FORMAT_VERSION,
            "budget_epsilon": repr(self._budget.epsilon),
            "budget_delta": repr(self._budget.delta),
            "budget_epsilon_exact": exact_text(self._budget.epsilon),
            "budget_delta_exact": exact_text(self._budget.delta),
            "accountant": self._accountant_name,
            "adaptive_parameters": repr(self._adaptive),
        }

    def _open(self, conn: sqlite3.Connection) -> bool:
        """Create or check the header, verify every entry and the anchor; one transaction.

        Everything runs under ``BEGIN IMMEDIATE`` (so that two processes creating the file at
        once agree on its header, and no writer moves the ledger or the anchor meanwhile).
        Returns whether the anchor lags behind the ledger (to be brought forward).
        """
        conn.execute("BEGIN IMMEDIATE")
        try:
            for statement in _SCHEMA.split(";"):
                if statement.strip():
                    conn.execute(statement)
            recorded = dict(conn.execute("SELECT key, value FROM metadata").fetchall())
            if recorded:
                self._bind(recorded)
            else:
                self._create(conn)
            anchor = None if self._key is None else self._key.anchor()
            if anchor is not None and anchor.ledger_id != self._ledger_id:
                raise self._altered(
                    "it is not the ledger its key file records (another ledger was put in its "
                    "place)"
                )
            self._catch_up(conn)
            if anchor is not None:
                self._check_anchor(conn, anchor)
            conn.commit()
        except BaseException:
            if conn.in_transaction:
                conn.rollback()
            raise
        return self._key is not None and (anchor is None or anchor.last_id < self._last_id)

    def _create(self, conn: sqlite3.Connection) -> None:
        """Write the header of a new ledger (with a new key file, if the key is missing)."""
        secret: bytes | None = None
        if self._key is not None:
            secret, anchor = self._key.load_or_create()
            if anchor is not None:
                raise self._altered(
                    f"the file is empty, but its key file records a ledger of {anchor.entries} "
                    "entries (it was deleted or emptied)"
                )
        chain = Chain(secret)
        metadata = self._expected_metadata()
        metadata["ledger_id"] = secret_bytes(16).hex()
        metadata["chain"] = chain.kind
        metadata["created"] = datetime.now(UTC).isoformat()
        metadata["mac"] = chain.header(metadata)
        conn.executemany("INSERT INTO metadata (key, value) VALUES (?, ?)", metadata.items())
        self._use(chain, metadata)

    def _use(self, chain: Chain, metadata: Mapping[str, str]) -> None:
        self._chain = chain
        self._ledger_id = metadata["ledger_id"]
        self._header_mac = self._last_mac = metadata["mac"]

    def _bind(self, recorded: dict[str, str]) -> None:
        """Check an existing header: version, key, MAC, then budget, accountant, adaptivity."""
        version = recorded.get("format_version")
        if version != FORMAT_VERSION:
            raise InvalidParameterError(
                "path",
                self._path,
                f"must be a ledger of layout version {FORMAT_VERSION} (it records {version!r}). "
                "Version 1 ledgers carry no tamper-evident chain and are not read any more: keep "
                "the file as the record of what it spent (any SQLite client reads it), and start "
                "a new ledger whose budget is what the old one left",
            )
        kind = recorded.get("chain")
        secret: bytes | None = None
        if kind == KEYED:
            if self._key is None:
                raise InvalidParameterError(
                    "key",
                    None,
                    f"must name the steward's key file: {self._path!r} is a tamper-evident "
                    "ledger, created with a key (Ledger.open finds one named like the ledger "
                    "with '.key' for its suffix)",
                )
            try:
                secret = self._key.read()[0]
            except FileNotFoundError:
                raise InvalidParameterError(
                    "key",
                    self._key.path,
                    f"does not exist, but {self._path!r} was created with a key: without it the "
                    "ledger cannot be verified. Restore the key file from a backup",
                ) from None
        elif kind == UNKEYED:
            if self._key is not None:
                raise InvalidParameterError(
                    "key",
                    self._key.path,
                    f"cannot be used with {self._path!r}: that ledger was created without a key "
                    "(its chain catches accidental edits only); open it without a key, or start "
                    "a keyed ledger elsewhere",
                )
        else:
            raise InvalidParameterError(
                "path", self._path, f"must record a known chain kind (it records {kind!r})"
            )
        chain = Chain(secret)
        header = {k: v for k, v in recorded.items() if k != "mac"}
        if "ledger_id" not in header or not same_mac(chain.header(header), recorded.get("mac")):
            raise self._altered(
                "its header (ledger id, budget, accountant) does not match its MAC: it was "
                "edited, or replaced by a ledger written with another key"
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
        self._use(chain, recorded)

    def _check_anchor(self, conn: sqlite3.Connection, anchor: Anchor) -> None:
        """Refuse a ledger that ends before its anchor, or whose anchored entry differs."""
        if anchor.last_id > self._last_id:
            raise self._altered(
                f"it ends at entry {self._last_id} ({self._count} entries), but its key file "
                f"records {anchor.entries} entries up to entry {anchor.last_id}: entries were "
                "removed from its end (or an older copy was put back)"
            )
        if anchor.last_id == 0:
            mac: object = self._header_mac
        else:
            row = conn.execute("SELECT mac FROM entries WHERE id = ?", (anchor.last_id,)).fetchone()
            mac = None if row is None else row[0]
        if not same_mac(anchor.mac, mac):
            raise self._altered(f"entry {anchor.last_id} is not the one its key file records")

    def _advance_anchor(self, conn: sqlite3.Connection) -> None:
        """Rewrite the key file's anchor to the last entry seen, under SQLite's write lock."""
        if self._key is None:
            return
        anchor = Anchor(self._ledger_id, self._last_id, self._count, self._last_mac)
        conn.execute("BEGIN IMMEDIATE")
        try:
            self._key.advance(anchor)
        finally:
            conn.rollback()  # nothing was written to the database

    # -- reading ---------------------------------------------------------------------------
    @staticmethod
    def _combined(events: tuple[PrivacyEvent, ...]) -> PrivacyEvent:
        """Return the one event an entry charges (the same on record and on reopen)."""
        return events[0] if len(events) == 1 else ComposedEvent(events)

    def _verify(self, rows: Sequence[tuple[object, ...]], previous: str) -> str:
        """Check the rows' MACs, chained from ``previous``; return the last MAC."""
        for row in rows:
            expected = self._chain.entry(previous, row[:-1])
            if not same_mac(expected, row[-1]):
                raise self._altered(
                    f"entry {row[0]!r} does not match its MAC (it was edited, or entries before "
                    "it were removed, reordered or copied from another ledger)"
                )
            previous = expected
        return previous

    def _parse(self, row: tuple[object, ...]) -> LedgerEntry:
        try:
            (id_, time, query, events_json, e_c, d_c, e_s, d_s, e_r, d_r, *exact) = row[:16]
            raw = json.loads(str(events_json))
            if not isinstance(raw, list):
                raise InvalidParameterError("events", raw, "must be a JSON list")
            events = tuple(event_from_dict(item) for item in raw)
            reals = [real(value) for value in (e_c, d_c, e_s, d_s, e_r, d_r)]
            for value, text in zip(reals, exact, strict=True):
                if not brackets(value, str(text)):
                    raise InvalidParameterError(
                        "exact", text, f"must be the exact value of {value!r}"
                    )
            return LedgerEntry(
                id=int(str(id_)),
                time=datetime.fromisoformat(str(time)),
                query=str(query),
                events=events,
                charged=Budget(reals[0], reals[1]),
                spent=Budget(reals[2], reals[3]),
                remaining=Budget(reals[4], reals[5]),
            )
        except (ValueError, TypeError) as exc:  # InvalidParameterError is both
            raise InvalidParameterError(
                "path",
                self._path,
                f"must hold well-formed ledger entries (entry {row[0]!r}: {exc})",
            ) from exc

    def _catch_up(self, conn: sqlite3.Connection) -> None:
        """Verify and compose the entries recorded since the last one seen (by any process)."""
        rows = conn.execute(
            f"SELECT {_COLUMNS} FROM entries WHERE id > ? ORDER BY id", (self._last_id,)
        ).fetchall()
        if not rows:
            return
        last_mac = self._verify(rows, self._last_mac)
        entries = [self._parse(row) for row in rows]
        accountant = self._filter.accountant.copy()
        for entry in entries:
            accountant.compose(self._combined(entry.events))
        self._filter = PrivacyFilter(self._budget, accountant, adaptive_parameters=self._adaptive)
        self._last_id = entries[-1].id
        self._count += len(entries)
        self._last_mac = last_mac

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
    def key(self) -> str | None:
        """The steward's key file, or None for a ledger without tamper evidence."""
        return None if self._key is None else self._key.path

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
        """Every entry in the file, oldest first (including other processes' entries).

        The whole chain is verified again (an entry edited since the file was opened raises).
        """
        with self._lock:
            rows = self._connection().execute(f"SELECT {_COLUMNS} FROM entries ORDER BY id")
            fetched = rows.fetchall()
            self._verify(fetched, self._header_mac)
            return [self._parse(row) for row in fetched]

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

        Steps, under the thread lock and SQLite's write lock (``BEGIN IMMEDIATE``): verify and
        compose the entries other processes recorded meanwhile; try the release on a copy of the
        filter (refusing it if over budget); insert the entry, chained to the last one by its
        MAC, and commit it (durable once this returns); spend in memory; then, with a key,
        bring the key file's anchor forward to this entry (under the write lock again).

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
            For a query that is not a string, or events that are not privacy events; or if
            entries recorded meanwhile do not match their MACs (nothing is written or spent).
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
                exact = exact_amounts(self._budget, self._filter, trial)
                if exact is None:  # an unlimited budget: no exact amounts to record
                    charged = Budget(
                        increase(spent.epsilon, before.epsilon),
                        increase(spent.delta, before.delta),
                    )
                else:
                    charged = Budget(ceil_float(exact[0]), ceil_float(exact[1]))
                time = datetime.now(UTC)
                entry_id = self._last_id + 1
                budgets = (charged, spent, remaining)
                reals = [float(v) for b in budgets for v in (b.epsilon, b.delta)]
                if exact is None:
                    exact = tuple(reals)
                values = (
                    entry_id,
                    time.isoformat(),
                    query,
                    events_json,
                    *reals,
                    *(exact_text(x) for x in exact),
                )
                mac = self._chain.entry(self._last_mac, values)
                cursor = conn.execute(_INSERT, (*values, mac))
                if cursor.rowcount != 1:  # pragma: no cover - an INSERT writes one row or raises
                    raise InternalError("SQLite did not insert the ledger entry.")
                conn.commit()  # durable from here: WAL with synchronous=FULL
            except BaseException:
                if conn.in_transaction:
                    conn.rollback()
                raise
            self._filter = trial
            self._last_id = entry_id
            self._count += 1
            self._last_mac = mac
            self._advance_anchor(conn)
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
            f" spent={self._filter.spent}, key={self.key!r})"
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
