"""The model's sums over blocks of axes (``_Map``, ``_project``) equal numpy's plain sums.

``_Map`` sums large tables block by block with ``einsum`` and small ones through a precomputed
index (``bincount``); both must give numpy's ``sum`` over the dropped axes (to rounding), and
broadcasts back must equal numpy's. ``_project`` (the model's marginals) sums large tables by
blocks too. A fit through either path gives the same loss to rounding.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

import dpcurator.synth._model as model_module
from dpcurator.synth import Marginal, fit_model
from dpcurator.synth._model import _blocks, _Map, _project

SIZES = (3, 2, 5, 2, 4, 2, 3)


def _cases() -> list[tuple[tuple[int, ...], tuple[int, ...]]]:
    """Every non-empty proper subset ``keep`` of a few cliques of ``SIZES``."""
    out = []
    for attrs in [(0, 1, 2, 3, 4, 5, 6), (1, 2, 4, 5), (0, 3, 6)]:
        for k in range(1, len(attrs)):
            out.extend((attrs, keep) for keep in itertools.combinations(attrs, k))
    return out


@pytest.mark.parametrize("block_cells", [1, 1 << 30])
def test_map_sums_and_broadcasts_equal_numpys(
    block_cells: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # block_cells 1: every table by blocks; 1 << 30: every table through the index.
    monkeypatch.setattr(model_module, "_BLOCK_CELLS", block_cells)
    rng = np.random.default_rng(7)
    for attrs, keep in _cases():
        shape = tuple(SIZES[a] for a in attrs)
        table = rng.random(shape)
        mapping = _Map(attrs, keep, SIZES)
        axes = tuple(i for i, a in enumerate(attrs) if a not in keep)
        expected = table.sum(axis=axes)
        got = mapping.project(table)
        assert got.shape == expected.shape
        np.testing.assert_allclose(got, expected, rtol=1e-12, atol=0.0)
        values = rng.random(expected.shape)
        broadcast = np.broadcast_to(values.reshape(mapping.broadcast), shape)
        np.testing.assert_array_equal(np.asarray(mapping.expand(values)), broadcast)


@pytest.mark.parametrize("block_cells", [1, 1 << 30])
def test_project_equals_numpys_sum(block_cells: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(model_module, "_BLOCK_CELLS", block_cells)
    rng = np.random.default_rng(11)
    for attrs, keep in _cases():
        table = rng.random(tuple(SIZES[a] for a in attrs))
        axes = tuple(i for i, a in enumerate(attrs) if a not in keep)
        np.testing.assert_allclose(
            _project(table, attrs, keep), table.sum(axis=axes), rtol=1e-12, atol=0.0
        )
    table = rng.random((3, 4))
    assert _project(table, (0, 1), ()) == pytest.approx(float(table.sum()), rel=1e-12)
    assert _project(table, (0, 1), (0, 1)) is table


def test_blocks_sum_out_exactly_the_dropped_axes() -> None:
    for attrs, keep in _cases():
        steps = _blocks(attrs, keep, SIZES)
        dropped = math.prod(SIZES[a] for a in attrs if a not in keep)
        assert math.prod(block for _, block, _ in steps) == dropped
        cells = math.prod(SIZES[a] for a in attrs)
        for before, block, after in steps:  # each step reads the table the last one left
            assert before * block * after == cells
            cells //= block
        assert cells == math.prod(SIZES[a] for a in keep)


def test_fit_by_blocks_equals_fit_by_index(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(3)
    sizes = (4, 3, 5, 2, 6)
    measured = [(0, 1, 2), (1, 3, 4), (0, 4), (2,), (2, 3)]
    truth = rng.dirichlet(np.ones(math.prod(sizes))).reshape(sizes) * 5000.0
    measurements = []
    for clique in measured:
        axes = tuple(a for a in range(len(sizes)) if a not in clique)
        counts = truth.sum(axis=axes).reshape(-1)
        measurements.append(Marginal(clique, counts + rng.normal(0.0, 5.0, counts.size), 5.0))
    fits = []
    for block_cells in (1, 1 << 30):
        monkeypatch.setattr(model_module, "_BLOCK_CELLS", block_cells)
        fits.append(
            fit_model(sizes, measurements, iterations=200, start="uniform", discrepancy=1.0)
        )
    by_blocks, by_index = fits
    assert by_blocks.iterations == by_index.iterations
    assert by_blocks.loss == pytest.approx(by_index.loss, rel=1e-9)
    for a, b in zip(by_blocks.marginals, by_index.marginals, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-7, atol=1e-12)


def test_kept_marginals_equal_each_one_summed_alone() -> None:
    """``Model.keep_marginals`` sums targets through shared tables: the same marginals."""
    rng = np.random.default_rng(5)
    sizes = (4, 3, 5, 2, 6, 3)
    truth = rng.dirichlet(np.ones(math.prod(sizes))).reshape(sizes) * 5000.0
    measurements = []
    for clique in [(0, 1, 2, 3), (2, 3, 4, 5), (0, 5)]:
        axes = tuple(a for a in range(len(sizes)) if a not in clique)
        counts = truth.sum(axis=axes).reshape(-1)
        measurements.append(Marginal(clique, counts + rng.normal(0.0, 5.0, counts.size), 5.0))
    model = fit_model(sizes, measurements, iterations=30)
    targets = [c for k in (1, 2, 3) for c in itertools.combinations(range(len(sizes)), k)]
    alone = fit_model(sizes, measurements, iterations=30)
    model.keep_marginals(targets)
    in_a_clique = [c for c in targets if model.tree.containing(c) is not None]
    assert len(model._kept) == len(in_a_clique) < len(targets)  # (1, 4) lies in no clique
    for clique in targets:
        np.testing.assert_allclose(
            model.marginal(clique), alone.marginal(clique), rtol=1e-12, atol=1e-9
        )
    # Control: a marginal of another model differs.
    other = fit_model(sizes, measurements[:2], iterations=30)
    assert not np.allclose(model.marginal((0, 5)), other.marginal((0, 5)), rtol=1e-3)
