"""Run a plan: the engine computes the small exact aggregates, then noise, then the released table.

Only the aggregated result (one row per group) comes back from the engine. Noise comes from the
mechanisms layer (exact samplers of :mod:`dpcurator.noise`); every value the analyst sees is a
post-processing of the noisy measurements (:mod:`dpcurator.curator._estimates`), with its
standard deviation and an interval.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray
from sqlglot import exp

from dpcurator.accounting import DiscreteGaussianEvent, PrivacyEvent
from dpcurator.curator._aggregates import release
from dpcurator.curator._estimates import HalfWidths, Measured, Noisy, Output
from dpcurator.curator._measures import JOINT, QuantileCounts, UnitCount, joint_epsilon
from dpcurator.curator._plan import Measurement, Plan, domain_product
from dpcurator.curator._statements import quantile_buckets, quantile_clamp
from dpcurator.errors import InternalError
from dpcurator.mechanisms import (
    Release,
    discrete_gaussian_mechanism,
    geometric_mechanism,
)
from dpcurator.mechanisms._exponential import exponential_mechanism_runs
from dpcurator.mechanisms._joint_quantiles import joint_quantile_mechanism
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
    """Per group and quantile column, the non-empty buckets (without GROUP BY: those near the
    quantiles): rows ``[indices, counts, below, total]``, ``below`` the count in lower buckets
    and ``total`` the group's count."""


def _key_tuples(
    table: Mapping[str, Sequence[Any]], aliases: Sequence[str], rows: int
) -> list[tuple[Any, ...]]:
    if not aliases:
        return [()] * rows
    return list(zip(*[_canonical_column(table[a]) for a in aliases], strict=True))


def _canonical_column(values: Sequence[Any]) -> Sequence[Any]:
    """``values`` with each float made canonical (a column without floats comes back as is).

    An engine returns one type per column (and NULLs), so its first value that is not NULL
    tells whether it holds floats.
    """
    first = next((v for v in values if v is not None), None)
    if isinstance(first, float):
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
    """Exact integers from the engine (NULL, the sum of no rows, is 0), as int64.

    Python ints that fit int64 are converted in one step; a column with NULLs or other types
    (an engine's Decimal) value by value.
    """
    array = np.asarray(values)
    if array.ndim == 1 and np.issubdtype(array.dtype, np.integer):
        return array.astype(np.int64)
    return np.array([0 if v is None else int(v) for v in values], dtype=np.int64)


def fetch(plan: Plan, read: Read, *, groups: bool = True) -> Exact:
    """Run the plan's statements through ``read`` (statement -> columns of Python values).

    Aggregates come back as exact integers (the engine's integer sums are never rounded to
    float64); group keys are canonical (see :func:`key_order`). ``groups=False`` skips the
    main statement where the release needs nothing from it: quantiles only, over public
    groups (no GROUP BY, or declared domains), which :func:`compute` takes from the plan.
    """
    aliases = [k.alias for k in plan.keys]
    keys: list[tuple[Any, ...]] = []
    columns: dict[str, NDArray[Any]] = {}
    if groups or not _public_quantiles_only(plan):
        table = read(plan.statements.main)
        rows = len(next(iter(table.values()))) if table else 0
        keys = _key_tuples(table, aliases, rows)
        columns = {name: _integer_column(v) for name, v in table.items() if name not in aliases}
    buckets: dict[tuple[tuple[Any, ...], str], NDArray[np.int64]] = {}
    if plan.statements.quantiles is not None:
        qt = read(plan.statements.quantiles)
        size = len(qt["__n"])
        names = (
            ["__bucket", "__n", "__below", "__total"] if "__below" in qt else ["__bucket", "__n"]
        )
        data = [_integer_column(qt[name]) for name in names]
        pairs = zip(_key_tuples(qt, aliases, size), qt["__column"], strict=True)
        code_of: dict[tuple[tuple[Any, ...], str], int] = {}
        codes = np.fromiter((code_of.setdefault(p, len(code_of)) for p in pairs), np.int64, size)
        order = np.argsort(codes, kind="stable")
        ends = np.cumsum(np.bincount(codes, minlength=len(code_of)))
        for key, code in code_of.items():
            members = order[ends[code - 1] if code else 0 : ends[code]]
            buckets[key] = _bucket_rows(np.stack([column[members] for column in data]))
    return Exact(keys=keys, columns=columns, buckets=buckets)


def _public_quantiles_only(plan: Plan) -> bool:
    """Whether the plan measures quantiles only, in groups known before reading the rows."""
    quantiles = all(isinstance(m.measure, QuantileCounts) for m in plan.measurements)
    return quantiles and not (plan.keys and plan.selects_partitions)


def _bucket_rows(rows: NDArray[np.int64]) -> NDArray[np.int64]:
    """Return a group's buckets as rows ``[indices, counts, below, total]``, by index.

    ``rows`` is ``[indices, counts]`` (every non-empty bucket: the prefix counts are computed
    here) or already has ``below`` and ``total`` (the engine's, for the buckets it kept).
    """
    out = rows[:, np.argsort(rows[0], kind="stable")]
    if out.shape[1] > 1 and not np.all(out[0, 1:] > out[0, :-1]):
        raise InternalError("The engine returned a bucket twice for one group.")
    if out.shape[0] == 2:
        counts = out[1]
        below = np.cumsum(counts) - counts
        total = np.full(counts.size, counts.sum(), dtype=np.int64)
        out = np.vstack([out, below, total])
    return out.astype(np.int64)


@dataclass
class _Groups:
    """The groups released, and where each is in the engine's result (-1: absent there)."""

    keys: list[tuple[Any, ...]]
    rows: NDArray[np.int64]

    @classmethod
    def of(cls, plan: Plan, exact: Exact) -> _Groups:
        if plan.keys and not plan.selects_partitions:
            keys = domain_product(plan.keys)
        elif plan.keys:
            keys = sorted(exact.keys, key=key_order)
        else:
            keys = [()]
        index = dict(zip(exact.keys, range(len(exact.keys)), strict=True))
        rows = np.fromiter(map(index.get, keys, itertools.repeat(-1)), np.int64, len(keys))
        return cls(keys, rows)

    def vector(self, exact: Exact, name: str) -> NDArray[np.int64]:
        """Return the exact aggregate ``name`` per released group (0 where it had no rows)."""
        values = exact.columns.get(name)
        if values is None or len(exact.keys) == 0:
            return np.zeros(len(self.keys), dtype=np.int64)
        return np.where(self.rows >= 0, values[self.rows], 0).astype(np.int64)

    def keep(self, kept: NDArray[np.bool_]) -> None:
        self.keys = list(itertools.compress(self.keys, kept))
        self.rows = self.rows[kept]


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
    half = HalfWidths(error, levels)
    return Noisy(np.asarray(noisy.value, dtype=np.int64), m.unit_value, error.std, half)


def _selection(m: Measurement) -> bool:
    return isinstance(m.measure, UnitCount) and m.measure.selection


def compute(
    plan: Plan, exact: Exact, *, source: RandomSource, confidence: float
) -> tuple[pd.DataFrame, dict[str, str], tuple[Any, ...]]:
    """Add noise to the exact aggregates and build the released table.

    Returns the table (group keys, then ``value, value_std, value_ci_low, value_ci_high`` for
    each aggregate), per aggregate how its interval is obtained, and what was measured (the
    groups' keys and each measure's noisy vector: :attr:`QueryRelease.measured`).
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
    joint = _joint_groups(plan)
    for m, event in planned:
        if isinstance(m.measure, QuantileCounts) and m.measure.column in joint:
            if m.measure not in measured.quantiles:  # the group's first level draws them all
                rows = joint[m.measure.column]
                measured.quantiles.update(_joint(plan, rows, groups.keys, exact, source))
        elif isinstance(m.measure, QuantileCounts):
            measured.quantiles[m.measure] = _quantiles(plan, m, groups.keys, exact, source)
        elif not _selection(m):
            vector = groups.vector(exact, m.result)
            measured.noisy[m.measure] = _noisy(m, event, vector, measured.levels, source)
    outputs = {a.alias: release(a, measured) for a in plan.query.aggregates}
    intervals = {alias: out.exact for alias, out in outputs.items()}
    return _frame(plan, groups.keys, outputs), intervals, (tuple(groups.keys), measured.noisy)


def _quantiles(
    plan: Plan,
    m: Measurement,
    groups: Sequence[tuple[Any, ...]],
    exact: Exact,
    source: RandomSource,
) -> FloatArray:
    """Per group, the exponential mechanism's choice among the public candidate points.

    The candidates are the ``B + 1`` ends of the column's ``B`` buckets
    (:func:`~dpcurator.curator._statements.quantile_buckets`); point ``j``'s utility is
    ``max(-|#(values in buckets < j) + #(values in bucket j) / 2 - q n|, OPT - T)`` (its
    mid-rank, :func:`_quantile_runs`; :func:`quantile_clamp`), so each non-empty bucket's own
    point is a run, and the points between two non-empty buckets share a utility: the choice is
    :func:`~dpcurator.mechanisms._exponential.exponential_mechanism_runs` (Smith 2011's
    interval mechanism on the public grid, with a tie scored by where the quantile falls in it).
    """
    assert isinstance(m.measure, QuantileCounts)
    column, level = m.measure.column, m.measure.level
    spec = next(v for v in plan.values if v.column == column)
    buckets = quantile_buckets(spec)
    epsilon = plan.per_group(m.epsilon)
    clamp = quantile_clamp(epsilon, m.sensitivity, buckets)
    out = np.empty(len(groups), dtype=np.float64)
    for i, group in enumerate(groups):
        entry = exact.buckets.get((group, column))
        lengths, utilities = _quantile_runs(entry, level, buckets, clamp)
        choice = exponential_mechanism_runs(
            lengths, utilities, epsilon=epsilon, sensitivity=m.sensitivity, source=source
        )
        out[i] = float(spec.range.lower + spec.range.width * Fraction(choice.value, buckets))
    return out


def _joint_groups(plan: Plan) -> dict[str, list[tuple[Measurement, PrivacyEvent]]]:
    """Per column whose quantiles are released jointly, its rows and events (see JOINT)."""
    out: dict[str, list[tuple[Measurement, PrivacyEvent]]] = {}
    for m, event in zip(plan.measurements, plan.events, strict=True):
        if isinstance(m.measure, QuantileCounts) and m.mechanism == JOINT:
            out.setdefault(m.measure.column, []).append((m, event))
    return out


def _joint(
    plan: Plan,
    rows: Sequence[tuple[Measurement, PrivacyEvent]],
    groups: Sequence[tuple[Any, ...]],
    exact: Exact,
    source: RandomSource,
) -> dict[QuantileCounts, FloatArray]:
    """Per group, one joint draw of a column's quantiles (JointExp over the public points).

    The candidates are sorted tuples of positions of the ``B + 1`` bucket ends
    (:func:`_joint_runs`); each group's choice is
    :func:`~dpcurator.mechanisms._joint_quantiles.joint_quantile_mechanism` at
    ``epsilon_J / g`` (``g`` groups per unit, as for one quantile) with the joint utility's
    sensitivity (:func:`~dpcurator.curator._measures.joint_quantiles`), over the runs of
    points between the group's non-empty buckets (all of them: the statement keeps every
    bucket of a joint column, see :func:`~dpcurator.curator._statements.build_statements`).
    """
    measures = sorted(
        (m.measure for m, _ in rows if isinstance(m.measure, QuantileCounts)),
        key=lambda q: q.level,
    )
    column = measures[0].column
    levels = [q.level for q in measures]
    spec = next(v for v in plan.values if v.column == column)
    buckets = quantile_buckets(spec)
    epsilon = plan.per_group(joint_epsilon([e for _, e in rows]))
    sensitivity = rows[0][0].sensitivity
    out = {q: np.empty(len(groups), dtype=np.float64) for q in measures}
    for i, group in enumerate(groups):
        lengths, ranks, total = _joint_runs(exact.buckets.get((group, column)), buckets)
        choice = joint_quantile_mechanism(
            lengths,
            ranks,
            levels,
            epsilon=epsilon,
            sensitivity=sensitivity,
            total=total,
            source=source,
        )
        for q, position in zip(measures, choice.value, strict=True):
            point = max(position // SUB_POSITIONS - 1, 0)
            out[q][i] = float(spec.range.lower + spec.range.width * Fraction(point, buckets))
    return out


SUB_POSITIONS = 2**41
"""``K``: each candidate point of a joint draw is ``K`` positions (see :func:`_joint_runs`)."""


def _joint_runs(
    entry: NDArray[np.int64] | None, buckets: int
) -> tuple[NDArray[np.int64], NDArray[np.int64], int]:
    """Return a group's runs of candidate positions (lengths), their ranks and its value count.

    Each of the ``B + 1`` points ``j`` (value ``L + j (U - L) / B``) is ``K`` public positions
    ``(j, s)``, ``s = 0 .. K - 1``, in that order, of rank
    ``below(j) + min(s, n_j)``: the values in lower buckets, plus ``s`` of the ``n_j`` values
    of bucket ``j`` (which all round to that point). Ranks never decrease along the positions,
    and adding one value in bucket ``k`` adds 1 to the rank of exactly the positions from
    ``(k, n_k + 1)`` on, so the joint utility's sensitivity is unchanged
    (:func:`~dpcurator.mechanisms.joint_quantile_sensitivity`). What it changes: a level that
    falls inside a tied value (many rows in one bucket, e.g. wages of 0) has a position of
    exactly its rank, where among points alone the nearest rank may be far, and the joint
    utility (the half total variation of the rank errors) is flat across every intermediate
    level's rank between its neighbours' errors. Every one of the ``K`` positions of an empty
    bucket's point has the same rank, so for data without ties the law of the chosen points is
    as without positions; the stated rank error stays the single-quantile formula's
    (:func:`~dpcurator.curator._measures.joint_quantiles`): the best tuple of points is reached
    by at least ``K - max_j n_j`` positions per level, so ``ln |C|`` grows by at most
    ``m ln(K / (K - max_j n_j))`` (``m 2**-20`` for at most ``2**20`` rows per bucket).
    Before point 0 come ``K`` more positions of rank 0 and value ``L`` (point 0's value), so
    that every rank of a point, 0 included, is reached by at least ``K - max_j n_j``
    positions. Consecutive positions of equal rank form one run.
    """
    k = SUB_POSITIONS
    if entry is None or entry.shape[1] == 0:  # no rows: one run, rank 0
        return np.array([(buckets + 2) * k], dtype=np.int64), np.zeros(1, dtype=np.int64), 0
    index, counts, below, total = entry
    if int(below[0]) != 0 or np.any(below[1:] != below[:-1] + counts[:-1]):
        raise InternalError("A joint quantile needs every non-empty bucket of its group.")
    inner = np.minimum(counts, k - 1)  # positions s = 0 .. inner - 1 have distinct ranks
    after = np.append(index[1:], buckets + 1) - index - 1  # empty points up to the next one
    # Segments per bucket: the inner positions one by one, the rest of its positions, the
    # empty points after it; plus the empty points before the first bucket.
    each = inner + 2
    ends = np.cumsum(each)
    size = int(ends[-1]) + 1
    lengths = np.ones(size, dtype=np.int64)
    ranks = np.zeros(size, dtype=np.int64)
    lengths[0] = (int(index[0]) + 1) * k  # with the K positions of rank 0 before point 0
    starts = 1 + ends - each
    within = np.arange(int(inner.sum()), dtype=np.int64) - np.repeat(
        np.cumsum(inner) - inner, inner
    )
    unit = np.repeat(starts, inner) + within
    ranks[unit] = np.repeat(below, inner) + within
    tail = starts + inner
    lengths[tail] = k - inner
    ranks[tail] = below + np.minimum(counts, inner)
    gap = tail + 1
    lengths[gap] = after * k
    ranks[gap] = below + counts
    keep = lengths > 0
    lengths, ranks = lengths[keep], ranks[keep]
    first = np.flatnonzero(np.concatenate([[True], ranks[1:] != ranks[:-1]]))
    return np.add.reduceat(lengths, first), ranks[first], int(total[0])


def _quantile_runs(
    entry: NDArray[np.int64] | None, level: float, buckets: int, clamp: float
) -> tuple[NDArray[np.int64], FloatArray]:
    """Return a group's runs of candidate points (lengths) and their clamped utilities.

    A point's rank is its *mid-rank*: the values in lower buckets plus half of those in its own
    bucket (the bucket it opens, ``[p, p + w)``), so ``u(p) = -|below + n_p / 2 - q n|``. Adding
    or removing a row moves a point's mid-rank by 1, 1/2 or 0 and ``q n`` by ``q``, so ``u``
    keeps the sensitivity ``max(q, 1 - q)`` per row of the plain rank ``below``. Where the
    values sit on the points (integer data: every integer is a point), a value that many rows
    share is scored by where the quantile falls among them: with the plain rank, the point at
    such a value, and every point next to it, stood a whole tie away from ``q n`` whenever the
    quantile fell inside the tie (Smith's intervals between data values never hold it at all).

    Each returned bucket's point is a run of its own; the points between two returned buckets
    share the rank past the lower one. Where the engine left buckets out (they border no run
    within ``T`` of the best), the run just past the returned bucket before them is itself
    beyond ``T`` (its rank is the left-out bucket's ``below``), so one run with ``OPT - T``
    covers them all; likewise before the first.
    """
    if entry is None or entry.shape[1] == 0:  # no rows: every point has utility 0
        return np.array([buckets + 1], dtype=np.int64), np.zeros(1)
    index, counts, below, total = entry
    target = level * float(total[0])
    low = below.astype(np.float64)
    before = np.abs(low[:1] - target)  # the points below the first returned bucket
    mid = np.abs(low + counts / 2.0 - target)  # each returned bucket's own point
    after = np.abs(low + counts - target)  # the points past each returned bucket
    gaps = np.diff(np.concatenate([[-1], index])) - 1  # points strictly between (or before)
    tail = buckets - int(index[-1])  # points past the last returned bucket
    lengths = np.append(np.column_stack([gaps, np.ones_like(index)]).ravel(), tail)
    distances = np.column_stack([np.concatenate([before, after[:-1]]), mid]).ravel()
    distances = np.append(distances, after[-1])
    keep = lengths > 0  # two adjacent buckets have no point between them
    lengths, distances = lengths[keep], distances[keep]
    limit = float(distances.min()) + clamp  # OPT: the best point's distance
    return lengths.astype(np.int64), -np.minimum(distances, limit)


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
    if not query.order_by and query.limit is None:
        return frame  # its index is already 0 .. n - 1
    if query.order_by:
        frame = frame.sort_values(
            [name for name, _ in query.order_by],
            ascending=[not desc for _, desc in query.order_by],
            kind="stable",
        )
    if query.limit is not None:
        frame = frame.head(query.limit)
    return frame.reset_index(drop=True)
