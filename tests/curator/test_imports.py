"""What the curator imports: a session's queries do not load SciPy's optimizers.

``import dpcurator.curator`` and a query on DuckDB stay clear of ``scipy.optimize`` (about 23
MiB of resident memory, counted in every session's peak), which only the zCDP conversions to
(epsilon, delta) need. Each check runs in a fresh interpreter: this one's ``sys.modules``
already holds everything. Memory itself is measured in ``benchmarks/bench_engines.py``.
"""

from __future__ import annotations

import subprocess
import sys

OPTIMIZE = "scipy.optimize"

QUERY = """
import pandas as pd
from dpcurator.accounting import Budget
from dpcurator.curator import Column, Session, Table
from dpcurator.noise import InsecureSeededSource

rows = pd.DataFrame({"u": [1, 1, 2, 3], "g": [0, 0, 1, 1], "x": [1.0, 2.0, 3.0, 4.0]})
table = Table(
    "t", rows, privacy_unit="u", max_rows_per_unit=2, max_groups_per_unit=1,
    columns=[Column("g", domain=[0, 1]), Column("x", lower=0, upper=5, nullable=False)],
)
with Session(table, Budget(10.0), ledger=":memory:", source=InsecureSeededSource(0)) as s:
    release = s.sql("SELECT g, COUNT(*), SUM(x), AVG(x) FROM t GROUP BY g", epsilon=1.0)
assert len(release.table) == 2
"""


def _loads_optimize(code: str) -> bool:
    probe = f"import sys\n{code}\nprint({OPTIMIZE!r} in sys.modules)"
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.strip().splitlines()[-1] == "True"


def test_import_curator_does_not_load_scipy_optimize() -> None:
    assert not _loads_optimize("import dpcurator.curator")


def test_a_query_on_duckdb_does_not_load_scipy_optimize() -> None:
    assert not _loads_optimize(QUERY)


def test_a_zcdp_conversion_loads_scipy_optimize() -> None:
    """Negative control: the probe sees the optimizers once a conversion needs them."""
    code = "from dpcurator.accounting._zcdp import zcdp_to_delta\nzcdp_to_delta(0.5, 1.0)"
    assert _loads_optimize(code)
