"""Property tests: the curator attacked by an adversarial analyst.

Threat model: the analyst is the adversary. Nothing that leaves the curator may depend on the
private rows except through noise: no error text, no exception chain, no failure bit, no order
of rows. Hypothesis generates random tables (NULL, NaN, infinities, extreme and huge numbers,
empty, unicode and number-like strings), random declarations (extreme bounds, domains, bins) and
random queries (valid, invalid and hostile) with random privacy parameters, and checks

1. ``Session.sql`` returns a :class:`QueryRelease` or raises a :class:`DPError`, never another
   exception; a ``DPError`` exposes no chained exception other than a ``DPError`` (its
   ``__cause__`` is None or a DPError, its ``__context__`` is None, a DPError or suppressed with
   ``from None``) and no text of a private value anywhere in its chain;
2. a refusal spends nothing and reads no private data (reads are counted at the one method that
   runs SQL on the rows); the documented failure after a charged read (``QueryFailedError``,
   "The query failed while running ... charged") is not a refusal: it must have read, and
   charged exactly the query's charge;
3. on neighbouring tables (all the rows of one privacy unit removed) with the same seed, a query
   succeeds on both or raises the same exception type with the same text (and the same chain),
   and what a release states about itself (columns, split, charge, SQL) is the same;
4. the release does not depend on the physical order of the rows (same rows shuffled, same seed:
   the same release, row order included, or the same error);
5. the exact bounded aggregates that noise is added to change between neighbours by at most the
   sensitivity each measurement is calibrated to (declared bounds at the edge of float precision,
   such as ``[2**53, 2**53 + 2]``, must either be refused at declaration or keep this bound).

Deterministic tests replay each known hostile input (casts and overflows that fail on one unit's
values, division by zero, 250 parentheses, 5000 NOTs, 1e400 literals and positions, TABLESAMPLE,
aliases that collide with generated columns, epsilons such as 5e-324, 1e200 and 10**400, bounds
such as [2**53, 2**53 + 2] and [-1e300, 1e300]) on a crafted table.

A failing property spends most of its time shrinking (each step opens sessions); passing, the
file takes about a minute on one core.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import re
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, currently_in_test_context, given, settings
from hypothesis import note as _hypothesis_note
from hypothesis import strategies as st

import dpcurator.errors
from dpcurator import DPError
from dpcurator.accounting import Budget
from dpcurator.curator import Column, QueryRelease, Session, Table
from dpcurator.curator._cache import Recent
from dpcurator.noise import InsecureSeededSource

# -- the private data ------------------------------------------------------------------------

CANARY = "cnry"
"""Private string values carry this marker; no error text may ever contain it."""

SCHEMA_TYPES = {
    "age": pa.int64(),
    "x": pa.float64(),
    "big": pa.decimal128(38, 0),
    "name": pa.string(),
    "flag": pa.bool_(),
    "secret": pa.string(),  # present in the data, never declared
}

INT_UNITS = [0, 1, 2, 3, 4, 5, 6, 7, -1, 2**53, 2**53 + 1, 2**63 - 1, -(2**63)]
STR_UNITS = ["u0", "", "é", "1", "0x1", "NaN", "NULL", "a'b", "😀", " "]

AGES = [0, 1, -1, 30, 31, 2**31, 2**53, 2**53 + 1, 2**62, 2**63 - 1, -(2**63)]
FLOATS = [
    math.nan,
    math.inf,
    -math.inf,
    1e308,
    -1e308,
    1.7976931348623157e308,
    -0.0,
    5e-324,
    2.0**53,
    2.0**53 + 2,
    1e15 + 0.125,
    1e300,
    -1e300,
    30.0,
]
BIGS = [0, 1, -1, 10**30, -(10**37), 10**38 - 1, 2**63, -(2**63) - 1]
STRINGS = ["", "1", "-0", "0", "1e400", "NaN", "inf", " 2 ", "0x10", "9223372036854775808"]
STRINGS += ["é", "😀", "NULL", "'; DROP TABLE people; --", 'a"b', "abc", "\t"]

# Hypothesis favours the first branch of a one_of and the first items of a sampled_from.
ages = st.integers(-5, 120) | st.sampled_from(AGES) | st.none()
floats = st.floats(-1e3, 1e3) | st.sampled_from(FLOATS) | st.none()
bigs = st.integers(-(10**6), 10**6) | st.sampled_from(BIGS) | st.none()
flags = st.booleans() | st.none()


@st.composite
def private_strings(draw: st.DrawFn) -> str | None:
    """Strings that look like data: number-like, unicode, empty, or a canary."""
    choice = draw(st.integers(0, 5))
    if choice == 3:
        return None
    if choice == 1:
        return f"{CANARY}{draw(st.integers(0, 99))}"
    if choice == 2:
        return draw(st.text(max_size=4))
    return draw(st.sampled_from(STRINGS))


Row = tuple[Any, ...]  # (hh, age, x, big, name, flag, secret)


@st.composite
def unit_rows(draw: st.DrawFn, unit: object) -> list[Row]:
    n = draw(st.integers(1, 3))
    return [
        (
            unit,
            draw(ages),
            draw(floats),
            draw(bigs),
            draw(private_strings()),
            draw(flags),
            f"{CANARY}-secret-{draw(st.integers(0, 9))}",
        )
        for _ in range(n)
    ]


@dataclass(frozen=True)
class Data:
    """Rows of a private table, grouped by privacy unit (the None unit: rows of no unit)."""

    units: tuple[object, ...]
    rows: dict[object, list[Row]]
    string_units: bool

    def all_rows(self, without: object = ..., order: Sequence[int] | None = None) -> list[Row]:
        kept = [u for u in (*self.units, None) if without is ... or u != without]
        rows = [r for u in kept for r in self.rows.get(u, [])]
        return rows if order is None else [rows[i] for i in order]

    def arrow(self, without: object = ..., order: Sequence[int] | None = None) -> pa.Table:
        rows = self.all_rows(without, order)
        unit_type = pa.string() if self.string_units else pa.int64()
        arrays = {"hh": pa.array([r[0] for r in rows], unit_type)}
        for i, (name, kind) in enumerate(SCHEMA_TYPES.items(), start=1):
            values = [r[i] for r in rows]
            if name == "big":
                values = [None if v is None else Decimal(v) for v in values]
            arrays[name] = pa.array(values, kind)
        return pa.table(arrays)


@st.composite
def datasets(draw: st.DrawFn, min_units: int = 0) -> Data:
    string_units = draw(st.booleans())
    pool = STR_UNITS if string_units else INT_UNITS
    units = tuple(
        draw(st.lists(st.sampled_from(pool), min_size=min_units, max_size=5, unique=True))
    )
    rows: dict[object, list[Row]] = {u: draw(unit_rows(u)) for u in units}
    if draw(st.integers(0, 4)) == 0:
        rows[None] = draw(unit_rows(None))
    return Data(units, rows, string_units)


# -- the public declaration ------------------------------------------------------------------

BOUNDS: list[tuple[Any, Any]] = [
    (0, 100),
    (-10, 10),
    (0, 1),
    (0, 120),
    (-1e300, 1e300),
    (2**53, 2**53 + 2),
    (1e15, 1e15 + 0.125),
    (-1e308, 1e308),
    (0, 5e-324),
    (-(2**63), 2**63 - 1),
    (1e300, 1.7976931348623157e308),
]
SANE_BOUNDS: list[tuple[Any, Any]] = [(0, 100), (-10, 10), (0, 1)]
BINS: list[tuple[Any, ...]] = [
    (0, 18, 65, 100),
    (-1e308, 0, 1e308),
    (0, 5e-324, 1e-300),
    (2**53, 2**53 + 2),
    (0, 1),
]
DOMAINS: dict[str, list[tuple[Any, ...]]] = {
    "name": [("", "1", "é"), ("abc", "NaN", "a'b"), ("-0", "0", "1e400", " 2 ")],
    "flag": [(True, False), (False,)],
    "age": [(0, 30, 2**53), (-(2**63), 2**63 - 1)],
    "x": [(30.0, -0.0, 1e308)],
}

HOSTILE_BOUNDS: list[tuple[Any, Any]] = [
    *BOUNDS,
    (0, 10**400),
    (-(10**400), 0),
    (math.nan, 1),
    (0, math.inf),
    (1, 1),
    (True, 2),
    ("0", "1"),
    (5e-324, 1e-323),
    (-0.0, 0.0),
    (Decimal(0), Decimal(1)),
    (np.float64(0), np.int64(3)),
]


@dataclass(frozen=True)
class Declared:
    """A declaration that Table accepted, and the notes of what the declaration refused."""

    table_options: dict[str, Any]
    columns: tuple[Column, ...]
    refused: tuple[str, ...] = ()

    def table(self, source: pa.Table) -> Table:
        return Table("people", source, columns=list(self.columns), **self.table_options)


def _column(name: str, options: dict[str, Any], refused: list[str]) -> Column:
    """The column with ``options``; what the declaration refuses (a DPError) is left out."""
    for drop in ((), ("bins",), ("bins", "domain"), ("bins", "domain", "lower", "upper")):
        kept = {k: v for k, v in options.items() if k not in drop}
        try:
            return Column(name, **kept)
        except DPError as error:
            refused.append(f"Column({name!r}, {kept}) -> {type(error).__name__}: {error}")
        except Exception as error:  # checked by test_declarations_raise_only_dperror
            refused.append(f"Column({name!r}, {kept}) -> NON-DPError {error!r}")
    return Column(name)


@st.composite
def declarations(draw: st.DrawFn) -> Declared:
    rows = draw(st.integers(1, 3))
    options: dict[str, Any] = {
        "privacy_unit": "hh",
        "max_rows_per_unit": rows,
        "max_groups_per_unit": draw(st.integers(1, 3)),
        "max_rows_per_group": draw(st.none() | st.integers(1, rows)),
    }
    refused: list[str] = []
    columns = [Column("hh")]
    for name in ("age", "x", "big"):
        spec: dict[str, Any] = {"nullable": draw(st.booleans())}
        bounds = draw(st.sampled_from(SANE_BOUNDS) | st.sampled_from(BOUNDS) | st.none())
        if bounds is not None:
            spec["lower"], spec["upper"] = bounds
            bins = draw(st.none() | st.sampled_from(BINS))
            if bins is not None:
                spec["bins"] = bins
        if name in DOMAINS and draw(st.booleans()):
            spec["domain"] = draw(st.sampled_from(DOMAINS[name]))
        columns.append(_column(name, spec, refused))
    for name in ("name", "flag"):
        domain = draw(st.none() | st.sampled_from(DOMAINS[name]))
        columns.append(_column(name, {} if domain is None else {"domain": domain}, refused))
    return Declared(options, tuple(columns), tuple(refused))


# -- queries ---------------------------------------------------------------------------------

NUMERIC = ["age", "x", "big"]
ANY_COLUMN = ["age", "x", "big", "name", "flag", "hh", "secret", "AGE", "people.x", "p.age"]
QUANTILE_LEVELS = ["0", "0.5", "1", "0.9", "1e400", "-0.0", "2", "'0.5'", "NULL", "-1e-400", "nan"]
EDGES = ["0, 10, 20", "1e400, 1e401", "-1e308, 0, 1e308", "0", "20, 10", "0, 5e-324", "'a', 'b'"]
EDGES += ["-1e400, 0", "0, 9007199254740992, 9007199254740993"]
AGGREGATES = [
    "COUNT(*)",
    "COUNT({c})",
    "COUNT(DISTINCT hh)",
    "COUNT(DISTINCT {c})",
    "SUM({n})",
    "AVG({n})",
    "VARIANCE({n})",
    "VAR_POP({n})",
    "STDDEV({n})",
    "STDDEV_POP({n})",
    "MEDIAN({n})",
    "QUANTILE({n}, {q})",
    "PERCENTILE_CONT({q}) WITHIN GROUP (ORDER BY {n})",
    "HISTOGRAM({n})",
    "HISTOGRAM({n}, {e})",
    # hostile
    "MAX({c})",
    "SUM({n} * 9223372036854775807)",
    "COUNT(*) + 1",
    "SUM(CAST(name AS INTEGER))",
    "string_agg(name, ',')",
    "first({c})",
    "COUNT(*) FILTER (WHERE age > 1)",
    "SUM(DISTINCT {n})",
    "any_value(secret)",
    "arg_max(name, x)",
    "COUNT(*) OVER ()",
    "{c}",
    "*",
    "1",
    "(SELECT COUNT(*) FROM people)",
]
ALIASES = ["n", "count", "count_std", "count_ci_low", "count_ci_high", "avg_x", "x_bin", "age_bin"]
ALIASES += ["name", "hh", "age", '"sp ace"', '"é"', '"count"', '"a""b"', "__n", "__u", "__k0"]
ALIASES += ["__bin", "__units", "__sev", "sum_x_std"]
KEYS = ["name", "flag", "age", "x", "big", "hh", "secret", "NAME", "people.flag", "p.name"]
KEYS += ["1", "2", "1.7", "1e400", "0", "-1", "'name'", "age + 1", "ROLLUP(name)", "ALL"]
ORDER = ["1", "2", "0", "1e400", "1.7", "-1", "count", "count DESC", "n", "name", "RANDOM()"]
ORDER += ["x", "count_std", "name NULLS FIRST", "secret"]
LIMITS = ["0", "1", "3", "-1", "1e400", "99999999999999999999", "'a'", "NULL", "1.5", "ALL"]
FROMS = ["people"] * 6 + ["PEOPLE", "people AS p", "people p", '"people"', "people TABLESAMPLE 1%"]
FROMS += ["people USING SAMPLE 10%", "main.people", "__dpcurator_people", "people, people"]
FROMS += ["read_csv('x.csv')", "(SELECT * FROM people)", "people JOIN people q ON TRUE"]

DEEP_PARENS = "(" * 250 + "age > 1" + ")" * 250
MANY_NOTS = "NOT " * 5000 + "age > 1"
SPECIAL_WHERE = [
    "CAST(name AS INTEGER) = 0",
    "1 // (age - 30) = 0",
    "age * 9223372036854775807 + age > 0",
    "CASE WHEN hh = 4 THEN CAST(name AS INTEGER) ELSE 0 END = 0",
    "age * 9223372036854775807 > 0",
    "ABS(age * 9223372036854775807) > 0",
    "1 % (age - 30) = 0",
    "CAST(x AS BIGINT) > 0",
    "CAST(ROUND(x) AS INTEGER) = 0",
    "big * 9223372036854775807 > 0",
    "age < 1e400",
    "x > -1e400",
    "secret = 'x'",
    "name LIKE '%'",
    "EXISTS (SELECT 1)",
    DEEP_PARENS,
    MANY_NOTS,
]
RAW_QUERIES: list[Any] = [
    "SELECT 1",
    "",
    " ",
    ";",
    "SELECT COUNT(*) FROM people; SELECT 1",
    "DROP TABLE people",
    "SELECT * FROM people",
    "PRAGMA version",
    "SELECT COUNT(*) FROM people -- ",
    "SELECT COUNT(*) FROM people /*",
    "SELECT COUNT(*) FROM people WHERE name = '",
    "\x00",
    "SELECT COUNT(*) FROM people WHERE " + DEEP_PARENS,
    "SELECT COUNT(*) FROM people WHERE " + MANY_NOTS,
    "SELECT COUNT(*) FROM " + "(" * 300 + "people" + ")" * 300,
    "SELECT " + "-" * 3000 + "1",
    None,
    b"SELECT COUNT(*) FROM people",
    1,
]
LITERALS = ["0", "30", "1", "-1", "1e400", "-1e400", "9223372036854775807", "9223372036854775808"]
LITERALS += ["'abc'", "''", "NULL", "TRUE", "'1'", "1.5", "-0.0", "'é'", "'NaN'", "2e308"]
WHERE_COLUMNS = ["age", "x", "big", "name", "flag", "hh", "secret", "people.age", "q.age"]
BINARY = ["=", "<>", "<", ">", "<=", ">=", "+", "-", "*", "/", "//", "%", "AND", "OR", "||"]
BINARY += ["LIKE", "IS DISTINCT FROM"]
TYPES = ["INTEGER", "BIGINT", "TINYINT", "DOUBLE", "VARCHAR", "UINTEGER", "HUGEINT", "DATE"]
UNARY = ["NOT ({})", "-({})", "ABS({})", "LENGTH({})", "ROUND({})", "({}) IS NULL", "LOWER({})"]
UNARY += ["sqrt({})", "ln({})", "YEAR({})", "TRY_CAST({} AS INTEGER)", "({})::BIGINT"]
UNARY += ["SUBSTRING(name, {})", "repeat('a', {})", "error({})", "regexp_matches(name, {})"]

where_leaves = st.sampled_from(WHERE_COLUMNS) | st.sampled_from(LITERALS)


def _where_node(children: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    return st.one_of(
        st.builds("({} {} {})".format, children, st.sampled_from(BINARY), children),
        st.builds(lambda f, a: f.format(a), st.sampled_from(UNARY), children),
        st.builds("CAST({} AS {})".format, children, st.sampled_from(TYPES)),
        st.builds("CASE WHEN {} THEN {} ELSE {} END".format, children, children, children),
        st.builds("COALESCE({}, {})".format, children, children),
        st.builds("{} IN ({}, {})".format, children, children, children),
        st.builds("{} BETWEEN {} AND {}".format, children, children, children),
    )


where_clauses = st.one_of(
    st.recursive(where_leaves, _where_node, max_leaves=6),
    st.sampled_from(SPECIAL_WHERE),
)


@st.composite
def aggregates(draw: st.DrawFn) -> str:
    text: str = draw(st.sampled_from(AGGREGATES)).format(
        c=draw(st.sampled_from(ANY_COLUMN)),
        n=draw(st.sampled_from(NUMERIC) | st.sampled_from(ANY_COLUMN)),
        q=draw(st.sampled_from(QUANTILE_LEVELS)),
        e=draw(st.sampled_from(EDGES)),
    )
    return text


# A typed WHERE grammar: well-typed expressions that fail (or not) at run time depending on
# the values (casts, overflow, division by zero, domain errors), which binding cannot catch.
TYPED_LEAVES = {
    "int": ["age", "30", "0", "-1", "1", "9223372036854775807", "2147483647", "LENGTH(name)"],
    "float": ["x", "1e308", "0.5", "-0.0", "1e400", "CAST(age AS DOUBLE)", "CAST(big AS DOUBLE)"],
    "str": ["name", "'abc'", "''", "'1'", "'é'"],
    "bool": ["flag", "TRUE", "x IS NULL", "name IS NOT NULL", "age > 30", "x <> x"],
}
TYPED_NODES = {
    "int": [
        "({int} + {int})",
        "({int} - {int})",
        "({int} * {int})",
        "({int} // {int})",
        "({int} % {int})",
        "ABS({int})",
        "-({int})",
        "CAST({str} AS INTEGER)",
        "CAST({float} AS BIGINT)",
        "CAST({int} AS TINYINT)",
        "big * {int}",
        "CASE WHEN {bool} THEN {int} ELSE {int} END",
    ],
    "float": [
        "({float} * {float})",
        "({float} / {float})",
        "({float} - {float})",
        "ROUND({float})",
        "CAST({str} AS DOUBLE)",
        "COALESCE({float}, {float})",
    ],
    "str": [
        "LOWER({str})",
        "({str} || {str})",
        "SUBSTRING({str}, {int})",
        "CAST({int} AS VARCHAR)",
    ],
    "bool": [
        "({int} {cmp} {int})",
        "({float} {cmp} {float})",
        "({str} {cmp} {str})",
        "({str} LIKE '%1%')",
        "NOT ({bool})",
        "({bool} AND {bool})",
        "({bool} OR {bool})",
        "({int} IN ({int}, {int}))",
        "({int} BETWEEN {int} AND {int})",
        "CASE WHEN {bool} THEN {bool} ELSE {bool} END",
    ],
}
COMPARISONS = ["=", "<>", "<", ">=", "IS DISTINCT FROM"]


@functools.cache
def typed(kind: str, depth: int) -> st.SearchStrategy[str]:
    """Expressions of type ``kind`` (int, float, str, bool) nested at most ``depth`` deep."""
    leaves = st.sampled_from(TYPED_LEAVES[kind])
    if depth == 0:
        return leaves

    @st.composite
    def node(draw: st.DrawFn) -> str:
        template: str = draw(st.sampled_from(TYPED_NODES[kind]))
        parts = {k: typed(k, depth - 1) for k in TYPED_LEAVES}
        parts["cmp"] = st.sampled_from(COMPARISONS)
        out = template
        for field_ in re.findall(r"\{(\w+)\}", template):
            out = out.replace("{" + field_ + "}", draw(parts[field_]), 1)
        return out

    return leaves | node()


VALID_AGGREGATES = [
    "COUNT(*)",
    "COUNT({c})",
    "COUNT(DISTINCT hh)",
    "SUM({n})",
    "AVG({n})",
    "VARIANCE({n})",
    "STDDEV_POP({n})",
    "MEDIAN({n})",
    "QUANTILE({n}, 0.25)",
    "HISTOGRAM({n})",
    "HISTOGRAM({n}, 0, 10, 100)",
]


@st.composite
def plausible_queries(draw: st.DrawFn) -> str:
    """Mostly well-formed aggregate queries, with WHERE clauses that may fail on some rows."""
    keys = draw(st.lists(st.sampled_from(["flag", "name", "age", "x"]), max_size=2, unique=True))
    items = [k for k in keys if draw(st.booleans())]
    aggs = draw(st.lists(st.sampled_from(VALID_AGGREGATES), min_size=1, max_size=3, unique=True))
    aggs = [a for a in aggs if a.startswith("HISTOGRAM")][:1] or aggs  # a histogram stands alone
    for agg in aggs:
        items.append(
            agg.format(
                c=draw(st.sampled_from(["age", "x", "big", "name", "flag"])),
                n=draw(st.sampled_from(NUMERIC)),
            )
        )
    text = f"SELECT {', '.join(items)} FROM people"
    where = draw(st.integers(0, 3))
    if where == 0:
        text += f" WHERE {draw(st.sampled_from(SPECIAL_WHERE[:10]))}"
    elif where != 3:
        text += f" WHERE {draw(typed('bool', 3))}"
    if keys:
        text += f" GROUP BY {', '.join(keys)}"
    if draw(st.integers(0, 3)) == 0:
        text += f" ORDER BY {draw(st.sampled_from(['1', '1 DESC', 'count']))}"
    if draw(st.integers(0, 3)) == 0:
        text += f" LIMIT {draw(st.sampled_from(['0', '1', '3']))}"
    return text


@st.composite
def hostile_queries(draw: st.DrawFn) -> str:
    """Queries assembled from hostile grammar pieces: odd aggregates, aliases, keys, clauses."""
    keys = draw(st.lists(st.sampled_from(KEYS), max_size=2, unique=True))
    items: list[str] = []
    for key in keys:
        if draw(st.integers(0, 3)) > 0:
            alias = draw(st.none() | st.sampled_from(ALIASES))
            items.append(key if alias is None else f"{key} AS {alias}")
    for agg in draw(st.lists(aggregates(), min_size=0, max_size=3)):
        alias = draw(st.none() | st.none() | st.sampled_from(ALIASES))
        items.append(agg if alias is None else f"{agg} AS {alias}")
    items = draw(st.permutations(items)) if items else ["COUNT(*)"]
    text = f"SELECT {', '.join(items)} FROM {draw(st.sampled_from(FROMS))}"
    if draw(st.booleans()):
        text += f" WHERE {draw(where_clauses)}"
    if keys:
        text += f" GROUP BY {', '.join(keys)}"
    if draw(st.integers(0, 3)) == 0:
        order = draw(st.lists(st.sampled_from(ORDER), min_size=1, max_size=2, unique=True))
        text += f" ORDER BY {', '.join(order)}"
    if draw(st.integers(0, 4)) == 0:
        text += f" LIMIT {draw(st.sampled_from(LIMITS))}"
    return text


@st.composite
def queries(draw: st.DrawFn) -> Any:
    """A query: mostly plausible, often hostile, sometimes raw junk (or not even a string)."""
    tier = draw(st.integers(0, 9))  # hypothesis favours 0: the plausible queries
    if tier <= 5:
        return draw(plausible_queries())
    if tier <= 8:
        return draw(hostile_queries())
    return draw(st.sampled_from(RAW_QUERIES))


HOSTILE_EPSILONS: list[Any] = [5e-324, 1e200, 10**400, 0, -1, math.nan, math.inf, -0.0]
HOSTILE_EPSILONS += [True, "1", None, 1e-300, np.float64(0.5), Decimal("0.5"), 2**1023 * 2]
HOSTILE_DELTAS: list[Any] = [0.0, 1e-6, 5e-324, 0.5, math.nan, 1, -0.0, 10**400, -1e-9]
HOSTILE_DELTAS += [math.inf, "0", None, 1 - 1e-16]
_usual_epsilons = st.sampled_from([1.0, 0.5, 2.0, 100.0, 0.01])
epsilons = st.one_of(*[_usual_epsilons] * 4, st.sampled_from(HOSTILE_EPSILONS))
_usual_deltas = st.sampled_from([1e-6, 1e-3, 0.0])
deltas = st.one_of(*[_usual_deltas] * 4, st.sampled_from(HOSTILE_DELTAS))
BUDGETS = [Budget(1e300, 0.9), Budget(1e300, 0.9), Budget(1.0, 1e-3), Budget(0.0, 0.0)]


@dataclass(frozen=True)
class Ask:
    """One query with its privacy parameters."""

    query: Any
    epsilon: Any
    delta: Any


asks = st.builds(Ask, queries(), epsilons, deltas)


# -- running a query and observing everything that leaves the curator ------------------------


def note(text: str) -> None:
    """Hypothesis's note inside a property test; nothing in the deterministic tests."""
    if currently_in_test_context():
        _hypothesis_note(text)


class _Reads:
    """Counts (and keeps) the curator's reads of private rows during a ``with`` block."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def __len__(self) -> int:
        return len(self.calls)


@contextmanager
def counting_reads(session: Session) -> Iterator[_Reads]:
    """Wrap the one method that runs SQL on the private rows: ``session._engine.run(sql)``
    (after the engine refactor) or ``Session._run(sql)`` (before it).

    A session reuses the exact aggregates of a statement it already ran (tested in
    ``test_over_cache.py``); here it keeps none, so that every answer's reads are seen.
    """
    if hasattr(session, "_results"):
        session._results = Recent(0)
    reads = _Reads()
    engine = getattr(session, "_engine", None)
    owner: Any = engine if engine is not None else session
    name = "run" if engine is not None else "_run"
    original: Callable[..., Any] = getattr(owner, name)

    def run(sql: str, *args: Any, **kwargs: Any) -> Any:
        call: tuple[str, dict[str, Any]] = (sql, {})
        reads.calls.append(call)  # a read, whether the engine then fails or not
        result = original(sql, *args, **kwargs)
        call[1].update(dict(result))
        return result

    had_own = name in getattr(owner, "__dict__", {})
    try:
        object.__setattr__(owner, name, run)
    except (AttributeError, TypeError) as error:  # pragma: no cover - a slotted engine
        raise AssertionError(f"cannot count reads through {type(owner).__name__}") from error
    try:
        yield reads
    finally:
        if had_own:
            object.__setattr__(owner, name, original)
        else:
            object.__delattr__(owner, name)


CHARGED = re.compile(r"failed while running.*charged", re.DOTALL)
QueryFailedError: Any = getattr(dpcurator.errors, "QueryFailedError", ())  # after the refactor


def _is_charged_failure(error: BaseException | None) -> bool:
    """The documented failure after a charged read (not a refusal)."""
    if isinstance(error, QueryFailedError):
        return True
    return isinstance(error, DPError) and CHARGED.search(str(error)) is not None


@dataclass
class Outcome:
    """Everything observable about one ``session.sql`` call (and what the ledger says)."""

    ask: Ask
    release: QueryRelease | None = None
    error: BaseException | None = None
    reads: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    plan_reads: int = 0
    spent_before: Budget | None = None
    spent_after: Budget | None = None
    expected_after: Budget | None = None  # what the ledger would have spent after the charge
    plan: Any = None

    def describe(self) -> str:
        if self.error is None:
            return "release"
        return f"{type(self.error).__name__}: {str(self.error)[:400]}"


def attempt(session: Session, ask: Ask) -> Outcome:
    """Run ``ask`` on ``session``; record the release or error, reads and spent budget.

    Before the query, its plan (no data read, nothing spent) and the ledger's check of its
    events give what the ledger should have spent after a charge; the plan is None when the
    query is refused before planning.
    """
    out = Outcome(ask)
    out.spent_before = session.spent
    try:
        with counting_reads(session) as reads:
            out.plan = session.plan(ask.query, epsilon=ask.epsilon, delta=ask.delta)
        out.plan_reads = len(reads)
        out.expected_after = session.ledger.check(out.plan.events)
    except Exception as error:  # judged on the sql() call below
        note(f"plan/check: {type(error).__name__}")
    with counting_reads(session) as reads:
        try:
            out.release = session.sql(ask.query, epsilon=ask.epsilon, delta=ask.delta)
        except Exception as error:  # the property judges every exception
            out.error = error
    out.reads = list(reads.calls)
    out.spent_after = session.spent
    return out


def open_session(declared: Declared, source: pa.Table, budget: Budget, seed: int) -> Session:
    return Session(
        declared.table(source), budget, ledger=":memory:", source=InsecureSeededSource(seed)
    )


# -- the properties --------------------------------------------------------------------------


def _chain(error: BaseException) -> Iterator[tuple[BaseException, bool]]:
    """Every exception chained to ``error`` (itself first), with whether it is shown."""
    seen: set[int] = set()
    stack: list[tuple[BaseException, bool]] = [(error, True)]
    while stack:
        current, shown = stack.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        yield current, shown
        if current.__cause__ is not None:
            stack.append((current.__cause__, shown))
        if current.__context__ is not None and current.__context__ is not current.__cause__:
            stack.append((current.__context__, shown and not current.__suppress_context__))


def check_only_dperror(outcome: Outcome) -> None:
    """Property 1: a release or a DPError whose chain exposes nothing else and no private text."""
    error = outcome.error
    if error is None:
        assert isinstance(outcome.release, QueryRelease)
        return
    assert isinstance(error, DPError), (
        f"sql() raised {type(error).__name__}, not a DPError: {str(error)[:300]!r}"
    )
    for link, shown in _chain(error):
        if link is not error and shown:
            assert isinstance(link, DPError), (
                f"the DPError exposes a chained {type(link).__module__}.{type(link).__name__} "
                f"(raise ... from None): {str(link)[:300]!r}"
            )
        assert CANARY not in str(link), (
            f"private text in the {'shown' if shown else 'suppressed'} chain: "
            f"{type(link).__name__}: {str(link)[:300]!r}"
        )


def _same_budget(a: Budget | None, b: Budget | None) -> bool:
    assert a is not None and b is not None
    return math.isclose(a.epsilon, b.epsilon, rel_tol=1e-12) and math.isclose(
        a.delta, b.delta, rel_tol=1e-12, abs_tol=1e-300
    )


def check_refusal_is_free(outcome: Outcome) -> None:
    """Property 2: a refusal neither reads nor spends; a charged failure reads and charges."""
    assert outcome.plan_reads == 0, "Session.plan read private data"
    if outcome.error is None or _is_charged_failure(outcome.error):
        assert outcome.reads, "an answer (or charged failure) without reading the data"
        assert outcome.expected_after is not None, (
            f"charged although the plan or the budget check refuses: {outcome.describe()}"
        )
        assert _same_budget(outcome.spent_after, outcome.expected_after), (
            f"spent {outcome.spent_before} -> {outcome.spent_after}, expected "
            f"{outcome.expected_after}: {outcome.describe()}"
        )
        return
    assert not outcome.reads, (
        f"refused after reading the data ({len(outcome.reads)} reads): {outcome.describe()}"
    )
    assert _same_budget(outcome.spent_after, outcome.spent_before), (
        f"a refusal spent {outcome.spent_before} -> {outcome.spent_after}: {outcome.describe()}"
    )


def _signature(error: BaseException) -> list[tuple[str, str, bool]]:
    return [(type(e).__qualname__, str(e), shown) for e, shown in _chain(error)]


def _release_metadata(release: QueryRelease) -> tuple[Any, ...]:
    """What a release says about itself that may not depend on the data."""
    return (
        tuple(release.table.columns),
        release.value_columns,
        repr([dataclasses.astuple(m) for m in release.split]),
        repr(release.events),
        release.charged,
        release.bounded_sql,
        release.threshold,
        release.confidence,
    )


def check_same_outcome(a: Outcome, b: Outcome, what: str) -> None:
    """Property 3: the same success/failure, error type, text and chain, release metadata."""
    assert (a.error is None) == (b.error is None), (
        f"{what}: {a.describe()!r} on one table, {b.describe()!r} on the other"
    )
    if a.error is not None and b.error is not None:
        assert type(a.error) is type(b.error), f"{what}: {a.describe()!r} vs {b.describe()!r}"
        assert str(a.error) == str(b.error), f"{what}: {a.describe()!r} vs {b.describe()!r}"
        assert _signature(a.error) == _signature(b.error), f"{what}: the chains differ"
        return
    assert a.release is not None and b.release is not None
    assert _release_metadata(a.release) == _release_metadata(b.release), (
        f"{what}: the releases describe themselves differently"
    )


def check_released_columns(outcome: Outcome) -> None:
    """A release has each group key once and four distinct columns per aggregate."""
    release = outcome.release
    if release is None:
        return
    columns = list(release.table.columns)
    assert len(set(columns)) == len(columns), f"repeated columns {columns}"
    for alias in release.value_columns:
        for suffix in ("", "_std", "_ci_low", "_ci_high"):
            assert f"{alias}{suffix}" in columns, f"{alias}{suffix} missing from {columns}"
    keys = len(outcome.plan.keys) if outcome.plan is not None else 0
    assert len(columns) == keys + 4 * len(release.value_columns), (
        f"released columns {columns} overwrite one another (value columns "
        f"{release.value_columns}, {keys} keys)"
    )


def _norm(value: Any) -> Any:
    if isinstance(value, np.generic):
        value = value.item()
    if value is None or value is np.ma.masked:
        return None
    if isinstance(value, float) and math.isnan(value):
        return "NaN"
    return value


def _number(value: Any) -> float:
    value = _norm(value)
    return 0.0 if value in (None, "NaN") else float(value)


def _vectors(
    reads: Sequence[tuple[str, dict[str, Any]]], plan: Any
) -> dict[str, dict[tuple[Any, ...], float]]:
    """Each measured vector (by result column, or per quantile column), keyed by group."""
    key_names = [k.alias for k in plan.keys]
    out: dict[str, dict[tuple[Any, ...], float]] = {}
    for _, result in reads:
        if not set(key_names) <= set(result):
            continue  # not one of the plan's statements (the units beyond their bounds)
        size = len(next(iter(result.values()))) if result else 0
        keys = [tuple(_norm(result[k][i]) for k in key_names) for i in range(size)]
        if "__bucket" in result:
            for i, key in enumerate(keys):
                column = str(_norm(result["__column"][i]))
                cell = (*key, _norm(result["__bucket"][i]))
                out.setdefault(f"quantile:{column}", {})[cell] = _number(result["__n"][i])
            continue
        for name, values in result.items():
            if name not in key_names:
                vector = out.setdefault(name, {})
                for i, key in enumerate(keys):
                    vector[key] = _number(values[i])
    return out


def check_sensitivity(a: Outcome, b: Outcome, max_rows_per_unit: int) -> None:
    """Property 5: neighbours' exact bounded aggregates differ by at most the calibration."""
    if a.plan is None or not a.reads or not b.reads:
        return
    if not all(result for _, result in [*a.reads, *b.reads]):
        return  # a read failed: nothing to compare
    va, vb = _vectors(a.reads, a.plan), _vectors(b.reads, a.plan)
    returned = {name for _, result in [*a.reads, *b.reads] for name in result}
    for m in a.plan.measurements:
        if m.kind == "quantile":
            name, bound = f"quantile:{m.column}", float(max_rows_per_unit)
            expected = "__bucket"
        else:
            name, bound = m.result, float(m.units)
            expected = m.result
        assert expected in returned, (
            f"the engine returned no column {expected!r} for {m.name} (columns: {returned}): "
            "this test no longer knows where the plan's measurements are"
        )
        x, y = va.get(name, {}), vb.get(name, {})
        change = sum(abs(x.get(k, 0.0) - y.get(k, 0.0)) for k in set(x) | set(y))
        assert change <= bound, (
            f"{m.name}: the exact bounded aggregate changes by {change:.17g} between "
            f"neighbours, but its noise is calibrated to a sensitivity of {bound:.17g} "
            f"(grid units; {m.kind}, bounds of {m.column!r})"
        )


def _run_on(
    declared: Declared, source: pa.Table, ask: Ask, budget: Budget, seed: int
) -> Outcome | None:
    try:
        session = open_session(declared, source, budget, seed)
    except DPError as error:
        note(f"Session refused the table: {error}")
        return None
    with session:
        return attempt(session, ask)


# -- hypothesis tests ------------------------------------------------------------------------


def examples(n: int) -> settings:
    """``n`` examples, no deadline, no complaint that generating tables and queries is slow."""
    return settings(
        max_examples=n,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )


@examples(300)
@given(
    name=st.sampled_from(["age", "x", "", "a\x00b", 3]),
    bounds=st.none() | st.sampled_from(HOSTILE_BOUNDS),
    bins=st.none() | st.sampled_from([*BINS, (0,), (1, 0), (0, math.nan), (0, 10**400)]),
    domain=st.none()
    | st.sampled_from([*DOMAINS["name"], (), ("a", "a"), (math.nan,), (None,), "ab", (10**400,)]),
    rows=st.sampled_from([1, 3, 0, -1, 2**63, 1.5, True, 10**400]),
)
def test_declarations_raise_only_dperror(
    name: Any, bounds: Any, bins: Any, domain: Any, rows: Any
) -> None:
    """A declaration is accepted or refused with a DPError (never OverflowError, TypeError ...)."""
    spec: dict[str, Any] = {}
    if bounds is not None:
        spec["lower"], spec["upper"] = bounds
    if bins is not None:
        spec["bins"] = bins
    if domain is not None:
        spec["domain"] = domain
    try:
        column = Column(name, **spec)
        Table("people", pd.DataFrame(), columns=[column], privacy_unit="hh", max_rows_per_unit=rows)
    except DPError:
        pass


@pytest.mark.slow
@examples(120)
@given(
    data=datasets(),
    declared=declarations(),
    asks=st.lists(asks, min_size=1, max_size=4),
    budget=st.sampled_from(BUDGETS),
)
def test_sql_returns_a_release_or_raises_a_dperror(
    data: Data, declared: Declared, asks: list[Ask], budget: Budget
) -> None:
    """Property 1: only QueryRelease or DPError, with no foreign or private chained error."""
    note(f"refused at declaration: {declared.refused}")
    try:
        session = open_session(declared, data.arrow(), budget, 0)
    except DPError:
        return
    with session:
        for ask in asks:
            outcome = attempt(session, ask)
            note(f"{ask!r} -> {outcome.describe()}")
            check_only_dperror(outcome)
            check_released_columns(outcome)


@pytest.mark.slow
@examples(100)
@given(
    data=datasets(),
    declared=declarations(),
    asks=st.lists(asks, min_size=1, max_size=4),
    budget=st.sampled_from(BUDGETS),
)
def test_refusals_spend_nothing_and_read_nothing(
    data: Data, declared: Declared, asks: list[Ask], budget: Budget
) -> None:
    """Property 2: a refusal reads no data and spends nothing; a charged failure charges."""
    try:
        session = open_session(declared, data.arrow(), budget, 0)
    except DPError:
        return
    with session:
        for ask in asks:
            outcome = attempt(session, ask)
            note(f"{ask!r} -> {outcome.describe()}")
            check_refusal_is_free(outcome)


@st.composite
def neighbours(draw: st.DrawFn) -> tuple[Data, object]:
    data = draw(datasets(min_units=1))
    return data, draw(st.sampled_from(data.units))


@pytest.mark.slow
@examples(150)
@given(
    pair=neighbours(),
    declared=declarations(),
    ask=asks,
    seed=st.integers(0, 3),
)
def test_neighbours_fail_alike(
    pair: tuple[Data, object], declared: Declared, ask: Ask, seed: int
) -> None:
    """Property 3: D and D minus one unit: both succeed, or the same error type and text."""
    data, removed = pair
    budget = Budget(1e300, 0.9)
    a = _run_on(declared, data.arrow(), ask, budget, seed)
    b = _run_on(declared, data.arrow(without=removed), ask, budget, seed)
    if a is None or b is None:
        assert (a is None) == (b is None), "the Session accepts only one of two neighbours"
        return
    note(f"removed unit {removed!r}: D -> {a.describe()}; D' -> {b.describe()}")
    check_same_outcome(a, b, f"D vs D minus unit {removed!r}")


@pytest.mark.slow
@examples(80)
@given(
    data=datasets(min_units=1),
    declared=declarations(),
    ask=asks,
    shuffle=st.randoms(use_true_random=False),
)
def test_release_does_not_depend_on_row_order(
    data: Data, declared: Declared, ask: Ask, shuffle: Any
) -> None:
    """Property 4: the same rows in another order give the same release (same seed)."""
    order = list(range(len(data.all_rows())))
    shuffle.shuffle(order)
    note(f"row order {order}")
    budget = Budget(1e300, 0.9)
    a = _run_on(declared, data.arrow(), ask, budget, 1)
    b = _run_on(declared, data.arrow(order=order), ask, budget, 1)
    if a is None or b is None:
        assert (a is None) == (b is None)
        return
    note(f"{a.describe()}; shuffled: {b.describe()}")
    check_same_outcome(a, b, "rows shuffled")
    if a.release is not None and b.release is not None:
        pd.testing.assert_frame_equal(a.release.table, b.release.table, obj="released table")


@pytest.mark.slow
@examples(100)
@given(pair=neighbours(), declared=declarations(), ask=asks)
def test_exact_aggregates_respect_the_calibrated_sensitivity(
    pair: tuple[Data, object], declared: Declared, ask: Ask
) -> None:
    """Property 5: what noise is added to changes by at most its sensitivity between neighbours."""
    data, removed = pair
    budget = Budget(1e300, 0.9)
    a = _run_on(declared, data.arrow(), ask, budget, 0)
    b = _run_on(declared, data.arrow(without=removed), ask, budget, 0)
    if a is None or b is None or a.plan is None:
        return
    note(f"removed unit {removed!r}; refused at declaration: {declared.refused}")
    check_sensitivity(a, b, int(declared.table_options["max_rows_per_unit"]))


# -- deterministic hostile examples ----------------------------------------------------------

FIXED = Data(
    units=(1, 2, 3, 4, 5, 6),
    rows={
        1: [(1, 10, 1.0, 1, "1", True, "cnry-s1"), (1, 20, 2.5, 2, "2", False, "cnry-s1")],
        2: [(2, 30, math.nan, 0, "", None, "cnry-s2")],  # age 30: division by zero
        3: [(3, 40, math.inf, -1, "é", True, "cnry-s3"), (3, 41, 1e308, 10**37, "-0", True, "s")],
        4: [(4, 2**62, -1e308, 10**37, f"{CANARY}-4", False, "cnry-s4")],  # not a number
        5: [(5, None, None, None, None, None, None)],
        6: [(6, 50, 2.0**53, 5, "NaN", False, "cnry-s6")],
        None: [(None, 7, 7.0, 7, "7", True, "cnry-none")],
    },
    string_units=False,
)
FIXED_DECLARED = Declared(
    {"privacy_unit": "hh", "max_rows_per_unit": 2, "max_groups_per_unit": 2},
    (
        Column("hh"),
        Column("age", lower=0, upper=100, bins=[0, 18, 65, 100]),
        Column("x", lower=-10, upper=10),
        Column("big", lower=-(10**6), upper=10**6),
        Column("name"),
        Column("flag", domain=[True, False]),
    ),
)
EXTREME_UNITS = (2, 4)

HOSTILE_QUERIES = {
    "cast-name-for-one-unit": (
        "SELECT COUNT(*) FROM people "
        "WHERE CASE WHEN hh = 4 THEN CAST(name AS INTEGER) ELSE 0 END = 0"
    ),
    "cast-name": "SELECT COUNT(*) FROM people WHERE CAST(name AS INTEGER) = 0",
    "int-overflow-simplified": "SELECT COUNT(*) FROM people WHERE age * 9223372036854775807 > 0",
    "int-overflow": "SELECT COUNT(*) FROM people WHERE age * 9223372036854775807 + age > 0",
    "abs-overflow": "SELECT COUNT(*) FROM people WHERE ABS(age * 9223372036854775807) > 0",
    "decimal-overflow": "SELECT COUNT(*) FROM people WHERE big * 9223372036854775807 > 0",
    "division-by-zero": "SELECT COUNT(*) FROM people WHERE 1 // (age - 30) = 0",
    "modulo-by-zero": "SELECT COUNT(*) FROM people WHERE 1 % (age - 30) = 0",
    "cast-double-to-int": "SELECT COUNT(*) FROM people WHERE CAST(x AS BIGINT) > 0",
    "deep-parentheses": "SELECT COUNT(*) FROM people WHERE " + DEEP_PARENS,
    "five-thousand-nots": "SELECT COUNT(*) FROM people WHERE " + MANY_NOTS,
    "huge-literal": "SELECT COUNT(*) FROM people WHERE age < 1e400",
    "order-by-1e400": "SELECT COUNT(*) AS n FROM people ORDER BY 1e400",
    "group-by-1.7": "SELECT flag, COUNT(*) FROM people GROUP BY 1.7",
    "group-by-1e400": "SELECT flag, COUNT(*) FROM people GROUP BY 1e400",
    "limit-1e400": "SELECT COUNT(*) FROM people LIMIT 1e400",
    "tablesample": "SELECT COUNT(*) FROM people TABLESAMPLE 1%",
    "using-sample": "SELECT COUNT(*) FROM people USING SAMPLE 10%",
    "alias-count-std": "SELECT COUNT(*), SUM(x) AS count_std FROM people",
    "alias-count-std-first": "SELECT COUNT(*) AS count_std, COUNT(*) FROM people",
    "key-alias-count-std": "SELECT flag AS count_std, COUNT(*) FROM people GROUP BY flag",
    "histogram-alias-bin": "SELECT HISTOGRAM(age) AS age_bin FROM people",
    "quantile-1e400": "SELECT QUANTILE(x, 1e400) FROM people",
    "histogram-edges-1e400": "SELECT HISTOGRAM(x, 0, 1e400) FROM people",
    "undeclared-column": "SELECT COUNT(*) FROM people WHERE secret = 'x'",
    "partition-selection": "SELECT name, COUNT(*) FROM people GROUP BY name",
    "deep-from": "SELECT COUNT(*) FROM " + "(" * 300 + "people" + ")" * 300,
    "many-minus": "SELECT " + "-" * 3000 + "1 FROM people",
    "not-a-string": None,
}


def _fixed_outcome(
    query: Any, without: object = ..., epsilon: Any = 1.0, delta: Any = 1e-3
) -> Outcome:
    outcome = _run_on(
        FIXED_DECLARED,
        FIXED.arrow(without=without),
        Ask(query, epsilon, delta),
        Budget(1e300, 0.9),
        0,
    )
    assert outcome is not None
    return outcome


@pytest.mark.parametrize("query", list(HOSTILE_QUERIES.values()), ids=list(HOSTILE_QUERIES))
def test_hostile_query_only_dperror(query: Any) -> None:
    outcome = _fixed_outcome(query)
    check_only_dperror(outcome)
    check_released_columns(outcome)


@pytest.mark.parametrize("query", list(HOSTILE_QUERIES.values()), ids=list(HOSTILE_QUERIES))
def test_hostile_query_refusal_is_free(query: Any) -> None:
    check_refusal_is_free(_fixed_outcome(query))


@pytest.mark.parametrize("removed", EXTREME_UNITS)
@pytest.mark.parametrize("query", list(HOSTILE_QUERIES.values()), ids=list(HOSTILE_QUERIES))
def test_hostile_query_neighbours_fail_alike(query: Any, removed: int) -> None:
    check_same_outcome(
        _fixed_outcome(query), _fixed_outcome(query, removed), f"D vs D minus unit {removed}"
    )


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) < 24 else f"{text[:10]}...({len(text)} chars)"


PARAMETER_QUERIES = [
    "SELECT COUNT(*) FROM people",
    "SELECT COUNT(*), SUM(x), AVG(age) FROM people",
    "SELECT name, COUNT(*) FROM people GROUP BY name",
    "SELECT flag, MEDIAN(age), VARIANCE(x) FROM people GROUP BY flag",
]


@pytest.mark.parametrize("query", PARAMETER_QUERIES)
@pytest.mark.parametrize("epsilon", HOSTILE_EPSILONS, ids=_short)
def test_hostile_epsilon(query: str, epsilon: Any) -> None:
    outcome = _fixed_outcome(query, epsilon=epsilon)
    check_only_dperror(outcome)
    check_refusal_is_free(outcome)


@pytest.mark.parametrize("query", PARAMETER_QUERIES)
@pytest.mark.parametrize("delta", HOSTILE_DELTAS, ids=_short)
def test_hostile_delta(query: str, delta: Any) -> None:
    outcome = _fixed_outcome(query, delta=delta)
    check_only_dperror(outcome)
    check_refusal_is_free(outcome)


HOSTILE_DECLARATIONS: dict[str, dict[str, Any]] = {
    "upper-10**400": {"lower": 0, "upper": 10**400},
    "lower--10**400": {"lower": -(10**400), "upper": 0},
    "bins-10**400": {"lower": 0, "upper": 1, "bins": [0, 10**400]},
    "nan-lower": {"lower": math.nan, "upper": 1},
    "string-bounds": {"lower": "0", "upper": "1"},
    "decimal-bounds": {"lower": Decimal(0), "upper": Decimal("1e400")},
    "domain-10**400": {"domain": [10**400]},
    "rows-10**400": {"max_rows_per_unit": 10**400},
    "rows-2**63": {"max_rows_per_unit": 2**63},
}


@pytest.mark.parametrize(
    "spec", list(HOSTILE_DECLARATIONS.values()), ids=list(HOSTILE_DECLARATIONS)
)
def test_hostile_declaration_raises_only_dperror(spec: dict[str, Any]) -> None:
    options = {"max_rows_per_unit": 1, **{k: v for k, v in spec.items() if k.startswith("max_")}}
    column = {k: v for k, v in spec.items() if not k.startswith("max_")}
    with suppress(DPError):
        Table("t", pd.DataFrame(), columns=[Column("v", **column)], privacy_unit="u", **options)


EXTREME_BOUNDS = [(2**53, 2**53 + 2), (-1e300, 1e300), (1e15, 1e15 + 0.125), (-1e308, 1e308)]
BOUNDS_QUERIES = [
    "SELECT SUM(v) FROM t",
    "SELECT COUNT(*), SUM(v), AVG(v) FROM t",
    "SELECT AVG(v), VARIANCE(v), STDDEV(v) FROM t",
    "SELECT MEDIAN(v) FROM t",
    "SELECT HISTOGRAM(v, 0, 1) FROM t",
]


@pytest.mark.parametrize("query", BOUNDS_QUERIES)
@pytest.mark.parametrize("bounds", EXTREME_BOUNDS, ids=repr)
def test_extreme_bounds_are_refused_or_sound(bounds: tuple[float, float], query: str) -> None:
    """Bounds at the edge of float precision: refused at declaration (a DPError), or every
    query over them is answered or refused with a DPError, its released values are finite, and
    its exact bounded aggregates keep the calibrated sensitivity between neighbours."""
    lower, upper = bounds
    try:
        column = Column("v", lower=lower, upper=upper)
    except DPError:
        return
    values = [lower, upper, float(upper) * 2, float(lower) * 2, math.nan, None]
    rows = [(i, v) for i, v in enumerate(values)]

    def run(without: int | None) -> Outcome:
        kept = [r for r in rows if r[0] != without]
        source = pa.table(
            {
                "u": pa.array([r[0] for r in kept], pa.int64()),
                "v": pa.array([None if r[1] is None else float(r[1]) for r in kept], pa.float64()),
            }
        )
        table = Table(
            "t", source, privacy_unit="u", max_rows_per_unit=1, columns=[Column("u"), column]
        )
        with Session(
            table, Budget(1e300, 0.9), ledger=":memory:", source=InsecureSeededSource(0)
        ) as session:
            return attempt(session, Ask(query, 1.0, 0.0))

    full = run(None)
    check_only_dperror(full)
    check_refusal_is_free(full)
    if full.release is not None:  # values finite; std and intervals may be NaN (quantiles)
        table = full.release.table
        values = table[list(full.release.value_columns)].to_numpy(dtype=float)
        assert np.isfinite(values).all(), f"non-finite values for bounds {bounds}: {table}"
        numbers = table.select_dtypes("number").to_numpy(dtype=float)
        assert not np.isinf(numbers).any(), f"infinite released numbers for {bounds}: {table}"
    for removed in range(len(rows)):
        check_sensitivity(full, run(removed), 1)


ORDER_KEYS: list[Any] = [math.nan, None, -0.0, 0.0, 1.0, math.inf, -math.inf]
ORDER_NAMES: list[Any] = ["a", None, "", "é", "B", "b"]
ORDER_QUERIES = {
    "strings": "SELECT name, COUNT(*) AS n FROM people GROUP BY name",
    "floats-nan-null-zeros": "SELECT x, COUNT(*) AS n, SUM(v) FROM people GROUP BY x",
    "two-keys": "SELECT flag, x, COUNT(*) AS n FROM people GROUP BY flag, x",
}


@pytest.mark.parametrize("seed", [1, 2])
@pytest.mark.parametrize("query", list(ORDER_QUERIES.values()), ids=list(ORDER_QUERIES))
def test_released_groups_do_not_follow_the_row_order(query: str, seed: int) -> None:
    """Partition selection releases its groups (NULL, NaN, -0.0 and infinite keys included)
    in an order, and with noise, that the rows' physical order cannot change."""
    units = 84
    source = pa.table(
        {
            "hh": list(range(units)),
            "x": pa.array([ORDER_KEYS[u % 7] for u in range(units)], pa.float64()),
            "name": [ORDER_NAMES[u % 6] for u in range(units)],
            "flag": [[True, None, False][u % 3] for u in range(units)],
            "v": [float(u % 10) for u in range(units)],
        }
    )
    order = np.random.default_rng(seed).permutation(units)  # test data, not privacy noise
    columns = (Column("hh"), Column("x"), Column("name"), Column("flag"))
    declared = Declared(
        {"privacy_unit": "hh", "max_rows_per_unit": 1}, (*columns, Column("v", lower=0, upper=10))
    )
    ask = Ask(query, 100.0, 1e-3)

    def run(source: pa.Table) -> Outcome:
        outcome = _run_on(declared, source, ask, Budget(1e300, 0.9), 0)
        assert outcome is not None and outcome.release is not None, outcome
        return outcome

    a, b = run(source), run(source.take(order))
    assert a.release is not None and b.release is not None
    assert len(a.release.table) >= 3, "the test needs several released groups"
    check_same_outcome(a, b, "rows shuffled")
    pd.testing.assert_frame_equal(a.release.table, b.release.table, obj="released table")
