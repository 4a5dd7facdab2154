"""The fit's working precision: large cliques in float32 in accelerated steps.

``JunctionTree.calibrate(compact=True)`` returns the marginals of cliques of at least ``LEAST``
cells in float32, the others in float64; the values are the float64 ones to float32's
precision. Only accelerated steps use them, and keep those cliques' potentials in float32 too;
a plain phase after them is float64. A fit returns its model's marginals in float64, and they
match a fit run wholly in float64 far closer than any measured marginal's noise.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

import dpcurator.synth._model as model_module
from dpcurator.synth import Marginal, fit_model
from dpcurator.synth._model import JunctionTree, _normalised, _sum_middle
from dpcurator.synth._threads import LEAST, limited
from tests.synth.conftest import noisy_marginals

SIZES = (8, 8, 8, 8, 8, 8, 3)  # the clique over the first six: 262,144 cells


def _measurements(seed: int) -> list[Marginal]:
    """Noisy 3-way marginals over the first six attributes, and the last with the first."""
    return noisy_marginals(SIZES, [*itertools.combinations(range(6), 3), (0, 6)], 3_000, seed)


def test_normalised_in_float32_is_the_float64_softmax_to_float32_precision() -> None:
    rng = np.random.default_rng(7)
    belief = rng.normal(0.0, 8.0, size=(64, 4_096))
    belief[:10] = -np.inf  # pieces without mass
    with limited(2):
        exact, log_z = _normalised(belief)
        compact, compact_log_z = _normalised(belief, np.float32)
    assert compact.dtype == np.float32
    assert exact.dtype == np.float64
    # Float32 rounds the exponent, |belief - max| up to about 40 here: 6e-8 * 40 relative.
    np.testing.assert_allclose(compact, exact, rtol=5e-6, atol=1e-30)
    assert compact_log_z == pytest.approx(log_z, abs=1e-6)
    assert float(np.sum(compact, dtype=np.float64)) == pytest.approx(1.0, abs=1e-6)


def test_sum_middle_keeps_float32() -> None:
    table = np.random.default_rng(3).random((6, 9, 7_000)).astype(np.float32)
    with limited(2):
        summed = _sum_middle(table)
    assert summed.dtype == np.float32
    exact = table.astype(np.float64).sum(axis=1)
    np.testing.assert_allclose(summed, exact, rtol=1e-6)


def test_compact_calibration_is_float32_for_large_cliques_only() -> None:
    tree = JunctionTree(SIZES, [(0, 1, 2, 3, 4, 5), (0, 6)])
    rng = np.random.default_rng(1)
    potentials = [rng.normal(0.0, 2.0, tuple(SIZES[a] for a in c)) for c in tree.cliques]
    exact = tree.calibrate(potentials)
    compact = tree.calibrate(potentials, compact=True)
    for clique, a, b in zip(tree.cliques, exact, compact, strict=True):
        large = math.prod(SIZES[i] for i in clique) >= LEAST
        assert b.dtype == (np.float32 if large else np.float64)
        assert a.dtype == np.float64
        np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-30)
    assert any(b.dtype == np.float32 for b in compact)
    assert any(b.dtype == np.float64 for b in compact)


def test_a_fit_returns_float64_marginals_that_match_a_float64_fit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    measurements = _measurements(0)
    options = {"iterations": 60, "start": "uniform", "discrepancy": 1.0, "plain_steps": 0}
    compact = fit_model(SIZES, measurements, **options)  # type: ignore[arg-type]
    monkeypatch.setattr(model_module, "_COMPACT", np.float64)
    exact = fit_model(SIZES, measurements, **options)  # type: ignore[arg-type]
    assert max(math.prod(SIZES[a] for a in c) for c in compact.tree.cliques) >= LEAST
    assert all(table.dtype == np.float64 for table in compact.marginals)
    noise = 3.0 / 3_000  # a measured cell's noise, as a probability
    for clique in [(0, 1, 2), (0, 6), (3, 4, 5)]:
        a, b = compact.marginal(clique) / 3_000, exact.marginal(clique) / 3_000
        assert float(np.max(np.abs(a - b))) < 1e-3 * noise
    assert compact.loss == pytest.approx(exact.loss, rel=1e-6)
    # Control: another noise draw moves the model by far more than the precision does.
    other = fit_model(SIZES, _measurements(1), **options)  # type: ignore[arg-type]
    moved = other.marginal((0, 1, 2)) / 3_000 - exact.marginal((0, 1, 2)) / 3_000
    assert float(np.max(np.abs(moved))) > 0.1 * noise


def test_a_fit_of_accelerated_steps_keeps_large_potentials_in_float32(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    measurements = _measurements(0)
    options = {"iterations": 40, "start": "uniform", "discrepancy": 1.0, "plain_steps": 0}
    compact = fit_model(SIZES, measurements, **options)  # type: ignore[arg-type]
    for clique, potential in zip(compact.tree.cliques, compact.potentials, strict=True):
        large = math.prod(SIZES[a] for a in clique) >= LEAST
        assert potential.dtype == (np.float32 if large else np.float64)
    assert any(p.dtype == np.float32 for p in compact.potentials)
    # Control: without compact potentials they stay float64, and the model barely moves.
    monkeypatch.setattr(model_module, "_COMPACT_POTENTIALS", False)
    wide = fit_model(SIZES, measurements, **options)  # type: ignore[arg-type]
    assert all(p.dtype == np.float64 for p in wide.potentials)
    assert compact.iterations == wide.iterations
    assert compact.loss == pytest.approx(wide.loss, rel=1e-6)
    noise = 3.0 / 3_000  # a measured cell's noise, as a probability
    moved = compact.marginal((0, 1, 2)) / 3_000 - wide.marginal((0, 1, 2)) / 3_000
    assert float(np.max(np.abs(moved))) < 1e-3 * noise
    plain = fit_model(SIZES, measurements, iterations=5, start="uniform")
    assert all(p.dtype == np.float64 for p in plain.potentials)


def test_accelerated_steps_work_in_float32_and_plain_steps_in_float64(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen: list[tuple[bool, set[str]]] = []
    calibrate = JunctionTree.calibrate

    def spy(self: JunctionTree, potentials: list[np.ndarray], *, compact: bool = False) -> object:
        seen.append((compact, {p.dtype.name for p in potentials if p.size >= LEAST}))
        return calibrate(self, potentials, compact=compact)

    monkeypatch.setattr(JunctionTree, "calibrate", spy)
    measurements = _measurements(0)
    plain = fit_model(SIZES, measurements, iterations=5, start="uniform")
    assert seen and all(not compact and kinds == {"float64"} for compact, kinds in seen)
    seen.clear()  # accelerated steps only (AIM's fits between rounds): float32 throughout
    fit_model(SIZES, measurements, iterations=5, start="uniform", discrepancy=1.0, plain_steps=0)
    assert seen[:-1] and all(compact and kinds == {"float32"} for compact, kinds in seen[:-1])
    assert seen[-1] == (False, {"float32"})  # the fitted model's marginals, in float64
    seen.clear()  # accelerated, then plain steps (AIM's final fit): float64 from the hand-over
    both = fit_model(SIZES, measurements, iterations=40, start="uniform", discrepancy=1.0)
    assert 0 < both.accelerated < both.iterations == 40
    compacts = [compact for compact, _ in seen]
    hand_over = compacts.index(False)
    assert all(compacts[:hand_over]) and not any(compacts[hand_over:])
    assert all(kinds == {"float64"} for _, kinds in seen[hand_over:])
    assert all(p.dtype == np.float64 for p in [*plain.potentials, *both.potentials])
