r"""Consistent sessions: a session's noisy counts and sums of one population, by least squares.

A session's answers over the same table and filter, grouped by keys with public domains (a
total, by state, by state and status, a histogram), measure linear functions of two unknown
vectors over the finest cells ``c`` (the product of every key's domain): the row counts
``N_c`` and, per numeric column declared NOT NULL, the sums ``S_c`` of its clamped values.
Every noisy measurement of a query joins:

- a ``COUNT(*)`` or ``HISTOGRAM`` answer, and the count inside ``AVG``, ``VARIANCE`` or a
  derived ``SUM`` of a NOT NULL column, measures ``A_q N`` (``A_q``: which cells each released
  group sums);
- a ``SUM`` measured directly measures ``A_q S``;
- the centred sum inside ``AVG``/``VARIANCE`` (and a derived ``SUM``) measures
  ``A_q (S - m N)``, ``m`` the midpoint of the column's declared bounds.

Measurement ``q`` released ``y_q = B_q x + e_q`` (``x = (N, S)``) with independent noise of
known variance ``sigma_q^2`` per group (the mechanism's exact error model: the geometric's or
the discrete Gaussian's), so the generalised least-squares estimate (Gauss-Markov: the best
linear unbiased one) of any measured linear function ``a^T x`` is

.. math::

    \widehat{a^T x} = a^T M^+ \sum_q B_q^T y_q / \sigma_q^2, \qquad
    M = \sum_q B_q^T B_q / \sigma_q^2, \qquad
    \operatorname{Var} = a^T M^+ a,

computed from the thin SVD of the weighted design ``W B = U \Sigma V^T`` (rows ``B_q /
sigma_q``): ``a^T x_hat = (V^T a)^T \Sigma^{-1} U^T W y`` and ``Var = ||\Sigma^{-1} V^T
a||^2``, covariances likewise. The SVD comes from the eigendecomposition of the small Gram
matrix ``(W B)(W B)^T = U \Sigma^2 U^T`` (measured values squared, not unknowns: the finest
cells may be thousands), ``V^T = \Sigma^{-1} U^T W B``; eigenvalues below
:data:`RANK_TOLERANCE` ``max(shape)`` times the largest are zero (each sum's unknowns are
scaled by its column's half-width, so counts and sums weigh alike).
Every answer gets combined values, consistent with all the others (a total equals the sum of
its groups; the sum of the sums by year is the total sum), of variance never above the raw
one's (the raw answer is one of the unbiased linear estimates). ``COUNT`` and ``SUM`` are
combined directly; an ``AVG`` is recombined as ``m + clip(S_hat_c / max(N_hat, 1), +-h)``
from the combined centred sum ``S_hat_c = S_hat - m N_hat`` and count (``h`` the half-width of
the bounds), with the delta-method standard deviation

.. math::

    \operatorname{sd} = \sqrt{\operatorname{Var} \hat S_c - 2 \mu \operatorname{Cov}(\hat S_c,
    \hat N) + \mu^2 \operatorname{Var} \hat N} \,/\, \max(\hat N, 1),
    \qquad \mu = \hat S_c / \hat N,

the raw ``AVG``'s formula with the combined covariance (the combined sum and count are
correlated). It is post-processing of released values: free, and as private as they are.

What it estimates: each answer is of its own bounded query. When no unit is beyond the declared
contribution bounds, every grouping keeps the same rows and the combination is unbiased; when
bounding keeps different rows under different groupings, the answers estimate slightly
different totals and the combined values lie between them (likewise sums on fixed-point grids
of different steps: within a grid step per row). Only the same population is combined: the same
table, filter (WHERE, as SQL) and data version; counts of a nullable column's non-NULL rows and
its sums, distinct-unit counts, squares, quantiles, partition-selected and ``LIMIT`` answers are
not.

Examples
--------
>>> import pandas as pd
>>> from dpcurator.accounting import Budget
>>> from dpcurator.curator import Column, Session, Table
>>> from dpcurator.noise import InsecureSeededSource
>>> t = Table("t", pd.DataFrame({"s": ["a", "b"] * 50}), columns=[Column("s", domain=["a", "b"])])
>>> with Session(t, Budget(3.0), ledger=":memory:", source=InsecureSeededSource(0)) as s:
...     total = s.sql("SELECT COUNT(*) AS n FROM t", epsilon=1.0)
...     by_s = s.sql("SELECT s, COUNT(*) AS n FROM t GROUP BY s", epsilon=1.0)
...     both = s.combined(by_s)
>>> bool(abs(both["n_combined"].sum() - s.combined(total)["n_combined"].iloc[0]) < 1e-6)
True
>>> bool((both["n_combined_std"] < both["n_std"]).all())
True
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from dpcurator.curator._aggregates import Count, CountColumn, Histogram, Mean, Sum, needs
from dpcurator.curator._estimates import Noisy
from dpcurator.curator._measures import RowCount, UnitCount, ValueSum
from dpcurator.curator._plan import Plan
from dpcurator.curator._release import QueryRelease
from dpcurator.curator._specs import KeySpec
from dpcurator.errors import QueryError

__all__ = ["KEPT_ANSWERS", "MAX_CELLS", "MAX_ENTRIES", "Answers"]

MAX_CELLS = 1 << 16
"""Most finest cells (product of the keys' domains) a combination works over."""
MAX_ENTRIES = 1 << 24
"""Most entries of the weighted design (measured groups x unknowns) a combination solves."""
KEPT_ANSWERS = 256
"""Most answers kept per population: the oldest leave the combination (memory stays bounded)."""
RANK_TOLERANCE = 1e-13
"""Eigenvalues of ``(W B)(W B)^T`` below ``max(shape)`` times this of the largest are zero."""

Population = tuple[str, str, Hashable]
"""The table, the filter's SQL and the rows' version token: answers about the same rows."""

FloatArray = NDArray[np.float64]


@dataclass(frozen=True)
class _Vector:
    """One noisy measurement, with its values per measured group (column units) and std.

    ``kind``: ``"count"`` (rows), ``"sum"`` or ``"centred"`` (of ``column``).
    """

    kind: str
    column: str | None
    values: FloatArray
    std: float


@dataclass(frozen=True)
class _Answer:
    """One release's combinable measurements, its keys and the outputs it can combine."""

    release: QueryRelease
    plan: Plan  # reads the released table's rows when combined (:func:`_row_keys`)
    keys: tuple[str, ...]
    domains: dict[str, tuple[Any, ...]]
    groups: tuple[tuple[Any, ...], ...]  # the measured vectors' groups (domain order)
    vectors: tuple[_Vector, ...]
    outputs: tuple[tuple[str, str, str | None], ...]  # (alias, count/sum/mean, column)
    bounds: dict[str, tuple[float, float]]  # column -> (mid, half)


def _key_id(key: KeySpec) -> str:
    """Return a key's identity: its column, and how bins and computed keys make values."""
    if key.edges is not None:
        return f"{key.column} bins {key.edges}"
    if key.expression is not None:
        return f"{key.column} = {key.expression.sql()}"
    return key.column


def _row_keys(plan: Plan, frame: pd.DataFrame) -> list[tuple[Any, ...]]:
    """Return the key values of each released row, in the keys' domains (bins by index)."""
    columns = []
    for key in plan.keys:
        if key.labels is not None:
            index = {label: i for i, label in enumerate(key.labels)}
            columns.append([index[v] for v in frame[f"{key.column}_bin"]])
        else:
            columns.append(list(frame[plan.query.key_names[key.column]]))
    return list(zip(*columns, strict=True)) if columns else [() for _ in range(len(frame))]


def _vector(kind: str, column: str | None, noisy: Noisy) -> _Vector | None:
    std = float(noisy.std) * noisy.unit
    if not math.isfinite(std) or std <= 0.0 or noisy.value.size == 0:
        return None
    return _Vector(kind, column, noisy.real(), std)


def _vectors(plan: Plan, noisy: Mapping[Any, Noisy]) -> list[_Vector]:
    """Return the row count and NOT NULL columns' sums among a query's noisy measurements.

    The row count is ``RowCount``, or ``UnitCount`` where the plan measured the latter in its
    stead (at most one row per unit and group: the same number).
    """
    table = plan.query.table
    counts_rows = any(RowCount() in needs(a, table) for a in plan.query.aggregates)
    count = noisy.get(RowCount())
    if count is None and counts_rows:
        count = noisy.get(UnitCount())
    out = [_vector("count", None, count)] if count is not None else []
    for measure, item in noisy.items():
        if isinstance(measure, ValueSum) and not table.column(measure.column).nullable:
            kind = {"raw": "sum", "centred": "centred"}.get(measure.encoding)
            if kind is not None:
                out.append(_vector(kind, measure.column, item))
    return [v for v in out if v is not None]


def _outputs(plan: Plan, vectors: Sequence[_Vector]) -> list[tuple[str, str, str | None]]:
    """Return the release's columns that the combination answers: (alias, kind, column)."""
    table = plan.query.table
    kinds = {(v.kind, v.column) for v in vectors}
    counted = ("count", None) in kinds
    out: list[tuple[str, str, str | None]] = []
    for a in plan.query.aggregates:
        column = getattr(a, "column", None)
        fixed = column is not None and not table.column(column).nullable
        centred = ("centred", column) in kinds and counted
        if isinstance(a, Count | Histogram) or (isinstance(a, CountColumn) and fixed):
            if counted:
                out.append((a.alias, "count", None))
        elif isinstance(a, Sum) and fixed and (("sum", column) in kinds or centred):
            out.append((a.alias, "sum", column))
        elif isinstance(a, Mean) and fixed and centred:
            out.append((a.alias, "mean", column))
    return out


def _answer(plan: Plan, release: QueryRelease) -> _Answer | None:
    """Return the release's combinable measurements, or None if it has none."""
    if plan.query.limit is not None or plan.selects_partitions or len(release.measured) != 2:
        return None
    groups, noisy = release.measured
    vectors = _vectors(plan, noisy)
    outputs = _outputs(plan, vectors)
    if not vectors or not outputs:
        return None
    return _Answer(
        release,
        plan,
        tuple(_key_id(k) for k in plan.keys),
        {_key_id(k): tuple(k.domain or ()) for k in plan.keys},
        tuple(groups),  # tuples already
        tuple(vectors),
        tuple(outputs),
        {v.column: (v.mid, v.half) for v in plan.values},
    )


class Answers:
    """The combinable answers of a session, grouped by population (see the module's notes)."""

    def __init__(self) -> None:
        self._by_population: dict[Population, list[_Answer]] = {}
        self._population_of: dict[int, Population] = {}
        self._solved: dict[Population, tuple[tuple[int, ...], _System]] = {}

    def add(self, plan: Plan, release: QueryRelease, version: Hashable) -> None:
        """Keep ``release`` if its counts or sums can be combined with others."""
        answer = _answer(plan, release)
        if answer is None:
            return
        where = "" if plan.query.where is None else plan.query.where.sql(dialect="duckdb")
        population: Population = (plan.query.table.name, where, version)
        kept = self._by_population.setdefault(population, [])
        kept.append(answer)
        self._population_of[id(release)] = population
        if len(kept) > KEPT_ANSWERS:
            del self._population_of[id(kept.pop(0).release)]

    def combined(self, release: QueryRelease) -> pd.DataFrame:
        """Return ``release``'s keys with its raw and combined values and their stds.

        Raises
        ------
        QueryError
            If ``release`` is not an answer of this session with a ``COUNT``, ``SUM`` or
            ``AVG`` over public-domain keys (without LIMIT), or its population's cells exceed
            :data:`MAX_CELLS`.
        """
        population = self._population_of.get(id(release))
        answers = self._by_population.get(population, []) if population is not None else []
        if not any(a.release is release for a in answers):
            raise QueryError(
                "This release cannot be combined: only COUNT(*), HISTOGRAM, and SUM and AVG of "
                f"NOT NULL columns, answered in this session (its last {KEPT_ANSWERS} per table "
                "and filter), grouped by keys with public domains and without LIMIT, are "
                "combined."
            )
        mine = next(a for a in answers if a.release is release)
        assert population is not None
        which = tuple(id(a.release) for a in answers)
        solved = self._solved.get(population)
        if solved is None or solved[0] != which:  # factor once per set of answers
            solved = (which, _system(answers))
            self._solved = {population: solved}
        combined = _least_squares(solved[1], mine)
        keys = [c for c in release.table.columns if c not in release.value_columns]
        keys = [c for c in keys if not c.endswith(("_std", "_ci_low", "_ci_high"))]
        out = release.table[keys].copy()
        for alias, _, _ in mine.outputs:
            value, std = combined[alias]
            out[alias] = release.table[alias].to_numpy()
            out[f"{alias}_std"] = release.table[f"{alias}_std"].to_numpy()
            out[f"{alias}_combined"] = value
            out[f"{alias}_combined_std"] = std
        out.attrs["answers"] = len(answers)
        return out


@dataclass
class _System:
    """The weighted design's thin SVD, with the unknowns' layout (see the module's notes)."""

    names: list[str]
    dims: list[int]
    cells: NDArray[np.int64]  # per key, each finest cell's index in the key's domain
    columns: list[str]
    bounds: dict[str, tuple[float, float]]
    basis: FloatArray  # V_k^T: rank x unknowns
    singular: FloatArray
    coef: FloatArray  # U_k^T W y / s

    def function(self, answer: _Answer, kind: str, column: str | None) -> FloatArray:
        """``B``: the unknowns' weights of ``kind`` over each of ``answer``'s groups."""
        groups = _aggregation(answer, self.names, self.dims, self.cells)
        size = groups.shape[1]
        out = np.zeros((groups.shape[0], size * (1 + len(self.columns))))
        if kind == "count":
            out[:, :size] = groups
            return out
        assert column is not None
        block = 1 + self.columns.index(column)
        mid, half = self.bounds[column]
        out[:, block * size : (block + 1) * size] = groups * half  # sums scaled by half
        if kind == "centred":
            out[:, :size] = -mid * groups
        return out

    def project(self, function: FloatArray) -> tuple[FloatArray, FloatArray]:
        """Return ``a^T x_hat`` per row of ``function`` and ``Sigma^-1 V^T a`` (its noise)."""
        weights = function @ self.basis.T
        return weights @ self.coef, weights / self.singular


def _domains(
    answers: Sequence[_Answer],
) -> tuple[list[str], list[int], dict[str, tuple[float, float]]]:
    """Return the keys of all answers, their domains' sizes and the columns' (mid, half)."""
    domains: dict[str, tuple[Any, ...]] = {}
    bounds: dict[str, tuple[float, float]] = {}
    for answer in answers:
        domains.update(answer.domains)
        bounds.update(answer.bounds)
    return list(domains), [len(d) for d in domains.values()], bounds


def _aggregation(
    answer: _Answer, names: list[str], dims: list[int], cells: NDArray[np.int64]
) -> FloatArray:
    """``A_q``: which finest cells each of the answer's groups sums (groups x cells)."""
    positions = [names.index(k) for k in answer.keys]
    size = cells.shape[1]
    code = np.zeros(size, dtype=np.int64)
    span = 1
    for p in positions:
        code = code * dims[p] + cells[p]
        span *= dims[p]
    lookup = np.full(span, -1, dtype=np.int64)
    index = [{v: i for i, v in enumerate(answer.domains[k])} for k in answer.keys]
    for row, group in enumerate(answer.groups):
        at = 0
        for p, where, value in zip(positions, index, group, strict=True):
            at = at * dims[p] + where[value]
        lookup[at] = row
    rows = lookup[code]
    out = np.zeros((len(answer.groups), size))
    hit = np.flatnonzero(rows >= 0)
    out[rows[hit], hit] = 1.0
    return out


def _system(answers: Sequence[_Answer]) -> _System:
    """Build and factor the weighted design of ``answers`` (raises beyond the size limits)."""
    names, dims, bounds = _domains(answers)
    cells = math.prod(dims)
    columns = sorted({v.column for a in answers for v in a.vectors if v.column is not None})
    rows = sum(len(a.groups) * len(a.vectors) for a in answers)
    unknowns = cells * (1 + len(columns))
    if cells > MAX_CELLS or rows * unknowns > MAX_ENTRIES:
        raise QueryError(
            f"These answers have {cells} finest cells and {rows} measured values together, "
            f"more than {MAX_CELLS} cells or {MAX_ENTRIES} design entries: combine answers over "
            "fewer or smaller keys."
        )
    grid = np.indices(dims, dtype=np.int64).reshape(len(dims), cells)
    empty = np.zeros(0)
    system = _System(names, dims, grid, columns, bounds, np.zeros((0, unknowns)), empty, empty)
    design, observed = [], []
    for answer in answers:
        for vector in answer.vectors:
            design.append(system.function(answer, vector.kind, vector.column) / vector.std)
            observed.append(vector.values / vector.std)
    weighted, y = np.vstack(design), np.concatenate(observed)
    gram, vectors = np.linalg.eigh(weighted @ weighted.T)  # W B = Q S V^T: gram = Q S^2 Q^T
    keep = gram > gram[-1] * max(rows, unknowns) * RANK_TOLERANCE
    singular = np.sqrt(gram[keep])
    system.basis = (vectors[:, keep].T @ weighted) / singular[:, None]
    system.singular = singular
    system.coef = (vectors[:, keep].T @ y) / singular
    return system


def _least_squares(system: _System, mine: _Answer) -> dict[str, tuple[FloatArray, FloatArray]]:
    """Return each of ``mine``'s outputs combined by ``system``, with its std.

    In the order of ``mine``'s released rows.
    """
    order = {g: i for i, g in enumerate(mine.groups)}
    rows = _row_keys(mine.plan, mine.release.table)
    take = np.array([order[r] for r in rows], dtype=np.int64)
    out = {}
    for alias, kind, column in mine.outputs:
        if kind in ("count", "sum"):
            value, noise = system.project(system.function(mine, kind, column))
            std = np.sqrt(np.einsum("ij,ij->i", noise, noise))
        else:
            assert column is not None
            value, std = _mean(system, mine, column)
        out[alias] = (value[take], std[take])
    return out


def _mean(system: _System, mine: _Answer, column: str) -> tuple[FloatArray, FloatArray]:
    """``m + clip(S_c / N, +-h)`` from the combined centred sum and count, delta-method std."""
    count, count_noise = system.project(system.function(mine, "count", None))
    centred, centred_noise = system.project(system.function(mine, "centred", column))
    mid, half = system.bounds[column]
    n = np.maximum(count, 1.0)
    mu = np.clip(centred / n, -half, half)
    var_n = np.einsum("ij,ij->i", count_noise, count_noise)
    var_s = np.einsum("ij,ij->i", centred_noise, centred_noise)
    cov = np.einsum("ij,ij->i", count_noise, centred_noise)
    std = np.sqrt(np.maximum(var_s - 2.0 * mu * cov + mu**2 * var_n, 0.0)) / n
    return mid + mu, std
