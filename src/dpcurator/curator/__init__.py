"""The trusted curator: private SQL over declared tables, sessions with budgets, a ledger.

- Declarations: :class:`Table` (where the rows live, the privacy unit, contribution bounds) and
  :class:`Column` (numeric bounds, public domains, histogram bins); also from TOML
  (:meth:`Table.from_toml`, :func:`read_declaration`).
- :class:`Session`: answers ``SELECT ... GROUP BY ...`` aggregate queries (COUNT, COUNT DISTINCT
  unit, SUM, AVG, VARIANCE, STDDEV, MEDIAN/QUANTILE, HISTOGRAM) with differential privacy, in
  SQL or through :class:`QueryBuilder`; refuses anything else, and any query over budget, before
  reading data. Contribution bounding, clamping and aggregation run as one SQL statement in the
  engine (DuckDB or Spark); noise is added to the small aggregated result.
- :class:`QueryRelease`: the released table with standard deviations and intervals, the budget
  split (:class:`Measurement`), the charge and the budget left.
- :meth:`Session.charged_measurements`: for mechanisms the session does not run itself (e.g.
  :mod:`dpcurator.synth`), planned counts measured inside the session within a zCDP budget
  charged beforehand (:class:`ChargedMeasurements`: discrete Gaussian counts, exponential-
  mechanism choices; sensitivities from the plan, :func:`count_sensitivities`); nothing exact
  leaves the session.
- :class:`Ledger`: every query durably charged (SQLite) before it reads any data;
  reopening resumes the spent budget.
- Engines (:class:`Engine`): where the rows live and the bounded SQL runs. :class:`DuckDBEngine`
  (in-process, the default) and :class:`SparkEngine` (a Spark session, local or a cluster) run
  the same plan; each registers the declared tables, runs the bounded statements, and offers the
  steward noiseless SQL (:meth:`DuckDBEngine.exact`); a session never exposes it to analysts.

Examples
--------
>>> import pandas as pd
>>> from dpcurator.accounting import Budget
>>> from dpcurator.curator import Column, Session, Table
>>> from dpcurator.noise import InsecureSeededSource
>>> df = pd.DataFrame({"hh": [1, 1, 2, 3], "state": ["CA", "CA", "NY", "TX"],
...                    "income": [10.0, 20.0, 30.0, 40.0]})
>>> t = Table("people", df, privacy_unit="hh", max_rows_per_unit=2,
...           columns=[Column("state", domain=["CA", "NY", "TX"]),
...                    Column("income", lower=0, upper=100)])
>>> with Session(t, Budget(2.0), ledger=":memory:", source=InsecureSeededSource(3)) as s:
...     r = s.sql("SELECT state, COUNT(*), AVG(income) FROM people GROUP BY state", epsilon=1.0)
>>> r.value_columns, [m.name for m in r.split]
(('count', 'avg_income'), ['COUNT(*)', 'COUNT(income)', 'SUM(income - 50)'])
"""

from __future__ import annotations

from dpcurator.curator._accuracy import Predicted, measurement_noise
from dpcurator.curator._builder import QueryBuilder
from dpcurator.curator._duckdb import DuckDBEngine
from dpcurator.curator._engine import Engine
from dpcurator.curator._ledger import Ledger, LedgerEntry
from dpcurator.curator._plan import Measurement, Noise, Plan
from dpcurator.curator._release import QueryRelease
from dpcurator.curator._session import DEFAULT_ACCOUNTANT, Session
from dpcurator.curator._spark import SparkEngine
from dpcurator.curator._specs import GaussianNoise
from dpcurator.curator._steward import ChargedMeasurements, count_sensitivities
from dpcurator.curator._table import Column, Declaration, Table, read_declaration
from dpcurator.errors import QueryError

__all__ = [
    "DEFAULT_ACCOUNTANT",
    "ChargedMeasurements",
    "Column",
    "Declaration",
    "DuckDBEngine",
    "Engine",
    "GaussianNoise",
    "Ledger",
    "LedgerEntry",
    "Measurement",
    "Noise",
    "Plan",
    "Predicted",
    "QueryBuilder",
    "QueryError",
    "QueryRelease",
    "Session",
    "SparkEngine",
    "Table",
    "count_sensitivities",
    "measurement_noise",
    "read_declaration",
]
