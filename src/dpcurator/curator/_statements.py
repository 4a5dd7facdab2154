"""The bounded aggregate statements of a plan, built once as sqlglot trees.

A plan's statements read the declared table's rows from the placeholder :data:`SOURCE` and are
rendered per engine by :func:`dpcurator.curator._engine.render`; no SQL text is ever pasted
together. Every name an analyst chose (columns, literals) enters as a quoted identifier or a
literal node.

The statement, in steps (common table expressions):

``__rows``
    The analyst's rows: the privacy unit, the group keys (a histogram's bin), each numeric
    column clamped into its bounds (NULL and NaN: the midpoint, or NULL where the column is
    nullable); rows without a unit, outside the keys' public domains, or where the analyst's
    filter is not true (TRY semantics: a filter that fails on a row is false) are dropped.
``__over``
    The units beyond a contribution bound, computed on the table's rows *before* the
    analyst's filter (see :func:`over_statement`). It is a function of the table, the group-key
    columns and the bounds only, so a session may compute it once and reuse it for every query
    with the same keys and bounds while the table is unchanged: it is a superset of the units
    beyond their bounds after any filter, and bounding a unit within its bounds keeps all its
    rows, so the result is the same either way. With one group per unit it also flags
    (:data:`SEVERAL`) the units whose rows have several keys: the others have one pair. A key
    whose public domain is a run of integers is read there as a code of its value in the
    domain (0 outside it), packed with its complement and tested by one ``BIT_OR``
    (:func:`_key_code`).
``__bounded``
    The rows of units within their bounds as they are, and the others bounded, in one of two
    ways.

    *Scaled* (statements without quantiles or histogram bins: every measure is a sum over rows,
    ``COUNT(*)``, ``COUNT(col)``, fixed-point sums and sums of squares, or ``COUNT(DISTINCT
    unit)``): one aggregation of the unit's rows per (unit, group) pair, like the floor
    ``GROUP BY unit``, gives each pair's ``n`` rows, its ``COUNT(col)`` and its exact integer
    sums ``s``. A unit keeps its ``g`` pairs of least key hash (MD5 of the key's text; ties:
    the keys' order); each kept pair gets a weight ``m = min(n, c)``, and when the kept pairs'
    weights total more than ``k``, the pairs in key-hash order take them until ``k`` are taken
    (``m = min(n, c, k - P)``, ``P`` the weights before it; pairs left at 0 are dropped). The
    pair then counts ``m`` rows, and each of its sums (``COUNT(col)`` included) is
    ``(s m) DIV n``, rounding toward zero, the same on DuckDB and Spark (exact integers:
    HUGEINT, DECIMAL(38, 0) and BIGINT; BIGINT wherever ``s m`` fits, see :func:`scale_part`).
    A pair within its bounds has ``m = n``, so it is counted exactly. What a unit contributes
    is as bounded as ``m`` of its rows would be:
    ``0 <= m <= c`` rows per group, ``sum m <= k``, at most ``g`` groups; ``|(s m) DIV n| <=
    m max|index|`` since ``|s| <= n max|index|``; ``0 <= (cc m) DIV n <= m`` for ``cc <= n``
    non-NULL rows; and it is present in a group (``COUNT(DISTINCT unit)``) only where
    ``m >= 1``. The estimate is ``m`` times the pair's mean, with less variance than a
    subset of ``m`` rows, and costs one pass over the rows instead of a window over them.

    *Truncated* (quantiles and histograms, whose bucket counts need whole rows): at most
    ``g`` groups per unit (ranked by a hash of the group key), ``c`` rows per unit and
    group and ``k`` rows per unit (ranked by a hash of the row). The hash is MD5 of the row's
    text, the same on every engine, with the row's values breaking ties.

    Either way every choice and every weight depends on the unit's own rows only, so removing
    a unit changes no other unit's contribution.

Then one aggregation per group computes every measure: exact integer counts and fixed-point sums
(see :func:`value_sum`), and, for quantiles, a second statement of per-bucket counts. A session
that knows many units are beyond their bounds runs a scaled statement through
:func:`all_pairs`: every unit's pairs scaled, without the join that splits the rows (the same
result, since scaling a pair within its bounds changes nothing).

A scaled statement with one group per unit (or without keys), whose keys are runs of
integers, also has a *single-pass* variant (:attr:`Statements.single`, :func:`_single_pass`):
one aggregation per unit of the analyst's rows, each unit's key read back from its packed
codes, without :data:`OVER`; the same aggregates at about the cost of one ``GROUP BY unit``,
which a session prefers where most units are beyond their bounds
(:mod:`dpcurator.curator._sampling`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import assert_never

from sqlglot import exp

from dpcurator.curator._cache import Recent
from dpcurator.curator._engine import SOURCE
from dpcurator.curator._measures import (
    JOINT,
    ColumnCount,
    Measure,
    QuantileCounts,
    RowCount,
    UnitCount,
    ValueSum,
)
from dpcurator.curator._specs import Contribution, KeySpec, Measurement, ValueSpec
from dpcurator.curator._table import Table

__all__ = [
    "OVER",
    "QUANTILE_BUCKETS",
    "SEVERAL",
    "SUM_CLAMP",
    "Statements",
    "all_pairs",
    "build_statements",
    "over_statement",
    "quantile_buckets",
    "quantile_clamp",
    "scale_part",
    "with_over",
    "without_heavy",
]

QUANTILE_BUCKETS = 2**20
"""The most buckets a quantile cuts ``[L, U]`` into (see :func:`quantile_buckets`)."""
SUM_CLAMP = 2**62
"""Integer sums are clamped into ``[-2**62, 2**62]`` in the engine (a 1-Lipschitz map of the
sum, so no sensitivity changes), so that they and their noise fit int64 exactly."""
OVER = "__over"
"""The name of the step listing the units beyond their bounds."""
SEVERAL = "__sev"
"""The column of :data:`OVER` (one group per unit only) flagging units with several keys."""
UNIT = "__u"


@dataclass(frozen=True)
class Statements:
    """A plan's statements (sqlglot trees reading :data:`SOURCE`).

    Attributes
    ----------
    main : sqlglot.exp.Query
        One row per group: the group keys and every measure but quantiles.
    quantiles : sqlglot.exp.Query or None
        Per group, column and bucket, the count of bounded rows (for quantiles).
    over : sqlglot.exp.Query or None
        The units beyond a bound (None when the table has no privacy unit).
    over_key : tuple
        What :attr:`over` depends on besides the table's rows: the unit, key columns, bounds.
    build_single : callable or None
        Builds :attr:`single` (on demand: most tables never need it), or None where it does not
        apply.
    """

    main: exp.Query
    quantiles: exp.Query | None
    over: exp.Query | None
    over_key: tuple[object, ...]
    build_single: Callable[[], exp.Query] | None = field(default=None, compare=False)

    @cached_property
    def single(self) -> exp.Query | None:
        """Return :attr:`main` in one aggregation per unit, without :attr:`over`, or None.

        The same result (see :func:`_single_pass`); None where it does not apply.
        """
        return None if self.build_single is None else self.build_single()

    @property
    def all(self) -> list[exp.Query]:
        """The statements that read the rows, in the order they run."""
        return [self.main] if self.quantiles is None else [self.main, self.quantiles]


# -- small builders ----------------------------------------------------------------------------
def _source_column(name: str) -> exp.Column:
    return exp.column(name, quoted=True)


def _ref(alias: str) -> exp.Column:
    return exp.column(alias)


def _number(value: float) -> exp.Expr:
    return exp.Literal.number(repr(float(value)))


def _integer(value: int) -> exp.Expr:
    return exp.Literal.number(value)


def _case(whens: Sequence[tuple[exp.Expr, exp.Expr]], default: exp.Expr) -> exp.Case:
    """``CASE WHEN c THEN v ... ELSE default END`` of fresh trees, taken as they are (no copy)."""
    return exp.Case(ifs=[exp.If(this=c, true=v) for c, v in whens], default=default)


def _clamp(value: exp.Expr, low: exp.Expr, high: exp.Expr) -> exp.Expr:
    """``value`` clamped into ``[low, high]``; NaN gives ``high`` and NULL stays NULL.

    A CASE, which DuckDB evaluates about twice as fast as ``LEAST(GREATEST(...))``; a NaN is
    greater than every number on both engines, as in ``LEAST(GREATEST(NaN, low), high)``. The
    common case comes first (``BETWEEN``: one test for a value within the bounds, the rows
    left for the next tests are the others only): the same value for every input, in less
    time than ``value < low`` and ``value > high`` each tested on every row.
    """
    inside = exp.Between(this=value, low=low, high=high)
    below = exp.LT(this=value.copy(), expression=low.copy())
    above = exp.GT(this=value.copy(), expression=high.copy())
    return _case([(inside, value.copy()), (below, low.copy()), (above, high.copy())], value.copy())


def _double(value: exp.Expr) -> exp.Expr:
    return exp.cast(value, exp.DataType.build("DOUBLE"))


def _missing(name: str) -> exp.Expr:
    """``col IS NULL OR isnan(CAST(col AS DOUBLE))``."""
    return exp.or_(
        _source_column(name).is_(exp.null()), exp.func("ISNAN", _double(_source_column(name)))
    )


def _key_hash(aliases: Sequence[str]) -> exp.Expr:
    """MD5 of the group key's text (NULL parts skipped on every engine): ranks a unit's groups."""
    texts = [exp.cast(_ref(a), exp.DataType.build("VARCHAR")) for a in aliases]
    joined = exp.Anonymous(this="CONCAT_WS", expressions=[exp.Literal.string("|"), *texts])
    return exp.func("MD5", joined)


_MIX_PRIME = 2147483647
_MIX_FACTOR = 1000003
_MIX_STEPS = 1 << 20


def _row_mix(values: Sequence[ValueSpec], others: Sequence[exp.Expr]) -> exp.Expr | None:
    """Return a pseudo-random integer of a row's aggregated content, the same on every engine.

    Integer arithmetic only (``h = (h * 1000003 + v) mod (2**31 - 1)`` over the row's parts):
    each clamped value's step among ``2**20`` of its range (``FLOOR`` of an IEEE product, exact
    on every engine; NULL is -1), then ``others`` (a histogram's bin, NULL flags). Rows that
    tie have the same parts; the row's columns then order them.
    """
    parts: list[exp.Expr] = []
    for v in values:
        scale = _number(float(_MIX_STEPS / v.range.width))
        offset = exp.paren(exp.Sub(this=_ref(v.alias), expression=_number(v.lower)))
        step = exp.func("FLOOR", exp.Mul(this=offset, expression=scale))
        parts.append(
            exp.func("COALESCE", exp.cast(step, exp.DataType.build("BIGINT")), _integer(-1))
        )
    parts += others
    if not parts:
        return None
    mixed: exp.Expr = _integer(0)
    for part in parts:
        scaled = exp.Mul(this=exp.paren(mixed), expression=_integer(_MIX_FACTOR))
        mixed = exp.Mod(
            this=exp.paren(exp.Add(this=scaled, expression=part)), expression=_integer(_MIX_PRIME)
        )
    return mixed


def _window_filter(
    columns: Sequence[str], source: str, window: exp.Window, limit: int
) -> exp.Select:
    """``SELECT columns FROM source`` keeping rows whose window rank is at most ``limit``.

    Written with QUALIFY (DuckDB runs it fastest); sqlglot rewrites it into a filtered
    subquery for engines without QUALIFY (Spark).
    """
    kept = exp.LTE(this=window, expression=_integer(limit))
    return exp.select(*columns).from_(source).qualify(kept)


def _ordered(*items: exp.Expr) -> exp.Order:
    return exp.Order(expressions=[exp.Ordered(this=item, nulls_first=True) for item in items])


# -- the rows ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Rows:
    """The ``__rows`` step: its projections (name, expression) and its filters."""

    projections: tuple[tuple[str, exp.Expr], ...]
    filters: tuple[exp.Expr, ...]

    @property
    def names(self) -> list[str]:
        return [name for name, _ in self.projections]

    def select(self) -> exp.Select:
        items = [exp.alias_(e, name) for name, e in self.projections]
        select = exp.select(*items).from_(exp.to_table(SOURCE))
        return select.where(exp.and_(*self.filters)) if self.filters else select


def _clamped(value: ValueSpec) -> exp.Expr:
    """Return a value clamped into its bounds; NULL and NaN: the midpoint (NULL if nullable).

    The values within the bounds come first (one ``BETWEEN``); NULL and NaN fail it and are
    caught next, before the bounds' tests (a NaN is above every number).
    """
    x = _double(_source_column(value.column))
    fill = exp.null() if value.nullable else _number(value.mid)
    low, high = _number(value.lower), _number(value.upper)
    inside = exp.Between(this=x, low=low, high=high)
    below = exp.LT(this=x.copy(), expression=low.copy())
    whens = [(inside, x.copy()), (_missing(value.column), fill), (below, low.copy())]
    return _case(whens, high.copy())


def _bin(key: KeySpec, nullable: bool) -> exp.Expr:
    assert key.edges is not None
    edges = key.edges
    x: exp.Expr = _double(_source_column(key.column))
    if not nullable:
        mid = _number((edges[0] + edges[-1]) / 2.0)
        x = _case([(_missing(key.column), mid)], x)
    if len(edges) <= 2:
        return _integer(0)
    whens = [
        (exp.LT(this=x.copy(), expression=_number(edge)), _integer(i))
        for i, edge in enumerate(edges[1:-1])
    ]
    return _case(whens, _integer(len(edges) - 2))


def _rows(
    table: Table,
    where: exp.Expr | None,
    keys: Sequence[KeySpec],
    values: Sequence[ValueSpec],
    counted: Sequence[tuple[str, str]],
) -> _Rows:
    projections: list[tuple[str, exp.Expr]] = []
    filters: list[exp.Expr] = []
    unit = table.unit_column
    if unit is not None:
        projections.append((UNIT, _source_column(unit)))
        filters.append(exp.not_(_source_column(unit).is_(exp.null())))
    if where is not None:
        # TRY semantics: a row on which the analyst's filter fails (a CAST, an overflow, a
        # division by zero) is not selected, instead of an error that depends on its value.
        filters.append(exp.func("COALESCE", exp.Try(this=_null_on_zero(where)), exp.false()))
    for key in keys:
        if key.is_bin:
            nullable = table.column(key.column).nullable
            if nullable:
                filters.append(exp.not_(_missing(key.column)))
            projections.append((key.alias, _bin(key, nullable)))
            continue
        projections.append((key.alias, _key_value(key)))
        if key.domain is not None:
            filters.append(_in_domain(_key_value(key), key.domain, whole=key.whole))
    projections += [(v.alias, _clamped(v)) for v in values]
    projections += [(alias, _source_column(column)) for column, alias in counted]
    if not projections:
        projections.append(("__one", _integer(1)))
    return _Rows(tuple(projections), tuple(filters))


def _null_on_zero(where: exp.Expr) -> exp.Expr:
    """Return ``where`` with every divisor ``d`` written ``NULLIF(d, 0)``.

    A division (or remainder) by zero is then NULL on every engine, as Spark computes it and
    as the filter's TRY semantics state; DuckDB divides a float by zero into an infinity (which
    ``> 3`` would select) and fails on an integer one.
    """

    def guard(node: exp.Expr) -> exp.Expr:
        if isinstance(node, exp.Div | exp.IntDiv | exp.Mod):
            node.set("expression", exp.func("NULLIF", node.expression.copy(), _integer(0)))
        return node

    return where.copy().transform(guard)


_RANGE_MIN = 16


def _key_value(key: KeySpec) -> exp.Expr:
    """Return a group key's value per row: its column, or a computed key's expression.

    A computed key with a numeric domain is cast to the domain's type (BIGINT when every value
    is an integer, else DOUBLE; NULL where the cast fails, as for NaN): the engines type the
    same expression differently (``FLOOR`` of a DOUBLE is a DOUBLE on DuckDB, a BIGINT on
    Spark), and a key's text decides how a unit's groups are ranked (:func:`_key_hash`).
    """
    if key.expression is None:
        return _source_column(key.column)
    numbers = [v for v in key.domain or () if not isinstance(v, str | bool)]
    if not numbers or len(numbers) != len(key.domain or ()):
        return key.expression.copy()
    kind = "BIGINT" if all(isinstance(v, int) for v in numbers) else "DOUBLE"
    return exp.TryCast(this=key.expression.copy(), to=exp.DataType.build(kind))


def _in_domain(x: exp.Expr, domain: tuple[object, ...], *, whole: bool) -> exp.Expr:
    """``x IN (domain)``; for a run of consecutive integers, a range test instead.

    Safe without TRY: the engine refuses a text column with a domain of non-text values (the
    one case where an engine would cast each row's value, and could fail). A domain of
    ``n >= 16`` consecutive integers ``a, ..., a + n - 1`` is tested as ``a <= x <= a + n - 1``
    and ``FLOOR(x) = x`` (the same rows, for integer and floating-point columns alike), so
    its SQL does not grow with ``n``; for a key known to be ``whole`` (a column of an integer
    type), the range alone (a NULL fails it either way).
    """
    run = _integer_run(domain)
    if run is not None:
        inside = exp.Between(this=x, low=_integer(run[0]), high=_integer(run[1]))
        if whole:
            return inside
        integral = exp.EQ(this=exp.func("FLOOR", x.copy()), expression=x.copy())
        return exp.and_(inside, integral)
    return exp.In(this=x, expressions=[exp.convert(v) for v in domain])


_RUNS: Recent[tuple[tuple[object, ...], tuple[int, int] | None]] = Recent(64)
"""The runs of recent domains, keyed by the domain object's identity (the entry keeps the
object, so that its id is not reused): a plan asks up to three times per key, and a session's
plans share their declared domains. Not by value: ``(1, 2)`` equals ``(1.0, 2.0)``."""


def _integer_run(domain: tuple[object, ...] | None) -> tuple[int, int] | None:
    """Return ``(a, b)`` for a domain of ``n >= 16`` consecutive integers ``a..b``, else None.

    Such a domain is tested as a range (:func:`_in_domain`), which binds only on a numeric key.
    """
    if domain is None:
        return None
    kept = _RUNS.get(id(domain))
    if kept is None or kept[0] is not domain:
        kept = (domain, _run_of(domain))
        _RUNS.put(id(domain), kept)
    return kept[1]


def _run_of(domain: tuple[object, ...]) -> tuple[int, int] | None:
    integers = [v for v in domain if type(v) is int]
    if len(integers) == len(domain) >= _RANGE_MIN:
        low, high = min(integers), max(integers)
        if high - low + 1 == len(set(integers)) == len(integers):
            return low, high
    return None


# -- the units beyond their bounds ---------------------------------------------------------------
def _grouped(keys: Sequence[KeySpec]) -> list[str]:
    return [k.alias for k in keys if not k.is_bin]


def over_statement(
    table: Table, keys: Sequence[KeySpec], contribution: Contribution
) -> exp.Select | None:
    """Return the units beyond a bound among all the table's rows (None without a unit).

    A unit is beyond its bounds if it has more than ``k`` rows, rows in more than ``g`` groups,
    or more than ``c`` rows in one group. Computed before any filter, it is a superset of the
    units beyond their bounds among the rows a query keeps.
    """
    unit = table.unit_column
    if unit is None:
        return None
    grouped = [k for k in keys if not k.is_bin]
    k, g, c = contribution.rows, contribution.groups, contribution.per_group
    aliases = [key.alias for key in grouped]
    limit_groups = bool(aliases) and g < k
    limit_per_group = bool(aliases) and c < k
    one_group = limit_groups and g == 1
    codes = {key.alias: _key_code(key) if one_group else (_key_value(key), None) for key in grouped}
    items = [exp.alias_(_source_column(unit), UNIT)]
    items += [exp.alias_(value, alias) for alias, (value, _) in codes.items()]
    rows = exp.select(*items).from_(exp.to_table(SOURCE))
    rows = rows.where(exp.not_(_source_column(unit).is_(exp.null())))
    if one_group:
        return _over_one_group(rows, {a: bits for a, (_, bits) in codes.items()}, min(k, c))
    if limit_groups or limit_per_group:
        per = exp.select(UNIT, "COUNT(*) AS __n").from_(rows.subquery("__all"))
        per = per.group_by(UNIT, *aliases)
        conditions = [f"SUM(__n) > {k}"]
        conditions += [f"COUNT(*) > {g}"] if limit_groups else []
        conditions += [f"MAX(__n) > {c}"] if limit_per_group else []
        over = exp.select(UNIT).from_(per.subquery("__per")).group_by(UNIT)
        return over.having(exp.or_(*conditions))
    return exp.select(UNIT).from_(rows.subquery("__all")).group_by(UNIT).having(f"COUNT(*) > {k}")


_PACKINGS = ((15, "INT"), (31, "BIGINT"))
"""The packed codes (:func:`_key_code`): code bits and the integer type that holds two of them."""


def _key_code(key: KeySpec) -> tuple[exp.Expr, int | None]:
    """Return a key as the test for one group per unit reads it, and its packing's code bits.

    For a domain of ``n >= 16`` consecutive integers ``a..b`` (:func:`_integer_run`: its range
    test binds only on a numeric key, so the arithmetic below binds too), each row's key
    becomes a code: ``x - a + 1`` for a row whose key is in the domain, ``0`` for every other
    row (outside the domain, or NULL). One code stands for all the rows that no statement keeps
    (they fail its domain test, :func:`_in_domain`), distinct codes for the domain's values: a
    unit has two codes iff it has rows of two of the domain's values, or of one and others; its
    units beyond their bounds are those of the key's own values, up to units whose several keys
    all lie outside the domain (whose rows no statement reads).

    A row carries its code ``c`` and the code's complement in ``b`` bits (:data:`_PACKINGS`):
    ``c + (2**b - 1 - c) * 2**b``, an INTEGER for ``b = 15`` (codes below ``2**15 - 1``), a
    BIGINT for ``b = 31`` (every other run: ``n < 2**31``). A unit's codes are all equal iff
    the ``BIT_OR`` of these has no bit set in both halves (two codes that differ differ in some
    bit, which is then set in both the OR of the codes and the OR of their complements): one
    aggregate state per unit (8 bytes, or 16 for a BIGINT) instead of a ``MIN``, a ``MAX`` and a
    ``COUNT`` of the key. Any other key is read as it is (packing None).
    """
    value = _key_value(key)
    run = _packable_run(key.domain)
    if run is None:
        return value, None
    bits, kind = _packing(run)
    inside = _in_domain(value.copy(), key.domain or (), whole=key.whole)
    code = _case([(inside, _code(value, run, kind))], exp.cast(_integer(0), kind))
    return _packed(code, bits, kind), bits


def _packable_run(domain: tuple[object, ...] | None) -> tuple[int, int] | None:
    """Return a domain's run of integers ``a..b`` if its codes can be packed, else None."""
    run = _integer_run(domain)
    return run if run is not None and run[1] - run[0] + 1 < 2 ** _PACKINGS[-1][0] - 1 else None


def _packing(run: tuple[int, int]) -> tuple[int, str]:
    """Return the code bits and the integer type of a run's packing (:data:`_PACKINGS`)."""
    return next(p for p in _PACKINGS if run[1] - run[0] + 1 < 2 ** p[0] - 1)


def _code(value: exp.Expr, run: tuple[int, int], kind: str) -> exp.Expr:
    """``x - a + 1``: a key ``x`` of the run ``a..b`` as its code ``1..n`` (type ``kind``)."""
    shifted = exp.Add(this=exp.Sub(this=value, expression=_integer(run[0])), expression=_integer(1))
    return exp.cast(shifted, kind)


def _packed(code: exp.Expr, bits: int, kind: str) -> exp.Expr:
    """Return a code ``c`` packed with its complement: ``c + (2**b - 1 - c) * 2**b``.

    Written ``(2**b - c) * (2**b - 1)`` (the same integer), so that the code is read once.
    """
    rest = exp.Sub(this=exp.cast(_integer(2**bits), kind), expression=code)
    return exp.Mul(this=exp.paren(rest), expression=_integer(2**bits - 1))


def _several(alias: str, bits: int | None) -> list[exp.Expr]:
    """Conditions on a unit's rows: true iff its key ``alias`` has more than one value."""
    if bits is not None:
        return [_mixed(f"BIT_OR({alias})", bits)]
    return [
        exp.condition(f"MIN({alias}) <> MAX({alias})"),
        exp.condition(f"(COUNT({alias}) > 0 AND COUNT({alias}) < COUNT(*))"),
    ]


def _mixed(ored: str, bits: int) -> exp.Expr:
    """Return whether ``ored``, a ``BIT_OR`` of packed codes (:func:`_packed`), has two codes."""
    low = 2**bits - 1
    return exp.condition(f"(({ored} & {low}) & ({ored} >> {bits})) <> 0")


def _over_one_group(rows: exp.Select, keys: dict[str, int | None], limit: int) -> exp.Select:
    """One group per unit: beyond it iff some key has two values (or NULL and a value).

    ``keys``: each key's alias, and its packing's code bits (:func:`_key_code`). Each unit listed
    also carries :data:`SEVERAL`, true when its rows have more than one key (the part of the
    test above that does not count rows), computed from the same aggregates: a unit without it
    has one key among all its rows, so one (unit, group) pair after any filter, which spares a
    scaled statement counting every unit's pairs (:func:`_one_pair`).
    """
    several = [c for alias, bits in keys.items() for c in _several(alias, bits)]
    flag = exp.or_(*several)
    over = exp.select(UNIT, exp.alias_(flag, SEVERAL)).from_(rows.subquery("__all"))
    over = over.group_by(UNIT)
    return over.having(exp.or_(exp.condition(f"COUNT(*) > {limit}"), flag.copy()))


# -- bounding ---------------------------------------------------------------------------------
def _bounding(
    rows: _Rows, keys: Sequence[KeySpec], values: Sequence[ValueSpec], contribution: Contribution
) -> list[tuple[str, exp.Select]]:
    """Return the steps from ``__rows`` to ``__bounded`` (after ``__over``)."""
    k, g, c = contribution.rows, contribution.groups, contribution.per_group
    columns = rows.names
    grouped = _grouped(keys)
    others: list[exp.Expr] = [_ref(k.alias) for k in keys if k.is_bin]
    others += [
        _case([(_ref(name).is_(exp.null()), _integer(1))], _integer(0))
        for name in columns
        if name.startswith("__cc")
    ]
    mix = _row_mix(values, others)
    row_order = _ordered(*([] if mix is None else [mix]), *[_ref(n) for n in columns])
    steps: list[tuple[str, exp.Select]] = []
    # An inner join, not a semi-join: __over lists each unit once, and DuckDB runs the inner
    # join about three times faster.
    on = exp.EQ(this=exp.column(UNIT, "__rows"), expression=exp.column(UNIT, OVER))
    heavy = exp.select(*[exp.column(c, "__rows") for c in columns]).from_("__rows")
    heavy = heavy.join(OVER, on=on)
    steps.append(("__heavy", heavy))
    current = "__heavy"
    if grouped and g < k:
        steps += _group_limit(columns, grouped, g)
        current = "__groups"
    if grouped and c < k:
        partition = [_ref(UNIT), *map(_ref, grouped)]
        number = exp.Window(this=exp.RowNumber(), partition_by=partition, order=row_order.copy())
        steps.append(("__per_group", _window_filter(columns, current, number, c)))
        current = "__per_group"
    number = exp.Window(this=exp.RowNumber(), partition_by=[_ref(UNIT)], order=row_order)
    steps.append(("__truncated", _window_filter(columns, current, number, k)))
    light = exp.select(*columns).from_("__rows").join(OVER, using=[UNIT], join_type="ANTI")
    bounded = exp.union(light, exp.select(*columns).from_("__truncated"), distinct=False)
    steps.append(("__bounded", exp.select(*columns).from_(bounded.subquery("__all_rows"))))
    return steps


def _group_limit(
    columns: Sequence[str], grouped: Sequence[str], limit: int
) -> list[tuple[str, exp.Select]]:
    """Keep each heavy unit's ``limit`` groups of smallest key hash (ties: the keys' order).

    The groups are ranked once per (unit, group) pair, not per row (MD5 per row is the costly
    part); rows are then kept by a join on the unit and the key, NULL keys matching NULL keys.
    """
    pairs = exp.select(UNIT, *grouped, exp.alias_(_key_hash(grouped), "__h")).from_("__heavy")
    pairs = pairs.group_by(UNIT, *grouped)
    order = _ordered(_ref("__h"), *map(_ref, grouped))
    rank = exp.Window(this=exp.func("DENSE_RANK"), partition_by=[_ref(UNIT)], order=order)
    chosen = _window_filter([UNIT, *grouped], "__pairs", rank, limit)
    # An equi-join on the unit, then the keys compared NULL-safely: the chosen pairs are
    # distinct, so each row matches at most once (a NULL-safe join key is slow in DuckDB).
    same = exp.EQ(this=exp.column(UNIT, "__heavy"), expression=exp.column(UNIT, "__chosen"))
    keys = [
        exp.NullSafeEQ(this=exp.column(a, "__heavy"), expression=exp.column(a, "__chosen"))
        for a in grouped
    ]
    kept = exp.select(*[exp.column(c, "__heavy") for c in columns]).from_("__heavy")
    kept = kept.join("__chosen", on=same).where(exp.and_(*keys))
    return [("__pairs", pairs), ("__chosen", chosen), ("__groups", kept)]


# -- scaled bounding: sums over rows, per (unit, group) pair ------------------------------------
@dataclass(frozen=True)
class _Part:
    """One summed column of a scaled statement: ``name``, a row's term, a pair's aggregate.

    ``largest``: the largest magnitude of a row's term, for a fixed-point sum (None: a count).
    """

    name: str
    row: exp.Expr
    pair: exp.Expr
    largest: int | None = None


def _parts(
    measurements: Sequence[Measurement], values: dict[str, ValueSpec], counted: dict[str, str]
) -> list[_Part]:
    """Return the summed columns besides the weight: ``COUNT(col)`` and sums, by position."""
    parts: list[_Part] = []
    for i, m in enumerate(measurements):
        measure = m.measure
        if isinstance(measure, ColumnCount):
            column = measure.column
            alias = values[column].alias if column in values else counted[column]
            present = _case([(_ref(alias).is_(exp.null()), _integer(0))], _integer(1))
            parts.append(_Part(f"__c{i}", present, exp.Count(this=_ref(alias))))
        elif isinstance(measure, ValueSum):
            value = values[measure.column]
            index = _row_index(value, measure, m.bits)
            largest = value.range.encoding(m.bits, measure.encoding).row_units
            parts.append(_Part(f"__s{i}", index, exp.Sum(this=index.copy()), largest))
    return parts


def _scales(keys: Sequence[KeySpec], measurements: Sequence[Measurement], has_unit: bool) -> bool:
    """Whether a statement bounds by scaling: a unit, no histogram bins and no quantiles."""
    quantiles = any(isinstance(m.measure, QuantileCounts) for m in measurements)
    return has_unit and not quantiles and not any(k.is_bin for k in keys)


def _scaled_bounding(
    rows: _Rows, keys: Sequence[KeySpec], parts: Sequence[_Part], contribution: Contribution
) -> list[tuple[str, exp.Select]]:
    """Return the steps from ``__rows`` to ``__bounded`` (after ``__over``), by scaling.

    ``__bounded`` has one row per row of a unit within its bounds (weight ``__w = 1``, each
    part its row's term) and one per kept (unit, group) pair of the others, whose ``n`` rows
    count as ``m = min(n, c)`` (at most ``k`` over the unit's kept pairs, taken in key-hash
    order: :func:`_kept_pairs`), with each part's exact pair total ``s`` scaled to
    ``(s m) DIV n`` (integer division, rounding toward zero on both engines); see the
    module's description.
    """
    k, g, c = contribution.rows, contribution.groups, contribution.per_group
    grouped = _grouped(keys)
    on = exp.EQ(this=exp.column(UNIT, "__rows"), expression=exp.column(UNIT, OVER))
    heavy = exp.select(*[exp.column(n, "__rows") for n in rows.names]).from_("__rows")
    steps: list[tuple[str, exp.Select]] = [("__heavy", heavy.join(OVER, on=on))]
    items: list[exp.Expr] = [_ref(UNIT), *map(_ref, grouped)]
    items.append(exp.alias_(exp.Count(this=exp.Star()), "__n"))
    items += [exp.alias_(p.pair.copy(), p.name) for p in parts]
    pairs = exp.select(*items).from_("__heavy").group_by(UNIT, *grouped)
    steps.append(("__pairs", pairs))
    pair_columns = [UNIT, *grouped, "__n", *[p.name for p in parts]]
    # Without a limit on groups (g = k), a unit's pairs may hold more than k rows together.
    rank = bool(grouped) and g < k
    total = bool(grouped) and (not rank or g * c > k)
    capped = _least(_ref("__n"), _integer(c))
    # |m| <= c for a kept pair; k + g c also bounds a dropped one's (m = min(n, c, k - P) with
    # P <= g c), should an engine compute a row before filtering it out.
    limit = k + g * c
    if rank and g == 1 and not total:
        steps += _one_pair(pair_columns, grouped)
        steps.append(("__scaled", _scaled(grouped, parts, "__kept", capped, limit)))
    elif rank or total:
        steps += _kept_pairs(pair_columns, grouped, contribution, total=total)
        steps.append(("__scaled", _scaled(grouped, parts, "__kept", _ref("__m"), limit)))
    else:
        steps.append(("__scaled", _scaled(grouped, parts, "__pairs", capped, limit)))
    own: list[exp.Expr] = [_ref(UNIT), *map(_ref, grouped), exp.alias_(_integer(1), "__w")]
    own += [exp.alias_(p.row.copy(), p.name) for p in parts]
    steps.append(("__own", exp.select(*own).from_("__rows")))
    columns = [UNIT, *grouped, "__w", *[p.name for p in parts]]
    light = exp.select(*columns).from_("__own").join(OVER, using=[UNIT], join_type="ANTI")
    bounded = exp.union(light, exp.select(*columns).from_("__scaled"), distinct=False)
    steps.append(("__bounded", exp.select(*columns).from_(bounded.subquery("__all_rows"))))
    return steps


def _single_pass_applies(keys: Sequence[KeySpec], contribution: Contribution) -> bool:
    """Whether :func:`_single_pass` applies: no group key, or one group per unit of run keys."""
    grouped = [key for key in keys if not key.is_bin]
    if grouped and contribution.groups != 1:
        return False
    return all(_packable_run(key.domain) is not None for key in grouped)


def _single_pass(
    keys: Sequence[KeySpec], parts: Sequence[_Part], contribution: Contribution
) -> list[tuple[str, exp.Select]]:
    """Return the steps from ``__rows`` to ``__bounded`` in one aggregation per unit.

    The same bounded rows as :func:`_scaled_bounding`, for a statement without group keys or
    with one group per unit whose keys are runs of integers (:func:`_single_pass_applies`),
    without the units beyond their bounds: one ``GROUP BY unit`` of the analyst's rows gives
    each unit its ``n`` rows, its parts' totals, and per key the ``BIT_OR`` of its packed codes
    (:func:`_packed`). A unit of one key (after the filter) has one pair, that key (its code,
    read from the ``BIT_OR``), with ``m = min(n, c)``, exactly as a scaled statement weighs it
    (its pair is kept whole when within its bounds, ``c <= k``); the rows of the other units
    are aggregated per pair and each keeps its pair of least key hash (:func:`_one_pair`'s
    order and weight). A unit's bounded rows depend on its rows after the filter only, so the
    filter may come first. One pass where most units are beyond their bounds; where few are,
    the units-beyond-bounds statement and an aggregation without bounding cost less
    (:mod:`dpcurator.curator._sampling` tells them apart).

    With keys, a unit's fixed-point sums are summed as DOUBLE, exact integers while ``n``
    terms of magnitude at most ``2**b`` stay below ``2**53`` (every partial sum is then an
    integer a double holds exactly, in any order, on both engines); a unit with more rows
    goes the way of a unit of several keys, whose pairs are summed exactly.
    """
    assert _single_pass_applies(keys, contribution)
    c = contribution.per_group
    grouped = [key for key in keys if not key.is_bin]
    runs = [_packable_run(key.domain) for key in grouped]
    capped = _least(_ref("__n"), _integer(c))
    limit = contribution.rows + contribution.groups * c
    count = exp.alias_(exp.Count(this=exp.Star()), "__n")
    if not grouped:
        items = [_ref(UNIT), count, *[exp.alias_(p.pair.copy(), p.name) for p in parts]]
        units = exp.select(*items).from_("__rows").group_by(UNIT)
        scaled = _scaled([], parts, "__units", capped, limit)
        return [("__units", units), ("__scaled", scaled), _bounded_scaled()]
    items = [_ref(UNIT), count]
    decoded: list[exp.Expr] = []
    several: list[exp.Expr] = []
    for key, run in zip(grouped, runs, strict=True):
        assert run is not None
        bits, kind = _packing(run)
        code = _packed(_code(_ref(key.alias), run, kind), bits, kind)
        ored = f"__b{key.alias}"
        items.append(exp.alias_(exp.func("BIT_OR", code), ored))
        # a unit of one key: the low bits of the OR are its code
        low = exp.BitwiseAnd(this=_ref(ored), expression=_integer(2**bits - 1))
        decoded.append(
            exp.alias_(exp.Add(this=exp.paren(low), expression=_integer(run[0] - 1)), key.alias)
        )
        several.append(_mixed(ored, bits))
    sums = [p for p in parts if p.largest is not None]
    if sums:
        exact_rows = min(_EXACT_DOUBLE // p.largest for p in sums if p.largest is not None)
        several.append(exp.GT(this=_ref("__n"), expression=_integer(exact_rows)))
    for p in parts:
        total = p.pair.copy() if p.largest is None else exp.Sum(this=_double(p.row.copy()))
        items.append(exp.alias_(total, p.name))
    one = [
        _ref(p.name) if p.largest is None else exp.alias_(exp.cast(_ref(p.name), "BIGINT"), p.name)
        for p in parts
    ]
    units = exp.select(*items).from_("__rows").group_by(UNIT)
    flag = exp.or_(*several)
    single = exp.select(UNIT, *decoded, "__n", *one).from_("__units").where(exp.not_(flag))
    steps = [("__units", units), ("__one", single)]
    steps += _pairs_of_flagged(grouped, parts, exp.select(UNIT).from_("__units").where(flag.copy()))
    steps.append(("__scaled", _scaled(_grouped(grouped), parts, "__kept", capped, limit)))
    return [*steps, _bounded_scaled()]


_EXACT_DOUBLE = 2**53
"""Integers up to this magnitude are exact as doubles (:func:`_single_pass`'s sums)."""


def _bounded_scaled() -> tuple[str, exp.Select]:
    return ("__bounded", exp.select("*").from_("__scaled"))


def _pairs_of_flagged(
    keys: Sequence[KeySpec], parts: Sequence[_Part], flagged: exp.Select
) -> list[tuple[str, exp.Select]]:
    """Return the steps from ``__one`` (a pair per unit) and the ``flagged`` units to ``__kept``.

    The rows of the flagged units are aggregated per (unit, group) pair, exactly, and each
    unit keeps its pair of least key hash (ties: the keys' order), as :func:`_one_pair` does.
    """
    aliases = _grouped(keys)
    names = [p.name for p in parts]
    on = exp.EQ(this=exp.column(UNIT, "__rows"), expression=exp.column(UNIT, "__flagged"))
    rows = exp.select("__rows.*").from_("__rows").join("__flagged", on=on)
    pairs = exp.select(UNIT, *aliases, exp.alias_(exp.Count(this=exp.Star()), "__n"))
    pairs = pairs.select(*[exp.alias_(p.pair.copy(), p.name) for p in parts])
    columns = [UNIT, *aliases, "__n", *names]
    order = _ordered(_key_hash(aliases), *map(_ref, aliases))
    rank = exp.Window(this=exp.RowNumber(), partition_by=[_ref(UNIT)], order=order)
    kept = exp.union(
        exp.select(*columns).from_("__one"),
        exp.select(*columns).from_("__ranked"),
        distinct=False,
    )
    return [
        ("__flagged", flagged),
        ("__heavy", rows),
        ("__pairs", pairs.from_("__heavy").group_by(UNIT, *aliases)),
        ("__ranked", _window_filter(columns, "__pairs", rank, 1)),
        ("__kept", exp.select(*columns).from_(kept.subquery("__k"))),
    ]


def _least(a: exp.Expr, b: exp.Expr) -> exp.Expr:
    return exp.func("LEAST", a, b)


def _one_pair(columns: Sequence[str], grouped: Sequence[str]) -> list[tuple[str, exp.Select]]:
    """Return the steps to ``__kept`` for one group per unit: each unit's pair of least key hash.

    :data:`OVER` flags (:data:`SEVERAL`) the units whose rows have several keys; every other
    unit has a single key among all the table's rows, hence at most one pair after any filter,
    which is kept as it is (no aggregation per unit). The pairs of the flagged units are
    ranked as in :func:`_kept_pairs` (a window over those units' pairs only). A unit within
    its bounds (every unit, when :func:`all_pairs` scales all of them) is not flagged either:
    it has at most one group. The pairs are marked (``__f``) by one outer join with the
    flagged units (each listed once), then split by the mark.
    """
    several = exp.select(UNIT).from_(OVER).where(_ref(SEVERAL))
    on = exp.EQ(this=exp.column(UNIT, "__pairs"), expression=exp.column(UNIT, "__several"))
    mark = exp.alias_(exp.not_(exp.column(UNIT, "__several").is_(exp.null())), "__f")
    flagged = exp.select(*[exp.column(n, "__pairs") for n in columns], mark).from_("__pairs")
    flagged = flagged.join("__several", on=on, join_type="LEFT")
    order = _ordered(_key_hash(grouped), *map(_ref, grouped))
    rank = exp.Window(this=exp.RowNumber(), partition_by=[_ref(UNIT)], order=order)
    ranked = _window_filter(columns, "__flagged", rank, 1).where(_ref("__f"))
    single = exp.select(*columns).from_("__flagged").where(exp.not_(_ref("__f")))
    kept = exp.union(single, exp.select(*columns).from_("__ranked"), distinct=False)
    return [
        ("__several", several),
        ("__flagged", flagged),
        ("__ranked", ranked),
        ("__kept", exp.select(*columns).from_(kept.subquery("__k"))),
    ]


def _kept_pairs(
    columns: Sequence[str], grouped: Sequence[str], contribution: Contribution, *, total: bool
) -> list[tuple[str, exp.Select]]:
    """Return the steps to ``__kept``: each kept pair with its weight ``__m``.

    A unit with at most ``g`` pairs whose ``min(n, c)`` total at most ``k`` (``total`` false:
    that holds for every unit) keeps them all with ``m = min(n, c)``. The others go through
    a window over their own pairs only, in the order of the key's hash (ties: the keys'
    order), as truncation ranks groups: the first ``g`` are kept, each with
    ``m = min(n, c, k - P)`` where ``P`` is the sum of ``min(n, c)`` over the pairs before
    it, and pairs left with ``m = 0`` are dropped; a unit's pairs are counted by an
    aggregation and a join, which DuckDB runs faster than a window over every unit.
    """
    k, g, c = contribution.rows, contribution.groups, contribution.per_group
    capped = _least(_ref("__n"), _integer(c))
    units = exp.select(UNIT, "COUNT(*) AS __p").from_("__pairs").group_by(UNIT)
    hard: list[exp.Expr] = [exp.GT(this=_ref("__p"), expression=_integer(g))]
    unit_items = ["__units.__p"]
    if total:
        units = units.select(exp.alias_(exp.Sum(this=capped), "__t"))
        unit_items.append("__units.__t")
        hard.append(exp.GT(this=_ref("__t"), expression=_integer(k)))
    on = exp.EQ(this=exp.column(UNIT, "__pairs"), expression=exp.column(UNIT, "__units"))
    joined = exp.select(*[exp.column(n, "__pairs") for n in columns], *unit_items)
    joined = joined.from_("__pairs").join("__units", on=on)
    easy = exp.select(*columns, exp.alias_(capped.copy(), "__m")).from_("__joined")
    easy = easy.where(exp.not_(exp.or_(*hard)))
    order = _ordered(_key_hash(grouped), *map(_ref, grouped))
    rank = exp.Window(this=exp.RowNumber(), partition_by=[_ref(UNIT)], order=order)
    spec = exp.WindowSpec(kind="ROWS", start="UNBOUNDED", start_side="PRECEDING", end="CURRENT ROW")
    running = exp.Window(
        this=exp.Sum(this=capped.copy()), partition_by=[_ref(UNIT)], order=order.copy(), spec=spec
    )
    ranked = exp.select(*columns, exp.alias_(rank, "__r"), exp.alias_(running, "__q"))
    ranked = ranked.from_("__joined").where(exp.or_(*[h.copy() for h in hard]))
    # m = min(n, c, k - P) with P = __q - min(n, c): the rows taken before this pair.
    before = exp.paren(exp.Sub(this=_ref("__q"), expression=capped.copy()))
    left = exp.Sub(this=_integer(k), expression=before)
    filled = exp.select(*columns, exp.alias_(_least(capped.copy(), left), "__m")).from_("__ranked")
    filled = filled.where(exp.LTE(this=_ref("__r"), expression=_integer(g)))
    kept = exp.union(easy, filled, distinct=False)
    steps = [("__units", units), ("__joined", joined), ("__ranked", ranked)]
    return [*steps, ("__kept", exp.select(*columns, "__m").from_(kept.subquery("__k")))]


def _scaled(
    grouped: Sequence[str], parts: Sequence[_Part], kept: str, m: exp.Expr, limit: int
) -> exp.Select:
    """Each kept pair's weight ``m`` and its parts scaled by ``m / n`` (pairs with ``m > 0``).

    ``limit`` bounds ``|m|``. See :func:`scale_part` for the integer arithmetic.
    """
    items: list[exp.Expr] = [_ref(UNIT), *map(_ref, grouped), exp.alias_(m, "__w")]
    for p in parts:
        scaled = scale_part(_ref(p.name), m.copy(), _ref("__n"), limit)
        items.append(exp.alias_(scaled, p.name))
    return exp.select(*items).from_(kept).where(exp.GT(this=m.copy(), expression=_integer(0)))


_INT64_MAX = 2**63 - 1


def scale_part(s: exp.Expr, m: exp.Expr, n: exp.Expr, limit: int) -> exp.Expr:
    """Return ``(s m) DIV n`` (toward zero) for an exact pair total ``s`` and ``|m| <= limit``.

    ``s`` is an exact wide integer (DuckDB: HUGEINT; Spark: DECIMAL(38, 0)), whose product and
    division cost several times a BIGINT's (DuckDB divides HUGEINTs in software). Where
    ``|s| <= (2**63 - 1) // limit``, ``s m`` fits a BIGINT, so the same quotient is computed
    in BIGINT; the other pairs keep the wide arithmetic. Both branches are exact integer
    divisions rounding toward zero, so the value is the same either way, on every engine.
    """
    bound = _INT64_MAX // max(limit, 1)
    fits = exp.Between(this=s.copy(), low=_integer(-bound), high=_integer(bound))
    narrow = exp.Mul(this=exp.cast(s.copy(), exp.DataType.build("BIGINT")), expression=m.copy())
    wide = exp.Mul(this=s.copy(), expression=m.copy())
    fast = exp.IntDiv(this=exp.paren(narrow), expression=n.copy())
    slow = exp.IntDiv(this=exp.paren(wide), expression=n.copy())
    return _case([(fits, fast)], slow)


def _scaled_aggregate(m: Measurement, index: int) -> exp.Expr | None:
    """Return a measure's aggregate over a scaled statement's ``__bounded`` (sums of parts)."""
    measure: Measure = m.measure
    match measure:
        case RowCount():
            return exp.Sum(this=_ref("__w"))
        case UnitCount():
            return exp.Count(this=exp.Distinct(expressions=[_ref(UNIT)]))
        case ColumnCount():
            return exp.Sum(this=_ref(f"__c{index}"))
        case ValueSum():
            return _sum_of(exp.cast(_ref(f"__s{index}"), exp.DataType.build("BIGINT")))
        case QuantileCounts():
            return None
        case _:
            assert_never(measure)


# -- the measures --------------------------------------------------------------------------------
def value_sum(value: ValueSpec, measure: ValueSum, bits: int) -> exp.Expr:
    """Exact integer sum of the rows' fixed-point indices (the rule of :mod:`dpcurator.noise`).

    Each row's index is the encoding's float expression clamped into ``[min_index, max_index]``
    (integers, exact as floats) and rounded, so it is an integer in that range: floating-point
    error (a midpoint or a multiplier that is not a float, the engine's arithmetic) can cost
    accuracy, never sensitivity, since one row moves the sum by at most ``2**bits`` whatever the
    floats did. The sum is exact (DuckDB: HUGEINT; Spark: DECIMAL(38, 0)), then clamped into
    ``[-2**62, 2**62]`` (a 1-Lipschitz map: the sensitivity is unchanged). A NULL row stays
    NULL through the clamp, so it adds nothing.
    """
    return _sum_of(_row_index(value, measure, bits))


def _row_index(value: ValueSpec, measure: ValueSum, bits: int) -> exp.Expr:
    """Return one row's fixed-point index of ``measure`` (BIGINT; NULL for a NULL value)."""
    enc = value.range.encoding(bits, measure.encoding)
    x = _ref(value.alias)
    scaled = exp.Sub(
        this=exp.Mul(
            this=exp.paren(exp.Sub(this=x, expression=_number(enc.offset))),
            expression=_number(enc.multiplier),
        ),
        expression=_number(enc.shift),
    )
    expression: exp.Expr
    match measure.encoding:
        case "raw":
            expression = exp.Mul(this=x.copy(), expression=_number(enc.multiplier))
        case "squares":
            product = exp.Mul(this=exp.paren(scaled), expression=exp.paren(scaled.copy()))
            expression = exp.Mul(this=product, expression=_number(2.0**-bits))
        case "centred":
            expression = scaled
        case _:
            assert_never(measure.encoding)
    clamped = _clamp(expression, _number(enc.min_index), _number(enc.max_index))
    return exp.cast(exp.func("ROUND", clamped), exp.DataType.build("BIGINT"))


def _sum_of(index: exp.Expr) -> exp.Expr:
    """``SUM(index)`` of BIGINT terms (0 for no rows), clamped into ``[-2**62, 2**62]``."""
    total = exp.func("COALESCE", exp.Sum(this=index), _integer(0))
    return _clamp(total, _integer(-SUM_CLAMP), _integer(SUM_CLAMP))


def _aggregate(
    m: Measurement, values: dict[str, ValueSpec], counted: dict[str, str], has_unit: bool
) -> exp.Expr | None:
    measure: Measure = m.measure
    match measure:
        case RowCount():
            return exp.Count(this=exp.Star())
        case UnitCount():
            if not has_unit:
                return exp.Count(this=exp.Star())
            return exp.Count(this=exp.Distinct(expressions=[_ref(UNIT)]))
        case ColumnCount(column=column):
            alias = values[column].alias if column in values else counted[column]
            return exp.Count(this=_ref(alias))
        case ValueSum(column=column):
            return value_sum(values[column], measure, m.bits)
        case QuantileCounts():
            return None
        case _:
            assert_never(measure)


def quantile_buckets(value: ValueSpec) -> int:
    """Return how many equal buckets of ``[L, U]`` a quantile counts (from the declaration only).

    The candidate points are the ``buckets + 1`` bucket ends ``L + j (U - L) / buckets``, and
    bucket ``j`` holds the values in ``[L + j w, L + (j + 1) w)`` (the top one also ``U``). With
    integer bounds and a width ``W <= 2**20``: ``W 2**j`` buckets for the largest such number
    ``<= 2**20``, so that every integer is a candidate and a value's bucket ``(x - L) 2**j`` is
    computed exactly in float64; otherwise :data:`QUANTILE_BUCKETS` (``2**20``). A resolution of
    at most a millionth of the range is far below the mechanism's spread on any real table; the
    cost of fine points is only ``ln(buckets + 1)`` in the rank-error bound, since the engine
    returns the non-empty buckets only and the choice works per run of empty ones
    (:func:`~dpcurator.mechanisms._exponential.exponential_mechanism_runs`).

    >>> from dpcurator.curator._specs import ValueSpec
    >>> from dpcurator.noise import FixedPointRange
    >>> def spec(lower: object, upper: object) -> ValueSpec:
    ...     return ValueSpec("x", "x", FixedPointRange.from_bounds(lower, upper), False)
    >>> quantile_buckets(spec(0, 250_000)), quantile_buckets(spec(15, 90))
    (1000000, 614400)
    >>> quantile_buckets(spec(0.0, 0.5)), quantile_buckets(spec(0, 2**21))
    (1048576, 1048576)
    """
    width = value.range.width
    if value.range.lower.denominator == 1 and width.denominator == 1 and width <= QUANTILE_BUCKETS:
        steps = int(width)
        return steps << ((QUANTILE_BUCKETS // steps).bit_length() - 1)
    return QUANTILE_BUCKETS


def _quantile_part(keys: Sequence[str], value: ValueSpec) -> exp.Select:
    buckets = quantile_buckets(value)
    per_unit = float(buckets / value.range.width)
    offset = exp.Sub(this=_ref(value.alias), expression=_number(value.lower))
    scaled = exp.Mul(this=exp.paren(offset), expression=_number(per_unit))
    index = exp.cast(exp.func("FLOOR", scaled), exp.DataType.build("BIGINT"))
    bucket = _clamp(index, _integer(0), _integer(buckets - 1))
    items: list[exp.Expr | str] = [*keys, exp.alias_(exp.Literal.string(value.column), "__column")]
    items += [exp.alias_(bucket, "__bucket"), "COUNT(*) AS __n"]
    part = exp.select(*items).from_("__bounded")
    part = part.where(exp.not_(_ref(value.alias).is_(exp.null())))
    return part.group_by(*keys, bucket.copy())


QUANTILE_CLAMP = 64
"""A quantile's utility is clamped ``(2 Delta / epsilon)(ln(buckets + 1) + 64)`` ranks below the
best candidate's (see :func:`quantile_clamp`)."""


def quantile_clamp(epsilon: float, sensitivity: float, buckets: int) -> float:
    """Return ``T``, in ranks: a quantile's utility is ``max(u, OPT - T)``.

    ``u(x) = -|rank(x) - q n|`` (``rank``: the mid-rank, see
    :func:`~dpcurator.curator._measure._quantile_runs`) and ``OPT = max_x u(x)`` both change by
    at most ``Delta`` between neighbours, so ``max(u, OPT - T)`` does too: the exponential
    mechanism on it has the same guarantee. It lets the engine return only the buckets next to
    a run within ``T`` of the best (every other run has ``OPT - T``), and it changes no error
    statement: the stated
    rank error ``(2 Delta / epsilon) ln((buckets + 1) / (1 - level))`` is below ``T`` for any
    level below ``1 - e**-64``, and up to ``T`` the clamped and plain utilities order the
    candidates alike (all clamped points together weigh at most ``e**-64`` of the best one).
    """
    return 2.0 * sensitivity / epsilon * (math.log(buckets + 1) + QUANTILE_CLAMP)


def _quantile_levels(
    value: ValueSpec, measurements: Sequence[Measurement], contribution: Contribution
) -> list[tuple[float, float]]:
    """Return the column's quantile levels, each with its clamp ``T`` (:func:`quantile_clamp`)."""
    buckets = quantile_buckets(value)
    return [
        (m.measure.level, quantile_clamp(m.epsilon / contribution.groups, m.sensitivity, buckets))
        for m in measurements
        if isinstance(m.measure, QuantileCounts) and m.measure.column == value.column
    ]


def _near_quantiles(part: exp.Select, levels: Sequence[tuple[float, float]]) -> exp.Select:
    """Keep the buckets of an ungrouped ``part`` near its quantiles ``levels`` (``(q, T)``).

    Adds ``__below`` (the count in the lower buckets) and ``__total``. A point's rank is its
    mid-rank (:func:`~dpcurator.curator._measure._quantile_runs`): ``__below + __n / 2`` for the
    point that opens a bucket, ``__below`` or ``__below + __n`` for the points between buckets.
    Each bucket's own point exists, so the best point is at most the least of the buckets'
    mid-rank distances to ``q n``, ``M``; a bucket is kept when one of its three ranks is within
    ``M + T + 1`` (``+ 1`` absorbs float rounding). Then every point the clamped utility does not
    flatten (distance below the best's plus ``T``) is a kept bucket's or lies between two kept
    ones (see :func:`quantile_clamp`). With GROUP BY keys the buckets all come back (windows
    partitioned by the keys cost more than they save).
    """
    running = exp.Window(
        this=exp.Sum(this=_ref("__n")),
        order=exp.Order(expressions=[exp.Ordered(this=_ref("__bucket"), nulls_first=False)]),
        spec=exp.WindowSpec(
            kind="ROWS", start="UNBOUNDED", start_side="PRECEDING", end="CURRENT ROW"
        ),
    )
    total = exp.Window(this=exp.Sum(this=_ref("__n")))
    prefix = exp.select(
        "__column",
        "__bucket",
        "__n",
        exp.alias_(exp.Sub(this=running, expression=_ref("__n")), "__below"),
        exp.alias_(total, "__total"),
    ).from_(part.subquery("__g"))

    def distances(level: float) -> list[exp.Expr]:
        """Return the distances to ``q n`` of the bucket's own point and of those around it."""
        target = exp.Mul(this=_double(_number(level)), expression=_double(_ref("__total")))
        below = _double(_ref("__below"))
        half = exp.Mul(this=_double(_ref("__n")), expression=_number(0.5))
        ranks = [
            exp.Add(this=below.copy(), expression=half),
            below,
            exp.Add(this=below.copy(), expression=_double(_ref("__n"))),
        ]
        return [exp.Abs(this=exp.Sub(this=r, expression=target.copy())) for r in ranks]

    def distance(level: float) -> exp.Expr:
        return exp.func("LEAST", *distances(level))

    best = [
        exp.alias_(exp.Window(this=exp.Min(this=distances(q)[0])), f"__m{i}")
        for i, (q, _) in enumerate(levels)
    ]
    near = exp.select("*", *best).from_(prefix.subquery("__p"))
    keep: exp.Expr | None = None
    for i, (q, clamp) in enumerate(levels):
        limit = exp.Add(this=_ref(f"__m{i}"), expression=_number(clamp + 1.0))
        test = exp.LT(this=distance(q), expression=limit)
        keep = test if keep is None else exp.or_(keep, test)
    out = exp.select("__column", "__bucket", "__n", "__below", "__total")
    return out.from_(near.subquery("__d")).where(keep)


# -- the statements -----------------------------------------------------------------------------
def build_statements(
    table: Table,
    where: exp.Expr | None,
    *,
    keys: Sequence[KeySpec],
    values: Sequence[ValueSpec],
    measurements: Sequence[Measurement],
    contribution: Contribution,
) -> Statements:
    """Build the plan's bounded statements (see the module's description)."""
    by_column = {v.column: v for v in values}
    counted = _counted_columns(measurements, by_column)
    rows = _rows(table, where, keys, values, list(counted.items()))
    over = over_statement(table, keys, contribution)
    steps: list[tuple[str, exp.Select]] = [("__rows", rows.select())]
    scaled = _scales(keys, measurements, over is not None)
    summed: list[_Part] = []
    if over is not None:
        steps.append((OVER, over))
        if scaled:
            summed = _parts(measurements, by_column, counted)
            steps += _scaled_bounding(rows, keys, summed, contribution)
        else:
            steps += _bounding(rows, keys, values, contribution)
    else:
        steps.append(("__bounded", exp.select(*rows.names).from_("__rows")))
    aliases = [k.alias for k in keys]
    aggregates = []
    for i, m in enumerate(measurements):
        if scaled:
            sql = _scaled_aggregate(m, i)
        else:
            sql = _aggregate(m, by_column, counted, over is not None)
        if sql is not None:
            aggregates.append(exp.alias_(sql, m.result))
    if not aggregates:  # quantiles only: the main statement lists the groups
        aggregates.append(exp.alias_(exp.Count(this=exp.Star()), "__rows_total"))
    main = exp.select(*aliases, *aggregates).from_("__bounded")
    main = main.group_by(*aliases) if aliases else main
    build_single = None
    if over is not None and scaled and _single_pass_applies(keys, contribution):
        bare = main.copy()

        def build_single() -> exp.Query:
            single = _single_pass(keys, summed, contribution)
            return _with_steps(bare.copy(), [("__rows", rows.select()), *single], copy=False)

    main = _with_steps(main, steps, copy=False)  # the quantiles' statement copies them
    quantile_columns = {m.column for m in measurements if isinstance(m.measure, QuantileCounts)}
    quantiles = None
    if quantile_columns:
        parts = [_quantile_part(aliases, v) for v in values if v.column in quantile_columns]
        # a joint draw needs the rank of every bucket (and the parts share one shape)
        if not aliases and not any(m.mechanism == JOINT for m in measurements):
            parts = [
                _near_quantiles(part, _quantile_levels(v, measurements, contribution))
                for part, v in zip(
                    parts, [v for v in values if v.column in quantile_columns], strict=True
                )
            ]
        union: exp.Query = parts[0]
        for part in parts[1:]:
            union = exp.union(union, part, distinct=False)
        outer = exp.select("*").from_(union.subquery("__buckets"))
        quantiles = _with_steps(outer, steps, copy=True)
    # the keys' domains decide which rows the units beyond their bounds test (_key_code)
    grouped = tuple((k.column, k.domain) for k in keys if not k.is_bin)
    over_key = (table.unit_column, grouped, contribution)
    return Statements(
        main=main, quantiles=quantiles, over=over, over_key=over_key, build_single=build_single
    )


def _counted_columns(
    measurements: Sequence[Measurement], values: dict[str, ValueSpec]
) -> dict[str, str]:
    """Columns counted (COUNT(col)) that are not clamped values, with their aliases."""
    out: dict[str, str] = {}
    for m in measurements:
        if isinstance(m.measure, ColumnCount) and m.measure.column not in values:
            out.setdefault(m.measure.column, f"__cc{len(out)}")
    return out


def _with_steps(
    select: exp.Select, steps: Sequence[tuple[str, exp.Select]], *, copy: bool
) -> exp.Select:
    """Return ``select`` with ``steps`` as its CTEs, copies of them unless ``copy`` is false.

    Without copies the statement takes the steps' trees as its own: for steps no other
    statement takes (copying a plan's trees is most of the time it takes to build them).
    """
    for name, step in steps:
        # __rows is read twice (light and heavy units): DuckDB should not materialize it.
        materialized = False if name == "__rows" else None
        as_ = step.copy() if copy else step
        select = select.with_(name, as_=as_, materialized=materialized, copy=False)
    return select


def with_over(statement: exp.Query, units: exp.Table) -> exp.Query:
    """Return ``statement`` reading the units beyond their bounds from ``units`` (a cache).

    ``units`` holds the rows of the statement's own :data:`OVER` step (the session
    materializes :attr:`Statements.over`), so its columns are read by the same names.
    """

    def replace(node: exp.Expr) -> exp.Expr:
        if isinstance(node, exp.CTE) and node.alias == OVER:
            names = node.this.named_selects if isinstance(node.this, exp.Query) else [UNIT]
            cached = exp.select(*names).from_(units.copy())
            return exp.CTE(this=cached, alias=exp.to_identifier(OVER))
        return node

    out = statement.transform(replace)
    assert isinstance(out, exp.Query)
    return out


_SCALING_STEPS = frozenset(
    {"__pairs", "__units", "__joined", "__several", "__flagged", "__ranked", "__kept", "__scaled"}
)
_TRUNCATING_STEPS = frozenset({"__chosen", "__groups", "__per_group", "__truncated"})
_BOUNDING_STEPS = frozenset({OVER, "__heavy"}) | _TRUNCATING_STEPS | _SCALING_STEPS


def _steps(statement: exp.Query) -> set[str]:
    return {cte.alias for cte in statement.find_all(exp.CTE)}


def _is_weight(node: exp.Expr) -> bool:
    return isinstance(node, exp.Column) and node.name == "__w" and not node.table


def without_heavy(statement: exp.Query) -> exp.Query:
    """Return ``statement`` for a table where no unit is beyond its bounds: rows as they are.

    Only for a table whose units beyond their bounds are known to be none (an empty cached
    :data:`OVER`); the result is then the same, without the bounding steps. A scaled
    statement's rows then all weigh ``__w = 1``, so its ``SUM(__w)`` is written ``COUNT(*)``
    (the same count for every group; a query without groups over no rows gets 0 instead of
    NULL, which the measurements read as 0), which DuckDB computes faster.
    """
    light = "__own" if "__own" in _steps(statement) else "__rows"

    def replace(node: exp.Expr) -> exp.Expr | None:
        if isinstance(node, exp.CTE) and node.alias in _BOUNDING_STEPS:
            return None
        if isinstance(node, exp.CTE) and node.alias == "__bounded":
            rows = exp.select("*").from_(light)
            return exp.CTE(this=rows, alias=exp.to_identifier("__bounded"))
        if isinstance(node, exp.Sum) and _is_weight(node.this):
            return exp.Count(this=exp.Star())
        return node

    out = statement.transform(replace)
    assert isinstance(out, exp.Query)
    return out


def all_pairs(statement: exp.Query) -> exp.Query:
    """Return a scaled ``statement`` that scales every unit's pairs, without splitting the rows.

    Scaling a unit within its bounds gives its exact rows' aggregates (``m = n`` and
    ``(s n) DIV n = s``), so the result is the same as the statement's; when many units are
    beyond their bounds, one aggregation of all the rows per (unit, group) pair costs less than
    splitting the rows by a join with those units. With one group per unit, :data:`OVER` is
    still read for its units of several keys (:func:`_one_pair`; a unit within its bounds has
    one); otherwise not at all. A statement that does not scale (it has quantiles or histogram
    bins) is returned as it is.
    """
    steps = _steps(statement)
    if "__own" not in steps:
        return statement
    dropped = {"__heavy", "__own"} | (set() if "__several" in steps else {OVER})

    def replace(node: exp.Expr) -> exp.Expr | None:
        if not isinstance(node, exp.CTE):
            return node
        if node.alias in dropped:
            return None
        if node.alias == "__pairs":
            pairs = node.this.from_("__rows")
            return exp.CTE(this=pairs, alias=exp.to_identifier("__pairs"))
        if node.alias == "__bounded":
            scaled = exp.select("*").from_("__scaled")
            return exp.CTE(this=scaled, alias=exp.to_identifier("__bounded"))
        return node

    out = statement.transform(replace)
    assert isinstance(out, exp.Query)
    return out
