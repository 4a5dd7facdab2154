"""The engine on Spark: the declared tables' rows in a Spark session, local or on a cluster.

:class:`SparkEngine` is the Spark implementation of :class:`~dpcurator.curator._engine.Engine`:
a curator session runs the same bounded statements on it as on
:class:`~dpcurator.curator.DuckDBEngine`, rendered in Spark SQL by
:func:`~dpcurator.curator._engine.render`.

A declared :class:`~dpcurator.curator.Table` may live in a Spark DataFrame, in a table or view of
the Spark catalog (the source is the SparkSession, ``source_table`` the name), in Parquet files
(a ``.parquet`` / ``.pq`` file or a folder of them) or CSV files (``.csv``, ``.tsv``, with a
header; types inferred), or in a pandas DataFrame or a pyarrow Table (copied into Spark once, at
registration). A steward opens it like DuckDB's engine::

    from dpcurator.curator import Column, Table
    from dpcurator.curator._spark import SparkEngine

    people = Table("people", "people.parquet", columns=[Column("state")])
    with SparkEngine(people) as engine:  # a local Spark unless given one: spark=...
        counts = engine.exact("people", "SELECT state, COUNT(*) AS n FROM {rows} GROUP BY state")

The engine works in its own session (``spark.newSession()``): its temporary views and SQL
settings stay there. ANSI mode is off in it, so a CAST that fails and a division by zero give
NULL (the TRY semantics the curator's statements rely on) and the session time zone is UTC.
Spark itself is never stopped by the engine (see :meth:`SparkEngine.close`).

Trust boundary: as for every engine, the schema of a source (column names and types) is public
and its rows are not; the steward's :meth:`SparkEngine.exact` is never offered to analysts.

Spark is an optional dependency: ``pip install 'dpcurator[spark]'`` (pyspark 3.5.9). This module
imports without it; opening an engine without it raises
:class:`~dpcurator.errors.UnsupportedError`.
"""

from __future__ import annotations

import contextlib
import decimal
import importlib
import itertools
import os
import re
import threading
import warnings
from collections.abc import Callable, Hashable, Iterator, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
import pandas as pd
import pyarrow as pa
from sqlglot import exp
from sqlglot.errors import ParseError

from dpcurator.curator._engine import (
    ClosesOnExit,
    check_columns,
    check_derived,
    declared_tables,
    integer_typed,
    render,
    with_derived,
)
from dpcurator.curator._table import Table
from dpcurator.curator._types import Kind
from dpcurator.errors import InvalidParameterError, QueryError, UnsupportedError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import DataType, StructType

__all__ = ["LOCAL_CONF", "SparkEngine"]

LOCAL_CONF: dict[str, str] = {
    "spark.master": "local[2]",
    "spark.app.name": "dpcurator",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
    "spark.sql.shuffle.partitions": "4",
}
"""The settings of the local Spark that an engine starts when it is given none and none runs."""

_SESSION_CONF = {
    # A failing CAST or a division by zero gives NULL: the TRY semantics of the statements.
    "spark.sql.ansi.enabled": "false",
    "spark.sql.session.timeZone": "UTC",
    # pandas and Arrow sources travel through Arrow, exactly typed; never the row-by-row
    # fallback (which turns pandas' missing strings into the text 'NaN').
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.sql.execution.arrow.pyspark.fallback.enabled": "false",
}
_NUMPY: dict[str, Any] = {
    "tinyint": np.int8,
    "smallint": np.int16,
    "int": np.int32,
    "bigint": np.int64,
    "float": np.float32,
    "double": np.float64,
    "boolean": np.bool_,
    "date": "datetime64[D]",
    "timestamp": "datetime64[us]",
    "timestamp_ntz": "datetime64[us]",
}
_PARQUET = (".parquet", ".pq")
_CSV = (".csv", ".csv.gz", ".txt")
_TSV = (".tsv", ".tsv.gz")
_URI = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
_PREPARED_CACHE = 256
_INT64 = (-(2**63), 2**63 - 1)


def _pyspark() -> ModuleType:
    """Import ``pyspark.sql`` on first use, or say how to install it."""
    try:
        return importlib.import_module("pyspark.sql")
    except ImportError as error:
        raise UnsupportedError(
            "SparkEngine needs pyspark, the 'spark' extra: pip install 'dpcurator[spark]' "
            f"(pyspark==3.5.9 and Java 17): {error}"
        ) from None


def _spark_errors() -> tuple[type[BaseException], ...]:
    """Return the errors Spark raises for a source or a statement it cannot read or bind."""
    base = importlib.import_module("pyspark.errors").PySparkException
    java = importlib.import_module("py4j.protocol").Py4JJavaError
    return (base, java)


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """Silence what pyspark 3.5 warns about itself, so a ``-W error`` caller does not fail.

    Its pandas bridge calls deprecated pandas and distutils APIs, and it leaves the sockets
    that bring results back to be closed by the garbage collector (a ResourceWarning).
    """
    with warnings.catch_warnings():
        for category in (DeprecationWarning, FutureWarning, PendingDeprecationWarning):
            warnings.filterwarnings("ignore", category=category, module=r"pyspark(\.|$)")
        warnings.filterwarnings("ignore", "unclosed <socket", ResourceWarning)
        yield


def _first_line(error: BaseException) -> str:
    lines = str(error).strip().splitlines()
    return lines[0] if lines else type(error).__name__


def _quoted(*parts: str) -> exp.Table:
    """Return a table node whose parts are quoted identifiers (backticks in Spark)."""
    names = [exp.to_identifier(p, quoted=True) for p in parts]
    return exp.Table(this=names[-1], db=names[-2] if len(names) > 1 else None)


def _local_session(sql: ModuleType) -> SparkSession:
    """Return the active session, else a local Spark on 127.0.0.1 (:data:`LOCAL_CONF`)."""
    active: SparkSession | None = sql.SparkSession.getActiveSession()
    if active is not None:
        return active
    builder = sql.SparkSession.builder
    for key, value in LOCAL_CONF.items():
        builder = builder.config(key, value)
    session: SparkSession = builder.getOrCreate()
    return session


def _file_version(path: str) -> tuple[tuple[str, int, int], ...]:
    """(path, size, mtime_ns) of the file, or of every file under the folder."""
    if os.path.isdir(path):
        files = sorted(
            os.path.join(root, name) for root, _, names in os.walk(path) for name in names
        )
    else:
        files = [path]
    out = []
    for file in files:
        try:
            stat = os.stat(file)
        except OSError:
            continue  # gone since the listing: the token differs all the same
        out.append((file, stat.st_size, stat.st_mtime_ns))
    return tuple(out)


def _file_format(path: str) -> str:
    lowered = path.lower().rstrip("/")
    if lowered.endswith(_PARQUET):
        return "parquet"
    if lowered.endswith(_CSV):
        return "csv"
    if lowered.endswith(_TSV):
        return "tsv"
    if not _URI.match(path) and os.path.isdir(path):
        return "parquet"
    raise InvalidParameterError(
        "source",
        path,
        "must end in .parquet, .pq, .csv, .tsv, .csv.gz or .tsv.gz, or be a folder of Parquet "
        "files (Spark reads no DuckDB database: pass a SparkSession and source_table instead)",
    )


def _for_spark(table: pa.Table) -> pa.Table:
    """Cast the Arrow types Spark lacks: unsigned integers widen, dictionaries decode."""
    fields = []
    for field in table.schema:
        kind = field.type
        if pa.types.is_dictionary(kind):
            kind = kind.value_type
        if pa.types.is_unsigned_integer(kind):
            widths = {8: pa.int16(), 16: pa.int32(), 32: pa.int64()}
            kind = widths.get(kind.bit_width, pa.decimal128(20, 0))
        fields.append(field.with_type(kind))
    schema = pa.schema(fields)
    return table if schema.equals(table.schema) else table.cast(schema)


def _value(value: Any, integral: bool) -> Any:
    """Return a result value as Python: a DECIMAL(p, 0) is an exact ``int``."""
    if integral and isinstance(value, decimal.Decimal):
        return int(value)
    return value


def _array(values: list[Any], kind: DataType) -> np.ndarray[Any, Any]:
    """One result column as an array (masked where NULL), typed like DuckDB's ``fetchnumpy``."""
    name = kind.simpleString()
    base = name.split("(")[0]
    dtype: Any = _NUMPY.get(base, object)
    if base == "decimal":
        if getattr(kind, "scale", None) == 0:
            values = [None if v is None else int(v) for v in values]
            fits = all(v is None or _INT64[0] <= v <= _INT64[1] for v in values)
            dtype = np.int64 if fits else object
        else:
            dtype = np.float64
    mask = [v is None for v in values]
    if dtype is object:
        out = np.empty(len(values), dtype=object)
        out[:] = values
    else:
        filler = np.zeros((), dtype=dtype).item()
        out = np.array([filler if v is None else v for v in values], dtype=dtype)
    return np.ma.masked_array(out, mask=mask) if any(mask) else out


@dataclass
class _Source:
    """Where one declared table's rows are, as the engine's Spark session names them."""

    relation: exp.Table
    version: Hashable | None
    path: str | None = None  # a local file or folder, read again when it changes
    reread: Callable[[], DataFrame] | None = None


class SparkEngine(ClosesOnExit):
    """The declared tables registered in a Spark session (local, or the one given).

    Parameters
    ----------
    tables : Table or sequence of Table, optional
        The declared tables (more can be added with :meth:`register`).
    spark : pyspark.sql.SparkSession, optional
        The Spark to run in. Default: the session of a table whose source is a SparkSession or
        a Spark DataFrame, else the active session, else a new local one (:data:`LOCAL_CONF`:
        ``local[2]`` on 127.0.0.1, no UI). The engine works in its own ``newSession()`` of it,
        and never stops it.

    Raises
    ------
    UnsupportedError
        If pyspark is not installed (``pip install 'dpcurator[spark]'``).
    InvalidParameterError
        For a source that cannot be read or a declared column that the source lacks (or that is
        declared numeric but is not).
    """

    dialect: ClassVar[str] = "spark"

    def __init__(
        self,
        tables: Table | Sequence[Table] | None = None,
        *,
        spark: SparkSession | None = None,
    ) -> None:
        self._sql = _pyspark()
        self._errors = _spark_errors()
        declared = {} if tables is None else declared_tables(tables)
        self._lock = threading.RLock()
        self._tables: dict[str, Table] = {}
        self._kinds: dict[str, dict[str, Kind]] = {}
        self._integers: dict[str, frozenset[str]] = {}
        self._sources: dict[str, _Source] = {}
        self._read: dict[str, exp.Expr] = {}  # the rows read (derived columns added)
        self._prepared: set[str] = set()
        self._views: list[str] = []
        self._global_views: list[str] = []
        self._cached: list[DataFrame] = []
        self._prefix = f"__dpcurator_{os.getpid()}_{id(self):x}"
        self._counter = itertools.count()
        self._closed = False
        with _quiet():
            base = self._base_session(spark, list(declared.values()))
            self._spark: SparkSession = base.newSession()
            for key, value in _SESSION_CONF.items():
                self._spark.conf.set(key, value)
            self._global_db = str(self._spark.conf.get("spark.sql.globalTempDatabase"))
        try:
            for table in declared.values():
                self.register(table)
        except BaseException:
            self.close()
            raise

    # -- registration ------------------------------------------------------------------------
    def _base_session(self, spark: SparkSession | None, tables: list[Table]) -> SparkSession:
        sql = self._sql
        if spark is not None:
            if not isinstance(spark, sql.SparkSession):
                raise InvalidParameterError("spark", spark, "must be a pyspark SparkSession")
            given: SparkSession = spark
            return given
        for table in tables:
            if isinstance(table.source, sql.SparkSession):
                session: SparkSession = table.source
                return session
            if isinstance(table.source, sql.DataFrame):
                owner: SparkSession = table.source.sparkSession
                return owner
        return _local_session(sql)

    def register(self, table: Table) -> None:
        """Register ``table``'s source and check its declared columns against its schema.

        Raises
        ------
        InvalidParameterError
            For a source the engine cannot read, a name already registered, a declared column
            the source lacks, a column declared numeric (bounds, bins) whose type is not, or a
            text column whose domain holds other values.
        """
        if not isinstance(table, Table):
            raise InvalidParameterError("table", table, "must be a Table declaration")
        with self._lock:
            self._check_open()
            if table.name.lower() in {name.lower() for name in self._tables}:
                raise InvalidParameterError("tables", table.name, "declare each table name once")
            with _quiet():
                source, schema = self._source(table)
            self._tables[table.name] = table
            self._sources[table.name] = source
            self._read[table.name] = with_derived(source.relation, table)
            try:
                self._check_schema(table, schema)
            except BaseException:
                del self._tables[table.name], self._sources[table.name], self._read[table.name]
                raise

    def _source(self, table: Table) -> tuple[_Source, StructType]:
        """Register the rows under a view (or find them in the catalog); return their schema."""
        source = table.source
        sql = self._sql
        try:
            if isinstance(source, sql.SparkSession):
                return self._catalog(table, source)
            if isinstance(source, sql.DataFrame):
                return self._global_view(table.name, source), source.schema
            if isinstance(source, pd.DataFrame | pa.Table):
                frame = self._from_arrow(source)
                return self._view(table.name, frame), frame.schema
            if isinstance(source, str | os.PathLike):
                return self._from_path(table, os.fspath(source))
        except self._errors as error:
            raise InvalidParameterError(
                "source", table.name, f"cannot be read: {_first_line(error)}"
            ) from None
        raise InvalidParameterError(
            "source",
            type(source).__name__,
            "must be a Spark DataFrame, a SparkSession (with source_table), a pandas DataFrame, "
            "a pyarrow Table or a file path",
        )

    def _name(self, table: str) -> str:
        return f"{self._prefix}_{table}_{next(self._counter)}"

    def _view(self, table: str, frame: DataFrame) -> _Source:
        """Register a temporary view of the engine's own session (a constant version)."""
        name = self._name(table)
        frame.createOrReplaceTempView(name)
        self._views.append(name)
        return _Source(_quoted(name), ("frame", self._prefix, name))

    def _global_view(self, table: str, frame: DataFrame) -> _Source:
        """Register a DataFrame of another session as a uniquely named global temporary view."""
        name = self._name(table)
        frame.createOrReplaceGlobalTempView(name)
        self._global_views.append(name)
        return _Source(_quoted(self._global_db, name), ("frame", self._prefix, name))

    def _catalog(self, table: Table, session: SparkSession) -> tuple[_Source, StructType]:
        """Find a table or view of the catalog by name; a temporary view of ``session`` too."""
        if table.source_table is None:
            raise InvalidParameterError(
                "source_table", None, f"must name the table of {table.name!r} in the SparkSession"
            )
        try:
            node = exp.to_table(table.source_table, dialect="spark")
        except ParseError:
            raise InvalidParameterError(
                "source_table", table.source_table, "must be a table name"
            ) from None
        for identifier in node.find_all(exp.Identifier):
            identifier.set("quoted", True)
        name = node.sql(dialect="spark")
        try:
            frame = self._spark.table(name)
        except self._errors:
            # A temporary view of the given session, which the engine's session cannot see:
            # shared with it through a global temporary view.
            frame = session.table(name)
            return self._global_view(table.name, frame), frame.schema
        return _Source(node, None), frame.schema

    def _from_arrow(self, source: pd.DataFrame | pa.Table) -> DataFrame:
        """Copy a pandas DataFrame or a pyarrow Table into Spark through Arrow, exactly typed."""
        types = importlib.import_module("pyspark.sql.pandas.types")
        try:
            arrow = _for_spark(
                source
                if isinstance(source, pa.Table)
                else pa.Table.from_pandas(source, preserve_index=False)
            )
        except (pa.ArrowException, ValueError, TypeError) as error:
            raise InvalidParameterError(
                "source", type(source).__name__, f"cannot be read: {_first_line(error)}"
            ) from None
        schema = types.from_arrow_schema(arrow.schema)
        # One chunk per column: pyspark cannot convert a column held in several Arrow chunks
        # (e.g. a pandas frame made by pd.concat).
        frame = arrow.combine_chunks().to_pandas(types_mapper=pd.ArrowDtype)
        out: DataFrame = self._spark.createDataFrame(frame, schema=schema)
        return out

    def _from_path(self, table: Table, path: str) -> tuple[_Source, StructType]:
        local = not _URI.match(path)
        if local and not os.path.exists(path):
            raise InvalidParameterError("source", path, "does not exist")
        kind = _file_format(path)
        location = path
        if local:
            location = "file://" + os.path.abspath(path).replace(os.sep, "/")

        def reread() -> DataFrame:
            reader = self._spark.read
            if kind == "parquet":
                out: DataFrame = reader.parquet(location)
            else:
                sep = "\t" if kind == "tsv" else ","
                out = reader.csv(location, header=True, inferSchema=True, sep=sep, escape='"')
            return out

        frame = reread()
        source = self._view(table.name, frame)
        if local:
            source.version, source.path, source.reread = _file_version(path), path, reread
        else:
            source.version = None
        return source, frame.schema

    def _check_schema(self, table: Table, schema: StructType) -> None:
        """Check the declared columns against the source's schema (public: names and types)."""
        types = {f.name.lower(): f.dataType.simpleString().upper() for f in schema.fields}
        check_derived(table, list(types))
        if any(c.expression is not None for c in table.columns):
            try:
                with _quiet():
                    derived = self._spark.sql(f"SELECT * FROM {self.relation(table.name)}").schema
            except self._errors as error:
                raise InvalidParameterError(
                    "columns",
                    table.name,
                    f"a derived column cannot be computed: {_first_line(error)}",
                ) from None
            types = {f.name.lower(): f.dataType.simpleString().upper() for f in derived.fields}
        self._kinds[table.name] = check_columns(table, types, self.dialect)
        self._integers[table.name] = integer_typed(types, self.dialect)

    def _refresh(self, table: str) -> None:
        """Read a file source again if its files changed since (Spark lists files once)."""
        source = self._source_of(table)
        if source.path is None or source.reread is None:
            return
        version = _file_version(source.path)
        if version == source.version:
            return
        try:
            frame = source.reread()
        except self._errors as error:
            raise InvalidParameterError(
                "source", table, f"cannot be read: {_first_line(error)}"
            ) from None
        self._check_schema(self._tables[table], frame.schema)
        frame.createOrReplaceTempView(source.relation.name)
        source.version = version
        self._prepared.clear()

    # -- the engine's work ---------------------------------------------------------------------
    def _check_open(self) -> None:
        if self._closed:
            raise InvalidParameterError("engine", self, "is closed: open a new SparkEngine")

    def _source_of(self, table: str) -> _Source:
        self._check_open()
        if table not in self._sources:
            raise InvalidParameterError(
                "table", table, f"is not declared; declared: {', '.join(sorted(self._tables))}"
            )
        return self._sources[table]

    @property
    def tables(self) -> dict[str, Table]:
        """The registered tables, by name."""
        return dict(self._tables)

    def kinds(self, table: str) -> dict[str, Kind]:
        """Return the kind of each column of ``table``'s source (lower-cased names; public)."""
        self._source_of(table)  # refuses an undeclared table
        return dict(self._kinds[table])

    @property
    def spark(self) -> SparkSession:
        """The engine's own Spark session (ANSI off, UTC), where its views live."""
        return self._spark

    def relation(self, table: str) -> str:
        """Return the Spark SQL name under which ``table``'s rows are registered."""
        return self._relation(table).sql(dialect=self.dialect)

    def _relation(self, table: str) -> exp.Expr:
        self._source_of(table)  # refuses an undeclared table or a closed engine
        return self._read[table]

    def render(self, statement: exp.Query, table: str) -> str:
        """Return ``statement`` as Spark SQL, reading ``table``'s rows."""
        if not isinstance(statement, exp.Query):
            raise InvalidParameterError(
                "statement", type(statement).__name__, "must be a sqlglot query (SELECT ...)"
            )
        return render(statement, self._relation(table), self.dialect)

    def prepare(self, statement: exp.Query, table: str) -> None:
        """Bind ``statement`` without running it; refuse it if it does not fit the table's types.

        Spark analyses a query when it is named (``spark.sql``) and runs it only when its rows
        are asked for: binding reads the schema only, never rows, so its error (Spark's first
        line, which names columns and types) may be shown.

        Raises
        ------
        QueryError
            If Spark cannot parse or bind the statement.
        """
        text = self.render(statement, table)
        with self._lock:
            self._refresh(table)
            if text in self._prepared:
                return
            message = None
            try:
                with _quiet():
                    self._spark.sql(text)
            except self._errors as error:
                message = _first_line(error)
            if message is not None:
                raise QueryError(f"The query does not fit the table's types: {message}")
            if len(self._prepared) >= _PREPARED_CACHE:
                self._prepared.clear()
            self._prepared.add(text)

    def run(self, statement: exp.Query, table: str) -> dict[str, list[Any]]:
        """Run a bounded aggregate statement; return its columns as lists of Python values.

        Integers stay exact: Spark's integers come back as Python ``int`` and a DECIMAL with
        scale 0 (the curator's wide sums) as ``int`` too, never through float64. The result is
        small (one row per group). Errors propagate as Spark raised them: the caller (a
        session) must not show them to an analyst.
        """
        text = self.render(statement, table)
        with self._lock:
            self._refresh(table)
            with _quiet():
                frame = self._spark.sql(text)
                rows = frame.collect()
        fields = frame.schema.fields
        integral = [
            f.dataType.typeName() == "decimal" and getattr(f.dataType, "scale", None) == 0
            for f in fields
        ]
        return {f.name: [_value(row[i], integral[i]) for row in rows] for i, f in enumerate(fields)}

    def integer_columns(self, table: str) -> frozenset[str]:
        """Return ``table``'s columns of integer types (lower-cased names; public schema)."""
        return self._integers[table]

    def row_count(self, table: str) -> int | None:
        """Return None: a Spark table's count costs a job (see :class:`Engine`)."""
        return None

    def version(self, table: str) -> Hashable | None:
        """Return a token that changes whenever ``table``'s rows may; None when unknown.

        A pandas DataFrame, an Arrow table or a Spark DataFrame: one constant per registration
        (pandas and Arrow rows were copied into Spark; a Spark DataFrame is taken to be
        immutable). Local files: the (path, size, mtime_ns) of every file. A table of the
        catalog or a remote path (``s3a://`` ...): None.
        """
        with self._lock:
            source = self._source_of(table)
            if source.path is not None:
                return _file_version(source.path)
            return source.version

    def materialize(self, statement: exp.Query, table: str) -> exp.Table:
        """Run ``statement`` into a cached DataFrame under a fresh temporary view; return it.

        The view lives in the engine's session until :meth:`close`, which also frees the cache.
        """
        text = self.render(statement, table)
        with self._lock:
            self._refresh(table)
            name = self._name("m")
            with _quiet():
                frame = self._spark.sql(text).cache()
                self._cached.append(frame)
                frame.count()
                frame.createOrReplaceTempView(name)
            self._views.append(name)
        return _quoted(name)

    def exact(self, table: str, sql: str) -> dict[str, np.ndarray[Any, Any]]:
        """Run trusted SQL on a declared table's rows, without noise: for the data steward only.

        ``sql`` (Spark SQL) names the table's rows as ``{rows}``; the result's columns come back
        as arrays (masked where NULL; a DECIMAL with scale 0 as integers). Nothing is charged
        and nothing is private: this is how the steward's own mechanisms read their true
        statistics. It is never an answer for an analyst, and a session never exposes it.
        """
        relation = self.relation(table)
        with self._lock:
            self._refresh(table)
            with _quiet():
                frame = self._spark.sql(sql.replace("{rows}", relation))
                rows = frame.collect()
        return {
            f.name: _array([row[i] for row in rows], f.dataType)
            for i, f in enumerate(frame.schema.fields)
        }

    def close(self) -> None:
        """Drop the engine's views and free what it cached (idempotent).

        Spark itself keeps running: neither the session given nor the local one the engine
        started is stopped (another engine reuses it; it ends with the Python process, or with
        ``SparkSession.getActiveSession().stop()``).
        """
        with self._lock:
            if self._closed:
                return
            self._closed = True
            views = [(name, False) for name in self._views]
            views += [(name, True) for name in self._global_views]
            with _quiet():
                for frame in self._cached:
                    with contextlib.suppress(Exception):  # Spark may be stopped already
                        frame.unpersist()
                for name, shared in views:
                    with contextlib.suppress(Exception):
                        catalog = self._spark.catalog
                        drop = catalog.dropGlobalTempView if shared else catalog.dropTempView
                        drop(name)
            self._cached.clear()
            self._views.clear()
            self._global_views.clear()
            self._prepared.clear()

    def __repr__(self) -> str:
        state = ", closed" if self._closed else ""
        return f"SparkEngine(tables={list(self._tables)}{state})"
