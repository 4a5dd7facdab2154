"""Marginals of a declared table, measured in the curator's engine with its contribution bounding.

A marginal over columns ``(a, b, ...)`` is the vector of counts of the rows in each cell of the
product of their public domains: a categorical column takes its declared ``domain``, a numeric
one its declared ``bins`` (a value below the first edge counts in the first bin, one above the
last in the last, NULL in none). A marginal is read as one aggregate query,

``SELECT <a>, <b>, COUNT(*) FROM <table> GROUP BY <a>, <b>``

(a binned column being the computed key ``CASE WHEN x < e1 THEN 0 ... END``), planned by the
session (:meth:`~dpcurator.curator.Session.plan`): the plan bounds every privacy unit's
contribution as the table declares it (at most ``k`` rows, in at most ``g`` cells, at most
``c`` rows per cell) and binds the statement in the engine, without reading a row. Its L1 and
L2 sensitivities follow from the plan's bounds alone
(:func:`~dpcurator.curator.count_sensitivities`), and it is measured inside the session
(:meth:`~dpcurator.curator.Session.charged_measurements`): the synthesis never holds an exact
count.

Many marginals, one read (:func:`plan_marginals`). When the table declares no
``max_rows_per_group`` below ``max_rows_per_unit`` (``c = k``), every marginal's sensitivities
are ``(k, k^2)`` whatever its columns, and so are those of a marginal summed from a larger
bounded ``GROUP BY`` (a :class:`~dpcurator.curator._steward.Projection`: the unit's change
keeps its L1 norm, at most ``k``). The marginals are then grouped into a few ``GROUP BY`` s over
unions of their columns (each within the planner's limit on key combinations), each planned
once and read once in the engine, and every marginal is summed from its group's bounded counts
steward-side: the same noise and the same charge per measurement as its own query, a few plans
and reads instead of one per marginal. Otherwise each marginal has its own query.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpcurator.curator import ChargedMeasurements, Plan, Session, Table, count_sensitivities
from dpcurator.curator._steward import Projection
from dpcurator.curator._table import MAX_DOMAIN, check_bins
from dpcurator.errors import InvalidParameterError, QueryError

__all__ = ["Attribute", "MarginalQuery", "attributes", "plan_marginals", "sigma_for"]


@dataclass(frozen=True)
class Attribute:
    """A column of the synthetic table: its public values (categories, or bins of a number).

    Attributes
    ----------
    name : str
        The declared column.
    values : tuple
        The categories (declared ``domain``), or for a binned column the bin indices.
    edges : tuple of float or None
        The bins' edges of a numeric column (None for a categorical one).
    """

    name: str
    values: tuple[Any, ...]
    edges: tuple[float, ...] | None = None

    @property
    def size(self) -> int:
        """How many values the attribute takes."""
        return len(self.values)

    @property
    def labels(self) -> tuple[str, ...]:
        """Human-readable values: categories, or ``[a, b)`` intervals (the last closed)."""
        if self.edges is None:
            return tuple(str(v) for v in self.values)
        last = len(self.edges) - 2
        return tuple(
            f"[{a:g}, {b:g}{']' if i == last else ')'}"
            for i, (a, b) in enumerate(zip(self.edges, self.edges[1:], strict=False))
        )

    def sql(self) -> str:
        """Return the group key in SQL (the column quoted, or its bin index as a CASE)."""
        column = '"' + self.name.replace('"', '""') + '"'
        if self.edges is None:
            return column
        inner = self.edges[1:-1]
        whens = " ".join(f"WHEN {column} < {e!r} THEN {i}" for i, e in enumerate(inner))
        return (
            f"CASE {whens} WHEN {column} >= {inner[-1]!r} THEN {len(inner)} END"
            if inner
            else (f"CASE WHEN {column} IS NOT NULL THEN 0 END")
        )


def attributes(
    table: Table,
    columns: Sequence[str] | None,
    bins: Mapping[str, Sequence[float]] | None = None,
) -> list[Attribute]:
    """Return the attributes of ``columns`` (default: every declared column with a domain or bins).

    Raises
    ------
    QueryError
        For a column that is not declared, is the privacy unit, is named twice, or has neither
        a public domain nor bins (nor bins given in ``bins``).
    """
    extra = dict(bins or {})
    unit = table.unit_column
    if columns is None:
        names = [
            c.name
            for c in table.columns
            if c.name != unit and (c.domain is not None or c.bins is not None or c.name in extra)
        ]
        if not names:
            raise QueryError(
                f"Table {table.name!r} declares no column with a public domain or bins: declare "
                "domains (categories) or bins (numbers) for the columns to synthesise."
            )
    else:
        if isinstance(columns, str) or not isinstance(columns, Sequence):
            raise InvalidParameterError("columns", columns, "must be a list of column names")
        names = [table.column(str(name)).name for name in columns]  # QueryError if undeclared
    if len(set(names)) != len(names) or not names:
        raise InvalidParameterError("columns", columns, "must name each column once, at least one")
    for name in extra:
        table.column(name)
    out = []
    for name in names:
        column = table.column(name)
        if name == unit:
            raise QueryError(
                f"Column {name!r} is the privacy unit: an identifier is never synthesised; "
                "leave it out of columns."
            )
        edges = check_bins(extra[name], f"bins[{name!r}]") if name in extra else column.bins
        if edges is not None:
            out.append(Attribute(name, tuple(range(len(edges) - 1)), tuple(edges)))
        elif column.domain is not None:
            out.append(Attribute(name, tuple(column.domain)))
        else:
            raise QueryError(
                f"Column {name!r} has neither a public domain nor bins, so its values cannot "
                f"be synthesised: declare domain = [...] (categories) or bins = [...] (numbers) "
                f"for it, or pass bins={{{name!r}: [...]}}."
            )
    return out


def sigma_for(l2sq: int, rho: Fraction) -> float:
    """Return the smallest float ``sigma`` found with ``Delta_2^2 / (2 sigma^2) <= rho`` (exact)."""
    if rho <= 0:
        raise InvalidParameterError("rho", float(rho), "must be > 0")
    sigma = math.sqrt(l2sq / (2.0 * float(rho)))
    while Fraction(l2sq) / (2 * Fraction(sigma) ** 2) > rho:
        sigma = math.nextafter(sigma, math.inf)
    return sigma


@dataclass
class MarginalQuery:
    """One marginal: its attributes (indices, ascending), what is read, sensitivities and cells.

    ``measured`` is the marginal's own plan, or a projection of a plan over more columns (see
    :func:`plan_marginals`); ``sql`` is the statement that plan runs.
    """

    clique: tuple[int, ...]
    sql: str
    measured: Plan | Projection
    l1: int
    l2sq: int
    cells: int
    keys: tuple[tuple[Any, ...], ...] = field(repr=False)
    """The group keys of its cells, in C order over the attributes' values (public)."""

    @classmethod
    def build(
        cls, session: Session, table: Table, attrs: Sequence[Attribute], clique: tuple[int, ...]
    ) -> MarginalQuery:
        """Write and plan the marginal's own query (bound in the engine; no row read)."""
        sql, plan = _planned(session, table, attrs, clique)
        return cls.of(plan, sql, attrs, clique, clique)

    @classmethod
    def of(
        cls,
        plan: Plan,
        sql: str,
        attrs: Sequence[Attribute],
        group: tuple[int, ...],
        clique: tuple[int, ...],
    ) -> MarginalQuery:
        """Return the marginal ``clique`` of a plan grouped by ``group`` (a superset of it)."""
        measured: Plan | Projection = (
            plan if group == clique else Projection(plan, tuple(group.index(i) for i in clique))
        )
        l1, l2sq = count_sensitivities(measured)
        cells = tuple(itertools.product(*(attrs[i].values for i in clique)))
        return cls(clique, sql, measured, l1, l2sq, len(cells), cells)

    def noisy(self, steps: ChargedMeasurements, sigma: float) -> NDArray[np.float64]:
        """Measure the counts with discrete Gaussian noise of parameter ``sigma`` (exact sampler).

        Inside the session, through the measurements charged for the synthesis
        (:meth:`~dpcurator.curator.Session.charged_measurements`): ``rho``-zCDP with ``rho =
        Delta_2^2 / (2 sigma^2)`` for add/remove of one privacy unit, ``Delta_2`` the counts'
        L2 sensitivity under the plan's bounds (Canonne, Kamath and Steinke 2020, Theorem 14).
        """
        return steps.gaussian(self.measured, self.keys, sigma)


def _planned(
    session: Session, table: Table, attrs: Sequence[Attribute], group: tuple[int, ...]
) -> tuple[str, Plan]:
    """Write and plan ``SELECT <keys>, COUNT(*) ... GROUP BY <keys>`` (nothing read)."""
    keys = [attrs[i].sql() for i in group]
    name = '"' + table.name.replace('"', '""') + '"'
    sql = f"SELECT {', '.join(keys)}, COUNT(*) AS n FROM {name} GROUP BY {', '.join(keys)}"
    return sql, session.plan(sql, epsilon=1.0)  # the bounds; its own noise is never used


def groups_for(
    sizes: Sequence[int], cliques: Sequence[tuple[int, ...]], limit: int = MAX_DOMAIN
) -> list[tuple[int, ...]]:
    """Return attribute sets, each within ``limit`` cells, such that each clique is in one.

    Greedy: cliques in decreasing size, each added to the group whose union with it has the
    fewest cells within the limit, else starting a group.

    >>> groups_for((2, 3, 4), [(0,), (1,), (2,), (0, 1), (1, 2)], limit=12)
    [(0, 1), (1, 2)]
    """
    groups: list[set[int]] = []
    for clique in sorted(cliques, key=lambda c: (-len(c), c)):
        if any(set(clique) <= g for g in groups):
            continue
        best: tuple[int, int] | None = None
        for at, group in enumerate(groups):
            cells = math.prod(sizes[a] for a in group | set(clique))
            if cells <= limit and (best is None or cells < best[0]):
                best = (cells, at)
        if best is None:
            groups.append(set(clique))
        else:
            groups[best[1]] |= set(clique)
    return [tuple(sorted(g)) for g in groups]


def plan_marginals(
    session: Session,
    table: Table,
    attrs: Sequence[Attribute],
    cliques: Sequence[tuple[int, ...]],
) -> dict[tuple[int, ...], MarginalQuery]:
    """Plan every marginal in ``cliques`` (nothing read); see the module's docstring.

    With ``c = k`` (no ``max_rows_per_group`` below ``max_rows_per_unit``), the marginals are
    projections of a few plans grouped by unions of their columns, each with the
    sensitivities ``(k, k^2)`` its own plan would have; otherwise each has its own plan.
    """
    if not cliques:
        return {}
    groups = groups_for([a.size for a in attrs], cliques)
    try:
        planned = [(g, *_planned(session, table, attrs, g)) for g in groups]
    except QueryError:  # a group the planner refuses: the marginals' own plans say why, if any
        planned = []
    if not planned or any(p.contribution.per_group < p.contribution.rows_l1 for *_, p in planned):
        # Merging cells would raise Delta_2 above a marginal's own: one plan each.
        return {c: MarginalQuery.build(session, table, attrs, c) for c in cliques}
    out = {}
    for clique in cliques:
        group, sql, plan = next(p for p in planned if set(clique) <= set(p[0]))
        out[clique] = MarginalQuery.of(plan, sql, attrs, group, clique)
    return out
