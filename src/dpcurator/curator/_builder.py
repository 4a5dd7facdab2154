r"""A small Python query builder: the same queries as SQL, composed with methods.

The builder writes SQL with sqlglot (identifiers quoted, the WHERE condition parsed on its own)
and hands it to :meth:`Session.sql`, so a built query goes through exactly the same checks,
planning and accounting as a written one.

Examples
--------
>>> import pandas as pd
>>> from dpcurator.accounting import Budget
>>> from dpcurator.curator import Column, Session, Table
>>> from dpcurator.noise import InsecureSeededSource
>>> t = Table("people", pd.DataFrame({"state": ["CA", "NY"], "age": [30, 50]}),
...           columns=[Column("state", domain=["CA", "NY"]), Column("age", lower=0, upper=100)])
>>> s = Session(t, Budget(1.0), ledger=":memory:", source=InsecureSeededSource(0))
>>> q = s.query("people").where("age >= 18").group_by("state").count("n").mean("age")
>>> print(q.to_sql().replace(" FROM", "\n FROM"))
SELECT "state", COUNT(*) AS "n", AVG("age") AS "avg_age"
 FROM people WHERE age >= 18 GROUP BY "state"
>>> q.run(epsilon=0.5).table["state"].tolist()
['CA', 'NY']
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError, TokenError

from dpcurator._validation import check_integer
from dpcurator.curator._release import QueryRelease
from dpcurator.errors import InvalidParameterError, QueryError

if TYPE_CHECKING:
    from dpcurator.curator._session import Session

__all__ = ["QueryBuilder"]


def _column(name: str) -> exp.Column:
    if not isinstance(name, str) or not name:
        raise InvalidParameterError("column", name, "must be a column name")
    return exp.column(name, quoted=True)


class QueryBuilder:
    """Compose an aggregate query on one table of a :class:`Session`; methods chain.

    Each method returns the builder. :meth:`run` answers it (through :meth:`Session.sql`);
    :meth:`to_sql` shows the SQL.
    """

    def __init__(self, session: Session, table: str) -> None:
        self._session = session
        self._table = table
        self._where: list[exp.Expr] = []
        self._keys: list[str] = []
        self._items: list[exp.Expr] = []
        self._order: list[tuple[str, bool]] = []
        self._limit: int | None = None

    def _add(self, node: exp.Expr, alias: str | None) -> QueryBuilder:
        self._items.append(exp.alias_(node, alias, quoted=True) if alias else node)
        return self

    def where(self, condition: str) -> QueryBuilder:
        """Keep the rows satisfying ``condition`` (an SQL condition on declared columns)."""
        if not isinstance(condition, str) or not condition.strip():
            raise InvalidParameterError("condition", condition, "must be an SQL condition")
        try:
            parsed = sqlglot.parse_one(condition, into=exp.Condition, dialect="duckdb")
        except (ParseError, TokenError) as error:
            raise QueryError(f"The condition {condition!r} is not valid SQL: {error}") from None
        self._where.append(parsed)
        return self

    def group_by(self, *columns: str) -> QueryBuilder:
        """Group by these declared columns (their domain, or private partition selection)."""
        for name in columns:
            _column(name)
            self._keys.append(name)
        return self

    def count(self, alias: str | None = None) -> QueryBuilder:
        """COUNT(*)."""
        return self._add(exp.Count(this=exp.Star()), alias or "count")

    def count_distinct(self, column: str, alias: str | None = None) -> QueryBuilder:
        """COUNT(DISTINCT column), for the privacy unit's column."""
        node = exp.Count(this=exp.Distinct(expressions=[_column(column)]))
        return self._add(node, alias)

    def sum(self, column: str, alias: str | None = None) -> QueryBuilder:
        """SUM(column) of a column with declared bounds."""
        return self._add(exp.Sum(this=_column(column)), alias or f"sum_{column}")

    def mean(self, column: str, alias: str | None = None) -> QueryBuilder:
        """AVG(column)."""
        return self._add(exp.Avg(this=_column(column)), alias or f"avg_{column}")

    def variance(self, column: str, alias: str | None = None) -> QueryBuilder:
        """VARIANCE(column) (sample variance)."""
        return self._add(exp.Variance(this=_column(column)), alias or f"var_{column}")

    def stddev(self, column: str, alias: str | None = None) -> QueryBuilder:
        """STDDEV(column) (sample standard deviation)."""
        return self._add(exp.Stddev(this=_column(column)), alias or f"stddev_{column}")

    def median(self, column: str, alias: str | None = None) -> QueryBuilder:
        """MEDIAN(column), by the exponential mechanism."""
        return self._add(exp.Median(this=_column(column)), alias or f"median_{column}")

    def quantile(self, column: str, q: float, alias: str | None = None) -> QueryBuilder:
        """QUANTILE(column, q), by the exponential mechanism."""
        node = exp.Quantile(this=_column(column), quantile=exp.convert(q))
        return self._add(node, alias)

    def histogram(self, column: str, bins: Sequence[float] | None = None) -> QueryBuilder:
        """HISTOGRAM(column) over the declared bins or the given edges."""
        args: list[exp.Expr] = [_column(column)]
        args += [exp.convert(float(edge)) for edge in bins or ()]
        return self._add(exp.Anonymous(this="HISTOGRAM", expressions=args), None)

    def order_by(self, column: str, *, descending: bool = False) -> QueryBuilder:
        """Sort the released table by an output column (post-processing)."""
        self._order.append((column, descending))
        return self

    def limit(self, rows: int) -> QueryBuilder:
        """Keep the first ``rows`` released rows (post-processing)."""
        self._limit = check_integer(rows, "rows", minimum=0)
        return self

    def to_sql(self) -> str:
        """Return the SQL this builder stands for."""
        select = exp.select(*[_column(k) for k in self._keys], *self._items).from_(
            exp.to_table(self._table, quoted=True)
        )
        for condition in self._where:
            select = select.where(condition)
        if self._keys:
            select = select.group_by(*[_column(k) for k in self._keys])
        for name, desc in self._order:
            select = select.order_by(exp.Ordered(this=_column(name), desc=desc))
        if self._limit is not None:
            select = select.limit(self._limit)
        return select.sql(dialect="duckdb")

    def run(self, *, epsilon: float, delta: float = 0.0) -> QueryRelease:
        """Answer the query (see :meth:`Session.sql`)."""
        return self._session.sql(self.to_sql(), epsilon=epsilon, delta=delta)

    def __repr__(self) -> str:
        return f"QueryBuilder({self.to_sql()!r})"
