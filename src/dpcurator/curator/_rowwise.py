"""Row-wise SQL expressions: what a WHERE clause and a derived column may compute.

Comparisons, logic, arithmetic and a few pure functions of one row's columns: nothing that
aggregates, reads other rows or tables, or depends on anything but the row.
"""

from __future__ import annotations

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError, TokenError

from dpcurator.errors import InvalidParameterError

__all__ = ["ROW_NODES", "row_expression"]

ROW_NODES: tuple[type[exp.Expr], ...] = (
    exp.Column,
    exp.Identifier,
    exp.Literal,
    exp.Boolean,
    exp.Null,
    exp.Paren,
    exp.Tuple,
    exp.And,
    exp.Or,
    exp.Not,
    exp.Xor,
    exp.EQ,
    exp.NEQ,
    exp.GT,
    exp.GTE,
    exp.LT,
    exp.LTE,
    exp.NullSafeEQ,
    exp.NullSafeNEQ,
    exp.Is,
    exp.In,
    exp.Between,
    exp.Like,
    exp.ILike,
    exp.Add,
    exp.Sub,
    exp.Mul,
    exp.Div,
    exp.IntDiv,
    exp.Mod,
    exp.Neg,
    exp.Abs,
    exp.Lower,
    exp.Upper,
    exp.Length,
    exp.Coalesce,
    exp.Substring,
    exp.Trim,
    exp.Round,
    exp.Floor,
    exp.Ceil,
    exp.Year,
    exp.Month,
    exp.Day,
    exp.Cast,
    exp.DataType,
    exp.Case,
    exp.If,
    exp.Concat,
    exp.DPipe,
)
"""The node types of a row-wise expression."""

MAX_EXPRESSION_CHARS = 2_000
"""Longest derived column expression accepted (characters)."""


def row_expression(text: object, column: str) -> exp.Expr:
    """Parse a derived column's expression (DuckDB's SQL) and check that it is row-wise.

    Raises
    ------
    InvalidParameterError
        If ``text`` is not one SQL expression made of :data:`ROW_NODES`.

    Examples
    --------
    >>> row_expression("FLOOR(age / 10) * 10", "decade").sql()
    'FLOOR(age / 10) * 10'
    >>> row_expression("SUM(age)", "total")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    dpcurator.errors.InvalidParameterError: expression ... row-wise ...
    """
    if not isinstance(text, str) or not text.strip() or len(text) > MAX_EXPRESSION_CHARS:
        raise InvalidParameterError(
            "expression",
            text,
            f"must be a SQL expression of at most {MAX_EXPRESSION_CHARS} characters "
            f"(derived column {column!r})",
        )
    try:
        tree = sqlglot.parse_one(text, read="duckdb")
    except (ParseError, TokenError, ValueError, RecursionError):
        tree = None
    if tree is None or isinstance(tree, exp.Query):
        raise InvalidParameterError(
            "expression", text, f"must be one SQL expression (derived column {column!r})"
        )
    for node in tree.walk():
        if not isinstance(node, ROW_NODES):
            raise InvalidParameterError(
                "expression",
                text,
                f"must be row-wise (derived column {column!r}): {node.sql(dialect='duckdb')!r} "
                "is not allowed; use comparisons, AND/OR/NOT, IN, BETWEEN, LIKE, IS NULL, "
                "arithmetic, CASE, CAST and the functions ABS, LOWER, UPPER, LENGTH, COALESCE, "
                "SUBSTRING, TRIM, ROUND, FLOOR, CEIL, YEAR, MONTH, DAY",
            )
    if not any(isinstance(node, exp.Column) for node in tree.walk()):
        raise InvalidParameterError(
            "expression", text, f"must read a column of the source (derived column {column!r})"
        )
    return tree
