"""The engine seam: what a curator needs from wherever the declared tables' rows live.

An :class:`Engine` registers declared :class:`~dpcurator.curator.Table` s, checks their columns
against the source's schema, binds a bounded statement without reading rows
(:meth:`Engine.prepare`), runs it (:meth:`Engine.run`, the only way a
:class:`~dpcurator.curator.Session` reads private data) and gives the data steward noiseless SQL
(:meth:`Engine.exact`). Two implementations: :class:`~dpcurator.curator.DuckDBEngine`
(in-process, the default) and :class:`~dpcurator.curator.SparkEngine` (a Spark session, local or
on a cluster).

Statements are sqlglot trees, written once by the planner and rendered per engine by
:func:`render`: the rows of the declared table are the placeholder table :data:`SOURCE`, which
the engine replaces by its own relation (a tree transform, never a text substitution).

Trust boundary: the schema of a declared source (column names and types) is public; its rows
are not. An engine's errors may name columns and types; a session never shows an analyst an
error raised while rows are read (see :meth:`~dpcurator.curator.Session.sql`).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from types import TracebackType
from typing import Any, ClassVar, Protocol, Self, runtime_checkable

import numpy as np
from sqlglot import exp

from dpcurator.curator._cache import Recent
from dpcurator.curator._rowwise import row_expression
from dpcurator.curator._table import Table
from dpcurator.curator._types import Kind, is_integer_type, kind_of_type
from dpcurator.errors import InvalidParameterError

__all__ = [
    "SOURCE",
    "ClosesOnExit",
    "Engine",
    "check_columns",
    "check_derived",
    "declared_tables",
    "integer_typed",
    "quote",
    "render",
    "with_derived",
]

SOURCE = "__source"
"""The placeholder table name under which a statement reads the declared table's rows."""

SOURCE_TABLE = exp.to_table(SOURCE)
""":data:`SOURCE` as a table node, the relation of a reported statement (never changed:
:func:`render` copies it)."""


@runtime_checkable
class Engine(Protocol):
    """Where the declared tables' rows live and where bounded statements run.

    ``dialect`` is the sqlglot dialect the engine's SQL is written in (``"duckdb"``,
    ``"spark"``).
    """

    dialect: ClassVar[str]

    @property
    def tables(self) -> dict[str, Table]:
        """The registered tables, by name."""
        ...

    def register(self, table: Table) -> None:
        """Register ``table``'s source and check its declared columns against its schema.

        Raises
        ------
        InvalidParameterError
            For a source the engine cannot read, a declared column the source lacks, or a
            column declared numeric (bounds, bins) whose type is not.
        """
        ...

    def kinds(self, table: str) -> Mapping[str, Kind]:
        """Return the kind of each column of ``table``'s source (lower-cased names; public)."""
        ...

    def render(self, statement: exp.Query, table: str) -> str:
        """Return ``statement`` as this engine's SQL, reading ``table``'s rows."""
        ...

    def prepare(self, statement: exp.Query, table: str) -> None:
        """Bind ``statement`` without reading rows; refuse it if it does not fit the schema.

        Raises
        ------
        QueryError
            If the engine cannot bind it (the error names columns and types only).
        """
        ...

    def run(self, statement: exp.Query, table: str) -> dict[str, list[Any]]:
        """Run a bounded aggregate statement; return its (small) result column by column.

        Integers come back exact (Python ``int``), never through float64. Errors propagate as
        raised: the caller must not show them to an analyst.
        """
        ...

    def version(self, table: str) -> Hashable | None:
        """Return a token that changes whenever ``table``'s rows may; None when unknown.

        Results derived from the rows (the units beyond their bounds) are reused only while
        the token is equal and not None.
        """
        ...

    def materialize(self, statement: exp.Query, table: str) -> exp.Table:
        """Run ``statement`` into a temporary table of the engine; return its name."""
        ...

    def integer_columns(self, table: str) -> frozenset[str]:
        """Return ``table``'s columns of integer types (lower-cased names; public schema)."""
        ...

    def row_count(self, table: str) -> int | None:
        """Return ``table``'s number of rows where it costs little to learn (metadata), or None.

        A session then reads the table's first rows to choose how to bound
        (:mod:`dpcurator.curator._sampling`); None keeps the default plan.
        """
        ...

    def exact(self, table: str, sql: str) -> dict[str, np.ndarray[Any, Any]]:
        """Run the steward's trusted SQL (``{rows}`` names the table's rows), without noise."""
        ...

    def close(self) -> None:
        """Release what the engine opened (idempotent)."""
        ...


def quote(name: str) -> str:
    """Quote an identifier (embedded quotes escaped), in DuckDB's syntax.

    >>> print(quote("people"), quote("odd name"))
    "people" "odd name"
    """
    return exp.to_identifier(name, quoted=True).sql(dialect="duckdb")


def declared_tables(tables: object) -> dict[str, Table]:
    """Check a table or a sequence of tables with distinct names; return them by name."""
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


class ClosesOnExit:
    """A context manager that calls ``self.close()`` on exit (engines)."""

    def close(self) -> None:
        """Release what was opened."""
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()


def check_columns(table: Table, types: Mapping[str, str], dialect: str) -> dict[str, Kind]:
    """Check ``table``'s declared columns against the source's types; return the columns' kinds.

    ``types`` maps the source's lower-cased column names to their types, as the engine (of
    ``dialect``) names them. The schema is public; the rows are not. A column declared numeric
    (bounds or bins) must have a numeric (or boolean) type, and a text column's domain must hold
    text only: comparing text with a number casts every row's text, which fails (DuckDB) or
    gives NULL (Spark) on some values, an outcome that would depend on the data. The kinds
    returned are what :func:`~dpcurator.curator._types.check_where_types` checks filters with.

    Raises
    ------
    InvalidParameterError
        For a declared column the source lacks or whose type does not fit its declaration.
    """
    kinds = {name: kind_of_type(kind, dialect) for name, kind in types.items()}
    for column in table.columns:
        kind = types.get(column.name.lower())
        if kind is None:
            raise InvalidParameterError(
                "columns",
                column.name,
                f"is declared but the source of {table.name!r} has no such column "
                f"(it has: {', '.join(types)})",
            )
        numeric = kinds[column.name.lower()] in (Kind.NUMBER, Kind.BOOLEAN)
        if (column.bounds is not None or column.bins is not None) and not numeric:
            raise InvalidParameterError(
                "columns",
                column.name,
                f"is declared numeric (bounds or bins) but its type in the source is {kind}",
            )
        others = [v for v in column.domain or () if not isinstance(v, str)]
        if kinds[column.name.lower()] is Kind.TEXT and others:
            raise InvalidParameterError(
                "columns",
                column.name,
                f"has type {kind} in the source, so its domain must hold text only "
                f"(it holds {others[0]!r}): write the values as strings",
            )
    return kinds


def integer_typed(types: Mapping[str, str], dialect: str) -> frozenset[str]:
    """Return the columns of integer types among ``types`` (lower-cased names: type names)."""
    return frozenset(name for name, kind in types.items() if is_integer_type(kind, dialect))


def with_derived(relation: exp.Expr, table: Table) -> exp.Expr:
    """Return ``relation``'s rows with ``table``'s derived columns appended.

    Each is computed with TRY semantics (NULL where it fails on a row), so that no row can make
    a statement fail. Without derived columns, ``relation`` itself.
    """
    derived = [c for c in table.columns if c.expression is not None]
    if not derived:
        return relation
    items: list[exp.Expr] = [exp.Star()]
    for column in derived:
        tree = row_expression(column.expression, column.name)
        items.append(exp.alias_(exp.Try(this=tree), column.name, quoted=True))
    return exp.select(*items).from_(relation.copy()).subquery("__derived")


def check_derived(table: Table, source_columns: Sequence[str]) -> None:
    """Refuse a derived column named like a column of the source (lower-cased names)."""
    taken = set(source_columns)
    for column in table.columns:
        if column.expression is not None and column.name.lower() in taken:
            raise InvalidParameterError(
                "columns",
                column.name,
                f"is a derived column named like a column of the source of {table.name!r}: "
                "give it another name",
            )


def _spark_fixes(node: exp.Expr) -> exp.Expr:
    """Adapt a tree to Spark SQL with ANSI mode off (how a SparkEngine runs).

    - TRY is implicit (a failing expression is NULL), so ``TRY(x)`` is ``x``;
    - CTEs take no MATERIALIZED hint;
    - a SUM of BIGINT wraps around on overflow, so exact integer sums are DECIMAL(38, 0) sums.
    """
    if isinstance(node, exp.Try):
        inner: exp.Expr = node.this
        return inner
    if isinstance(node, exp.CTE) and node.args.get("materialized") is not None:
        node.set("materialized", None)  # in place, so the CTE's body is still transformed
    if (
        isinstance(node, exp.Sum)
        and isinstance(node.this, exp.Cast)
        and node.this.to.is_type(exp.DataType.Type.BIGINT)
    ):
        decimal = exp.DataType.build("DECIMAL(38, 0)")
        return exp.Sum(this=exp.cast(node.this.this.copy(), decimal))
    return node


_DIALECT_FIXES: dict[str, Callable[[exp.Expr], exp.Expr]] = {"spark": _spark_fixes}


_RENDERED: Recent[tuple[exp.Query, exp.Expr, str]] = Recent(512)
"""The SQL text of recently rendered statements, keyed by the statement's and the relation's
identities (the entry keeps both objects, so that their ids are not reused) and the dialect: a
plan's statements are rendered to bind them, to run them and to report them, and a session
reuses its plans, so most renders repeat (trees are never changed once built)."""


def render(statement: exp.Query, relation: exp.Expr, dialect: str) -> str:
    """Render ``statement`` in ``dialect`` with :data:`SOURCE` replaced by ``relation``.

    >>> import sqlglot
    >>> tree = sqlglot.parse_one("SELECT COUNT(*) AS n FROM __source")
    >>> render(tree, exp.to_table("people"), "spark")
    'SELECT COUNT(*) AS n FROM people'
    """
    key = (id(statement), id(relation), dialect)
    kept = _RENDERED.get(key)
    if kept is None or kept[0] is not statement or kept[1] is not relation:
        kept = (statement, relation, _render(statement, relation, dialect))
        _RENDERED.put(key, kept)
    return kept[2]


def _render(statement: exp.Query, relation: exp.Expr, dialect: str) -> str:

    def bind(node: exp.Expr) -> exp.Expr:
        if isinstance(node, exp.Table) and node.name == SOURCE and not node.args.get("db"):
            out = relation.copy()
            if node.args.get("alias") is not None or isinstance(out, exp.Table):
                out.set("alias", node.args.get("alias"))
            return out
        return node

    bound = statement.transform(bind)
    fix = _DIALECT_FIXES.get(dialect)
    if fix is not None:
        bound = bound.transform(fix, copy=False)
    return bound.sql(dialect=dialect, copy=False)  # bound is this call's own copy
