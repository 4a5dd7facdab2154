r"""Consistent sessions: noisy counts of the same population combined by least squares.

A session's ``COUNT(*)`` and ``HISTOGRAM`` answers over the same table and filter, grouped by
keys with public domains (a total, by state, by state and status, a histogram), all measure
linear functions of one unknown vector: the counts ``x`` of the finest cells (the product of
every key's domain). Answer ``q`` released ``y_q = A_q x + e_q`` with independent noise of
known variance ``sigma_q^2`` per cell (the mechanism's exact error model), so the generalised
least-squares estimate (Gauss-Markov: the best linear unbiased one)

.. math::

    \hat x = M^+ \sum_q A_q^T y_q / \sigma_q^2, \qquad
    M = \sum_q A_q^T A_q / \sigma_q^2, \qquad
    \operatorname{Cov}(A_r \hat x) = A_r M^+ A_r^T

gives every answer ``r`` a combined value ``A_r x_hat``: consistent with all the others (a total
equals the sum of its groups) and of variance never above the raw one's (the raw answer is one
of the unbiased linear estimates). Only estimable functions are reported (``A_r x`` always is).
It is post-processing of released values: free, and as private as they are.

What it estimates: each answer is of its own bounded query. When no unit is beyond the declared
contribution bounds, every grouping keeps the same rows and the combination is unbiased; when
bounding keeps different rows under different groupings, the answers estimate slightly
different totals and the combined values lie between them.

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
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from itertools import product
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from dpcurator.curator._aggregates import Count, Histogram
from dpcurator.curator._plan import Plan
from dpcurator.curator._release import QueryRelease
from dpcurator.curator._specs import KeySpec
from dpcurator.errors import QueryError

__all__ = ["KEPT_ANSWERS", "MAX_CELLS", "Answers"]

MAX_CELLS = 4096
"""Most finest cells (product of the keys' domains) a combination works over."""
KEPT_ANSWERS = 256
"""Most answers kept per population: the oldest leave the combination (memory stays bounded)."""

Population = tuple[str, str, Hashable]
"""The table, the filter's SQL and the rows' version token: answers about the same rows."""


@dataclass(frozen=True)
class _Answer:
    """One released count vector: its keys, the key values of its rows, values and std."""

    release: QueryRelease
    alias: str
    keys: tuple[str, ...]
    domains: dict[str, tuple[Any, ...]]
    rows: tuple[tuple[Any, ...], ...]
    values: NDArray[np.float64]
    std: float


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


def _answer(plan: Plan, release: QueryRelease) -> _Answer | None:
    """Return the release's ``COUNT(*)`` as a combinable answer, or None if it is not one."""
    count = next((a for a in plan.query.aggregates if isinstance(a, Count | Histogram)), None)
    if count is None or plan.query.limit is not None or plan.selects_partitions:
        return None
    frame = release.table
    std = float(frame[f"{count.alias}_std"].iloc[0]) if len(frame) else math.nan
    if not math.isfinite(std) or std <= 0.0:
        return None
    keys = tuple(_key_id(k) for k in plan.keys)
    domains = {_key_id(k): tuple(k.domain or ()) for k in plan.keys}
    return _Answer(
        release,
        count.alias,
        keys,
        domains,
        tuple(_row_keys(plan, frame)),
        frame[count.alias].to_numpy(dtype=np.float64),
        std,
    )


class Answers:
    """The combinable answers of a session, grouped by population (see the module's notes)."""

    def __init__(self) -> None:
        self._by_population: dict[Population, list[_Answer]] = {}
        self._population_of: dict[int, Population] = {}

    def add(self, plan: Plan, release: QueryRelease, version: Hashable) -> None:
        """Keep ``release`` if its ``COUNT(*)`` can be combined with others."""
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
        """Return ``release``'s keys with its raw and combined counts and their stds.

        Raises
        ------
        QueryError
            If ``release`` is not a ``COUNT(*)`` answer of this session over public-domain keys
            (without LIMIT), or its population's cells exceed :data:`MAX_CELLS`.
        """
        population = self._population_of.get(id(release))
        answers = self._by_population.get(population, []) if population is not None else []
        if not any(a.release is release for a in answers):
            raise QueryError(
                "This release cannot be combined: only COUNT(*) and HISTOGRAM answers of this "
                f"session (its last {KEPT_ANSWERS} per table and filter), grouped by keys with "
                "public domains and without LIMIT, are combined."
            )
        mine = next(a for a in answers if a.release is release)
        value, std = _least_squares(answers, mine)
        keys = [c for c in release.table.columns if c not in release.value_columns]
        keys = [c for c in keys if not c.endswith(("_std", "_ci_low", "_ci_high"))]
        out = release.table[keys].copy()
        out[mine.alias] = mine.values
        out[f"{mine.alias}_std"] = mine.std
        out[f"{mine.alias}_combined"] = value
        out[f"{mine.alias}_combined_std"] = std
        out.attrs["answers"] = len(answers)
        return out


def _least_squares(
    answers: Sequence[_Answer], mine: _Answer
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Return ``A_r x_hat`` and its std for ``mine`` (``r``) from all ``answers``."""
    domains: dict[str, tuple[Any, ...]] = {}
    for answer in answers:
        domains.update(answer.domains)
    names = list(domains)
    cells = math.prod(len(d) for d in domains.values())
    if cells > MAX_CELLS:
        raise QueryError(
            f"These answers' keys have {cells} cells together, more than {MAX_CELLS}: combine "
            "answers over fewer or smaller keys."
        )
    finest = list(product(*(domains[n] for n in names)))
    designs = [_design(a, names, finest) for a in answers]
    normal = np.zeros((len(finest), len(finest)))
    weighted = np.zeros(len(finest))
    for answer, design in zip(answers, designs, strict=True):
        normal += (design.T @ design) / answer.std**2
        weighted += (design.T @ answer.values) / answer.std**2
    inverse = np.linalg.pinv(normal, hermitian=True)
    design = designs[[a.release is mine.release for a in answers].index(True)]
    value = design @ (inverse @ weighted)
    variance = np.einsum("ij,jk,ik->i", design, inverse, design)
    return value, np.sqrt(np.maximum(variance, 0.0))


def _design(
    answer: _Answer, names: list[str], finest: list[tuple[Any, ...]]
) -> NDArray[np.float64]:
    """``A_q``: which finest cells each of the answer's rows sums."""
    positions = [names.index(k) for k in answer.keys]
    row_of = {row: i for i, row in enumerate(answer.rows)}
    design = np.zeros((len(answer.rows), len(finest)))
    for j, cell in enumerate(finest):
        i = row_of.get(tuple(cell[p] for p in positions))
        if i is not None:
            design[i, j] = 1.0
    return design
