# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Private SQL over a declared table
#
# A data steward holds the CPS tax units (`dpcurator.datasets.load_cps`: 281,000 tax units in
# 200,576 households). Analysts ask aggregate SQL; each answer is differentially private for
# the addition or removal of one **household**, and the session refuses any query that would
# exceed the budget, before it reads a row.
#
# This notebook runs in the documentation build, so every output below is what the code printed.

# %%
import tempfile
from pathlib import Path

from dpcurator.accounting import Budget
from dpcurator.curator import Column, Session, Table
from dpcurator.datasets import load_cps
from dpcurator.errors import BudgetExceededError, QueryError

rows = load_cps()
rows[["household_id", "state", "filing_status", "age_head", "wages"]].head()

# %% [markdown]
# ## Declare the table
#
# The declaration is public metadata, written by the steward and never read off the data:
#
# - the **privacy unit** (`household_id`) and how many rows each unit may contribute
#   (`max_rows_per_unit`): a household's extra rows are dropped, so a count moves by at most 4
#   when a household joins or leaves;
# - **bounds** of numeric columns: values are clamped into them before any sum;
# - **domains** of group keys: a `GROUP BY` releases exactly these groups, empty ones too.

# %%
STATES = sorted(rows["state"].unique())  # the 50 states and DC: public knowledge
cps = Table(
    "cps",
    rows,
    privacy_unit="household_id",
    max_rows_per_unit=4,
    max_groups_per_unit=4,
    columns=[
        Column("state", domain=STATES),
        Column("filing_status", domain=sorted(rows["filing_status"].unique())),
        Column("wages", lower=0, upper=250_000, nullable=False),
        Column("age_head", lower=0, upper=85, bins=[0, 18, 35, 65, 86], nullable=False),
    ],
)

# %% [markdown]
# ## Open a session and ask
#
# The session's ledger records every release durably, chained with the steward's key (here in
# a temporary folder). A release shows each value with the standard deviation of its noise and
# a 95% interval, for the *bounded* query (values clamped, contributions bounded).

# %%
folder = Path(tempfile.mkdtemp())
session = Session(
    cps, Budget(epsilon=1.0), ledger=folder / "cps.ledger.sqlite", ledger_key=folder / "cps.key"
)
release = session.sql(
    "SELECT filing_status, COUNT(*) AS tax_units, AVG(wages) AS wages "
    "FROM cps GROUP BY filing_status",
    epsilon=0.3,
)
release

# %% [markdown]
# `release.table` is a pandas DataFrame with the error columns; `release.split` says how the
# 0.3 was spent (a count, and a sum of wages shifted by the middle of their bounds).

# %%
release.table

# %%
[(m.name, m.mechanism, m.epsilon, m.sensitivity) for m in release.split]

# %% [markdown]
# ## Accuracy first
#
# The noise of counts and sums does not depend on the data, so its size is known before asking.
# `predicted_errors` shows it at a given epsilon, and `epsilon_for` finds the smallest epsilon
# that meets a target: neither reads data nor spends anything.

# %%
query = "SELECT state, COUNT(*) AS tax_units FROM cps GROUP BY state"
print(session.predicted_errors(query, epsilon=0.1))
print("epsilon for +/-100 at 95%:", session.epsilon_for(query, target_ci=100))

# %%
by_state = session.sql(query, target_ci=100)
by_state.table.head()

# %% [markdown]
# ## Histograms and bands
#
# `HISTOGRAM(age_head)` uses the declared bins; a band of a bounded column
# (`FLOOR(age_head / 10) * 10`) is a group key whose domain follows from the bounds.

# %%
session.sql(
    "SELECT FLOOR(age_head / 10) * 10 AS decade, COUNT(*) AS n FROM cps GROUP BY decade",
    epsilon=0.1,
).table

# %% [markdown]
# ## Refusals cost nothing
#
# A query the curator cannot answer privately (raw rows, undeclared columns) or that would
# exceed the budget is refused before any data is read.

# %%
for sql, eps in [("SELECT wages FROM cps", 0.1), ("SELECT COUNT(*) FROM cps", 5.0)]:
    try:
        session.sql(sql, epsilon=eps)
    except (QueryError, BudgetExceededError) as error:
        print(type(error).__name__, "-", error)
print("left:", session.remaining)
session.close()
