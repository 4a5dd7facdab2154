"""The WHERE clause's type check: the same refusals on every engine, before any row is read."""

from __future__ import annotations

import pandas as pd
import pytest
from sqlglot import parse_one

from dpcurator.curator import Column, Table
from dpcurator.curator._types import Kind, check_where_types, kind_of_type
from dpcurator.errors import QueryError
from tests.curator.conftest import EngineKind, open_session

KINDS = {
    "state": Kind.TEXT,
    "age": Kind.NUMBER,
    "born": Kind.TEMPORAL,
    "member": Kind.BOOLEAN,
}

ALLOWED = [
    "age > 30",
    "age + 1 > 30 AND state = 'IL'",
    "state IN ('IL', 'OH') OR age BETWEEN 1 AND 5",
    "LOWER(state) LIKE 'i%' AND LENGTH(state) = 2",
    "SUBSTRING(state, 1, 1) = 'I'",
    "state || 'x' = 'ILx'",
    "YEAR(born) = 2020 AND born > '2019-01-01'",
    "born BETWEEN '2019-01-01' AND '2020-01-01'",
    "member AND NOT member IS NULL",
    "member IS TRUE",
    "CAST(state AS INTEGER) > 1",
    "CAST(age AS VARCHAR) = '30'",
    "COALESCE(age, 0) > 1",
    "CASE WHEN age > 1 THEN state ELSE 'none' END = 'IL'",
    "ABS(age - 50) < 10 AND ROUND(age / 3) = FLOOR(age / 3)",
    "state IS NULL OR age IS NOT NULL",
    "age = NULL",
]

REFUSED = [
    "state + 1 > 2",
    "state = 1",
    "state > 1",
    "age = '20'",
    "age IN ('10', 'a')",
    "state IN (1, 2)",
    "state BETWEEN 1 AND 5",
    "-state > 1",
    "state = age",
    "state || 1 = 'IL1'",
    "age LIKE '1%'",
    "LOWER(age) = '10'",
    "LENGTH(age) = 2",
    "ABS(state) > 1",
    "ROUND(state) = 7",
    "YEAR(state) = 2020",
    "COALESCE(state, 1) = 1",
    "CASE WHEN age > 1 THEN state ELSE 1 END = 1",
    "CASE WHEN state THEN 1 ELSE 0 END = 1",
    "state AND age > 1",
    "NOT state",
    "age",
    "state IS TRUE",
    "born > 5",
    "state > born",
    "member = 1",
    "(age > 1) + 1 > 2",
    "(age, state) = (30, 'IL')",
]


@pytest.mark.parametrize("where", ALLOWED)
def test_filters_of_one_kind_pass(where: str) -> None:
    check_where_types(parse_one(where), KINDS)


@pytest.mark.parametrize("where", REFUSED)
def test_implicit_casts_between_kinds_are_refused(where: str) -> None:
    with pytest.raises(QueryError, match="cast"):
        check_where_types(parse_one(where), KINDS)


def test_the_refusal_names_the_expression_and_the_kinds() -> None:
    with pytest.raises(QueryError, match=r"mixes text and a number in 'state = 1'"):
        check_where_types(parse_one("state = 1"), KINDS)


def test_unknown_columns_are_left_to_the_engine() -> None:
    check_where_types(parse_one("nosuch + 1 > 2"), KINDS)  # the engine refuses the name


@pytest.mark.parametrize(
    ("name", "dialect", "kind"),
    [
        ("VARCHAR", "duckdb", Kind.TEXT),
        ("ENUM('a', 'b')", "duckdb", Kind.TEXT),
        ("HUGEINT", "duckdb", Kind.NUMBER),
        ("DECIMAL(18,3)", "duckdb", Kind.NUMBER),
        ("TIMESTAMP WITH TIME ZONE", "duckdb", Kind.TEMPORAL),
        ("BOOLEAN", "duckdb", Kind.BOOLEAN),
        ("INTEGER[]", "duckdb", Kind.OTHER),
        ("STRING", "spark", Kind.TEXT),
        ("DECIMAL(38,0)", "spark", Kind.NUMBER),
        ("TIMESTAMP_NTZ", "spark", Kind.TEMPORAL),
        ("STRUCT<A:INT>", "spark", Kind.OTHER),
        ("NOT A TYPE ((", "duckdb", Kind.OTHER),
    ],
)
def test_kinds_of_the_engines_types(name: str, dialect: str, kind: Kind) -> None:
    assert kind_of_type(name, dialect) is kind


def _typed_table() -> Table:
    frame = pd.DataFrame(
        {
            "state": ["IL", "OH", "7"] * 10,
            "age": [10, 20, 30] * 10,
            "born": pd.to_datetime(["2020-01-01", "2021-06-01", "2019-03-01"] * 10),
            "member": [True, False, True] * 10,
        }
    )
    return Table(
        "p",
        frame,
        columns=[
            Column("state"),
            Column("age", lower=0, upper=100),
            Column("born"),
            Column("member"),
        ],
    )


def test_both_engines_refuse_and_answer_the_same_filters(engine_kind: EngineKind) -> None:
    # Before this check, Spark (casting per row) answered most of REFUSED, which DuckDB
    # refused, and DuckDB bound `state AND age > 1`, which Spark refused.
    with open_session(_typed_table(), engine=engine_kind) as session:
        for where in REFUSED:
            with pytest.raises(QueryError, match="cast"):
                session.plan(f"SELECT COUNT(*) FROM p WHERE {where}", epsilon=0.1)
        for where in ALLOWED:
            session.plan(f"SELECT COUNT(*) FROM p WHERE {where}", epsilon=0.1)
        assert session.spent.epsilon == 0.0
