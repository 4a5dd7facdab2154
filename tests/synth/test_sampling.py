"""Drawing synthetic rows from a fitted model (``Model.sample``, ``_systematic``).

The sampler is systematic within each group of rows that share the values already drawn: one
uniform offset per group, so each value's count in a group is the group's size times the
conditional probability, rounded up or down. The values are then laid evenly along the group's
rows sorted by attributes drawn earlier (balanced sampling), so they are also in proportion
within each value of those. The tests check both properties on random inputs (seeded), each
with a negative control that breaks it (independent draws per row; rows in random order); and
that sampled rows stay within the attributes' domains and follow the model, off its cliques too.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpcurator.noise import InsecureSeededSource, uniform_integers
from dpcurator.synth import Marginal, fit_model
from dpcurator.synth._model import _systematic


def _problem(seed: int) -> tuple[np.ndarray, np.ndarray]:
    """A joint table ``p(group, value)`` (some groups without mass) and each row's group."""
    rng = np.random.default_rng(seed)  # the inputs, not privacy noise
    joint = rng.dirichlet(np.full(6, 0.5), size=40) * rng.random((40, 1))
    joint[[3, 17]] = 0.0  # groups without mass: uniform values
    group = rng.integers(0, 40, 3000)
    return joint, group


def _within_rounding(joint: np.ndarray, group: np.ndarray, values: np.ndarray) -> bool:
    """Whether every (group, value) count is its expected count rounded down or up."""
    width = joint.shape[1]
    mass = joint.sum(axis=1, keepdims=True)
    conditional = np.where(mass > 0, joint / np.where(mass > 0, mass, 1.0), 1.0 / width)
    sizes = np.bincount(group, minlength=joint.shape[0])
    expected = sizes[:, None] * conditional
    counts = np.bincount(group * width + values, minlength=joint.size).reshape(joint.shape)
    slack = 1e-9
    return bool(
        np.all(counts >= np.floor(expected + slack)) and np.all(counts <= np.ceil(expected - slack))
    )


@pytest.mark.parametrize("seed", range(5))
def test_each_groups_counts_are_the_expected_ones_rounded(seed: int) -> None:
    joint, group = _problem(seed)
    values = _systematic(joint, group, InsecureSeededSource(seed))
    assert values.shape == group.shape
    assert values.min() >= 0 and values.max() < joint.shape[1]
    assert _within_rounding(joint, group, values)


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
    # L c / n (its spread positions), and c / n within 1 / n of p (the rounding): 2 rows in all,
    # and 3 leaves room for the interleaving of the other values. In random order (the negative
    # control below) the misses are binomial, about sqrt(250 p (1 - p)) ~ 7 rows.
    rng = np.random.default_rng(seed)  # the inputs, not privacy noise
    joint = rng.dirichlet(np.full(5, 1.0), size=8)
    group, other = rng.integers(0, 8, 20_000), rng.integers(0, 10, 20_000)
    values = _systematic(joint, group, InsecureSeededSource(seed), [other])
    assert _within_rounding(joint, group, values)
    assert _off_balance(joint, group, other, values) <= 3.0
    unbalanced = _systematic(joint, group, InsecureSeededSource(seed))
    assert _within_rounding(joint, group, unbalanced)
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
    assert not _within_rounding(joint, group, values)


def test_the_row_order_within_a_group_is_random() -> None:
    # Rows of one group are not handed values in index order: the first and second halves of
    # a single group get both values (sorted assignment would give all 0s, then all 1s).
    joint = np.array([[0.5, 0.5]])
    values = _systematic(joint, np.zeros(1000, dtype=np.int64), InsecureSeededSource(1))
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
