"""A one-clique model's extrapolation in one pass, and the step size's growth on large models.

On a model of one large clique, the momentum's extrapolation (``_calibrated_extrapolation``)
exponentiates the new potentials in the pass that builds them. It returns the potentials of
the two-pass path (``_extrapolated``, then ``JunctionTree.calibrate``) and its marginals to the
bit (the same pieces), in float64 and in float32. A fit
on a model with a clique of at least ``LEAST`` cells grows its step size by ``_GROW_LARGE``,
and a fit on a smaller model by ``_GROW`` alone.
"""

from __future__ import annotations

import numpy as np
import pytest

import dpcurator.synth._model as model_module
from dpcurator.synth import fit_model
from dpcurator.synth._model import (
    JunctionTree,
    _calibrated_extrapolation,
    _extrapolated,
    _merged,
    _Objective,
    _total,
)
from dpcurator.synth._threads import limited
from tests.synth.conftest import noisy_marginals

SIZES = (8, 8, 8, 8, 8, 8)  # one clique of 262,144 cells
CLIQUES = [(0, 1, 2), (2, 3, 4), (0, 4, 5), (1, 3, 5)]


def _one_clique() -> tuple[JunctionTree, list[np.ndarray], model_module._Gradient]:
    """A one-clique tree, random potentials, and the loss's gradient there (several terms)."""
    measurements = _merged(noisy_marginals(SIZES, CLIQUES, 4_000, 5))
    tree = JunctionTree(SIZES, [(0, 1, 2, 3, 4, 5)])
    objective = _Objective(tree, measurements, [0] * len(measurements), _total(measurements))
    theta = [np.random.default_rng(2).normal(0.0, 1.5, SIZES)]
    gradient = objective.gradient(objective(tree.calibrate(theta)))
    assert len(tree.cliques) == 1 and len(gradient[0]) > 1
    return tree, theta, gradient


@pytest.mark.parametrize(("compact", "rtol"), [(False, 1e-12), (True, 5e-6)])
def test_an_extrapolation_in_one_pass_is_the_two_pass_one_to_the_bit(
    compact: bool, rtol: float
) -> None:
    tree, theta, _ = _one_clique()
    previous = [theta[0] * 0.8 + 0.1]
    with limited(2):
        point, marginals = _calibrated_extrapolation(tree, theta, previous, 0.4, compact)
        expected = [_extrapolated(theta[0], previous[0], 0.4)[0]]
        expected_marginals = tree.calibrate(expected, compact=compact)
        other = _calibrated_extrapolation(tree, theta, previous, 0.8, compact)[1]
    np.testing.assert_array_equal(point[0], expected[0])
    assert marginals[0].dtype == expected_marginals[0].dtype
    np.testing.assert_array_equal(marginals[0], expected_marginals[0])  # the same pieces
    assert not np.allclose(other[0], expected_marginals[0], rtol=100 * rtol, atol=1e-30)


def _fit(sizes: tuple[int, ...], grow_large: float, monkeypatch: pytest.MonkeyPatch) -> float:
    """The loss after 30 steps on one clique over ``sizes``, ``_GROW_LARGE`` at ``grow_large``."""
    monkeypatch.setattr(model_module, "_GROW_LARGE", grow_large)
    measurements = noisy_marginals(sizes, CLIQUES, 4_000, 9)
    everything = tuple(range(len(sizes)))
    return fit_model(sizes, measurements, iterations=30, extra_cliques=[everything]).loss


def test_only_large_models_grow_their_step_by_grow_large(monkeypatch: pytest.MonkeyPatch) -> None:
    small = (8, 8, 8, 4, 4, 2)  # one clique of 16,384 cells
    assert _fit(small, 1.25, monkeypatch) == _fit(small, 3.0, monkeypatch)
    # Control: on the large model (one clique of 262,144 cells) the growth changes the path.
    assert _fit(SIZES, 1.25, monkeypatch) != _fit(SIZES, 3.0, monkeypatch)
