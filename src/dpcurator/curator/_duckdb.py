"""The DuckDB engine: the declared tables' rows in an in-process DuckDB (the default engine).

:class:`DuckDBEngine` implements :class:`~dpcurator.curator._engine.Engine`: it registers each
declared :class:`~dpcurator.curator.Table` (a DataFrame, an Arrow table, a Parquet/CSV file, a
DuckDB database or connection), checks the declared columns against the source's schema, binds
statements without running them (:meth:`DuckDBEngine.prepare`, whose errors depend on the schema
only), runs the curator's bounded aggregate statements
(:meth:`DuckDBEngine.run`, the only method a :class:`~dpcurator.curator.Session` reads private
data through) and gives the data steward noiseless SQL (:meth:`DuckDBEngine.exact`).

The engine is the steward's object: a :class:`~dpcurator.curator.Session` keeps its engine to
itself and offers analysts differentially private answers only. Steward tools that need true
statistics (the hierarchical releases count every node, then add noise) open an engine on the
declared tables themselves.

Trust boundary: the schema of a declared source (column names and types) is public; its rows
are not. Nothing an engine error says about rows ever leaves a session: the session turns every
failure after reading into one fixed message (see :meth:`Session.sql`).

Examples
--------
>>> import pandas as pd
>>> from dpcurator.curator import Column, DuckDBEngine, Table
>>> rows = pd.DataFrame({"state": ["IL", "IL", "OH"]})
>>> with DuckDBEngine(Table("people", rows, columns=[Column("state")])) as engine:
...     counts = engine.exact("people", "SELECT COUNT(*) AS n FROM {rows}")
>>> int(counts["n"][0])
3
"""

from __future__ import annotations

import itertools
import os
import threading
from collections.abc import Hashable, Sequence
from pathlib import Path
from typing import Any, ClassVar

import duckdb
import numpy as np
import pandas as pd
import pyarrow as pa
from sqlglot import exp

from dpcurator.curator._engine import (
    ClosesOnExit,
    check_columns,
    check_derived,
    declared_tables,
    integer_typed,
    quote,
    render,
    with_derived,
)
from dpcurator.curator._table import Table
from dpcurator.curator._types import Kind
from dpcurator.errors import InvalidParameterError, QueryError

__all__ = ["DuckDBEngine"]

_PREPARED_CACHE = 256
_PERFECT_HASH_BITS = 17
"""On a connection the engine opens, DuckDB aggregates into a perfect hash table (one slot per
possible key, no hashing) when the keys' value ranges span at most this many bits (DuckDB's
default: 12). A public domain of up to 131,072 consecutive integers (``BETWEEN`` tests give the
key its range) then aggregates in about 30-40% less CPU time at 100,000 groups, at the same
peak memory; the results are the same. A connection given to the engine keeps its settings."""


class DuckDBEngine(ClosesOnExit):
    """The declared tables registered in one DuckDB connection (in-process).

    Parameters
    ----------
    tables : Table or sequence of Table
        The declared tables.
    connection : duckdb.DuckDBPyConnection, optional
        The connection to run in (default: a new in-process one; a table whose source is a
        connection runs in that one). A connection given here is not closed by :meth:`close`.

    Raises
    ------
    InvalidParameterError
        For a source that cannot be read or a declared column that the source lacks (or that is
        declared numeric but is not).
    """

    dialect: ClassVar[str] = "duckdb"

    def __init__(
        self,
        tables: Table | Sequence[Table] | None = None,
        *,
        connection: duckdb.DuckDBPyConnection | None = None,
    ) -> None:
        declared = {} if tables is None else declared_tables(tables)
        self._tables: dict[str, Table] = {}
        self._kinds: dict[str, dict[str, Kind]] = {}
        self._integers: dict[str, frozenset[str]] = {}
        self._lock = threading.RLock()
        self._prepared: set[str] = set()
        self._relations: dict[str, exp.Expr] = {}  # the rows read (derived columns added)
        self._versions: dict[str, Hashable | None] = {}
        self._counter = itertools.count()
        self._drops: list[str] = []  # what close() undoes in a connection it does not own
        self._connection, self._owns_connection = self._connect(connection, declared.values())
        try:
            for table in declared.values():
                self.register(table)
        except BaseException:
            self.close()
            raise

    # -- registration ------------------------------------------------------------------------
    @staticmethod
    def _connect(
        connection: duckdb.DuckDBPyConnection | None, tables: Sequence[Table] | Any
    ) -> tuple[duckdb.DuckDBPyConnection, bool]:
        given = [t.source for t in tables if isinstance(t.source, duckdb.DuckDBPyConnection)]
        if connection is not None:
            if not isinstance(connection, duckdb.DuckDBPyConnection):
                raise InvalidParameterError("connection", connection, "must be a DuckDB connection")
            given.append(connection)
        if any(c is not given[0] for c in given):
            raise InvalidParameterError(
                "tables", "<connections>", "must all live in the same DuckDB connection"
            )
        if given:
            return given[0], False
        connection = duckdb.connect()
        connection.execute(f"SET perfect_ht_threshold = {_PERFECT_HASH_BITS}")
        return connection, True

    def register(self, table: Table) -> None:
        """Register ``table``'s source and check its declared columns against its schema.

        Raises
        ------
        InvalidParameterError
            For a source that cannot be read, a table name registered twice, a declared column
            the source lacks, or a column declared numeric whose type is not.
        """
        with self._lock:
            if table.name.lower() in {n.lower() for n in self._tables}:
                raise InvalidParameterError("tables", table.name, "declare each table name once")
            if (
                isinstance(table.source, duckdb.DuckDBPyConnection)
                and table.source is not self._connection
            ):
                raise InvalidParameterError(
                    "tables", "<connections>", "must all live in the same DuckDB connection"
                )
            base = self._register(table)
            self._relations[table.name] = with_derived(base, table)
            self._tables[table.name] = table
            try:
                self._check_schema(table, base)
            except BaseException:
                del self._tables[table.name], self._relations[table.name]
                raise
            self._versions[table.name] = _version(table)

    def _register(self, table: Table) -> exp.Table:
        source = table.source
        name = f"__dpcurator_{id(self):x}_{table.name}"
        view = exp.to_table(quote(name), dialect="duckdb")
        conn = self._connection
        if isinstance(source, duckdb.DuckDBPyConnection):
            if table.source_table is None:
                raise InvalidParameterError(
                    "source_table", None, f"must name the table of {table.name!r} in the connection"
                )
            return exp.to_table(table.source_table, dialect="duckdb")
        if isinstance(source, pd.DataFrame | pa.Table):
            conn.register(name, source)
            self._drops.append(f"DROP VIEW IF EXISTS {view.sql(dialect='duckdb')}")
            return view
        if not isinstance(source, str | os.PathLike):
            raise InvalidParameterError(
                "source",
                type(source).__name__,
                "must be a pandas DataFrame, a pyarrow Table, a file path or a DuckDB connection",
            )
        path = os.fspath(source)
        if not os.path.exists(path):
            raise InvalidParameterError("source", path, "does not exist")
        reader = self._reader(table, path)
        conn.execute(f"CREATE TEMP VIEW {view.sql(dialect='duckdb')} AS SELECT * FROM {reader}")
        self._drops.append(f"DROP VIEW IF EXISTS {view.sql(dialect='duckdb')}")
        return view

    def _reader(self, table: Table, path: str) -> str:
        lowered = path.lower()
        literal = exp.convert(path).sql(dialect="duckdb")
        if lowered.endswith((".parquet", ".pq")):
            return f"read_parquet({literal})"
        if lowered.endswith((".csv", ".tsv", ".csv.gz", ".tsv.gz", ".txt")):
            return f"read_csv_auto({literal})"
        if lowered.endswith((".duckdb", ".db", ".ddb")):
            if table.source_table is None:
                raise InvalidParameterError(
                    "source_table", None, f"must name the table of {table.name!r} in {path}"
                )
            alias = quote(f"__dpcurator_db_{id(self):x}_{table.name}")
            self._connection.execute(f"ATTACH {literal} AS {alias} (READ_ONLY)")
            self._drops.append(f"DETACH DATABASE IF EXISTS {alias}")
            inner = exp.to_table(table.source_table, dialect="duckdb")
            return f"{alias}.{inner.sql(dialect='duckdb')}"
        raise InvalidParameterError(
            "source", path, "must end in .parquet, .csv, .tsv, .csv.gz, .duckdb or .db"
        )

    def _check_schema(self, table: Table, base: exp.Table) -> None:
        """Check the declared columns against the source's schema (public: names and types)."""
        types = self._describe(base.sql(dialect="duckdb"), table)
        check_derived(table, list(types))
        if any(c.expression is not None for c in table.columns):
            types = self._describe(self.relation(table.name), table)
        self._kinds[table.name] = check_columns(table, types, self.dialect)
        self._integers[table.name] = integer_typed(types, self.dialect)

    def _describe(self, relation: str, table: Table) -> dict[str, str]:
        """Return the type of each column of ``relation`` (lower-cased names)."""
        try:
            described = self._connection.execute(f"DESCRIBE SELECT * FROM {relation}").fetchall()
        except duckdb.Error as error:
            raise InvalidParameterError("source", table.name, f"cannot be read: {error}") from None
        return {str(row[0]).lower(): str(row[1]).upper() for row in described}

    # -- the engine's work ---------------------------------------------------------------------
    @property
    def tables(self) -> dict[str, Table]:
        """The declared tables, by name."""
        return dict(self._tables)

    def kinds(self, table: str) -> dict[str, Kind]:
        """Return the kind of each column of ``table``'s source (lower-cased names; public)."""
        self._relation(table)  # refuses an undeclared table
        return dict(self._kinds[table])

    def relation(self, table: str) -> str:
        """Return the SQL name under which ``table``'s rows are registered."""
        return self._relation(table).sql(dialect="duckdb")

    def _relation(self, table: str) -> exp.Expr:
        if table not in self._relations:
            raise InvalidParameterError(
                "table", table, f"is not declared; declared: {', '.join(sorted(self._tables))}"
            )
        return self._relations[table]

    def render(self, statement: exp.Query, table: str) -> str:
        """Return ``statement`` as DuckDB SQL reading ``table``'s rows."""
        return render(statement, self._relation(table), self.dialect)

    def prepare(self, statement: exp.Query, table: str) -> None:
        """Bind ``statement`` without running it; refuse it if it does not fit the tables' types.

        Binding reads the schema only, never rows, so its error (the engine's first line, which
        names columns and types) may be shown.

        Raises
        ------
        QueryError
            If the engine cannot bind the statement.
        """
        sql = self.render(statement, table)
        with self._lock:
            if sql in self._prepared:
                return
            message = None
            try:  # a relation is bound when made and runs only when read: nothing runs here
                self._connection.sql(sql)
            except duckdb.Error as error:
                message = str(error).splitlines()[0]
            if message is not None:
                raise QueryError(f"The query does not fit the table's types: {message}")
            if len(self._prepared) >= _PREPARED_CACHE:
                self._prepared.clear()
            self._prepared.add(sql)

    def run(self, statement: exp.Query, table: str) -> dict[str, list[Any]]:
        """Run a bounded aggregate statement; return its columns as lists of Python values.

        Python values keep the engine's exact integers (DuckDB's HUGEINT sums become Python
        ``int``, never float64). The result is small (one row per group). Errors propagate as
        the engine raised them: the caller (a session) must not show them to an analyst.
        """
        sql = self.render(statement, table)
        with self._lock:
            cursor = self._connection.execute(sql)
            names = [str(d[0]) for d in cursor.description or ()]
            rows = cursor.fetchall()
        return {name: [row[i] for row in rows] for i, name in enumerate(names)}

    def integer_columns(self, table: str) -> frozenset[str]:
        """Return ``table``'s columns of integer types (lower-cased names; public schema)."""
        return self._integers[table]

    def row_count(self, table: str) -> int | None:
        """Return ``table``'s number of rows where it costs little to learn, else None.

        A Parquet file's count is in its metadata and an Arrow table knows its length. Other
        sources give None: a CSV file (a whole read), a DuckDB database (its source table may
        be a view, computed in full), a table of a connection or a DataFrame (rows that may
        change).
        """
        source = self._tables[table].source
        if isinstance(source, pa.Table):
            return int(source.num_rows)
        if not isinstance(source, str | os.PathLike):
            return None
        if not os.fspath(source).lower().endswith((".parquet", ".pq")):
            return None
        with self._lock:
            found = self._connection.execute(f"SELECT COUNT(*) FROM {self.relation(table)}")
            return int(found.fetchall()[0][0])

    def version(self, table: str) -> Hashable | None:
        """Return a token that changes whenever ``table``'s rows may; None when unknown.

        A file (Parquet, CSV, DuckDB database and its write-ahead log) is known by its size and
        modification time; a pyarrow Table is immutable; a pandas DataFrame (mutable in place)
        and a table in a DuckDB connection (writable by whoever holds it) are unknown.
        """
        self._relation(table)
        registered = self._versions[table]
        return None if registered is None else (registered, _version(self._tables[table]))

    def materialize(self, statement: exp.Query, table: str) -> exp.Table:
        """Run ``statement`` into a temporary table of the connection; return its name."""
        sql = self.render(statement, table)
        label = f"__dpcurator_cache_{id(self):x}_{next(self._counter)}"
        name = exp.to_table(quote(label), dialect="duckdb")
        with self._lock:
            self._connection.execute(f"CREATE TEMP TABLE {name.sql(dialect='duckdb')} AS {sql}")
            self._drops.append(f"DROP TABLE IF EXISTS {name.sql(dialect='duckdb')}")
        return name

    def exact(self, table: str, sql: str) -> dict[str, np.ndarray[Any, Any]]:
        """Run trusted SQL on a declared table's rows, without noise: for the data steward only.

        ``sql`` names the table's rows as ``{rows}``; the result's columns come back as arrays.
        Nothing is charged and nothing is private: this is how the steward's own mechanisms read
        their true statistics (the hierarchical releases count every node with it, then add
        noise). It is never an answer for an analyst, and a session never exposes it.

        Examples
        --------
        >>> import pandas as pd
        >>> from dpcurator.curator import Column, Table
        >>> rows = pd.DataFrame({"state": ["IL", "IL", "OH"]})
        >>> with DuckDBEngine(Table("people", rows, columns=[Column("state")])) as engine:
        ...     int(engine.exact("people", "SELECT COUNT(*) AS n FROM {rows}")["n"][0])
        3
        """
        relation = self.relation(table)
        with self._lock:
            result = self._connection.execute(sql.replace("{rows}", relation))
            return dict(result.fetchnumpy())

    def close(self) -> None:
        """Close the connection if the engine opened it, else drop what it made in it."""
        with self._lock:
            if self._owns_connection:
                self._connection.close()
                return
            while self._drops:
                self._connection.execute(self._drops.pop())

    def __repr__(self) -> str:
        return f"DuckDBEngine(tables={list(self._tables)})"


def _version(table: Table) -> Hashable | None:
    """Return a token of the source's state (file sizes and times, an Arrow table's id) or None."""
    source = table.source
    if isinstance(source, pa.Table):
        return ("arrow", id(source))
    if isinstance(source, str | os.PathLike):
        path = Path(source)
        files = [path, path.with_name(path.name + ".wal")]
        return tuple((str(f), f.stat().st_size, f.stat().st_mtime_ns) for f in files if f.exists())
    return None
