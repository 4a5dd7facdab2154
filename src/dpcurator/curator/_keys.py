"""Computed group keys: bands of a bounded column, whose public domain follows from its bounds.

``GROUP BY FLOOR(age / 10) * 10`` groups by 10-year bands. Its values are public although no
domain was declared for them: ``age`` is declared within ``[L, U]``, so the band takes the
values ``10 n`` for the integers ``n`` from ``floor(L / 10)`` to ``floor(U / 10)``. The curator
derives that domain exactly (rationals, from the declaration only, never from the rows) and
treats the key like a declared one: every band of the domain is released, and a row whose band
falls outside it (a value beyond the declared bounds, NULL, NaN) is not counted, as a row
outside a declared domain is not.

A computed key is either

- a band ``c * STEP(a * x + b) + d`` of one bounded numeric column ``x``, where ``STEP`` is
  ``FLOOR`` or ``CEIL`` and ``a, b, c, d`` are number literals combined with ``+``, ``-``,
  ``*`` and ``/`` (``a != 0``, ``c != 0``); or
- a bucketing ``CASE WHEN <condition> THEN <literal> ... [ELSE <literal>] END`` whose every
  result is a literal: its domain is those literals, whatever the conditions (row-wise filters,
  checked like a WHERE clause); a row that meets no condition and has no ELSE is NULL, outside
  the domain, and not counted.

- a calendar part of a date or timestamp column, whose values the calendar fixes: ``MONTH``
  (1-12), ``QUARTER`` (1-4), ``DAY``/``DAYOFMONTH`` (1-31), ``DAYOFYEAR`` (1-366), ``HOUR``
  (0-23), ``MINUTE`` (0-59), also written ``EXTRACT(MONTH FROM d)`` and so on. ``YEAR`` has no
  such domain (declare it, see :class:`~dpcurator.curator.Column`'s ``expression``), and the
  day of the week is refused because the engines number it differently.

Anything else is refused: its domain is not public (a continuous value, a text function, a
column without bounds, a CASE with a computed result).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from sqlglot import exp

from dpcurator.curator._table import Table
from dpcurator.errors import QueryError

__all__ = ["MAX_BANDS", "ComputedKey", "computed_key"]

MAX_BANDS = 10_000
"""Most values a computed key's domain may have."""


@dataclass(frozen=True)
class ComputedKey:
    """A group key computed from one bounded column, with its public domain.

    Attributes
    ----------
    name : str
        The key's SQL (columns quoted): how the query names it.
    column : str
        The declared column it is computed from.
    expression : sqlglot.exp.Expr
        The key's SQL tree over the source's columns.
    domain : tuple
        Its values (ints where integral, else floats equal to the exact values), ascending
        when ``c > 0``.
    """

    name: str
    column: str
    expression: exp.Expr
    domain: tuple[Any, ...]


@dataclass(frozen=True)
class _Linear:
    """``a * x + b`` (``a = 0``: a constant)."""

    a: Fraction
    b: Fraction


@dataclass(frozen=True)
class _Steps:
    """``c * n + d`` for the integers ``n`` in ``[low, high]``."""

    c: Fraction
    d: Fraction
    low: int
    high: int


def computed_key(node: exp.Expr, table: Table, column_of: Any) -> ComputedKey:
    """Return the computed key ``node`` (``column_of`` maps a Column node to its declared name).

    Raises
    ------
    QueryError
        When ``node`` is not a band of one bounded column (its domain would not be public).

    Examples
    --------
    >>> from sqlglot import parse_one
    >>> from dpcurator.curator import Column, Table
    >>> import pandas as pd
    >>> t = Table("p", pd.DataFrame({"age": [1]}), columns=[Column("age", lower=0, upper=99)])
    >>> computed_key(parse_one("FLOOR(age / 10) * 10"), t, lambda c: c.name).domain
    (0, 10, 20, 30, 40, 50, 60, 70, 80, 90)
    """
    inner = node.unnest()
    if isinstance(inner, exp.Case):
        return _bucket_key(inner, column_of)
    part = _calendar_part(inner)
    if part is not None:
        return _calendar_key(node, inner, part, column_of)
    columns = {column_of(c) for c in node.find_all(exp.Column)}
    if len(columns) != 1:
        raise _not_public(node, "it must be computed from exactly one declared column")
    (name,) = columns
    bounds = table.column(name).bounds
    if bounds is None:
        raise _not_public(node, f"column {name!r} has no declared bounds")
    low, high = (Fraction(v) for v in bounds)
    shape = _shape(node, low, high, node)
    if not isinstance(shape, _Steps):
        raise _not_public(node, "it takes a continuum of values: apply FLOOR or CEIL")
    count = shape.high - shape.low + 1
    if count > MAX_BANDS:
        raise _not_public(
            node, f"it has {count:,} values, more than {MAX_BANDS:,}: widen the bands"
        )
    domain = tuple(_number(shape.c * n + shape.d, node) for n in range(shape.low, shape.high + 1))

    expression = _quoted(node, column_of)
    return ComputedKey(expression.sql(dialect="duckdb"), name, expression, domain)


def _bucket_key(node: exp.Case, column_of: Any) -> ComputedKey:
    """Return the key of a CASE whose every result is a literal (its domain, in order)."""
    results = [when.args["true"] for when in node.args.get("ifs") or []]
    if node.args.get("default") is not None:
        results.append(node.args["default"])
    domain: list[Any] = []
    for result in results:
        value = _literal_value(result.unnest())
        if value is None:
            raise _not_public(node, f"its result {_sql(result)!r} is not a literal")
        if value not in domain:
            domain.append(value)
    columns = sorted({column_of(c) for c in node.find_all(exp.Column)})
    if not columns:
        raise _not_public(node, "it reads no column")

    expression = _quoted(node, column_of)
    return ComputedKey(expression.sql(dialect="duckdb"), columns[0], expression, tuple(domain))


_CALENDAR: dict[str, range] = {
    "MONTH": range(1, 13),
    "QUARTER": range(1, 5),
    "DAY": range(1, 32),
    "DAYOFYEAR": range(1, 367),
    "HOUR": range(24),
    "MINUTE": range(60),
}
"""The calendar parts a group key may take, with their values (the same on every engine)."""

_PART_FUNCTIONS: dict[type[exp.Expr], str] = {
    exp.Month: "MONTH",
    exp.Quarter: "QUARTER",
    exp.Day: "DAY",
    exp.DayOfMonth: "DAY",
    exp.DayOfYear: "DAYOFYEAR",
    exp.Hour: "HOUR",
    exp.Minute: "MINUTE",
}
_EXTRACT_NAMES = {name: name for name in _CALENDAR} | {"DOY": "DAYOFYEAR"}
_UNLISTED = (exp.Year, exp.DayOfWeek, exp.DayOfWeekIso, exp.Week)


def _calendar_part(node: exp.Expr) -> str | None:
    """Return the calendar part ``node`` extracts (None if it is no date function)."""
    if isinstance(node, exp.Extract):
        unit = node.this.name.upper() if isinstance(node.this, exp.Var | exp.Column) else ""
        if unit not in _EXTRACT_NAMES:
            raise _not_public(
                node,
                f"EXTRACT({unit} ...) has no fixed calendar domain: use one of "
                + ", ".join(sorted(_CALENDAR)),
            )
        return _EXTRACT_NAMES[unit]
    if isinstance(node, _UNLISTED):
        raise _not_public(
            node,
            f"{_sql(node)!r} has no fixed calendar domain (YEAR: declare the column's years as "
            "a derived column with a domain) or is numbered differently by the engines (the day "
            "of the week): use MONTH, QUARTER, DAY, DAYOFYEAR, HOUR or MINUTE",
        )
    return _PART_FUNCTIONS.get(type(node))


def _calendar_key(node: exp.Expr, inner: exp.Expr, part: str, column_of: Any) -> ComputedKey:
    """Return the key of a calendar part of one date or timestamp column."""
    argument = inner.expression if isinstance(inner, exp.Extract) else inner.this
    if not isinstance(argument, exp.Column):
        raise _not_public(node, "a calendar part must be taken of a declared column itself")
    name = column_of(argument)
    unit = "DOY" if part == "DAYOFYEAR" else part  # the name both engines' EXTRACT know
    expression = exp.Extract(this=exp.var(unit), expression=exp.column(name, quoted=True))
    return ComputedKey(_sql(_quoted(node, column_of)), name, expression, tuple(_CALENDAR[part]))


def _quoted(node: exp.Expr, column_of: Any) -> exp.Expr:
    """``node`` with every column reference replaced by its quoted declared name."""

    def quote(sub: exp.Expr) -> exp.Expr:
        return exp.column(column_of(sub), quoted=True) if isinstance(sub, exp.Column) else sub

    return node.copy().transform(quote)


def _literal_value(node: exp.Expr) -> str | int | float | None:
    if isinstance(node, exp.Literal) and node.is_string:
        return str(node.this)
    if isinstance(node, exp.Literal):
        number = Fraction(node.this)
        return int(number) if number.denominator == 1 else float(node.this)
    if isinstance(node, exp.Neg) and isinstance(node.this, exp.Literal) and not node.this.is_string:
        value = _literal_value(node.this)
        return None if value is None or isinstance(value, str) else -value
    return None


def _shape(node: exp.Expr, low: Fraction, high: Fraction, whole: exp.Expr) -> _Linear | _Steps:
    if isinstance(node, exp.Paren):
        return _shape(node.this, low, high, whole)
    if isinstance(node, exp.Column):
        return _Linear(Fraction(1), Fraction(0))
    if isinstance(node, exp.Literal) and not node.is_string:
        return _Linear(Fraction(0), Fraction(node.this))
    if isinstance(node, exp.Neg):
        return _scaled(_shape(node.this, low, high, whole), Fraction(-1), Fraction(0))
    if isinstance(node, exp.Floor | exp.Ceil) and node.args.get("decimals") is None:
        return _step(node, _shape(node.this, low, high, whole), low, high, whole)
    if isinstance(node, exp.Add | exp.Sub | exp.Mul | exp.Div):
        left = _shape(node.this, low, high, whole)
        right = _shape(node.expression, low, high, whole)
        return _combined(node, left, right, whole)
    raise _not_public(whole, f"{_sql(node)!r} is not arithmetic, FLOOR or CEIL")


def _step(
    node: exp.Expr, inner: _Linear | _Steps, low: Fraction, high: Fraction, whole: exp.Expr
) -> _Steps:
    if not isinstance(inner, _Linear) or inner.a == 0:
        raise _not_public(whole, "FLOOR or CEIL must apply to a linear function of the column")
    ends = sorted((inner.a * low + inner.b, inner.a * high + inner.b))
    rounding = math.floor if isinstance(node, exp.Floor) else math.ceil
    return _Steps(Fraction(1), Fraction(0), rounding(ends[0]), rounding(ends[1]))


def _constant(shape: _Linear | _Steps) -> Fraction | None:
    return shape.b if isinstance(shape, _Linear) and shape.a == 0 else None


def _combined(
    node: exp.Expr, left: _Linear | _Steps, right: _Linear | _Steps, whole: exp.Expr
) -> _Linear | _Steps:
    lc, rc = _constant(left), _constant(right)
    if isinstance(node, exp.Add | exp.Sub):
        sign = Fraction(1 if isinstance(node, exp.Add) else -1)
        if rc is not None:
            return _scaled(left, Fraction(1), sign * rc)
        if lc is not None and isinstance(node, exp.Add):
            return _scaled(right, Fraction(1), lc)
        if lc is not None:
            return _scaled(right, Fraction(-1), lc)
    elif isinstance(node, exp.Mul):
        if rc is not None:
            return _scaled(left, rc, Fraction(0))
        if lc is not None:
            return _scaled(right, lc, Fraction(0))
    elif rc is not None and rc != 0:  # division by a constant
        return _scaled(left, 1 / rc, Fraction(0))
    raise _not_public(whole, f"{_sql(node)!r} must combine the column with constants only")


def _scaled(shape: _Linear | _Steps, factor: Fraction, offset: Fraction) -> _Linear | _Steps:
    """``factor * shape + offset``."""
    if isinstance(shape, _Linear):
        return _Linear(shape.a * factor, shape.b * factor + offset)
    if factor == 0:
        raise QueryError("A computed group key multiplies its bands by zero: drop it.")
    return _Steps(shape.c * factor, shape.d * factor + offset, shape.low, shape.high)


def _number(value: Fraction, whole: exp.Expr) -> int | float:
    """Return the value as the engines compute it: an int, or a float equal to it."""
    if value.denominator == 1:
        return int(value)
    as_float = float(value)
    if Fraction(as_float) != value:
        raise _not_public(
            whole,
            f"its value {value} is not a binary fraction, so engines would compute it with "
            "rounding: use bands whose values are integers (or halves, quarters ...)",
        )
    return as_float


def _not_public(node: exp.Expr, why: str) -> QueryError:
    return QueryError(
        f"GROUP BY {_sql(node)!r}: the values of a computed group key must follow from the "
        f"declaration, and {why}. Write a band of a bounded column, e.g. FLOOR(age / 10) * 10, "
        "or declare the column with a public domain."
    )


def _sql(node: exp.Expr) -> str:
    return node.sql(dialect="duckdb")
