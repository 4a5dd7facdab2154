"""Post-processing: projection onto the scaled simplex, and clipping."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from dpcurator.errors import InvalidParameterError
from dpcurator.local._olh import OptimizedLocalHashing
from dpcurator.local._postprocess import project_counts, project_to_simplex
from dpcurator.local._protocol import FrequencyEstimate
from dpcurator.noise import InsecureSeededSource

finite = st.floats(-1e6, 1e6, allow_nan=False, allow_infinity=False)
vectors = arrays(np.float64, st.integers(1, 30), elements=finite)
totals = st.floats(0.0, 1e6, allow_nan=False)


def _estimate(counts: list[float] | np.ndarray, n: int = 100) -> FrequencyEstimate:
    arr = np.asarray(counts, dtype=np.float64)
    return FrequencyEstimate(counts=arr, variances=np.arange(1.0, arr.size + 1), n=n)


@settings(max_examples=150, deadline=None)
@given(vectors, totals)
def test_projection_is_valid_optimal_and_idempotent(y: np.ndarray, total: float) -> None:
    x = project_to_simplex(y, total)
    scale = max(1.0, total, float(np.abs(y).max()))
    assert np.all(x >= 0)
    assert x.sum() == pytest.approx(total, abs=1e-9 * scale * y.size)
    # KKT: x = max(y - theta, 0) for one theta
    positive = x > 0
    if positive.any():
        theta = float(np.mean((y - x)[positive]))
        np.testing.assert_allclose((y - x)[positive], theta, atol=1e-7 * scale)
        assert np.all(y[~positive] <= theta + 1e-7 * scale)
    np.testing.assert_allclose(project_to_simplex(x, total), x, atol=1e-9 * scale)


@settings(max_examples=100, deadline=None)
@given(vectors, st.data())
def test_projection_never_moves_away_from_a_valid_truth(y: np.ndarray, data: st.DataObject) -> None:
    # The simplex is convex and holds the true counts, so the projection is at least as close
    # to them as the unbiased estimate (non-expansiveness of a projection onto a convex set).
    weights = data.draw(arrays(np.float64, y.size, elements=st.floats(0, 1)))
    total = 1000.0
    truth = (
        weights / weights.sum() * total if weights.sum() > 0 else np.full(y.size, total / y.size)
    )
    x = project_to_simplex(y, total)
    assert np.linalg.norm(x - truth) <= np.linalg.norm(y - truth) * (1 + 1e-12) + 1e-6


def test_known_projection_and_clip() -> None:
    raw = _estimate([70.0, -8.0, 42.0])
    simplex = project_counts(raw)
    np.testing.assert_allclose(simplex.counts, [64.0, 0.0, 36.0])
    assert simplex.n == 100
    np.testing.assert_array_equal(simplex.variances, raw.variances)  # kept, documented
    assert simplex.variances is not raw.variances
    np.testing.assert_array_equal(raw.counts, [70.0, -8.0, 42.0])  # the input is untouched
    clipped = project_counts(raw, method="clip")
    np.testing.assert_array_equal(clipped.counts, [70.0, 0.0, 42.0])
    np.testing.assert_allclose(project_counts(raw, 10).counts, [10.0, 0.0, 0.0])
    np.testing.assert_array_equal(project_counts(raw, 0).counts, [0.0, 0.0, 0.0])
    # a negative control of the property test: clipping alone does not sum to n
    assert clipped.counts.sum() != pytest.approx(100.0)


def test_projecting_a_real_estimate() -> None:
    olh = OptimizedLocalHashing(0.5, 30)
    values = np.repeat(np.arange(3), [600, 300, 100])
    raw = olh.estimate(values, source=InsecureSeededSource(0))
    assert (raw.counts < 0).any()  # the unbiased estimates are not valid counts
    projected = project_counts(raw)
    assert np.all(projected.counts >= 0)
    assert projected.counts.sum() == pytest.approx(1000.0)
    assert project_counts(projected).counts == pytest.approx(projected.counts)
    truth = np.zeros(30)
    truth[:3] = [600, 300, 100]
    assert np.linalg.norm(projected.counts - truth) < np.linalg.norm(raw.counts - truth)


def test_bad_parameters() -> None:
    raw = _estimate([1.0, 2.0])
    with pytest.raises(InvalidParameterError) as info:
        project_counts(raw, method="round")  # type: ignore[arg-type]
    assert info.value.name == "method"
    with pytest.raises(InvalidParameterError) as info:
        project_counts(raw, -1)
    assert info.value.name == "n"
    with pytest.raises(InvalidParameterError) as info:
        project_counts(raw, 5, method="clip")
    assert info.value.name == "n"
    with pytest.raises(InvalidParameterError) as info:
        project_counts(np.array([1.0]))  # type: ignore[arg-type]
    assert info.value.name == "estimate"
    with pytest.raises(InvalidParameterError) as info:
        project_to_simplex([1.0, np.nan], 1.0)
    assert info.value.name == "values"


def test_normalize_clips_then_rescales_to_n() -> None:
    raw = FrequencyEstimate(np.array([70.0, -8.0, 42.0, 0.0]), np.full(4, 25.0), 100)
    out = project_counts(raw, method="normalize")
    assert out.counts.min() >= 0 and out.counts.sum() == pytest.approx(100.0)
    # proportional to the clipped counts: 70 : 42
    assert out.counts[0] / out.counts[2] == pytest.approx(70 / 42)
    # all-negative estimates spread n evenly rather than dividing by zero
    flat = project_counts(FrequencyEstimate(-np.ones(4), np.ones(4), 8), method="normalize")
    assert flat.counts.tolist() == [2.0, 2.0, 2.0, 2.0]
    with pytest.raises(InvalidParameterError, match="n"):
        project_counts(raw, 50, method="clip")
