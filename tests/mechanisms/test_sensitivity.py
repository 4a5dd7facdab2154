"""Sensitivity helpers: lecture values and named neighbour relations."""

from __future__ import annotations

import math

import pytest

from dpcurator.accounting import NeighbourRelation
from dpcurator.errors import InvalidParameterError, UnsupportedError
from dpcurator.mechanisms import (
    count_sensitivity,
    histogram_sensitivity,
    mean_sensitivity,
    sum_sensitivity,
)

ADD_REMOVE = NeighbourRelation.ADD_REMOVE
REPLACE = NeighbourRelation.REPLACE


def test_count_is_one_per_contribution() -> None:
    assert count_sensitivity() == 1  # lecture 003: a count query has sensitivity 1
    assert count_sensitivity(relation=REPLACE) == 1
    assert count_sensitivity(contributions=4) == 4


def test_sum_under_both_relations() -> None:
    assert sum_sensitivity(3.0, 5.0) == 5.0  # lecture 003: values in [3, 5] -> b = 5
    assert sum_sensitivity(3.0, 5.0, relation=REPLACE) == 2.0
    assert sum_sensitivity(-7.0, 2.0) == 7.0  # max(|a|, |b|) when a < 0
    assert sum_sensitivity(-7.0, 2.0, relation="replace", contributions=2) == 18.0


def test_mean_is_two_c_over_n_under_replace() -> None:
    # Lecture 002: ||x_i||_2 <= c, replace-one neighbours: Delta_2 = 2c/n.
    assert mean_sensitivity(3.0, 600) == pytest.approx(2 * 3.0 / 600)
    with pytest.raises(UnsupportedError, match="add/remove"):
        mean_sensitivity(1.0, 10, relation=ADD_REMOVE)


def test_histogram_l1_and_l2() -> None:
    assert histogram_sensitivity() == 1.0
    assert histogram_sensitivity(norm="l2") == 1.0
    assert histogram_sensitivity(relation=REPLACE) == 2.0
    assert histogram_sensitivity(relation=REPLACE, norm="l2") == pytest.approx(math.sqrt(2))
    assert histogram_sensitivity(relation=REPLACE, contributions=3) == 6.0


@pytest.mark.parametrize(
    ("call", "name"),
    [
        (lambda: count_sensitivity(contributions=0), "contributions"),
        (lambda: count_sensitivity(relation="neighbours"), "relation"),
        (lambda: sum_sensitivity(5.0, 3.0), "upper"),
        (lambda: sum_sensitivity(math.nan, 3.0), "lower"),
        (lambda: sum_sensitivity(0.0, math.inf), "upper"),
        (lambda: mean_sensitivity(0.0, 10), "radius"),
        (lambda: mean_sensitivity(1.0, 0), "n"),
        (lambda: histogram_sensitivity(norm="linf"), "norm"),
    ],
)
def test_bad_parameters_name_the_argument(call: object, name: str) -> None:
    with pytest.raises(InvalidParameterError) as info:
        call()  # type: ignore[operator]
    assert info.value.name == name
    assert name in str(info.value)
