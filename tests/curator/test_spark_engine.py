"""SparkEngine: every kind of source, the schema checks, and DuckDB's semantics on Spark.

The tests share one local Spark per test process (the ``spark`` fixture) and use tables of a few
rows. They call Spark through the engine only, or through JVM-side calls (``spark.sql`` without
collecting, the catalog): the suite's ``-W error`` then also checks that the engine keeps
pyspark's own warnings to itself.
"""

from __future__ import annotations

import decimal
import importlib.util
import os
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import sqlglot
from sqlglot import exp

from dpcurator.curator import Column, DuckDBEngine, Table
from dpcurator.curator import _spark as spark_module
from dpcurator.curator._engine import SOURCE, Engine
from dpcurator.curator._spark import SparkEngine
from dpcurator.errors import InvalidParameterError, QueryError, UnsupportedError

BIG = 2**62 + 1  # far above 2**53: float64 would round it


def people() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "pid": [1, 1, 2, 3, 3, 4],
            "state": ["CA", "CA", "NY", "TX", "TX", None],
            "income": [10.5, 20.0, 30.0, 40.0, 50.0, 60.0],
            "big": [BIG, BIG, 1, 2, 3, 4],
            "code": ["7", "x", "9", None, "1", "2"],
        }
    )


def people_table(source: Any = None, **options: Any) -> Table:
    columns = options.pop(
        "columns",
        [Column("state", domain=["CA", "NY", "TX"]), Column("income", lower=0, upper=100)],
    )
    frame = people() if source is None else source
    return Table("people", frame, privacy_unit="pid", max_rows_per_unit=2, columns=columns)


def query(sql: str) -> exp.Query:
    tree = sqlglot.parse_one(sql, read="duckdb")
    assert isinstance(tree, exp.Query)
    return tree


COUNT_BY_STATE = query(
    f"SELECT state, COUNT(*) AS n, SUM(income) AS total FROM {SOURCE} "
    "WHERE state IS NOT NULL GROUP BY state ORDER BY state"
)
EXPECTED = {"state": ["CA", "NY", "TX"], "n": [2, 1, 2], "total": [30.5, 30.0, 90.0]}


@pytest.fixture
def engine(spark: Any) -> Any:
    with SparkEngine(people_table(), spark=spark) as opened:
        yield opened


def write_parquet(path: Path, frame: pd.DataFrame) -> None:
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), path)


# -- sources and their schemas ------------------------------------------------------------------
def test_pandas_source_runs_in_its_own_session(spark: Any, engine: SparkEngine) -> None:
    assert isinstance(engine, Engine)
    assert engine.dialect == "spark"
    assert list(engine.tables) == ["people"]
    assert engine.run(COUNT_BY_STATE, "people") == EXPECTED
    # The engine's settings stay in its own session.
    assert engine.spark is not spark
    assert engine.spark.conf.get("spark.sql.ansi.enabled") == "false"
    assert engine.spark.conf.get("spark.sql.session.timeZone") == "UTC"
    view = engine.relation("people")
    assert view.startswith("`__dpcurator_")
    assert spark.catalog.tableExists(view) is False
    assert engine.spark.catalog.tableExists(view) is True


def test_arrow_source_keeps_exact_types(spark: Any) -> None:
    arrow = pa.table(
        {
            "state": pa.array(["CA", "NY", "CA"]).dictionary_encode(),
            "big": pa.array([BIG, None, 3], pa.int64()),
            "small": pa.array([1, 2, 250], pa.uint8()),  # Spark has no unsigned types: widened
        }
    )
    table = Table("t", arrow, columns=[Column("state"), Column("small", lower=0, upper=255)])
    with SparkEngine(table, spark=spark) as engine:
        result = engine.run(query(f"SELECT state, big, small FROM {SOURCE} ORDER BY small"), "t")
    assert result == {"state": ["CA", "NY", "CA"], "big": [BIG, None, 3], "small": [1, 2, 250]}


def test_spark_dataframe_source_becomes_a_global_view(spark: Any) -> None:
    frame = spark.sql(
        "SELECT * FROM VALUES (1, 'CA', 10.5D), (2, 'NY', 30.0D) AS t(pid, state, income)"
    )
    with SparkEngine(people_table(frame), spark=spark) as engine:
        relation = engine.relation("people")
        assert relation.startswith("`global_temp`.`__dpcurator_")
        result = engine.run(query(f"SELECT state, income FROM {SOURCE} ORDER BY state"), "people")
        assert result == {"state": ["CA", "NY"], "income": [10.5, 30.0]}
    assert spark.catalog.tableExists(relation) is False  # dropped


def test_sparksession_source_names_a_table(spark: Any) -> None:
    spark.sql(
        "CREATE OR REPLACE GLOBAL TEMP VIEW dp_people AS "
        "SELECT * FROM VALUES (1, 'CA', 10.5D), (2, 'NY', 30.0D) AS t(pid, state, income)"
    )
    spark.sql("CREATE OR REPLACE TEMP VIEW dp_local AS SELECT * FROM global_temp.dp_people")
    try:
        shared = Table("people", spark, source_table="global_temp.dp_people", columns=["state"])
        local = Table("local", spark, source_table="dp_local", columns=["state"])
        with SparkEngine([shared, local]) as engine:  # the session comes from the sources
            assert engine.render(query(f"SELECT state FROM {SOURCE}"), "people") == (
                "SELECT state FROM `global_temp`.`dp_people`"
            )
            assert engine.version("people") is None
            # A temporary view of the given session is out of the engine's session: copied.
            assert engine.relation("local").startswith("`global_temp`.")
            for name in ("people", "local"):
                result = engine.run(query(f"SELECT COUNT(*) AS n FROM {SOURCE}"), name)
                assert result == {"n": [2]}
    finally:
        spark.catalog.dropTempView("dp_local")
        spark.catalog.dropGlobalTempView("dp_people")


@pytest.mark.parametrize(
    ("source_table", "message"),
    [(None, "must name the table"), ("no_such_table", "cannot be read")],
)
def test_sparksession_source_refusals(spark: Any, source_table: Any, message: str) -> None:
    table = Table("people", spark, source_table=source_table, columns=["state"])
    with pytest.raises(InvalidParameterError, match=message):
        SparkEngine(table)


def test_parquet_file_and_folder(spark: Any, tmp_path: Path) -> None:
    file = tmp_path / "people.parquet"
    write_parquet(file, people())
    folder = tmp_path / "parts"
    folder.mkdir()
    write_parquet(folder / "part-0.parquet", people().iloc[:3])
    write_parquet(folder / "part-1.parquet", people().iloc[3:])
    tables = [
        people_table(str(file)),
        Table("parts", folder, privacy_unit="pid", max_rows_per_unit=2, columns=["state"]),
    ]
    with SparkEngine(tables, spark=spark) as engine:
        assert engine.run(COUNT_BY_STATE, "people") == EXPECTED
        assert engine.run(query(f"SELECT COUNT(*) AS n FROM {SOURCE}"), "parts") == {"n": [6]}


@pytest.mark.parametrize(("suffix", "sep"), [(".csv", ","), (".tsv", "\t")])
def test_csv_with_header_and_inferred_types(
    spark: Any, tmp_path: Path, suffix: str, sep: str
) -> None:
    path = tmp_path / f"people{suffix}"
    people().to_csv(path, sep=sep, index=False)
    with SparkEngine(people_table(path), spark=spark) as engine:
        assert engine.run(COUNT_BY_STATE, "people") == EXPECTED
        result = engine.run(query(f"SELECT MAX(big) AS top FROM {SOURCE}"), "people")
    assert result == {"top": [BIG]}


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("missing.parquet", "does not exist"),
        ("people.duckdb", "must end in .parquet"),
        ("not_parquet.parquet", "cannot be read"),
        ([1, 2, 3], "must be a Spark DataFrame"),
    ],
)
def test_unreadable_sources(spark: Any, tmp_path: Path, source: Any, message: str) -> None:
    if isinstance(source, str):
        if source != "missing.parquet":
            (tmp_path / source).write_text("not what the name says")
        source = str(tmp_path / source)
    with pytest.raises(InvalidParameterError, match=message):
        SparkEngine(people_table(source), spark=spark)


@pytest.mark.parametrize(
    ("column", "message"),
    [
        (Column("zipcode"), "has no such column"),
        (Column("state", lower=0, upper=1), r"declared numeric .* type in the source is STRING"),
        (Column("state", domain=["CA", 7]), "domain must hold text only"),
    ],
)
def test_schema_refusals(spark: Any, column: Column, message: str) -> None:
    with pytest.raises(InvalidParameterError, match=message):
        SparkEngine(people_table(columns=[column]), spark=spark)


def test_register_adds_a_table_and_refuses_a_second_of_the_same_name(spark: Any) -> None:
    with SparkEngine(spark=spark) as engine:
        assert engine.tables == {}
        engine.register(people_table())
        with pytest.raises(InvalidParameterError, match="declare each table name once"):
            engine.register(people_table())
        with pytest.raises(InvalidParameterError, match="is not declared"):
            engine.run(COUNT_BY_STATE, "others")
        assert repr(engine) == "SparkEngine(tables=['people'])"


# -- prepare, run, version, materialize, exact -------------------------------------------------
def test_prepare_binds_without_reading_rows(spark: Any) -> None:
    # Reading any row of this source fails: prepare must succeed all the same.
    bomb = spark.sql(
        "SELECT id AS pid, CAST(raise_error('a row was read') AS STRING) AS state FROM range(3)"
    )
    with SparkEngine(people_table(bomb, columns=["state"]), spark=spark) as engine:
        statement = query(f"SELECT state, COUNT(*) AS n FROM {SOURCE} GROUP BY state")
        engine.prepare(statement, "people")
        engine.prepare(statement, "people")  # cached
        with pytest.raises(QueryError, match=r"does not fit the table.s types: .*zipcode"):
            engine.prepare(query(f"SELECT zipcode FROM {SOURCE}"), "people")
        with pytest.raises(QueryError, match=r"does not fit.*MISSING_AGGREGATION"):
            engine.prepare(query(f"SELECT state FROM {SOURCE} GROUP BY pid"), "people")
        with pytest.raises(Exception, match="a row was read"):
            engine.run(statement, "people")


def test_run_keeps_wide_sums_exact(engine: SparkEngine) -> None:
    statement = query(f"SELECT SUM(CAST(big AS DECIMAL(38, 0))) AS total FROM {SOURCE}")
    (total,) = engine.run(statement, "people")["total"]
    assert type(total) is int
    assert total == 2 * BIG + 10
    (count,) = engine.run(query(f"SELECT COUNT(*) AS n FROM {SOURCE}"), "people")["n"]
    assert type(count) is int


def test_failing_cast_is_null_not_an_error(engine: SparkEngine) -> None:
    statement = query(
        f"SELECT SUM(TRY(CAST(code AS BIGINT))) AS codes, TRY(CAST('x' AS INTEGER)) AS bad, "
        f"TRY(1 / 0) AS ratio FROM {SOURCE}"
    )
    assert "TRY" not in engine.render(statement, "people")
    assert engine.run(statement, "people") == {"codes": [19], "bad": [None], "ratio": [None]}


def test_version_follows_the_files(spark: Any, tmp_path: Path) -> None:
    path = tmp_path / "people.parquet"
    write_parquet(path, people())
    with SparkEngine([people_table(path)], spark=spark) as engine:
        first = engine.version("people")
        assert first is not None
        assert engine.version("people") == first
        assert hash(first) == hash(engine.version("people"))
        assert engine.run(query(f"SELECT COUNT(*) AS n FROM {SOURCE}"), "people") == {"n": [6]}
        write_parquet(path, pd.concat([people(), people()]))
        os.utime(path, ns=(1, 1))  # a new modification time, whatever the clock's resolution
        second = engine.version("people")
        assert second != first
        assert engine.version("people") == second
        # The engine reads the new rows (Spark alone would keep the old listing).
        assert engine.run(query(f"SELECT COUNT(*) AS n FROM {SOURCE}"), "people") == {"n": [12]}
    with SparkEngine(people_table(), spark=spark) as engine:
        token = engine.version("people")
        assert token is not None
        assert engine.version("people") == token


def test_materialize_then_read_the_returned_table(spark: Any, engine: SparkEngine) -> None:
    inner = query(f"SELECT pid, COUNT(*) AS n FROM {SOURCE} GROUP BY pid")
    table = engine.materialize(inner, "people")
    assert isinstance(table, exp.Table)
    assert table.sql(dialect="spark").startswith("`__dpcurator_")
    outer = query("SELECT SUM(n) AS rows, COUNT(*) AS units FROM m")
    outer = outer.transform(lambda n: table.copy() if isinstance(n, exp.Table) else n)
    assert engine.run(outer, "people") == {"rows": [6], "units": [4]}
    engine.close()
    assert engine.spark.catalog.tableExists(table.name) is False


def test_exact_gives_arrays(engine: SparkEngine) -> None:
    result = engine.exact(
        "people",
        "SELECT state, COUNT(*) AS n, SUM(CAST(big AS DECIMAL(38, 0))) AS total "
        "FROM {rows} GROUP BY state ORDER BY state NULLS LAST",
    )
    assert result["state"].tolist() == ["CA", "NY", "TX", None]
    assert result["state"].mask.tolist() == [False, False, False, True]
    assert result["n"].dtype == np.int64
    assert result["n"].tolist() == [2, 1, 2, 1]
    assert result["total"].tolist() == [2 * BIG, 1, 5, 4]


def test_same_statement_same_result_on_duckdb_and_spark(spark: Any) -> None:
    frame = people()
    statement = query(
        f"SELECT state, COUNT(*) AS n, SUM(income) AS income, "
        f"SUM(CAST(big AS DECIMAL(38, 0))) AS big FROM {SOURCE} "
        "GROUP BY state ORDER BY state NULLS FIRST"
    )
    with SparkEngine(people_table(frame), spark=spark) as engine:
        on_spark = engine.run(statement, "people")
    with DuckDBEngine(people_table(frame)) as duck:
        on_duckdb = duck.run(statement, "people")
    assert on_spark == on_duckdb
    assert on_spark == {
        "state": [None, "CA", "NY", "TX"],
        "n": [1, 2, 1, 2],
        "income": [60.0, 30.5, 30.0, 90.0],
        "big": [4, 2 * BIG, 1, 5],
    }


def test_sum_of_bigint_wraps_on_spark(engine: SparkEngine) -> None:
    """Spark's SUM(BIGINT) is a BIGINT (DuckDB's is a HUGEINT): write wide sums as DECIMAL."""
    statement = query(f"SELECT SUM(big) AS total FROM {SOURCE} WHERE state = 'CA'")
    assert engine.run(statement, "people") == {"total": [2 * BIG - 2**64]}


# -- life cycle -----------------------------------------------------------------------------------
def test_close_is_idempotent_and_leaves_spark_running(spark: Any) -> None:
    engine = SparkEngine(people_table(), spark=spark)
    view = engine.relation("people")
    engine.close()
    engine.close()
    assert repr(engine) == "SparkEngine(tables=['people'], closed)"
    assert engine.spark.catalog.tableExists(view) is False
    with pytest.raises(InvalidParameterError, match="is closed"):
        engine.run(COUNT_BY_STATE, "people")
    assert spark.sql("SELECT 1").columns == ["1"]  # Spark still runs


def test_refuses_what_is_not_a_query_or_a_session(spark: Any, engine: SparkEngine) -> None:
    with pytest.raises(InvalidParameterError, match="sqlglot query"):
        engine.prepare(sqlglot.parse_one("DROP TABLE x"), "people")  # type: ignore[arg-type]
    with pytest.raises(InvalidParameterError, match="SparkSession"):
        SparkEngine(people_table(), spark="local")  # type: ignore[arg-type]


def test_without_pyspark(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pyspark.sql", None)
    with pytest.raises(UnsupportedError, match=r"pip install 'dpcurator\[spark\]'"):
        SparkEngine(people_table())
    # The module itself imports without pyspark (loaded afresh under another name).
    monkeypatch.setitem(sys.modules, "pyspark", None)
    spec = importlib.util.spec_from_file_location("spark_copy", spark_module.__file__)
    assert spec is not None and spec.loader is not None
    copy = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "spark_copy", copy)
    spec.loader.exec_module(copy)
    with pytest.raises(UnsupportedError, match="needs pyspark"):
        copy.SparkEngine()


def test_decimal_values_stay_decimal_unless_integral(engine: SparkEngine) -> None:
    statement = query(f"SELECT CAST(SUM(income) AS DECIMAL(10, 2)) AS total FROM {SOURCE}")
    assert engine.run(statement, "people") == {"total": [decimal.Decimal("210.50")]}
