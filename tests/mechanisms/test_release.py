"""ErrorModel and Release: closed forms against brute-force sums over the integers."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpcurator.accounting import PureDPEvent
from dpcurator.errors import InvalidParameterError, UnsupportedError
from dpcurator.mechanisms import ErrorModel, Release


def _pmf(distribution: str, scale: float) -> tuple[np.ndarray, np.ndarray]:
    """Brute-force pmf on [-X, X] (X far in the tail), normalised numerically."""
    reach = int(60 * scale) + 60
    x = np.arange(-reach, reach + 1, dtype=np.float64)
    if distribution == "discrete_laplace":
        w = np.exp(-np.abs(x) / scale)
    else:
        w = np.exp(-(x**2) / (2 * scale**2))
    return x, w / w.sum()


def _tail(x: np.ndarray, p: np.ndarray, q: int) -> float:
    return float(p[np.abs(x) > q].sum())


CASES = [
    ("discrete_laplace", 0.5),
    ("discrete_laplace", 1.0),
    ("discrete_laplace", 3.7),
    ("discrete_laplace", 40.0),
    ("discrete_gaussian", 0.3),
    ("discrete_gaussian", 1.0),
    ("discrete_gaussian", 6.5),
    ("discrete_gaussian", 1500.0),  # beyond the direct-sum range: closed forms and bounds
]


@pytest.mark.parametrize(("distribution", "scale"), CASES)
def test_moments_match_brute_force(distribution: str, scale: float) -> None:
    x, p = _pmf(distribution, scale)
    model = ErrorModel(distribution, noise_scale=scale, unit=0.5, center=np.zeros(3))
    variance = float((x**2 * p).sum())
    mean_abs = float((np.abs(x) * p).sum())
    assert model.variance == pytest.approx(variance * 0.25, rel=1e-9)
    assert model.std == pytest.approx(math.sqrt(variance) * 0.5, rel=1e-9)
    assert model.expected_l1 == pytest.approx(3 * mean_abs * 0.5, rel=1e-9)
    assert model.scale == scale * 0.5


@pytest.mark.parametrize(("distribution", "scale"), CASES)
@pytest.mark.parametrize("alpha", [0.5, 0.05, 1e-6])
def test_quantiles_are_valid_and_tight(distribution: str, scale: float, alpha: float) -> None:
    x, p = _pmf(distribution, scale)
    model = ErrorModel(distribution, noise_scale=scale)
    q = model._quantile(alpha)
    assert _tail(x, p, q) <= alpha * (1 + 1e-9)
    exact = distribution == "discrete_laplace" or scale <= 1000
    slack = 1 if exact else 2  # the bound for large sigma is at most one unit above exact
    if q >= slack:
        assert _tail(x, p, q - slack) > alpha


def test_laplace_closed_forms_and_lecture_bounds() -> None:
    t = 10.0
    model = ErrorModel("discrete_laplace", noise_scale=t, center=np.zeros(5))
    a = math.exp(-1 / t)
    assert model.variance == pytest.approx(2 * a / (1 - a) ** 2, rel=1e-12)
    # Just below the continuous Laplace: variance 2 t^2, E|Z| = t (lecture 000: k Delta/eps).
    assert model.variance < 2 * t**2
    # 1 / sinh(1/t) = t (1 - 1/(6 t^2) + O(t^-4)).
    assert 5 * t * (1 - 1 / (6 * t**2) - 1e-6) < model.expected_l1 < 5 * t
    # Lecture 000: P(||.||_inf > (Delta/eps) ln(k/beta)) < beta; ours is exact and no wider
    # (the grid unit covers the integer ceiling).
    for beta in (0.5, 0.1, 0.01):
        assert model.tail_bound(beta) <= t * math.log(5 / beta) + 1


def test_confidence_interval_shape_rounding_and_outward_ends() -> None:
    center = np.array([[1.0, 2.0], [3.0, 4.0]])
    model = ErrorModel(
        "discrete_laplace", noise_scale=2.0, unit=0.25, rounding=0.125, center=center
    )
    lo, hi = model.confidence_interval(0.9)
    assert lo.shape == hi.shape == (2, 2)
    q = model._quantile(0.1)
    half = q * 0.25 + 0.125
    assert np.all(lo < center - half + 1e-12) and np.all(lo >= np.nextafter(center - half, -np.inf))
    assert np.all(hi > center + half - 1e-12)
    narrow_lo, narrow_hi = model.confidence_interval(0.5)
    assert np.all(narrow_hi - narrow_lo < hi - lo)


def test_integer_error_model_has_no_rounding_and_exact_ends() -> None:
    model = ErrorModel("discrete_laplace", noise_scale=1.0, center=np.array([0.0, 10.0]))
    lo, hi = model.confidence_interval(0.9)
    assert lo.tolist() == [-2.0, 8.0] and hi.tolist() == [2.0, 12.0]
    assert model.coordinates == 2
    assert "discrete_laplace" in repr(model) and "coordinates=2" in repr(model)


def test_center_is_read_only_copy() -> None:
    center = np.array([1.0, 2.0])
    model = ErrorModel("discrete_gaussian", noise_scale=1.0, center=center)
    center[0] = 99.0
    assert model.center[0] == 1.0
    with pytest.raises(ValueError, match="read-only"):
        model.center[0] = 5.0


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"distribution": "laplace", "noise_scale": 1.0}, "distribution"),
        ({"distribution": "discrete_laplace", "noise_scale": 0.0}, "noise_scale"),
        ({"distribution": "discrete_laplace", "noise_scale": math.nan}, "noise_scale"),
        ({"distribution": "discrete_laplace", "noise_scale": 1.0, "unit": -1.0}, "unit"),
        ({"distribution": "discrete_laplace", "noise_scale": 1.0, "rounding": -0.5}, "rounding"),
    ],
)
def test_error_model_rejects_bad_parameters(kwargs: dict[str, object], name: str) -> None:
    with pytest.raises(InvalidParameterError) as info:
        ErrorModel(**kwargs)  # type: ignore[arg-type]
    assert info.value.name == name


@pytest.mark.parametrize("level", [0.0, 1.0, -0.1, 1.5, math.nan])
def test_levels_and_betas_must_be_open_probabilities(level: float) -> None:
    model = ErrorModel("discrete_laplace", noise_scale=1.0)
    with pytest.raises(InvalidParameterError, match="level"):
        model.confidence_interval(level)
    with pytest.raises(InvalidParameterError, match="beta"):
        model.tail_bound(level)


def test_release_delegates_and_refuses_categorical_intervals() -> None:
    model = ErrorModel("discrete_laplace", noise_scale=1.0, center=np.array(3.0))
    numeric = Release(3.0, PureDPEvent(1.0), model)
    lo, hi = numeric.confidence_interval(0.9)
    assert float(lo) == 1.0 and float(hi) == 5.0
    categorical = Release("blue", PureDPEvent(1.0))
    with pytest.raises(UnsupportedError, match="categorical"):
        categorical.confidence_interval()
    with pytest.raises(InvalidParameterError, match="event"):
        Release(1.0, "epsilon=1")  # type: ignore[arg-type]
    with pytest.raises(InvalidParameterError, match="error"):
        Release(1.0, PureDPEvent(1.0), "std=1")  # type: ignore[arg-type]
