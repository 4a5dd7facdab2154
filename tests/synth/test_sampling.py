"""Drawing synthetic rows from a fitted model (``Model.sample``, ``_drawn``).

Within each group of rows that share the values already drawn, each value's count is the
group's size times the conditional probability, rounded with the remainders carried from group
to group (``_carried_counts``): every count is within a few rows of its expectation, and so are
a value's counts summed over any first groups. The values are then laid evenly along the
group's rows sorted by attributes drawn earlier (balanced sampling), so they are also in
proportion within each value of those. The tests check these properties on random inputs
(seeded), each with a negative control that breaks it (independent draws per row; groups
rounded one by one; rows in random order); and that sampled rows stay within the attributes'
domains and follow the model, off its cliques too.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import dpcurator.synth._model as model_module
from dpcurator.noise import InsecureSeededSource, uniform_integers
from dpcurator.synth import Marginal, fit_model
from dpcurator.synth._model import _carried_counts, _drawn


def _problem(seed: int) -> tuple[np.ndarray, np.ndarray]:
    """A joint table ``p(group, value)`` (some groups without mass) and each row's group."""
    rng = np.random.default_rng(seed)  # the inputs, not privacy noise
    joint = rng.dirichlet(np.full(6, 0.5), size=40) * rng.random((40, 1))
    joint[[3, 17]] = 0.0  # groups without mass: uniform values
    group = rng.integers(0, 40, 3000)
    return joint, group


def _misses(joint: np.ndarray, group: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Each (group, value) count less its expectation (group size times the conditional)."""
    width = joint.shape[1]
    mass = joint.sum(axis=1, keepdims=True)
    conditional = np.where(mass > 0, joint / np.where(mass > 0, mass, 1.0), 1.0 / width)
    sizes = np.bincount(group, minlength=joint.shape[0])
    counts = np.bincount(group * width + values, minlength=joint.size).reshape(joint.shape)
    return np.asarray(counts - sizes[:, None] * conditional)


def _within_a_few_rows(joint: np.ndarray, group: np.ndarray, values: np.ndarray) -> bool:
    """Whether every count, and every value's count over the first groups, misses by < 3.

    A miss is the change of the carried remainder, and a prefix's is the first remainder less
    the last: remainders stay within (-1, 2), the first within (-1, 1).
    """
    misses = _misses(joint, group, values)
    return bool(np.abs(misses).max() < 3 and np.abs(np.cumsum(misses, axis=0)).max() < 3)


@pytest.mark.parametrize("seed", range(5))
def test_each_count_and_each_run_of_groups_is_within_a_few_rows(seed: int) -> None:
    joint, group = _problem(seed)
    values = _drawn(joint, group, InsecureSeededSource(seed))
    assert values.shape == group.shape
    assert values.min() >= 0 and values.max() < joint.shape[1]
    assert _within_a_few_rows(joint, group, values)


def _small_groups(seed: int) -> tuple[np.ndarray, np.ndarray]:
    """3,000 groups of one to three rows (as the last attributes drawn of a large clique)."""
    rng = np.random.default_rng(seed)  # the inputs, not privacy noise
    joint = rng.dirichlet(np.full(6, 0.5), size=3000)
    return joint, np.repeat(np.arange(3000), rng.integers(1, 4, 3000))


@pytest.mark.parametrize("seed", range(3))
def test_counts_over_many_small_groups_stay_within_a_few_rows(seed: int) -> None:
    joint, group = _small_groups(seed)
    chains = model_module._CHAIN
    try:
        model_module._CHAIN = 10**6  # one chain
        values = _drawn(joint, group, InsecureSeededSource(seed))
    finally:
        model_module._CHAIN = chains
    assert _within_a_few_rows(joint, group, values)


def test_chains_keep_the_bound_within_each_chain() -> None:
    """3,000 groups in chains of 1,024 (the shipped size): the bound holds along each chain."""
    joint, group = _small_groups(7)
    values = _drawn(joint, group, InsecureSeededSource(7))
    misses = _misses(joint, group, values)
    assert model_module._CHAIN < 3000
    for start in range(0, 3000, 1000):  # 3 chains of 1,000 groups
        assert np.abs(np.cumsum(misses[start : start + 1000], axis=0)).max() < 3


def test_groups_rounded_one_by_one_miss_over_many_groups() -> None:
    # The negative control: each group rounded on its own (no remainder carried), the misses
    # of a value over the first groups add up like a random walk, about sqrt(3000 / 4) ~ 27
    # rows at the end (each miss is -0.5 to 0.5 on average in absolute value, independent).
    joint, group = _small_groups(0)
    sizes = np.bincount(group)
    source = InsecureSeededSource(0)
    counts = np.concatenate(
        [_carried_counts(joint[g : g + 1], sizes[g : g + 1], source) for g in range(3000)]
    )
    misses = counts - sizes[:, None] * joint
    assert np.abs(misses).max() < 3  # each group is still rounded
    assert np.abs(np.cumsum(misses, axis=0)).max() > 3 * 3


def _off_balance(
    joint: np.ndarray, group: np.ndarray, other: np.ndarray, values: np.ndarray
) -> float:
    """The largest miss of a (group, other, value) count from its share of the (group, other)."""
    width, kinds = joint.shape[1], int(other.max()) + 1
    conditional = joint / joint.sum(axis=1, keepdims=True)
    cells = group * kinds + other
    sizes = np.bincount(cells, minlength=joint.shape[0] * kinds)
    expected = sizes[:, None] * conditional[np.arange(sizes.size) // kinds]
    counts = np.bincount(cells * width + values, minlength=expected.size).reshape(expected.shape)
    return float(np.abs(counts - expected).max())


@pytest.mark.parametrize("seed", range(5))
def test_values_are_in_proportion_within_each_value_of_an_earlier_attribute(seed: int) -> None:
    # 8 groups x 10 values of an earlier attribute, about 250 rows per cell. Each cell is one
    # run of the group's sorted rows; a value's count in a run of L rows is within one row of
    # L c / n (its spread positions), and c / n within 3 / n of p (the rounding, L / n about
    # 1 / 10): under 2 rows in all, and 3 leaves room for the interleaving of the other
    # values. In random order (the negative
    # control below) the misses are binomial, about sqrt(250 p (1 - p)) ~ 7 rows.
    rng = np.random.default_rng(seed)  # the inputs, not privacy noise
    joint = rng.dirichlet(np.full(5, 1.0), size=8)
    group, other = rng.integers(0, 8, 20_000), rng.integers(0, 10, 20_000)
    values = _drawn(joint, group, InsecureSeededSource(seed), [other])
    assert _within_a_few_rows(joint, group, values)
    assert _off_balance(joint, group, other, values) <= 3.0
    unbalanced = _drawn(joint, group, InsecureSeededSource(seed))
    assert _within_a_few_rows(joint, group, unbalanced)
    assert _off_balance(joint, group, other, unbalanced) > 3.0 * 3


def test_independent_draws_per_row_break_the_rounding_property() -> None:
    # The negative control: the same inputs, each row's value drawn on its own from its group's
    # conditional distribution, miss the property (so the check above can fail).
    joint, group = _problem(0)
    mass = joint.sum(axis=1, keepdims=True)
    conditional = np.where(mass > 0, joint / np.where(mass > 0, mass, 1.0), 1.0 / joint.shape[1])
    cdf = np.cumsum(conditional, axis=1)
    u = uniform_integers(2**53, group.size, source=InsecureSeededSource(0)) / float(2**53)
    values = np.minimum((u[:, None] >= cdf[group]).sum(axis=1), joint.shape[1] - 1)
    assert not _within_a_few_rows(joint, group, values)


def test_the_row_order_within_a_group_is_random() -> None:
    # Rows of one group are not handed values in index order: the first and second halves of
    # a single group get both values (sorted assignment would give all 0s, then all 1s).
    joint = np.array([[0.5, 0.5]])
    values = _drawn(joint, np.zeros(1000, dtype=np.int64), InsecureSeededSource(1))
    assert values.sum() == 500
    assert 150 < values[:500].sum() < 350


def test_sampled_rows_are_within_the_domains_and_follow_the_model() -> None:
    sizes = (3, 4, 2, 5)
    rng = np.random.default_rng(2)  # the data
    x = rng.integers(0, np.array(sizes), (5000, 4))
    x[:, 1] = (x[:, 0] + rng.integers(0, 2, 5000)) % 4

    def counts(clique: tuple[int, ...]) -> np.ndarray:
        shape = tuple(sizes[a] for a in clique)
        flat = np.ravel_multi_index(tuple(x[:, a] for a in clique), shape)
        return np.bincount(flat, minlength=math.prod(shape)).astype(float)

    cliques = [(0,), (1,), (2,), (3,), (0, 1), (1, 2, 3)]
    model = fit_model(sizes, [Marginal(c, counts(c), 1.0) for c in cliques], iterations=300)
    rows = model.sample(5000, InsecureSeededSource(3))
    assert rows.shape == (5000, 4)
    assert all(rows[:, a].min() >= 0 and rows[:, a].max() < s for a, s in enumerate(sizes))
    # Each count within a few rows of the model's (rounding at each attribute drawn), on the
    # measured cliques and on pairs the model makes independent given a separator.
    for clique in [*cliques, (0, 2), (0, 3)]:
        shape = tuple(sizes[a] for a in clique)
        flat = np.ravel_multi_index(tuple(rows[:, a] for a in clique), shape)
        drawn = np.bincount(flat, minlength=math.prod(shape))
        assert np.abs(drawn - model.marginal(clique)).max() <= len(sizes) + 1
    assert model.sample(0, InsecureSeededSource(3)).shape == (0, 4)
