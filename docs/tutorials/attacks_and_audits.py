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
# # Attacks and audits: checking the claims
#
# A privacy reviewer asks two questions: what does an attacker get from a release that is
# *not* differentially private, and does a mechanism that claims epsilon keep its promise?
# `dpcurator.attacks` answers the first by running the attacks, `dpcurator.audit` the second
# by certifying a lower bound on a mechanism's epsilon from its outputs.

# %%
import numpy as np
import pandas as pd

from dpcurator.accounting import Budget, GaussianEvent, PoissonSampledEvent, make_accountant
from dpcurator.attacks import SessionOracle, lp_reconstruction, subset_sum_oracle
from dpcurator.audit import audit_mechanism
from dpcurator.curator import Column, Session, Table
from dpcurator.datasets import load_adult
from dpcurator.mechanisms import laplace_mechanism
from dpcurator.noise import InsecureSeededSource

# %% [markdown]
# ## Reconstruction (Dinur and Nissim 2003)
#
# The secret: whether each of 100 people in UCI Adult earns more than $50,000. An interface
# answers "how many of these people earn more?" for any subset of them, rounding its answers
# to hide individuals. With 400 random subsets and a linear program, the attacker recovers
# every secret bit.

# %%
people = load_adult().head(100)
secret = (people["income"] == ">50K").to_numpy(dtype=int)
rounded = subset_sum_oracle(secret, noise="rounding", scale=2.0)
attack = lp_reconstruction(rounded, len(secret), source=InsecureSeededSource(1))
print(f"{attack.queries} queries, {attack.errors(secret)} wrong bits out of {len(secret)}")

# %% [markdown]
# The same attack through a curator session: every subset count is a differentially private
# query, and the 400 answers share a total budget of epsilon 1. The attacker now does no better
# than guessing that nobody earns more.

# %%
table = Table(
    "adult",
    pd.DataFrame({"person_id": people["person_id"], "rich": secret}),
    columns=[Column("person_id"), Column("rich", domain=[0, 1])],
)
with Session(table, Budget(1.0), ledger=":memory:", source=InsecureSeededSource(2)) as session:
    oracle = SessionOracle(
        session,
        "adult",
        row_id="person_id",
        ids=people["person_id"].tolist(),
        secret="rich = 1",
        epsilon=1.0,
        queries=4 * len(secret),
    )
    private = lp_reconstruction(oracle, len(secret), source=InsecureSeededSource(3))
    print(f"{private.errors(secret)} wrong bits; guessing 0 for all: {secret.sum()} wrong")
    print("spent:", session.spent)

# %% [markdown]
# ## Auditing a mechanism
#
# A counting release claims epsilon 1 with Laplace noise of sensitivity 1, but the query it
# releases doubles the count, so neighbours move it by 2. The audit runs it many times on two
# neighbouring inputs (counts 10 and 11) and certifies, at 95% confidence, a lower bound on the
# true epsilon: above 1, the claim is refuted.

# %%
source = InsecureSeededSource(4)


def doubled_count(count: int, size: int) -> np.ndarray:
    return laplace_mechanism(
        np.full(size, 2.0 * count),
        epsilon=1.0,
        sensitivity=1.0,
        changed_coordinates=1,
        source=source,
    ).value


buggy = audit_mechanism(doubled_count, 10, 11, samples=20_000, batched=True)
print(buggy)
print("claim of epsilon 1 refuted:", buggy.refutes(1.0))


# %%
def honest_count(count: int, size: int) -> np.ndarray:
    return laplace_mechanism(
        np.full(size, float(count)),
        epsilon=1.0,
        sensitivity=1.0,
        changed_coordinates=1,
        source=source,
    ).value


honest = audit_mechanism(honest_count, 10, 11, samples=20_000, batched=True)
print("honest mechanism refuted:", honest.refutes(1.0))

# %% [markdown]
# An audit can only find violations: a lower bound below the claim does not prove the claim.
# The proof is the accounting.
#
# ## Accounting the same events loosely and tightly
#
# 1,000 steps of DP-SGD (sampling rate 0.01, noise multiplier 1): the same events, accounted
# by Rényi DP and by privacy-loss distributions.

# %%
step = PoissonSampledEvent(sampling_rate=0.01, event=GaussianEvent(sigma=1.0))
for name in ("rdp", "pld"):
    epsilon = make_accountant(name).compose(step, count=1000).get_epsilon(1e-5)
    print(f"{name}: epsilon {epsilon:.4f} at delta 1e-5")
