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
# # Consistent census tables
#
# A statistics office publishes population counts at every level of a hierarchy
# (region > state > county). Noise is added to each level's counts with a split of the budget;
# then post-processing makes the tables **consistent** (each parent is the sum of its
# children), **non-negative** and **integral**, keeping public invariants exact. Post-processing
# costs no privacy.

# %% [markdown]
# ## A tree of four counties
#
# The worked example of the lectures: a nation with two states of two counties each, the noisy
# counts of every node (root first), and a public total of 10.

# %%
from dpcurator.hierarchy import (
    HierarchySpec,
    Tree,
    error_by_epsilon,
    postprocess,
    release_hierarchy,
)
from dpcurator.noise import InsecureSeededSource

tree = Tree.from_paths([("GA", "g1"), ("GA", "g2"), ("MI", "m1"), ("MI", "m2")])
noisy = [13, 7, 8, 7, -1, 2, 0]  # US, GA, MI, g1, g2, m1, m2
exact = postprocess(tree, noisy, total=10, method="exact")
exact.values, exact.certified

# %% [markdown]
# The exact method finds the consistent, non-negative integer counts closest to the noisy ones
# (weighted squared distance) and proves it optimal (`certified`). Least squares is consistent
# but fractional and may be negative; rounding the relaxed solution breaks sums:

# %%
print(postprocess(tree, noisy, total=10, method="least_squares").values)
print(postprocess(tree, noisy, total=10, method="relaxed", lower=None).violations)

# %% [markdown]
# ## A real release: the Midwest by race
#
# The 2000 Census population of 437 Midwest counties, five race cells per county, released
# consistently within every race under zCDP (discrete Gaussian noise, as the 2020 Census).
# The same declaration is `examples/midwest_race.toml` for `dpcurator release`.
#
# The seeded source below makes the notebook reproducible; it is **not private**, and a real
# release leaves `source` out (the default is the operating system's secure generator).

# %%
spec = HierarchySpec(
    name="midwest_race",
    data="midwest",
    root="Midwest",
    levels=("state", "county"),
    attribute_counts=("popwhite", "popblack", "popamerindian", "popasian", "popother"),
    mechanism="discrete_gaussian",
    rho=0.5,
    invariants=("total",),
    methods=("exact", "least_squares"),
)
release = release_hierarchy(spec, source=InsecureSeededSource(7))
release

# %%
release.table().head(8)

# %% [markdown]
# ## Error against the budget
#
# The steward's confidential simulation: the error of each level and method for a few budgets,
# measured against the truth (never publish this table: it is computed from the true counts).

# %%
errors = error_by_epsilon(spec, [0.05, 0.5, 5.0])
errors[errors["level"] == "county × attribute"].pivot_table(
    index="budget", columns="estimate", values="mean_abs"
).round(1)
