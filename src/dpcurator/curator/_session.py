"""Sessions: the trusted curator answering aggregate queries under a budget, with a ledger.

A query's way through a :class:`Session`: parse and check (refusals cost nothing and read no
data) -> plan (measurements, budget split, privacy events, bounded SQL) -> budget check against
the ledger -> the engine prepares the SQL (errors that do not depend on the data are refusals)
-> the engine runs it (DuckDB, in-process) -> noise on the small aggregated result -> the ledger
entry is committed -> the :class:`~dpcurator.curator.QueryRelease` is returned. An engine or noise
failure after the data was read is charged (it could depend on the data) and reported.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self

import duckdb
import numpy as np
import pandas as pd
import pyarrow as pa
from sqlglot import exp

from dpcurator._validation import check_probability
from dpcurator.accounting import ACCOUNTANT_NAMES, Budget
from dpcurator.curator._ledger import Ledger
from dpcurator.curator._measure import compute, fetch
from dpcurator.curator._plan import Plan, make_plan, quote
from dpcurator.curator._release import QueryRelease
from dpcurator.curator._sql import parse_query
from dpcurator.curator._table import Table, read_declaration
from dpcurator.errors import InvalidParameterError, QueryError
from dpcurator.noise import RandomSource, resolve_source

if TYPE_CHECKING:
    from dpcurator.curator._builder import QueryBuilder

__all__ = ["DEFAULT_ACCOUNTANT", "Session"]

DEFAULT_ACCOUNTANT = "basic"
"""The session's default accountant. Queries are pure epsilon-DP measurements (plus (epsilon,
delta) partition selection); among the accountants valid when every query and its budget are
chosen adaptively (fully adaptive composition, Rogers et al. 2016), basic composition is exact
for such a sequence up to the first few dozen queries; ``"zcdp"`` (also fully adaptive) is
tighter for long sessions of many small queries without partition selection."""

_NUMERIC = (
    "TINYINT",
    "SMALLINT",
    "INTEGER",
    "BIGINT",
    "HUGEINT",
    "UTINYINT",
    "USMALLINT",
    "UINTEGER",
    "UBIGINT",
    "UHUGEINT",
    "FLOAT",
    "DOUBLE",
    "DECIMAL",
    "BOOLEAN",
)


def _tables(tables: object) -> dict[str, Table]:
    items = [tables] if isinstance(tables, Table) else tables
    if not isinstance(items, Sequence) or isinstance(items, str) or not items:
        raise InvalidParameterError("tables", tables, "must be a Table or a list of Table")
    out: dict[str, Table] = {}
    for table in items:
        if not isinstance(table, Table):
            raise InvalidParameterError("tables", table, "must contain Table declarations")
        if table.name.lower() in {n.lower() for n in out}:
            raise InvalidParameterError("tables", table.name, "declare each table name once")
        out[table.name] = table
    return out


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
    adaptive_parameters : bool, default True
        False declares that all queries and their budgets are fixed in advance.
    source : RandomSource, optional
        Randomness (secure by default; a seeded source only for tests and simulations).
    confidence : float, default 0.95
        Level of the released intervals.
    connection : duckdb.DuckDBPyConnection, optional
        The DuckDB connection to run in (default: a new in-process one; a table whose source
        is a connection runs in that one).

    Examples
    --------
    >>> import pandas as pd
    >>> from dpcurator.accounting import Budget
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
        adaptive_parameters: bool = True,
        source: RandomSource | None = None,
        confidence: float = 0.95,
        connection: duckdb.DuckDBPyConnection | None = None,
    ) -> None:
        self._tables = _tables(tables)
        if not isinstance(budget, Budget):
            raise InvalidParameterError("budget", budget, "must be a Budget(epsilon, delta)")
        name = DEFAULT_ACCOUNTANT if accountant is None else accountant
        if name not in ACCOUNTANT_NAMES:
            raise InvalidParameterError(
                "accountant", accountant, f"must be one of {', '.join(ACCOUNTANT_NAMES)}"
            )
        self._confidence = check_probability(
            confidence, "confidence", open_left=True, open_right=True
        )
        self._source = resolve_source(source)
        path = _default_ledger(self._tables) if ledger is None else ledger
        self._lock = threading.RLock()
        self._prepared: set[str] = set()
        self._connection, self._owns_connection = self._connect(connection)
        self._relations = {t.name: self._register(t) for t in self._tables.values()}
        for table in self._tables.values():
            self._check_schema(table)
        self._ledger = Ledger(
            path, budget=budget, accountant=name, adaptive_parameters=adaptive_parameters
        )

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

        The ledger defaults to ``<name>.ledger.sqlite`` next to the TOML file.
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
            source=source,
            confidence=confidence,
        )

    # -- the engine --------------------------------------------------------------------------
    def _connect(
        self, connection: duckdb.DuckDBPyConnection | None
    ) -> tuple[duckdb.DuckDBPyConnection, bool]:
        given = [
            t.source
            for t in self._tables.values()
            if isinstance(t.source, duckdb.DuckDBPyConnection)
        ]
        if connection is not None:
            if not isinstance(connection, duckdb.DuckDBPyConnection):
                raise InvalidParameterError("connection", connection, "must be a DuckDB connection")
            given.append(connection)
        if any(c is not given[0] for c in given):
            raise InvalidParameterError(
                "tables", "<connections>", "must all live in the same DuckDB connection"
            )
        return (given[0], False) if given else (duckdb.connect(), True)

    def _register(self, table: Table) -> str:
        source = table.source
        view = quote(f"__dpcurator_{table.name}")
        conn = self._connection
        if isinstance(source, duckdb.DuckDBPyConnection):
            if table.source_table is None:
                raise InvalidParameterError(
                    "source_table", None, f"must name the table of {table.name!r} in the connection"
                )
            return exp.to_table(table.source_table, dialect="duckdb").sql(dialect="duckdb")
        if isinstance(source, pd.DataFrame | pa.Table):
            conn.register(f"__dpcurator_{table.name}", source)
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
        lowered = path.lower()
        literal = exp.convert(path).sql(dialect="duckdb")
        if lowered.endswith((".parquet", ".pq")):
            reader = f"read_parquet({literal})"
        elif lowered.endswith((".csv", ".tsv", ".csv.gz", ".tsv.gz", ".txt")):
            reader = f"read_csv_auto({literal})"
        elif lowered.endswith((".duckdb", ".db", ".ddb")):
            if table.source_table is None:
                raise InvalidParameterError(
                    "source_table", None, f"must name the table of {table.name!r} in {path}"
                )
            alias = quote(f"__dpcurator_db_{table.name}")
            conn.execute(f"ATTACH {literal} AS {alias} (READ_ONLY)")
            inner = exp.to_table(table.source_table, dialect="duckdb")
            reader = f"{alias}.{inner.sql(dialect='duckdb')}"
            conn.execute(f"CREATE TEMP VIEW {view} AS SELECT * FROM {reader}")
            return view
        else:
            raise InvalidParameterError(
                "source", path, "must end in .parquet, .csv, .tsv, .csv.gz, .duckdb or .db"
            )
        conn.execute(f"CREATE TEMP VIEW {view} AS SELECT * FROM {reader}")
        return view

    def _check_schema(self, table: Table) -> None:
        """Check the declared columns against the source's schema (public: names and types)."""
        relation = self._relations[table.name]
        try:
            described = self._connection.execute(f"DESCRIBE SELECT * FROM {relation}").fetchall()
        except duckdb.Error as error:
            raise InvalidParameterError("source", table.name, f"cannot be read: {error}") from None
        types = {str(row[0]).lower(): str(row[1]).upper() for row in described}
        for column in table.columns:
            kind = types.get(column.name.lower())
            if kind is None:
                raise InvalidParameterError(
                    "columns",
                    column.name,
                    f"is declared but the source of {table.name!r} has no such column "
                    f"(it has: {', '.join(str(r[0]) for r in described)})",
                )
            numeric = kind.startswith(_NUMERIC)
            if (column.bounds is not None or column.bins is not None) and not numeric:
                raise InvalidParameterError(
                    "columns",
                    column.name,
                    f"is declared numeric (bounds or bins) but its type in the source is {kind}",
                )

    def _run(self, sql: str) -> dict[str, np.ndarray[Any, Any]]:
        result = self._connection.execute(sql).fetchnumpy()
        return {name: np.asarray(values) for name, values in result.items()}

    def _bind(self, plan: Plan, relation: str) -> tuple[str, str | None]:
        sql = plan.sql.replace("FROM __source", f"FROM {relation}", 1)
        qsql = None
        if plan.quantile_sql is not None:
            qsql = plan.quantile_sql.replace("FROM __source", f"FROM {relation}", 1)
        return sql, qsql

    # -- queries -----------------------------------------------------------------------------
    def plan(self, query: str, *, epsilon: float, delta: float = 0.0) -> Plan:
        """Check and plan ``query`` without reading data or spending (what :meth:`sql` would do).

        Raises
        ------
        QueryError
            If the query is not a supported aggregate over a declared table.
        """
        parsed = parse_query(query, self._tables)
        plan = make_plan(parsed, epsilon=epsilon, delta=delta)
        sql, qsql = self._bind(plan, self._relations[parsed.table.name])
        for statement in (sql, qsql):
            if statement is not None:
                self._prepare(statement)
        return plan

    def _prepare(self, sql: str) -> None:
        """Bind the SQL without running it: errors here do not depend on the data."""
        if sql in self._prepared:
            return
        try:
            self._connection.execute(f"EXPLAIN {sql}")
        except duckdb.Error as error:
            raise QueryError(
                f"The query does not fit the table's types: {str(error).splitlines()[0]}"
            ) from None
        if len(self._prepared) > 256:
            self._prepared.clear()
        self._prepared.add(sql)

    def sql(self, query: str, *, epsilon: float, delta: float = 0.0) -> QueryRelease:
        """Answer an aggregate SQL query with differential privacy.

        Parameters
        ----------
        query : str
            ``SELECT <group keys>, <aggregates> FROM <table> [WHERE ...] [GROUP BY ...]
            [ORDER BY ...] [LIMIT n]`` over one declared table. Aggregates: COUNT(*),
            COUNT(column), COUNT(DISTINCT <privacy unit>), SUM, AVG, VARIANCE/VAR_SAMP/VAR_POP,
            STDDEV/STDDEV_SAMP/STDDEV_POP, MEDIAN, QUANTILE(column, q), PERCENTILE_CONT,
            HISTOGRAM(column [, edges...]).
        epsilon : float
            The query's budget, split evenly over its measurements (the split is reported).
        delta : float, default 0
            Needed (> 0) when group keys have no declared domain (partition selection).

        Returns
        -------
        QueryRelease

        Raises
        ------
        QueryError
            The query is not supported (nothing read, nothing spent).
        BudgetExceededError
            The query would exceed the budget (nothing read, nothing spent).
        """
        with self._lock:
            plan = self.plan(query, epsilon=epsilon, delta=delta)
            self._ledger.check(plan.events)  # refuses before any data is read
            sql, qsql = self._bind(plan, self._relations[plan.query.table.name])
            try:
                exact = fetch(plan, self._run, sql, qsql)
                table, intervals = compute(
                    plan, exact, source=self._source, confidence=self._confidence
                )
            except Exception as error:
                # The data was read: the failure may depend on it, so the query is charged.
                entry = self._ledger.record(f"{query} -- failed", plan.events)
                raise QueryError(
                    f"The query failed while running ({error}); it read the data, so it was "
                    f"charged (ledger entry {entry.id})."
                ) from error
            entry = self._ledger.record(query, plan.events)
        return QueryRelease(
            query=query,
            table=table,
            value_columns=tuple(a.alias for a in plan.query.aggregates),
            intervals=intervals,
            split=plan.measurements,
            events=plan.events,
            charged=entry.charged,
            spent=entry.spent,
            remaining=entry.remaining,
            entry_id=entry.id,
            confidence=self._confidence,
            bounded_sql=sql,
            threshold=plan.threshold,
        )

    def query(self, table: str) -> QueryBuilder:
        """Start a query on ``table`` with the builder (see :class:`QueryBuilder`)."""
        from dpcurator.curator._builder import QueryBuilder  # noqa: PLC0415 - a cycle otherwise

        if table not in self._tables:
            raise QueryError(
                f"Table {table!r} is not declared in this session; declared: "
                f"{', '.join(sorted(self._tables))}."
            )
        return QueryBuilder(self, table)

    def exact(self, table: str, sql: str) -> dict[str, np.ndarray[Any, Any]]:
        """Run trusted SQL on a declared table's rows, without noise: for the data steward only.

        ``sql`` names the table's rows as ``{rows}``; the result's columns come back as arrays.
        Nothing is charged and nothing is private: this is the engine the steward's own
        mechanisms read their true statistics through (the hierarchical releases count every
        node with it, then add noise), never an answer for an analyst.

        Examples
        --------
        >>> import pandas as pd
        >>> from dpcurator.accounting import Budget
        >>> from dpcurator.curator import Column, Table
        >>> rows = pd.DataFrame({"state": ["IL", "IL", "OH"]})
        >>> table = Table("people", rows, columns=[Column("state")])
        >>> with Session(table, Budget(1.0), ledger=":memory:") as session:
        ...     counts = session.exact("people", "SELECT COUNT(*) AS n FROM {rows}")
        >>> int(counts["n"][0])
        3
        """
        if table not in self._tables:
            raise InvalidParameterError(
                "table", table, f"is not declared; declared: {', '.join(sorted(self._tables))}"
            )
        with self._lock:
            result = self._connection.execute(sql.replace("{rows}", self._relations[table]))
            return dict(result.fetchnumpy())

    # -- state ---------------------------------------------------------------------------------
    @property
    def tables(self) -> dict[str, Table]:
        """The declared tables, by name."""
        return dict(self._tables)

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
            if self._owns_connection:
                self._connection.close()

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
            f"Session(tables={list(self._tables)}, budget={self.budget!r}, "
            f"remaining={self.remaining!r}, ledger={self._ledger.path!r})"
        )
