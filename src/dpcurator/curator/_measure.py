"""Run a plan: the engine computes the small exact aggregates, then noise, then the released table.

Only the aggregated result (one row per group) comes back from the engine. Noise comes from the
mechanisms layer (exact samplers of :mod:`dpcurator.noise`); every value the analyst sees is a
post-processing of the noisy measurements, with its standard deviation and an interval:

- counts and sums measured directly: the exact interval of the two-sided geometric noise;
- SUM derived as ``mid * N + S`` from a centred sum ``S`` and a count ``N``: standard deviation
  exact (independent noises), interval by a union bound over both noises (coverage at least the
  level);
- AVG, VARIANCE, STDDEV: ratios of noisy measurements; standard deviation by the delta method and
  a normal interval, marked approximate;
- quantiles: chosen by the exponential mechanism, no standard deviation (NaN).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from dpcurator.curator._plan import QUANTILE_BUCKETS, Measurement, Plan, domain_product
from dpcurator.errors import InternalError
from dpcurator.mechanisms import exponential_mechanism, geometric_mechanism
from dpcurator.noise import RandomSource

__all__ = ["Exact", "Output", "compute", "fetch"]

FloatArray = NDArray[np.float64]


@dataclass
class Exact:
    """The exact aggregates of a plan, as the engine returned them (never released)."""

    keys: list[tuple[Any, ...]]
    columns: dict[str, NDArray[Any]]
    buckets: dict[tuple[tuple[Any, ...], str], NDArray[np.int64]]


def _key_tuples(
    table: Mapping[str, Sequence[Any]], aliases: Sequence[str], rows: int
) -> list[tuple[Any, ...]]:
    columns = [[_canonical(v) for v in table[a]] for a in aliases]
    return [tuple(col[i] for col in columns) for i in range(rows)] if aliases else [()] * rows


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


def fetch(
    plan: Plan,
    run: Callable[[str], Mapping[str, Sequence[Any]]],
    sql: str,
    quantile_sql: str | None = None,
) -> Exact:
    """Run the bound SQL through ``run`` (SQL -> columns of Python values); collect the result.

    Aggregates come back as exact integers (the engine's integer sums are never rounded to
    float64); group keys are canonical (see :func:`key_order`).
    """
    aliases = [k.alias for k in plan.keys]
    table = run(sql)
    rows = len(next(iter(table.values()))) if table else 0
    keys = _key_tuples(table, aliases, rows)
    columns = {name: _integer_column(v) for name, v in table.items() if name not in aliases}
    buckets: dict[tuple[tuple[Any, ...], str], NDArray[np.int64]] = {}
    if quantile_sql is not None:
        qt = run(quantile_sql)
        qrows = len(qt["__n"])
        qkeys = _key_tuples(qt, aliases, qrows)
        names = list(qt["__column"])
        bucket = _integer_column(qt["__bucket"])
        counts = _integer_column(qt["__n"])
        for i in range(qrows):
            entry = buckets.setdefault((qkeys[i], names[i]), np.zeros(QUANTILE_BUCKETS, np.int64))
            entry[bucket[i]] += counts[i]
    return Exact(keys=keys, columns=columns, buckets=buckets)


@dataclass
class Output:
    """A released column: values with their standard deviation and interval."""

    value: NDArray[Any]
    std: FloatArray
    low: FloatArray
    high: FloatArray
    exact: str  # "exact", "conservative", "approximate" or "none"


@dataclass
class _Noisy:
    value: NDArray[np.int64]  # in measurement units
    unit: float
    std: float  # in units
    half: dict[float, float]  # level -> half-width in units

    def real(self) -> FloatArray:
        return self.value.astype(np.float64) * self.unit


def compute(
    plan: Plan, exact: Exact, *, source: RandomSource, confidence: float
) -> tuple[pd.DataFrame, dict[str, str]]:
    """Add noise to the exact aggregates and build the released table.

    Returns the table (group keys, then ``value, value_std, value_ci_low, value_ci_high`` for
    each aggregate) and, per aggregate, how its interval is obtained.
    """
    miss = 1.0 - confidence
    # Levels at which a union bound over two noises may split the miss probability.
    splits = [miss * t for t in np.linspace(0.05, 0.95, 19)]
    levels = [confidence, *(1.0 - a for a in splits)]
    z = statistics.NormalDist().inv_cdf(0.5 + confidence / 2.0)
    # The groups released: all of the public domain, or those partition selection keeps.
    index = {key: i for i, key in enumerate(exact.keys)}
    if plan.keys and not plan.selects_partitions:
        groups = domain_product(plan.keys)
    elif plan.keys:
        groups = sorted(exact.keys, key=key_order)
    else:
        groups = [()]
    rows = [index.get(g) for g in groups]
    present = np.array([r is not None for r in rows], dtype=bool)
    take = np.array([r if r is not None else 0 for r in rows], dtype=np.int64)

    def exact_vector(name: str) -> NDArray[np.int64]:
        values = exact.columns.get(name, np.zeros(len(exact.keys), dtype=np.int64))
        if len(exact.keys) == 0:
            return np.zeros(len(groups), dtype=np.int64)
        out = values[take]
        out[~present] = 0
        return out

    noisy: dict[tuple[str, str | None], _Noisy] = {}
    events = list(plan.events)

    def measure(m: Measurement, position: int, values: NDArray[np.int64]) -> _Noisy:
        if values.size == 0:
            return _Noisy(values, m.unit_value, math.nan, {})
        release = geometric_mechanism(values, epsilon=m.epsilon, sensitivity=m.units, source=source)
        expected = events[position]
        if m.kind != "selection" and release.event != expected:
            raise InternalError(f"The release's event {release.event} differs from the plan's.")
        error = release.error
        assert error is not None
        half = {}
        for level in levels:
            lo, _ = error.confidence_interval(level)
            half[level] = float(release.value.reshape(-1)[0] - lo.reshape(-1)[0])
        return _Noisy(np.asarray(release.value, dtype=np.int64), m.unit_value, error.std, half)

    kept = np.ones(len(groups), dtype=bool)
    for position, m in enumerate(plan.measurements):
        if m.kind == "selection":
            result = measure(m, position, exact_vector(m.result))
            assert plan.threshold is not None
            kept = result.value >= plan.threshold
            noisy[(m.kind, None)] = result
    groups = [g for g, keep in zip(groups, kept, strict=True) if keep]
    for key in list(noisy):
        noisy[key].value = noisy[key].value[kept]
    take, present = take[kept], present[kept]
    for position, m in enumerate(plan.measurements):
        if m.kind in {"selection", "quantile"}:
            continue
        values = exact_vector(m.result)  # already restricted to the kept groups
        noisy[(m.kind, m.column)] = measure(m, position, values)

    size = len(groups)
    outputs: dict[str, Output] = {}

    def direct(item: _Noisy) -> Output:
        value = item.real()
        half = item.half.get(confidence, math.nan) * item.unit
        return Output(
            value, np.full(size, item.std * item.unit), value - half, value + half, "exact"
        )

    def count_of(column: str | None) -> _Noisy:
        if column is not None and plan.query.table.column(column).nullable:
            return noisy[("count_column", column)]
        for kind in ("count", "count_distinct", "selection"):
            if (kind, None) in noisy:
                return noisy[(kind, None)]
        raise InternalError("The plan has no count for this aggregate.")

    specs = {v.column: v for v in plan.values}
    for agg in plan.query.aggregates:
        col = agg.column
        if agg.function in {"count", "histogram"}:
            item = count_of(None)
            out = direct(item)
            out.value = item.value.copy()
            outputs[agg.alias] = out
        elif agg.function == "count_distinct":
            key = ("selection", None) if ("selection", None) in noisy else ("count_distinct", None)
            item = noisy[key]
            out = direct(item)
            out.value = item.value.copy()
            outputs[agg.alias] = out
        elif agg.function == "count_column":
            item = count_of(col)
            out = direct(item)
            out.value = item.value.copy()
            outputs[agg.alias] = out
        elif agg.function == "sum":
            assert col is not None
            if ("sum", col) in noisy:
                outputs[agg.alias] = direct(noisy[("sum", col)])
            else:
                outputs[agg.alias] = _derived_sum(
                    specs[col].mid,
                    count_of(col),
                    noisy[("centered_sum", col)],
                    splits,
                    miss,
                )
        elif agg.function == "avg":
            assert col is not None
            outputs[agg.alias] = _mean(specs[col], count_of(col), noisy[("centered_sum", col)], z)
        elif agg.function in {"var", "stddev"}:
            assert col is not None
            outputs[agg.alias] = _variance(
                specs[col],
                count_of(col),
                noisy[("centered_sum", col)],
                noisy[("centered_squares", col)],
                z,
                sample=not agg.population,
                root=agg.function == "stddev",
            )
        elif agg.function == "quantile":
            assert col is not None and agg.quantile is not None
            m = plan.measurement_for_quantile(col, agg.quantile)
            outputs[agg.alias] = _quantiles(plan, m, groups, exact, source)
        else:  # pragma: no cover - the parser admits no other function
            raise InternalError(f"Unknown aggregate {agg.function!r}.")
    frame = _frame(plan, groups, outputs)
    return frame, {alias: out.exact for alias, out in outputs.items()}


def _derived_sum(
    mid: float, count: _Noisy, centered: _Noisy, splits: Sequence[float], miss: float
) -> Output:
    """``mid * N + S``: exact std; interval by the best union-bound split of the miss rate."""
    value = mid * count.real() + centered.real()
    std = math.sqrt((mid * count.std * count.unit) ** 2 + (centered.std * centered.unit) ** 2)
    half = min(
        abs(mid) * count.half.get(1.0 - a, math.nan) * count.unit
        + centered.half.get(1.0 - (miss - a), math.nan) * centered.unit
        for a in splits
    )
    size = value.size
    return Output(value, np.full(size, std), value - half, value + half, "conservative")


def _mean(spec: Any, count: _Noisy, centered: _Noisy, z: float) -> Output:
    n = np.maximum(count.real(), 1.0)
    s = centered.real()
    mean_c = np.clip(s / n, -spec.half, spec.half)
    value = spec.mid + mean_c
    var_s = (centered.std * centered.unit) ** 2
    var_n = (count.std * count.unit) ** 2
    std = np.sqrt(var_s + mean_c**2 * var_n) / n
    low = np.clip(value - z * std, spec.lower, spec.upper)
    high = np.clip(value + z * std, spec.lower, spec.upper)
    return Output(value, std, low, high, "approximate")


def _variance(
    spec: Any,
    count: _Noisy,
    centered: _Noisy,
    squares: _Noisy,
    z: float,
    *,
    sample: bool,
    root: bool,
) -> Output:
    n = np.maximum(count.real(), 2.0)
    s = centered.real()
    q = squares.real()
    factor = n / (n - 1.0) if sample else np.ones_like(n)
    pop = q / n - (s / n) ** 2
    cap = spec.half**2
    var = np.clip(pop, 0.0, cap) * factor
    # Delta method on var = factor * (Q/N - S^2/N^2).
    var_q = (squares.std * squares.unit) ** 2
    var_s = (centered.std * centered.unit) ** 2
    var_n = (count.std * count.unit) ** 2
    d_q = factor / n
    d_s = factor * (-2.0 * s / n**2)
    d_n = factor * (-q / n**2 + 2.0 * s**2 / n**3)
    std = np.sqrt(d_q**2 * var_q + d_s**2 * var_s + d_n**2 * var_n)
    upper = cap * factor
    if root:
        value = np.sqrt(var)
        std = std / (2.0 * np.maximum(value, math.sqrt(cap) * 1e-3))
        return Output(
            value,
            std,
            np.clip(value - z * std, 0.0, np.sqrt(upper)),
            np.clip(value + z * std, 0.0, np.sqrt(upper)),
            "approximate",
        )
    return Output(
        var,
        std,
        np.clip(var - z * std, 0.0, upper),
        np.clip(var + z * std, 0.0, upper),
        "approximate",
    )


def _quantiles(
    plan: Plan,
    m: Measurement,
    groups: Sequence[tuple[Any, ...]],
    exact: Exact,
    source: RandomSource,
) -> Output:
    assert m.column is not None and m.quantile is not None
    spec = next(v for v in plan.values if v.column == m.column)
    candidates = np.linspace(spec.lower, spec.upper, QUANTILE_BUCKETS + 1)
    epsilon = m.epsilon / plan.groups_touched
    zero = np.zeros(QUANTILE_BUCKETS, dtype=np.int64)
    out = np.empty(len(groups), dtype=np.float64)
    for i, group in enumerate(groups):
        counts = exact.buckets.get((group, m.column), zero)
        below = np.concatenate([[0], np.cumsum(counts)]).astype(np.float64)
        utilities = -np.abs(below - m.quantile * below[-1])
        chosen = exponential_mechanism(
            list(range(candidates.size)),
            utilities,
            epsilon=epsilon,
            sensitivity=m.sensitivity,
            source=source,
        )
        out[i] = candidates[chosen.value]
    nan = np.full(len(groups), math.nan)
    return Output(out, nan, nan.copy(), nan.copy(), "none")


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
