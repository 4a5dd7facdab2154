"""Shared fixtures of the hierarchy tests: random trees and instances, brute force, examples.

Random trees and noisy counts are test fixtures (numpy's seeded generator builds them); no
mechanism's noise is drawn here. The worked examples D1 and D2 are those of ``hierarchy.md``
(d), whose numbers were checked by brute force.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpcurator.hierarchy._domains import Domains, domains
from dpcurator.hierarchy._tree import Tree

# D2: nation > GA {g1, g2}, MI {m1, m2}; truth c, noisy y (hierarchy.md (d)).
D2_PARENTS = [-1, 0, 0, 1, 1, 2, 2]
D2_TRUTH = np.array([10, 5, 5, 4, 1, 3, 2])
D2_NOISY = np.array([13.0, 7.0, 8.0, 7.0, -1.0, 2.0, 0.0])


@dataclass
class Instance:
    """A post-processing problem: tree, noisy counts, weights, domain keywords, domains."""

    tree: Tree
    noisy: NDArray[np.float64]
    weights: NDArray[np.float64]
    truth: NDArray[np.int64]
    options: dict[str, Any] = field(default_factory=dict)

    @property
    def doms(self) -> Domains:
        return domains(self.tree, self.noisy, **self.options)


def random_tree(rng: np.random.Generator, n_nodes: int) -> Tree:
    """A random rooted tree: each node's parent drawn among the nodes before it, shuffled."""
    parent = np.array([-1] + [int(rng.integers(0, v)) for v in range(1, n_nodes)])
    relabel = rng.permutation(n_nodes)  # input order unrelated to breadth-first order
    shuffled = np.empty(n_nodes, dtype=np.int64)
    shuffled[relabel] = np.where(parent < 0, -1, relabel[np.maximum(parent, 0)])
    return Tree.from_parents(shuffled)


def random_instance(
    rng: np.random.Generator,
    n_nodes: int,
    *,
    max_value: int,
    noise: int,
    real_noise: bool = False,
    random_weights: bool = False,
    options: dict[str, Any] | None = None,
) -> Instance:
    """Truth: random leaf counts in ``0..max_value`` summed up; noisy: truth + integer noise."""
    tree = random_tree(rng, n_nodes)
    leaves = int(np.count_nonzero(tree.is_leaf))
    truth = np.asarray(tree.aggregate(rng.integers(0, max_value + 1, leaves)), dtype=np.int64)
    noisy = truth + rng.integers(-noise, noise + 1, tree.n_nodes).astype(np.float64)
    if real_noise:
        noisy = noisy + rng.uniform(-0.5, 0.5, tree.n_nodes)
    weights = (
        rng.choice([0.5, 1.0, 2.0, 3.0], tree.n_nodes) if random_weights else np.ones(tree.n_nodes)
    )
    return Instance(tree, noisy, weights, truth, dict(options or {}))


def feasible_points(tree: Tree, doms: Domains, max_value: int) -> NDArray[np.int64]:
    """Every consistent point with leaves in ``0..max_value`` that lies within ``doms``."""
    leaves = np.flatnonzero(tree.is_leaf)
    grid = np.array(list(itertools.product(range(max_value + 1), repeat=leaves.size)))
    membership = np.zeros((tree.n_nodes, leaves.size), dtype=np.int64)
    for j, leaf in enumerate(leaves):
        v = int(leaf)
        while v >= 0:
            membership[v, j] = 1
            v = int(tree.parent[v])
    points = grid @ membership.T
    inside = np.all((points >= doms.lower) & (points <= doms.upper), axis=1)
    return points[inside]


def brute_force(
    tree: Tree,
    noisy: NDArray[np.float64],
    weights: NDArray[np.float64],
    doms: Domains,
    max_value: int,
) -> tuple[float, NDArray[np.int64], NDArray[np.float64]]:
    """The minimum objective, the feasible points, and each point's objective."""
    points = feasible_points(tree, doms, max_value)
    costs = ((points - noisy) ** 2 * weights).sum(axis=1)
    return float(costs.min()), points, costs
