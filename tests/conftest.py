"""Suite-wide settings: property tests are reproducible and never time-limited.

Hypothesis draws its examples from a fixed seed (``derandomize``), like every other statistical
test here, and has no per-example deadline: CI machines are small and shared, and speed is
measured in ``benchmarks/``, not in tests.

The ``spark`` fixture is one local Spark per test process (each pytest-xdist worker has its
own), bound to 127.0.0.1, started on first use and stopped when the process's tests end.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import settings

settings.register_profile("dpcurator", derandomize=True, deadline=None, print_blob=True)
settings.load_profile("dpcurator")

# Small and quick to start: two cores, a small heap, no UI, the JIT's quick tier only.
SPARK_TEST_CONF = {
    "spark.master": "local[2]",
    "spark.app.name": "dpcurator-tests",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
    "spark.driver.memory": "1g",
    "spark.driver.extraJavaOptions": "-XX:+UseSerialGC -XX:TieredStopAtLevel=1",
    "spark.sql.shuffle.partitions": "1",
    "spark.default.parallelism": "2",
    # Adaptive execution re-plans each query at run time: about a third of a small query's
    # time here, and results do not depend on the physical plan.
    "spark.sql.adaptive.enabled": "false",
}


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A local SparkSession for this test process, stopped at its end."""
    from pyspark.sql import SparkSession

    with pytest.MonkeyPatch.context() as env:
        env.setenv("SPARK_LOCAL_IP", "127.0.0.1")
        builder = SparkSession.builder
        for key, value in SPARK_TEST_CONF.items():
            builder = builder.config(key, value)
        warehouse = tmp_path_factory.mktemp("spark-warehouse")
        session = builder.config("spark.sql.warehouse.dir", str(warehouse)).getOrCreate()
        session.sparkContext.setLogLevel("ERROR")
        try:
            yield session
        finally:
            session.stop()
