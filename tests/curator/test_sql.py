"""The SQL front end: what is accepted, what is refused (and why), and injection attempts."""

from __future__ import annotations

import pandas as pd
import pytest

from dpcurator import QueryError
from dpcurator.curator import Column, Table
from dpcurator.curator._aggregates import (
    Aggregate,
    Count,
    CountColumn,
    CountUnits,
    Histogram,
    Mean,
    Quantile,
    Sum,
    Variance,
)
from dpcurator.curator._sql import parse_query

TABLE = Table(
    "people",
    pd.DataFrame(),
    privacy_unit="pid",
    max_rows_per_unit=2,
    columns=[
        Column("state", domain=["CA", "NY"]),
        Column("city"),
        Column("income", lower=0, upper=1000),
        Column("age", lower=0, upper=100, bins=[0, 18, 65, 100]),
        Column('odd "name"; DROP TABLE x; --', lower=0, upper=1),
    ],
)
TABLES = {"people": TABLE}


def parse(text: str):  # type: ignore[no-untyped-def]
    return parse_query(text, TABLES)


def test_aggregates_and_default_names() -> None:
    q = parse(
        "SELECT state, COUNT(*), COUNT(income), COUNT(DISTINCT pid), SUM(income), AVG(income), "
        "VARIANCE(income), VAR_POP(income), STDDEV(income), STDDEV_POP(income), MEDIAN(income), "
        "QUANTILE(income, 0.9), PERCENTILE_CONT(0.25) WITHIN GROUP (ORDER BY income) "
        "FROM people GROUP BY state"
    )
    assert [type(a) for a in q.aggregates] == [
        Count, CountColumn, CountUnits, Sum, Mean, Variance, Variance, Variance, Variance,
        Quantile, Quantile, Quantile,
    ]  # fmt: skip
    assert [a.alias for a in q.aggregates][-3:] == ["median_income", "p90_income", "p25_income"]
    variances = [a for a in q.aggregates if isinstance(a, Variance)]
    assert [(v.population, v.root) for v in variances] == [
        (False, False), (True, False), (False, True), (True, True),
    ]  # fmt: skip
    assert q.group_by == ("state",)


@pytest.mark.parametrize(
    ("item", "expected"),
    [
        ("COUNT(*)", Count(alias="count", text="COUNT(*)")),
        ("COUNT(city)", CountColumn(column="city", alias="count_city", text="COUNT(city)")),
        (
            "COUNT(DISTINCT pid)",
            CountUnits(column="pid", alias="count_distinct_pid", text="COUNT(DISTINCT pid)"),
        ),
        ("SUM(income)", Sum(column="income", alias="sum_income", text="SUM(income)")),
        ("AVG(income)", Mean(column="income", alias="avg_income", text="AVG(income)")),
        ("VARIANCE(age)", Variance(column="age", alias="var_age", text="VARIANCE(age)")),
        ("VAR_SAMP(age)", Variance(column="age", alias="var_age", text="VARIANCE(age)")),
        (
            "VAR_POP(age)",
            Variance(column="age", alias="var_pop_age", text="VAR_POP(age)", population=True),
        ),
        ("STDDEV(age)", Variance(column="age", alias="stddev_age", text="STDDEV(age)", root=True)),
        (
            "STDDEV_SAMP(age)",
            Variance(column="age", alias="stddev_age", text="STDDEV_SAMP(age)", root=True),
        ),
        (
            "STDDEV_POP(age)",
            Variance(
                column="age",
                alias="stddev_pop_age",
                text="STDDEV_POP(age)",
                population=True,
                root=True,
            ),
        ),
        ("MEDIAN(age)", Quantile(column="age", alias="median_age", text="MEDIAN(age)", level=0.5)),
        (
            "QUANTILE(age, 0.9)",
            Quantile(column="age", alias="p90_age", text="QUANTILE(age, 0.9)", level=0.9),
        ),
        (
            "PERCENTILE_CONT(age, 0.125)",
            Quantile(
                column="age", alias="p12_5_age", text="QUANTILE_CONT(age, 0.125)", level=0.125
            ),
        ),
        (
            "PERCENTILE_DISC(age, 0.5)",
            Quantile(column="age", alias="median_age", text="QUANTILE_DISC(age, 0.5)", level=0.5),
        ),
        (
            "PERCENTILE_DISC(0.25) WITHIN GROUP (ORDER BY age)",
            Quantile(
                column="age",
                alias="p25_age",
                text="QUANTILE_DISC(age, 0.25 ORDER BY age)",  # sqlglot's DuckDB rendering
                level=0.25,
            ),
        ),
        (
            "HISTOGRAM(age)",
            Histogram(column="age", alias="count", text="HISTOGRAM(age)", edges=(0, 18, 65, 100)),
        ),
        (
            "HISTOGRAM(income, 0, 10) AS n",
            Histogram(
                column="income", alias="n", text="HISTOGRAM(income, 0, 10)", edges=(0.0, 10.0)
            ),
        ),
        (
            "AVG(p.income) AS mean",
            Mean(column="income", alias="mean", text="AVG(p.income)"),
        ),
    ],
)
def test_each_aggregate_maps_to_its_class(item: str, expected: Aggregate) -> None:
    (aggregate,) = parse(f"SELECT {item} FROM people AS p").aggregates
    assert aggregate == expected
    assert type(aggregate) is type(expected)


def test_aliases_order_limit_positions_and_qualifiers() -> None:
    q = parse(
        "SELECT p.state AS s, COUNT(*) AS n FROM people AS p WHERE p.age >= 18 "
        "GROUP BY 1 ORDER BY n DESC, s LIMIT 3"
    )
    assert q.key_names == {"state": "s"}
    assert q.order_by == (("n", True), ("s", False))
    assert q.limit == 3
    assert q.where is not None and '"age"' in q.where.sql()


def test_histogram_with_declared_or_literal_bins() -> None:
    assert parse("SELECT HISTOGRAM(age) FROM people").histogram.edges == (0, 18, 65, 100)  # type: ignore[union-attr]
    q = parse("SELECT HISTOGRAM(income, 0, 10, 100) FROM people")
    assert isinstance(q.histogram, Histogram) and q.histogram.edges == (0.0, 10.0, 100.0)
    assert q.histogram is q.aggregates[0]
    assert parse("SELECT COUNT(*) FROM people").histogram is None


@pytest.mark.parametrize(
    ("query", "reason"),
    [
        ("SELECT * FROM people", "raw rows"),
        ("SELECT income FROM people", "not a GROUP BY key"),
        ("SELECT state FROM people GROUP BY state", "no aggregate"),
        ("SELECT COUNT(*) FROM other", "not declared"),
        ("SELECT COUNT(*) FROM people JOIN other ON 1 = 1", "Joins"),
        ("SELECT COUNT(*) FROM (SELECT * FROM people)", "FROM must name"),
        ("SELECT COUNT(*) FROM people WHERE age IN (SELECT age FROM people)", "Subqueries"),
        ("SELECT COUNT(*) FROM people UNION SELECT COUNT(*) FROM people", "Only SELECT"),
        ("SELECT SUM(salary) FROM people", "not declared"),
        ("SELECT SUM(city) FROM people", "needs bounds"),
        ("SELECT AVG(income * 2) FROM people", "not a column"),
        ("SELECT COUNT(DISTINCT city) FROM people", "privacy unit only"),
        ("SELECT pid, COUNT(*) FROM people GROUP BY pid", "one group per privacy unit"),
        ("SELECT state, COUNT(*) FROM people GROUP BY state HAVING COUNT(*) > 3", "HAVING"),
        ("SELECT COUNT(*) OVER () FROM people", "Window"),
        ("SELECT DISTINCT state FROM people", "DISTINCT"),
        ("SELECT COUNT(*) FROM people WHERE read_csv('x') = 1", "not allowed"),
        ("SELECT COUNT(*) FROM people WHERE random() < 0.5", "not allowed"),
        ("SELECT COUNT(*) FROM people WHERE SUM(age) > 1", "aggregate"),
        ("SELECT COUNT(*) + 1 FROM people", "neither a group key"),
        ("SELECT COUNT(*) FROM people; DROP TABLE people", "exactly one"),
        ("DELETE FROM people", "Only SELECT"),
        ("SELECT COUNT(*) FROM people WHERE", "not valid SQL"),
        ("SELEC COUNT(*) FROM people", "not valid SQL"),
        ("", "empty"),
        ("SELECT QUANTILE(income, 2) FROM people", r"must be in \[0, 1\]"),
        ("SELECT HISTOGRAM(income) FROM people", "declare bins"),
        ("SELECT HISTOGRAM(age), COUNT(*) FROM people", "only aggregate"),
        ("SELECT COUNT(*) AS a, SUM(income) AS a FROM people", "appear twice"),
        ("SELECT COUNT(*) FROM main.people", "without a schema"),
        ("WITH x AS (SELECT 1) SELECT COUNT(*) FROM people", "WITH"),
        ("SELECT state, COUNT(*) FROM people GROUP BY ROLLUP (state)", "ROLLUP"),
        ("SELECT COUNT(*) FROM people ORDER BY income", "output column"),
        ("SELECT COUNT() FROM people", r"give a column, or \* to count rows"),
        ("SELECT MEAN(income) FROM people", "neither a group key"),
        ("SELECT MODE(income) FROM people", "not supported"),
    ],
)
def test_refusals_say_why(query: str, reason: str) -> None:
    with pytest.raises(QueryError, match=reason):
        parse(query)


def test_injection_in_names_and_literals_is_quoted() -> None:
    weird = 'odd "name"; DROP TABLE x; --'
    q = parse(f'SELECT SUM("{weird.replace(chr(34), chr(34) * 2)}") FROM people')
    assert q.aggregates[0].column == weird
    q = parse("SELECT COUNT(*) FROM people WHERE city = 'x''; DROP TABLE people; --'")
    rendered = q.where.sql(dialect="duckdb")  # type: ignore[union-attr]
    assert rendered == "\"city\" = 'x''; DROP TABLE people; --'"
    with pytest.raises(QueryError, match="not declared"):
        parse('SELECT COUNT(*) FROM people WHERE "city"" = 1; --" = 2')
