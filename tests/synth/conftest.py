"""Shared inputs of the synthetic-data tests."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from dpcurator.synth import Marginal


def noisy_marginals(
    sizes: Sequence[int], cliques: Sequence[tuple[int, ...]], rows: int, seed: int
) -> list[Marginal]:
    """Marginals over ``cliques`` of a random table over ``sizes``, with Gaussian noise of 3.

    Attribute 1 depends on attribute 0 (``x1 = x0 + {0, 1}``), so the marginals are not those of
    independent attributes.
    """
    rng = np.random.default_rng(seed)
    data = rng.integers(0, 8, size=(rows, len(sizes))) % np.array(sizes)
    data[:, 1] = (data[:, 0] + rng.integers(0, 2, rows)) % sizes[1]
    out = []
    for clique in cliques:
        shape = tuple(sizes[a] for a in clique)
        counts = np.bincount(
            np.ravel_multi_index(tuple(data[:, a] for a in clique), shape),
            minlength=math.prod(shape),
        ).astype(np.float64)
        out.append(Marginal(tuple(clique), counts + rng.normal(0, 3.0, counts.size), 3.0))
    return out
