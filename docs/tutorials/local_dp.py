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
# # Telemetry with local differential privacy
#
# A telemetry engineer wants to know which values are common on the devices, and trusts no
# server with a raw value: each device randomises its own answer before sending it. Here the
# "devices" are the 52,519 pets licensed in Seattle (`dpcurator.datasets.load_pet_names`), and
# the question is how common each species and each breed is.
#
# A protocol object holds epsilon and the domain; `privatize` runs on each device (vectorised
# here, to simulate all of them), `aggregate` on the server. The seeded source makes the
# notebook reproducible; on devices, leave it out (the default is the secure generator).

# %%
import numpy as np
import pandas as pd

from dpcurator.accounting import BasicAccountant
from dpcurator.datasets import load_pet_names
from dpcurator.local import choose_protocol, project_counts
from dpcurator.noise import InsecureSeededSource

pets = load_pet_names()
source = InsecureSeededSource(3)

# %% [markdown]
# ## A small domain: species
#
# The domain (the list of possible answers) is public and fixed in advance. For a small domain
# `choose_protocol` picks generalized randomized response.

# %%
SPECIES = ["Cat", "Dog", "Goat", "Pig"]
codes = pets["species"].map({name: i for i, name in enumerate(SPECIES)}).to_numpy()
protocol = choose_protocol(1.0, len(SPECIES))
reports = protocol.privatize(codes, source=source)  # on each device
estimate = protocol.aggregate(reports)  # on the server
pd.DataFrame(
    {
        "true": np.bincount(codes, minlength=len(SPECIES)),
        "estimate": estimate.counts.round(),
        "std": estimate.std.round(1),
    },
    index=SPECIES,
)

# %% [markdown]
# The estimates are unbiased, with the standard errors the protocol predicts; a rare value
# (goats, pigs) is lost in the noise, and raw estimates can be negative. `project_counts` makes
# them non-negative counts that sum to the number of reports (post-processing: free).

# %%
project_counts(estimate).counts.round()

# %% [markdown]
# ## A large domain: breeds
#
# With hundreds of possible answers, optimised unary encoding (or local hashing, which sends
# fewer bits) has a much lower variance than randomized response.

# %%
breeds = pets["primary_breed"].fillna("Unknown")
BREEDS = sorted(breeds.unique())  # in practice: a published list of breeds
breed_codes = breeds.map({name: i for i, name in enumerate(BREEDS)}).to_numpy()
for prefer in ("variance", "communication"):
    print(prefer, "->", choose_protocol(2.0, len(BREEDS), prefer=prefer))

# %%
protocol = choose_protocol(2.0, len(BREEDS), prefer="communication")
estimate = protocol.estimate(breed_codes, source=source)
true = np.bincount(breed_codes, minlength=len(BREEDS))
top = np.argsort(-estimate.counts)[:8]
pd.DataFrame(
    {"true": true[top], "estimate": estimate.counts[top].round(), "std": estimate.std[top].round()},
    index=[BREEDS[i] for i in top],
)

# %% [markdown]
# ## Accounting for repeated reports
#
# Each report's privacy event is the protocol's `event`. A device that reports both its species
# and its breed pays for both; any accountant composes them.

# %%
species_protocol = choose_protocol(1.0, len(SPECIES))
accountant = BasicAccountant().compose(species_protocol.event).compose(protocol.event)
print(species_protocol.event, protocol.event, sep="\n")
print("each device's epsilon:", round(accountant.get_epsilon(0.0), 9))
