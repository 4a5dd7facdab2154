"""The one type check of an analyst's WHERE clause, the same for every engine.

Engines cast implicitly in different ways: DuckDB refuses ``state + 1`` (text plus a number)
while Spark casts each row's text to a number (NULL where it is not one); DuckDB compares
``state = 1`` as text, Spark as numbers; Spark refuses a text column used as a predicate, DuckDB
casts each row's text to a boolean. So the same query would be refused by one engine and
answered (differently) by the other. The curator checks the filter itself, from the source's
public schema (column names and types, never rows), before any engine sees it, and refuses
every implicit cast between kinds of values: the analyst writes the ``CAST`` they mean, which
both engines evaluate the same way (and, under TRY semantics, a row where it fails is not
selected).

The rules, by kind (text, number, date/time, boolean, other):

- comparisons (``=``, ``<``, ``BETWEEN``, ``IN``, ...) take operands of one kind; a date/time
  may be compared with a string literal (``d > '2020-01-01'``, a constant both engines parse);
- arithmetic, ``ABS``, ``ROUND``, ``FLOOR`` and ``CEIL`` take numbers; ``LIKE``, ``LOWER``,
  ``UPPER``, ``TRIM``, ``LENGTH``, ``SUBSTRING`` and ``||`` take text; ``YEAR``, ``MONTH`` and
  ``DAY`` take dates or times;
- ``AND``, ``OR``, ``NOT``, ``IS TRUE``, a ``CASE`` condition and the filter itself are
  booleans; the branches of ``CASE``, ``IF`` and ``COALESCE`` are of one kind;
- ``NULL`` fits everywhere, and ``CAST(x AS type)`` is of its target's kind;
- tuples are refused (Spark compares them as structs with named fields, DuckDB by position):
  compare each part.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping, Sequence

from sqlglot import exp

from dpcurator.errors import QueryError

__all__ = ["Kind", "check_key_types", "check_where_types", "is_integer_type", "kind_of_type"]


class Kind(enum.Enum):
    """The kind of a value, as far as implicit casts are concerned."""

    TEXT = "text"
    NUMBER = "a number"
    TEMPORAL = "a date or time"
    BOOLEAN = "a boolean"
    OTHER = "a value of another type"


def kind_of_type(name: str, dialect: str) -> Kind:
    """Return the kind of a source column's type, as the engine names it.

    >>> kind_of_type("VARCHAR", "duckdb"), kind_of_type("decimal(38,0)", "spark")
    (<Kind.TEXT: 'text'>, <Kind.NUMBER: 'a number'>)
    """
    data_type = _data_type(name, dialect)
    return Kind.OTHER if data_type is None else _kind_of_data_type(data_type)


def is_integer_type(name: str, dialect: str) -> bool:
    """Return whether a source column's type, as the engine names it, holds integers only.

    >>> is_integer_type("BIGINT", "duckdb"), is_integer_type("double", "spark")
    (True, False)
    """
    data_type = _data_type(name, dialect)
    return data_type is not None and data_type.is_type(*exp.DataType.INTEGER_TYPES)


def _data_type(name: str, dialect: str) -> exp.DataType | None:
    """Return the type ``name`` as sqlglot reads it, None for a type it does not know."""
    try:
        return exp.DataType.build(name, dialect=dialect)
    except Exception:  # unknown: of no kind the checks use, not known to hold integers
        return None


def _kind_of_data_type(data_type: exp.DataType) -> Kind:
    if data_type.is_type(*exp.DataType.TEXT_TYPES, exp.DataType.Type.ENUM):
        return Kind.TEXT
    if data_type.is_type(*exp.DataType.NUMERIC_TYPES):
        return Kind.NUMBER
    if data_type.is_type(*exp.DataType.TEMPORAL_TYPES):
        return Kind.TEMPORAL
    if data_type.is_type(exp.DataType.Type.BOOLEAN):
        return Kind.BOOLEAN
    return Kind.OTHER


def check_where_types(where: exp.Expr | None, kinds: Mapping[str, Kind]) -> None:
    """Refuse a WHERE clause with an implicit cast between kinds of values (see the module).

    ``kinds`` maps the source's lower-cased column names to their kinds.

    Raises
    ------
    QueryError
        Naming the expression and the kinds it mixes, and what to write instead.

    Examples
    --------
    >>> from sqlglot import parse_one
    >>> kinds = {"state": Kind.TEXT, "age": Kind.NUMBER}
    >>> check_where_types(parse_one("age + 1 > 30 AND state = 'IL'"), kinds)
    >>> check_where_types(parse_one("state + 1 > 2"), kinds)
    Traceback (most recent call last):
    ...
    dpcurator.errors.QueryError: WHERE uses text in 'state + 1', which takes a number: ...
    """
    if where is not None:
        _Checker(kinds).expect(where, Kind.BOOLEAN, where)


def check_key_types(expression: exp.Expr, kinds: Mapping[str, Kind]) -> None:
    """Refuse a computed group key with an implicit cast between kinds (as in a WHERE clause).

    Raises
    ------
    QueryError
        As :func:`check_where_types`.
    """
    _Checker(kinds).kind(expression)


_Handler = Callable[["_Checker", exp.Expr], "Kind | None"]


class _Checker:
    """Infers kinds bottom-up (None: NULL, or a column the engine does not know)."""

    def __init__(self, kinds: Mapping[str, Kind]) -> None:
        self._kinds = kinds

    def kind(self, node: exp.Expr) -> Kind | None:
        for types, handler in _HANDLERS:
            if isinstance(node, types):
                return handler(self, node)
        return None  # identifiers, data types and other parts that are no value

    def expect(self, node: exp.Expr, wanted: Kind, context: exp.Expr) -> None:
        got = self.kind(node)
        if got is not None and got is not wanted:
            raise QueryError(
                f"WHERE uses {got.value} in {_sql(context)!r}, which takes {wanted.value}: "
                "the engines would cast each row's value, each in its own way. Write the cast "
                "you mean (CAST(column AS type))."
            )

    def same(self, nodes: Sequence[exp.Expr], context: exp.Expr) -> Kind | None:
        """Return the one kind of ``nodes`` (a date or time may meet a string literal)."""
        found: Kind | None = None
        for node in nodes:
            kind = self.kind(node)
            if kind is None or kind is found:
                continue
            if found is None:
                found = kind
                continue
            pair = {found, kind}
            if pair == {Kind.TEMPORAL, Kind.TEXT} and _literal_text_only(nodes, self):
                found = Kind.TEMPORAL
                continue
            raise QueryError(
                f"WHERE mixes {found.value} and {kind.value} in {_sql(context)!r}: the engines "
                "would cast each row's value, each in its own way. Compare values of one kind, "
                "with an explicit CAST(column AS type) where you mean one."
            )
        return found

    # -- handlers ----------------------------------------------------------------------------
    def column(self, node: exp.Expr) -> Kind | None:
        assert isinstance(node, exp.Column)
        return self._kinds.get(node.name.lower())

    def literal(self, node: exp.Expr) -> Kind | None:
        assert isinstance(node, exp.Literal)
        return Kind.TEXT if node.is_string else Kind.NUMBER

    def predicate(self, node: exp.Expr) -> Kind:
        for part in _operands(node):
            self.expect(part, Kind.BOOLEAN, node)
        return Kind.BOOLEAN

    def comparison(self, node: exp.Expr) -> Kind:
        self.same([node.this, node.expression], node)
        return Kind.BOOLEAN

    def membership(self, node: exp.Expr) -> Kind:
        self.same([node.this, *node.expressions], node)
        return Kind.BOOLEAN

    def between(self, node: exp.Expr) -> Kind:
        self.same([node.this, node.args["low"], node.args["high"]], node)
        return Kind.BOOLEAN

    def is_(self, node: exp.Expr) -> Kind:
        if isinstance(node.expression, exp.Boolean):  # x IS TRUE / IS FALSE
            self.expect(node.this, Kind.BOOLEAN, node)
        else:
            self.kind(node.this)
        return Kind.BOOLEAN

    def arithmetic(self, node: exp.Expr) -> Kind:
        for part in _operands(node):
            self.expect(part, Kind.NUMBER, node)
        return Kind.NUMBER

    def text(self, node: exp.Expr) -> Kind:
        self.expect(node.this, Kind.TEXT, node)
        for name in ("start", "length"):  # SUBSTRING's positions
            if node.args.get(name) is not None:
                self.expect(node.args[name], Kind.NUMBER, node)
        return Kind.NUMBER if isinstance(node, exp.Length) else Kind.TEXT

    def like(self, node: exp.Expr) -> Kind:
        self.expect(node.this, Kind.TEXT, node)
        self.expect(node.expression, Kind.TEXT, node)
        return Kind.BOOLEAN

    def concat(self, node: exp.Expr) -> Kind:
        for part in _operands(node):
            self.expect(part, Kind.TEXT, node)
        return Kind.TEXT

    def date_part(self, node: exp.Expr) -> Kind:
        self.expect(node.this, Kind.TEMPORAL, node)
        return Kind.NUMBER

    def coalesce(self, node: exp.Expr) -> Kind | None:
        return self.same([node.this, *node.expressions], node)

    def case(self, node: exp.Expr) -> Kind | None:
        branches = []
        for when in node.args.get("ifs") or []:
            self.expect(when.this, Kind.BOOLEAN, when)
            branches.append(when.args["true"])
        if node.args.get("default") is not None:
            branches.append(node.args["default"])
        return self.same(branches, node)

    def if_(self, node: exp.Expr) -> Kind | None:
        self.expect(node.this, Kind.BOOLEAN, node)
        branches = [node.args["true"]]
        if node.args.get("false") is not None:
            branches.append(node.args["false"])
        return self.same(branches, node)

    def cast(self, node: exp.Expr) -> Kind:
        assert isinstance(node, exp.Cast)
        self.kind(node.this)
        return _kind_of_data_type(node.to)

    def paren(self, node: exp.Expr) -> Kind | None:
        return self.kind(node.this)

    def tuple_(self, node: exp.Expr) -> Kind:
        raise QueryError(
            f"WHERE uses the tuple {_sql(node)!r}, which engines compare (and cast) each in "
            "its own way: compare each part instead (a = 1 AND b = 'x')."
        )


def _operands(node: exp.Expr) -> list[exp.Expr]:
    if isinstance(node, exp.Concat):
        return list(node.expressions)
    return [v for k, v in node.args.items() if k in ("this", "expression") and v is not None]


def _literal_text_only(nodes: Sequence[exp.Expr], checker: _Checker) -> bool:
    """Whether every text among ``nodes`` is a string literal (a constant date or time)."""
    return all(
        isinstance(n, exp.Literal) and n.is_string for n in nodes if checker.kind(n) is Kind.TEXT
    )


def _sql(node: exp.Expr) -> str:
    return node.sql(dialect="duckdb")


_HANDLERS: tuple[tuple[type[exp.Expr] | tuple[type[exp.Expr], ...], _Handler], ...] = (
    (exp.Column, _Checker.column),
    (exp.Literal, _Checker.literal),
    (exp.Boolean, lambda _c, _n: Kind.BOOLEAN),
    (exp.Null, lambda _c, _n: None),
    (exp.Paren, _Checker.paren),
    (exp.Tuple, _Checker.tuple_),
    ((exp.And, exp.Or, exp.Xor, exp.Not), _Checker.predicate),
    (exp.Is, _Checker.is_),
    ((exp.Like, exp.ILike), _Checker.like),
    (exp.Between, _Checker.between),
    (exp.In, _Checker.membership),
    (
        (exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE, exp.NullSafeEQ, exp.NullSafeNEQ),
        _Checker.comparison,
    ),
    (
        (exp.Add, exp.Sub, exp.Mul, exp.Div, exp.IntDiv, exp.Mod, exp.Neg, exp.Abs),
        _Checker.arithmetic,
    ),
    ((exp.Round, exp.Floor, exp.Ceil), _Checker.arithmetic),
    ((exp.Lower, exp.Upper, exp.Trim, exp.Length, exp.Substring), _Checker.text),
    ((exp.Concat, exp.DPipe), _Checker.concat),
    ((exp.Year, exp.Month, exp.Day), _Checker.date_part),
    (exp.Coalesce, _Checker.coalesce),
    (exp.Case, _Checker.case),
    (exp.If, _Checker.if_),
    (exp.Cast, _Checker.cast),
)
