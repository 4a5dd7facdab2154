"""Run a plan: the engine computes the small exact aggregates, then noise, then the released table.

Only the aggregated result (one row per group) comes back from the engine. Noise comes from the
mechanisms layer (exact samplers of :mod:`dpcurator.noise`); every value the analyst sees is a
post-processing of the noisy measurements (:mod:`dpcurator.curator._estimates`), with its
standard deviation and an interval.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray
from sqlglot import exp

from dpcurator.accounting import DiscreteGaussianEvent
from dpcurator.curator._aggregates import release
from dpcurator.curator._estimates import Measured, Noisy, Output
from dpcurator.curator._measures import QuantileCounts, UnitCount
from dpcurator.curator._plan import QUANTILE_BUCKETS, Measurement, Plan, domain_product
from dpcurator.errors import InternalError
from dpcurator.mechanisms import (
    Release,
    discrete_gaussian_mechanism,
    exponential_mechanism,
    geometric_mechanism,
)
from dpcurator.noise import RandomSource

__all__ = ["Exact", "compute", "fetch", "key_order"]

FloatArray = NDArray[np.float64]
Read = Callable[[exp.Query], Mapping[str, Sequence[Any]]]


@dataclass
class Exact:
    """The exact aggregates of a plan, as the engine returned them (never released)."""

    keys: list[tuple[Any, ...]]
    columns: dict[str, NDArray[Any]]
    buckets: dict[tuple[tuple[Any, ...], str], NDArray[np.int64]]


def _key_tuples(
    table: Mapping[str, Sequence[Any]], aliases: Sequence[str], rows: int
) -> list[tuple[Any, ...]]:
    if not aliases:
        return [()] * rows
    return list(zip(*[_canonical_column(table[a]) for a in aliases], strict=True))


def _canonical_column(values: Sequence[Any]) -> Sequence[Any]:
    """``values`` with each float made canonical (a column without floats comes back as is)."""
    if any(isinstance(v, float) for v in values):
        return [_canonical(v) for v in values]
    return values


def _canonical(value: Any) -> Any:
    """Return one representative per group key value.

    ``-0.0`` and ``0.0`` group together, and which one the engine returns depends on the rows;
    every NaN likewise.
    """
    if isinstance(value, float):
        if math.isnan(value):
            return math.nan
        return value + 0.0  # -0.0 + 0.0 == 0.0
    return value


def key_order(key: tuple[Any, ...]) -> tuple[tuple[int, Any], ...]:
    """Return a total order on group keys of mixed types (NULL first, then NaN, numbers, text ...).

    Released groups are sorted by it, so that their order is a function of the released keys
    alone, never of the engine's output order (which follows the data).

    >>> sorted([("b",), (None,), (2,), ("a",), (float("nan"),)], key=key_order)
    [(None,), (nan,), (2,), ('a',), ('b',)]
    """
    out: list[tuple[int, Any]] = []
    for value in key:
        if value is None:
            out.append((0, 0))
        elif isinstance(value, float) and math.isnan(value):
            out.append((1, 0))
        elif isinstance(value, bool | int | float):
            out.append((2, value))
        elif isinstance(value, str):
            out.append((3, value))
        else:
            out.append((4, repr(value)))
    return tuple(out)


def _integer_column(values: Sequence[Any]) -> NDArray[np.int64]:
    """Exact integers from the engine (NULL, the sum of no rows, is 0)."""
    return np.array([0 if v is None else int(v) for v in values], dtype=np.int64)


def fetch(plan: Plan, read: Read) -> Exact:
    """Run the plan's statements through ``read`` (statement -> columns of Python values).

    Aggregates come back as exact integers (the engine's integer sums are never rounded to
    float64); group keys are canonical (see :func:`key_order`).
    """
    aliases = [k.alias for k in plan.keys]
    table = read(plan.statements.main)
    rows = len(next(iter(table.values()))) if table else 0
    keys = _key_tuples(table, aliases, rows)
    columns = {name: _integer_column(v) for name, v in table.items() if name not in aliases}
    buckets: dict[tuple[tuple[Any, ...], str], NDArray[np.int64]] = {}
    if plan.statements.quantiles is not None:
        qt = read(plan.statements.quantiles)
        qkeys = _key_tuples(qt, aliases, len(qt["__n"]))
        bucket = _integer_column(qt["__bucket"])
        counts = _integer_column(qt["__n"])
        for i, name in enumerate(qt["__column"]):
            entry = buckets.setdefault((qkeys[i], name), np.zeros(QUANTILE_BUCKETS, np.int64))
            entry[bucket[i]] += counts[i]
    return Exact(keys=keys, columns=columns, buckets=buckets)


@dataclass
class _Groups:
    """The groups released, and where each is in the engine's result (None: absent there)."""

    keys: list[tuple[Any, ...]]
    rows: list[int | None]

    @classmethod
    def of(cls, plan: Plan, exact: Exact) -> _Groups:
        if plan.keys and not plan.selects_partitions:
            keys = domain_product(plan.keys)
        elif plan.keys:
            keys = sorted(exact.keys, key=key_order)
        else:
            keys = [()]
        index = {key: i for i, key in enumerate(exact.keys)}
        return cls(keys, [index.get(k) for k in keys])

    def vector(self, exact: Exact, name: str) -> NDArray[np.int64]:
        """Return the exact aggregate ``name`` per released group (0 where it had no rows)."""
        values = exact.columns.get(name)
        if values is None or len(exact.keys) == 0:
            return np.zeros(len(self.keys), dtype=np.int64)
        take = np.array([r if r is not None else 0 for r in self.rows], dtype=np.int64)
        out = values[take]
        out[np.array([r is None for r in self.rows], dtype=bool)] = 0
        return out

    def keep(self, kept: NDArray[np.bool_]) -> None:
        self.keys = [g for g, k in zip(self.keys, kept, strict=True) if k]
        self.rows = [r for r, k in zip(self.rows, kept, strict=True) if k]


def _noisy(
    m: Measurement,
    event: object,
    values: NDArray[np.int64],
    levels: Sequence[float],
    source: RandomSource,
) -> Noisy:
    """Noise on one measurement's exact vector, with its half-widths per level.

    The geometric mechanism, or the discrete Gaussian when the plan chose it; the release's
    event must be the plan's (for a Gaussian, its sigma and sensitivity: the plan's event may
    be the (epsilon, delta) it was calibrated to).
    """
    if values.size == 0:
        return Noisy(values, m.unit_value, math.nan, {})
    noisy: Release[Any]
    if m.gaussian is not None:
        noisy = discrete_gaussian_mechanism(
            values, sigma=m.gaussian.sigma, sensitivity=m.gaussian.l2, source=source
        )
        drawn = noisy.event
        if not isinstance(drawn, DiscreteGaussianEvent) or (drawn.sigma, drawn.sensitivity) != (
            m.gaussian.sigma,
            m.gaussian.l2,
        ):
            raise InternalError(f"The release's event {noisy.event} differs from the plan's.")
    else:
        noisy = geometric_mechanism(values, epsilon=m.epsilon, sensitivity=m.units, source=source)
        if not _selection(m) and noisy.event != event:
            raise InternalError(f"The release's event {noisy.event} differs from the plan's.")
    error = noisy.error
    assert error is not None
    half = {}
    for level in levels:
        low, _ = error.confidence_interval(level)
        half[level] = float(noisy.value.reshape(-1)[0] - low.reshape(-1)[0])
    return Noisy(np.asarray(noisy.value, dtype=np.int64), m.unit_value, error.std, half)


def _selection(m: Measurement) -> bool:
    return isinstance(m.measure, UnitCount) and m.measure.selection


def compute(
    plan: Plan, exact: Exact, *, source: RandomSource, confidence: float
) -> tuple[pd.DataFrame, dict[str, str]]:
    """Add noise to the exact aggregates and build the released table.

    Returns the table (group keys, then ``value, value_std, value_ci_low, value_ci_high`` for
    each aggregate) and, per aggregate, how its interval is obtained.
    """
    values = {v.column: v for v in plan.values}
    measured = Measured(plan.query.table, values, confidence)
    groups = _Groups.of(plan, exact)
    planned = list(zip(plan.measurements, plan.events, strict=True))
    for m, event in planned:  # partition selection first: it decides the groups
        if _selection(m):
            selected = _noisy(m, event, groups.vector(exact, m.result), measured.levels, source)
            assert plan.threshold is not None
            kept = selected.value >= plan.threshold
            selected.keep(kept)
            groups.keep(kept)
            measured.noisy[m.measure] = selected
    for m, event in planned:
        if isinstance(m.measure, QuantileCounts):
            measured.quantiles[m.measure] = _quantiles(plan, m, groups.keys, exact, source)
        elif not _selection(m):
            vector = groups.vector(exact, m.result)
            measured.noisy[m.measure] = _noisy(m, event, vector, measured.levels, source)
    outputs = {a.alias: release(a, measured) for a in plan.query.aggregates}
    frame = _frame(plan, groups.keys, outputs)
    return frame, {alias: out.exact for alias, out in outputs.items()}


def _quantiles(
    plan: Plan,
    m: Measurement,
    groups: Sequence[tuple[Any, ...]],
    exact: Exact,
    source: RandomSource,
) -> FloatArray:
    """Per group, the exponential mechanism's choice among the public candidate points."""
    assert isinstance(m.measure, QuantileCounts)
    column, level = m.measure.column, m.measure.level
    spec = next(v for v in plan.values if v.column == column)
    candidates = np.linspace(spec.lower, spec.upper, QUANTILE_BUCKETS + 1)
    epsilon = m.epsilon / plan.groups_touched
    zero = np.zeros(QUANTILE_BUCKETS, dtype=np.int64)
    out = np.empty(len(groups), dtype=np.float64)
    for i, group in enumerate(groups):
        counts = exact.buckets.get((group, column), zero)
        below = np.concatenate([[0], np.cumsum(counts)]).astype(np.float64)
        utilities = -np.abs(below - level * below[-1])
        choice = exponential_mechanism(
            list(range(candidates.size)),
            utilities,
            epsilon=epsilon,
            sensitivity=m.sensitivity,
            source=source,
        )
        out[i] = candidates[choice.value]
    return out


def _frame(
    plan: Plan, groups: Sequence[tuple[Any, ...]], outputs: dict[str, Output]
) -> pd.DataFrame:
    data: dict[str, Any] = {}
    query = plan.query
    for position, key in enumerate(plan.keys):
        values = [g[position] for g in groups]
        if key.labels is not None:
            data[f"{key.column}_bin"] = [key.labels[v] for v in values]
        else:
            data[query.key_names[key.column]] = values
    for alias, out in outputs.items():
        data[alias] = out.value
        data[f"{alias}_std"] = out.std
        data[f"{alias}_ci_low"] = out.low
        data[f"{alias}_ci_high"] = out.high
    frame = pd.DataFrame(data)
    if query.order_by:
        frame = frame.sort_values(
            [name for name, _ in query.order_by],
            ascending=[not desc for _, desc in query.order_by],
            kind="stable",
        )
    if query.limit is not None:
        frame = frame.head(query.limit)
    return frame.reset_index(drop=True)
