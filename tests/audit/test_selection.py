"""Tests of ``dpcurator.audit._selection``: the candidate events and their counts."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpcurator.audit._selection import (
    categorical_codes,
    categorical_family,
    granularity_feature,
    histogram_family,
    logistic_score,
    selection_bounds,
    threshold_family,
)


def test_granularity_feature_is_the_lowest_set_bit() -> None:
    values = np.array([1.0, 0.75, 3 * 2.0**-60, -(2.0**-1074), 2.0**1000, 0.0, math.inf, math.nan])
    assert granularity_feature(values).tolist() == [0, -2, -60, -1074, 1000, -2000, 2000, 2001]
    # fl(1 + z) for |z| < 1 lies on the 2**-53 grid, z itself usually does not (Haney et al.).
    z = -np.linspace(0.01, 0.4, 1000)
    assert (granularity_feature(1.0 + z) >= -53).all()
    assert (granularity_feature(z) < -53).mean() > 0.5


def test_categorical_codes_are_injective_on_rows() -> None:
    rows = np.array([[0, 1, 1], [1, 1, 0], [0, 1, 1], [1, 0, 0]], dtype=bool)
    codes = categorical_codes(rows, [rows])(rows)
    assert codes[0] == codes[2] and len(set(codes.tolist())) == 3
    floats = np.array([[0.5, 1.0], [0.5, 1.0], [1.0, 0.5]])
    keys = categorical_codes(floats, [floats])(floats)
    assert keys[0] == keys[1] != keys[2]


def test_threshold_family_counts_match_direct_counts() -> None:
    x = np.arange(100.0)
    y = np.arange(50.0, 150.0)
    family = threshold_family(x, y, lambda v: np.asarray(v, dtype=np.float64), "Y")
    assert family is not None
    for i in (0, 7, family.hits.size // 2, family.hits.size - 1):
        event = family.build(i)
        assert family.hits[i] == np.count_nonzero(event.contains(x))
        assert family.hits_other[i] == np.count_nonzero(event.contains(y))


def test_categorical_family_orders_by_likelihood_ratio() -> None:
    x = np.array([0] * 80 + [1] * 15 + [2] * 5)
    y = np.array([0] * 10 + [1] * 30 + [2] * 60)
    family = categorical_family(x, y, np.asarray, "Y", max_categories=10)
    assert family is not None
    assert family.build(0).name == "Y in {0}"  # largest P[x]/P[y] first
    assert family.build(1).name == "Y in {0, 1}"
    assert family.build(2).name == "Y in {2}"  # then the other direction
    assert family.hits.tolist() == [80, 95, 5, 20]
    assert categorical_family(x, y, np.asarray, "Y", max_categories=2) is None  # too many


def test_histogram_family_describes_intervals() -> None:
    x = np.linspace(0, 1, 1000)
    family = histogram_family(x, x + 0.5, lambda v: np.asarray(v, dtype=np.float64), "Y", 8)
    assert family is not None
    event = family.build(0)
    assert event.name.startswith("Y in (")
    assert family.hits[0] == np.count_nonzero(event.contains(x))


def test_logistic_score_points_towards_the_first_sample() -> None:
    grid = np.linspace(-1, 1, 400)
    x = np.column_stack([grid + 1.0, grid])
    y = np.column_stack([grid - 1.0, grid])
    score = logistic_score(x, y)
    assert (score(x) > score(y)).mean() > 0.95


def test_selection_bounds_vectorised() -> None:
    bounds = selection_bounds(
        np.array([750.0, 0.0, 500.0]),
        1000,
        np.array([250.0, 0.0, 500.0]),
        1000,
        alpha=0.025,
        delta=0.0,
    )
    assert 0.9 < bounds[0] < math.log(3)
    assert bounds[1] == -math.inf
    assert bounds[2] < 0
    with_delta = selection_bounds(
        np.array([750.0]), 1000, np.array([250.0]), 1000, alpha=0.025, delta=0.1
    )
    assert with_delta[0] < bounds[0]
    assert pytest.approx(bounds[0]) != with_delta[0]
