r"""The server's configuration: ``server.toml``.

The steward's file names the declared tables (each a TOML declaration read by
:func:`~dpcurator.curator.read_declaration`), the global budget of each table (what all analysts
together may spend on it: the privacy loss of the people in the table), the analysts and their
budget per table, the accountant, the ledger store and the limits of the HTTP interface::

    [server]
    accountant = "basic"                  # fully adaptive: "basic" or "zcdp"
    ledger = "service.ledger.sqlite"      # relative to this file; or "postgresql://..."
    max_body_bytes = 65536                # larger requests are refused (413)
    max_query_chars = 4000                # longer queries are refused (400)
    rate_per_minute = 600                 # per key and server process (429 beyond)
    min_response_ms = 100                 # a query's answer is never sent sooner ...
    response_quantum_ms = 50              # ... and its latency is rounded up to a multiple
    concurrent_requests = 8               # worked on at once per process; more wait in turn
    confidence = 0.95

    [tables.cps]
    declaration = "cps.toml"              # relative to this file
    budget = { epsilon = 10.0, delta = 1e-5 }

    [analysts.alice]
    budgets.cps = { epsilon = 2.0, delta = 1e-6 }

Analysts and budgets in the file are the starting point: the server adds what the ledger store
does not hold yet, and ``dpcurator admin`` adds, removes and raises from there (with an audit
trail). The ledger store, not the file, is then the record; a budget in the file that is lower
than the store's is not applied (budgets are only ever raised).

Examples
--------
>>> import os, tempfile
>>> folder = tempfile.mkdtemp()
>>> with open(os.path.join(folder, "t.toml"), "w") as f:
...     _ = f.write('[table]\nname = "t"\nsource = "t.csv"\n'
...                 '[columns.x]\nlower = 0\nupper = 1\n')
>>> with open(os.path.join(folder, "server.toml"), "w") as f:
...     _ = f.write('[tables.t]\ndeclaration = "t.toml"\nbudget = { epsilon = 5.0 }\n'
...                 '[analysts.ann]\nbudgets.t = { epsilon = 1.0 }\n')
>>> config = load_config(os.path.join(folder, "server.toml"))
>>> config.tables[0].name, config.tables[0].budget, config.analysts[0].budgets
('t', Budget(epsilon=5.0, delta=0.0), (('t', Budget(epsilon=1.0, delta=0.0)),))
"""

from __future__ import annotations

import math
import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dpcurator.accounting import Budget
from dpcurator.curator import Table, read_declaration
from dpcurator.errors import InvalidParameterError

__all__ = ["AnalystConfig", "Limits", "ServerConfig", "TableConfig", "load_config"]

_FULLY_ADAPTIVE = ("basic", "zcdp")
_SERVER_KEYS = {
    "accountant",
    "ledger",
    "max_body_bytes",
    "max_query_chars",
    "rate_per_minute",
    "min_response_ms",
    "response_quantum_ms",
    "concurrent_requests",
    "confidence",
}


@dataclass(frozen=True)
class Limits:
    """The HTTP interface's limits.

    Attributes
    ----------
    max_body_bytes : int
        Largest request body accepted (413 beyond).
    max_query_chars : int
        Longest SQL text accepted (400 beyond).
    rate_per_minute : int
        Requests per key and minute in one server process (a token bucket; 429 beyond).
    min_response_ms : int
        A query's answer (or its failure) is sent no sooner than this after it arrived.
    response_quantum_ms : int
        ... and at a multiple of this (see :func:`~dpcurator.service.padded_delay`).
    concurrent_requests : int
        Requests worked on at once by one server process (its worker threads); later ones wait
        in the order they came. The work is mostly Python under one interpreter lock, so more
        threads add no speed, only a lottery for the lock: with 40 threads (anyio's default) and
        32 clients, p99 latency was about twice as long.
    """

    max_body_bytes: int = 65_536
    max_query_chars: int = 4_000
    rate_per_minute: int = 600
    min_response_ms: int = 100
    response_quantum_ms: int = 50
    concurrent_requests: int = 8


@dataclass(frozen=True)
class TableConfig:
    """A declared table served, with its global budget (all analysts together)."""

    name: str
    table: Table
    budget: Budget


@dataclass(frozen=True)
class AnalystConfig:
    """An analyst named in the file, with a budget per table (``(table, budget)`` pairs)."""

    name: str
    budgets: tuple[tuple[str, Budget], ...]


@dataclass(frozen=True)
class ServerConfig:
    """A parsed ``server.toml`` (see the module's notes for the format).

    Attributes
    ----------
    path : str
        The file (relative paths in it are relative to its folder).
    tables : tuple of TableConfig
    analysts : tuple of AnalystConfig
    accountant : str
        ``"basic"`` or ``"zcdp"``: analysts choose queries adaptively, so only fully adaptive
        filters are valid.
    ledger : str
        A SQLite file path, or a ``postgresql://`` URL.
    limits : Limits
    confidence : float
        Level of the released intervals.
    """

    path: str
    tables: tuple[TableConfig, ...]
    analysts: tuple[AnalystConfig, ...]
    accountant: str
    ledger: str
    limits: Limits
    confidence: float = 0.95

    def table(self, name: str) -> TableConfig:
        """Return the table ``name`` (KeyError if it is not served)."""
        for table in self.tables:
            if table.name == name:
                return table
        raise KeyError(name)


def check_name(value: object, what: str) -> str:
    """Check an analyst's or a table's name: 1 to 64 letters, digits, ``_``, ``-`` or ``.``.

    >>> check_name("alice", "analyst")
    'alice'
    """
    ok = (
        isinstance(value, str)
        and 0 < len(value) <= 64
        and all(c.isascii() and (c.isalnum() or c in "_-.") for c in value)
    )
    if not ok:
        raise InvalidParameterError(
            what, value, "must be 1 to 64 ASCII letters, digits, '_', '-' or '.'"
        )
    return str(value)


def parse_budget(raw: object, where: str) -> Budget:
    """Read ``{epsilon = ..., delta = ...}`` as a finite :class:`Budget`.

    >>> parse_budget({"epsilon": 1, "delta": 1e-6}, "budget")
    Budget(epsilon=1.0, delta=1e-06)
    """
    if not isinstance(raw, Mapping) or set(raw) - {"epsilon", "delta"} or "epsilon" not in raw:
        raise InvalidParameterError(where, raw, "must be a table { epsilon = ..., delta = ... }")
    values = []
    for name in ("epsilon", "delta"):
        value = raw.get(name, 0.0)
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not math.isfinite(value)
        ):
            raise InvalidParameterError(f"{where}.{name}", value, "must be a finite number")
        values.append(float(value))
    return Budget(values[0], values[1])


def _integer(raw: Mapping[str, Any], name: str, default: int, minimum: int) -> int:
    value = raw.get(name, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise InvalidParameterError(f"server.{name}", value, f"must be an integer >= {minimum}")
    return value


def _limits(server: Mapping[str, Any]) -> Limits:
    defaults = Limits()
    return Limits(
        max_body_bytes=_integer(server, "max_body_bytes", defaults.max_body_bytes, 256),
        max_query_chars=_integer(server, "max_query_chars", defaults.max_query_chars, 16),
        rate_per_minute=_integer(server, "rate_per_minute", defaults.rate_per_minute, 1),
        min_response_ms=_integer(server, "min_response_ms", defaults.min_response_ms, 0),
        response_quantum_ms=_integer(
            server, "response_quantum_ms", defaults.response_quantum_ms, 1
        ),
        concurrent_requests=_integer(
            server, "concurrent_requests", defaults.concurrent_requests, 1
        ),
    )


def _tables(raw: object, folder: Path) -> tuple[TableConfig, ...]:
    if not isinstance(raw, Mapping) or not raw:
        raise InvalidParameterError("tables", raw, "must name at least one [tables.NAME]")
    out = []
    for name, spec in raw.items():
        check_name(name, "table")
        if not isinstance(spec, Mapping) or set(spec) != {"declaration", "budget"}:
            raise InvalidParameterError(
                f"tables.{name}", spec, "must have exactly 'declaration' and 'budget'"
            )
        if not isinstance(spec["declaration"], str):
            raise InvalidParameterError(
                f"tables.{name}.declaration", spec["declaration"], "must be a file path"
            )
        declaration = read_declaration(folder / spec["declaration"])
        if declaration.table.name != name:
            raise InvalidParameterError(
                f"tables.{name}.declaration",
                spec["declaration"],
                f"must declare the table {name!r} (it declares {declaration.table.name!r})",
            )
        out.append(TableConfig(name, declaration.table, parse_budget(spec["budget"], name)))
    return tuple(out)


def _analysts(raw: object, tables: set[str]) -> tuple[AnalystConfig, ...]:
    if not isinstance(raw, Mapping):
        raise InvalidParameterError("analysts", raw, "must be [analysts.NAME] tables")
    out = []
    for name, spec in raw.items():
        check_name(name, "analyst")
        budgets = spec.get("budgets", {}) if isinstance(spec, Mapping) else None
        if (
            not isinstance(spec, Mapping)
            or set(spec) - {"budgets"}
            or not isinstance(budgets, Mapping)
        ):
            raise InvalidParameterError(
                f"analysts.{name}", spec, "must hold only budgets.TABLE = { epsilon = ... }"
            )
        for table in budgets:
            if table not in tables:
                raise InvalidParameterError(
                    f"analysts.{name}.budgets", table, "must name a table of [tables]"
                )
        pairs = tuple(
            (str(t), parse_budget(b, f"analysts.{name}.budgets.{t}")) for t, b in budgets.items()
        )
        out.append(AnalystConfig(name, pairs))
    return tuple(out)


def load_config(path: str | os.PathLike[str]) -> ServerConfig:
    """Read and check ``server.toml``.

    Raises
    ------
    InvalidParameterError
        For a missing file, malformed TOML, an unknown key, a table whose declaration does not
        match its name, a budget that is not finite, an accountant that is not fully adaptive.
    """
    file = Path(path)
    try:
        data = tomllib.loads(file.read_text())
    except OSError as exc:
        raise InvalidParameterError("config", str(file), f"must be readable ({exc})") from None
    except tomllib.TOMLDecodeError as exc:
        raise InvalidParameterError("config", str(file), f"is not valid TOML: {exc}") from None
    extra = set(data) - {"server", "tables", "analysts"}
    if extra:
        raise InvalidParameterError("config", sorted(extra), "unknown sections")
    server = data.get("server", {})
    if not isinstance(server, Mapping) or set(server) - _SERVER_KEYS:
        raise InvalidParameterError(
            "server", server, f"must hold only {', '.join(sorted(_SERVER_KEYS))}"
        )
    accountant = server.get("accountant", "basic")
    if accountant not in _FULLY_ADAPTIVE:
        raise InvalidParameterError(
            "server.accountant",
            accountant,
            "must be 'basic' or 'zcdp': analysts choose queries adaptively, and only these "
            "accountants' filters are valid then",
        )
    folder = file.resolve().parent
    ledger = server.get("ledger", file.stem + ".ledger.sqlite")
    if not isinstance(ledger, str) or not ledger:
        raise InvalidParameterError("server.ledger", ledger, "must be a path or postgresql:// URL")
    if not ledger.startswith(("postgresql://", "postgres://")):
        ledger = str(folder / ledger)
    confidence = server.get("confidence", 0.95)
    if not isinstance(confidence, float) or not 0 < confidence < 1:
        raise InvalidParameterError("server.confidence", confidence, "must be in (0, 1)")
    tables = _tables(data.get("tables"), folder)
    analysts = _analysts(data.get("analysts", {}), {t.name for t in tables})
    return ServerConfig(
        path=str(file),
        tables=tables,
        analysts=analysts,
        accountant=str(accountant),
        ledger=ledger,
        limits=_limits(server),
        confidence=confidence,
    )
