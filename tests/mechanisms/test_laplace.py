"""Laplace mechanism on the grid and geometric mechanism: calibration, grid, lecture numbers."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpcurator.accounting import DiscreteLaplaceEvent
from dpcurator.errors import InvalidParameterError
from dpcurator.mechanisms import geometric_mechanism, laplace_mechanism
from dpcurator.noise import InsecureSeededSource


def test_lecture_count_at_epsilon_point_one_has_scale_ten() -> None:
    # Lecture 003: Delta f / eps = 1 / 0.1 = 10.
    release = laplace_mechanism(4213.0, epsilon=0.1, sensitivity=1.0)
    assert release.error is not None
    assert release.event.scale * release.error.unit == pytest.approx(10.0, rel=2**-15)
    assert release.error.scale == pytest.approx(10.0, rel=2**-15)
    assert release.event.epsilon <= 0.1
    geometric = geometric_mechanism(4213, epsilon=0.1)
    assert geometric.event == DiscreteLaplaceEvent(scale=10.0, sensitivity=1)


def test_lecture_two_counts_have_scale_twenty() -> None:
    # Lecture 004: counts with and without blue eyes, Delta f = 2, eps = 0.1: scale 20.
    release = laplace_mechanism([3000.0, 5000.0], epsilon=0.1, sensitivity=2.0)
    assert release.error is not None
    assert release.error.scale == pytest.approx(20.0, rel=2**-15)


@settings(max_examples=60, deadline=None)
@given(
    epsilon=st.floats(1e-3, 100.0),
    sensitivity=st.floats(1e-6, 1e6),
    coordinates=st.integers(1, 100),
)
def test_event_never_exceeds_the_requested_epsilon(
    epsilon: float, sensitivity: float, coordinates: int
) -> None:
    release = laplace_mechanism(
        np.zeros(coordinates),
        epsilon=epsilon,
        sensitivity=sensitivity,
        source=InsecureSeededSource(0),
    )
    assert release.error is not None
    event = release.event
    assert isinstance(event, DiscreteLaplaceEvent)
    assert epsilon * (1 - 1e-12) <= event.epsilon <= epsilon
    # The real-unit noise is Delta/eps, inflated by the rounding charge by at most 2**-16.
    b = sensitivity / epsilon
    assert b <= release.error.scale <= b * (1 + 2**-16) * (1 + 1e-15)
    # The grid is at least 2**16 times finer than the noise and than Delta per coordinate.
    assert release.error.unit <= min(b, sensitivity / coordinates) * 2**-16


@settings(max_examples=40, deadline=None)
@given(
    x=st.floats(-1e6, 1e6, allow_nan=False),
    y=st.floats(-1e6, 1e6, allow_nan=False),
)
def test_grid_and_event_do_not_depend_on_the_data(x: float, y: float) -> None:
    a = laplace_mechanism(x, epsilon=0.7, sensitivity=3.0, source=InsecureSeededSource(1))
    b = laplace_mechanism(y, epsilon=0.7, sensitivity=3.0, source=InsecureSeededSource(1))
    assert a.event == b.event
    assert a.error is not None and b.error is not None
    assert a.error.unit == b.error.unit
    # Outputs live on the grid.
    for release in (a, b):
        assert release.error is not None
        index = release.value / release.error.unit
        assert index == math.floor(index)
    # Same seed: the noise is the same integer, so the outputs differ by the rounded shift.
    assert b.value - a.value == pytest.approx(y - x, abs=a.error.unit)


def test_rounding_charge_uses_the_number_of_changed_coordinates() -> None:
    full = laplace_mechanism(np.zeros(8), epsilon=1.0, sensitivity=1.0)
    one = laplace_mechanism(np.zeros(8), epsilon=1.0, sensitivity=1.0, changed_coordinates=1)
    assert isinstance(full.event, DiscreteLaplaceEvent)
    assert isinstance(one.event, DiscreteLaplaceEvent)
    assert full.error is not None and one.error is not None
    for release, m in ((full, 8), (one, 1)):
        assert release.error is not None
        scaled = 1.0 / release.error.unit
        assert release.event.sensitivity == math.floor(scaled) + m
    assert one.error.unit > full.error.unit  # the grid needs to be finer for 8 changes


def test_explicit_grid_bits() -> None:
    release = laplace_mechanism([0.3, 0.7], epsilon=1.0, sensitivity=1.0, grid_bits=4)
    assert release.error is not None
    assert release.error.unit == 2**-4
    assert release.event.sensitivity == 16 + 2
    assert np.all(release.value * 16 == np.floor(release.value * 16))
    with pytest.raises(InvalidParameterError) as info:
        laplace_mechanism(0.0, epsilon=1e-6, sensitivity=1.0, grid_bits=40)
    assert info.value.name == "grid_bits"


def test_types_and_shapes() -> None:
    src = InsecureSeededSource(2)
    assert isinstance(laplace_mechanism(1.0, epsilon=1.0, sensitivity=1.0, source=src).value, float)
    assert isinstance(laplace_mechanism(3, epsilon=1.0, sensitivity=1.0, source=src).value, float)
    matrix = laplace_mechanism(np.ones((2, 3)), epsilon=1.0, sensitivity=1.0, source=src)
    assert matrix.value.shape == (2, 3) and matrix.value.dtype == np.float64
    assert matrix.error is not None and matrix.error.center.shape == (2, 3)
    geo = geometric_mechanism(np.arange(6).reshape(2, 3), epsilon=1.0, sensitivity=2, source=src)
    assert geo.value.shape == (2, 3) and geo.value.dtype == np.int64
    assert geo.event == DiscreteLaplaceEvent(scale=2.0, sensitivity=2)
    assert isinstance(geometric_mechanism(7, epsilon=1.0, source=src).value, int)


def test_saturation_far_outside_the_grid_range_is_finite() -> None:
    release = laplace_mechanism(1e300, epsilon=1.0, sensitivity=1.0)
    assert release.error is not None
    assert math.isfinite(release.value)
    assert release.value == pytest.approx(2**52 * release.error.unit, rel=1e-6)


@pytest.mark.parametrize(
    ("call", "name"),
    [
        (lambda: laplace_mechanism(0.0, epsilon=0.0, sensitivity=1.0), "epsilon"),
        (lambda: laplace_mechanism(0.0, epsilon=-1.0, sensitivity=1.0), "epsilon"),
        (lambda: laplace_mechanism(0.0, epsilon=math.nan, sensitivity=1.0), "epsilon"),
        (lambda: laplace_mechanism(0.0, epsilon=math.inf, sensitivity=1.0), "epsilon"),
        (lambda: laplace_mechanism(0.0, epsilon=1.0, sensitivity=math.inf), "sensitivity"),
        (lambda: laplace_mechanism(0.0, epsilon=1.0, sensitivity=0.0), "sensitivity"),
        (lambda: laplace_mechanism(0.0, epsilon=1e-300, sensitivity=1.0), "epsilon"),
        (lambda: laplace_mechanism(0.0, epsilon=1.0, sensitivity=1e300), "sensitivity"),
        (lambda: laplace_mechanism(math.nan, epsilon=1.0, sensitivity=1.0), "value"),
        (lambda: laplace_mechanism([1.0, math.inf], epsilon=1.0, sensitivity=1.0), "value"),
        (lambda: laplace_mechanism("12", epsilon=1.0, sensitivity=1.0), "value"),
        (lambda: laplace_mechanism(True, epsilon=1.0, sensitivity=1.0), "value"),
        (
            lambda: laplace_mechanism([0.0], epsilon=1.0, sensitivity=1.0, changed_coordinates=2),
            "changed_coordinates",
        ),
        (
            lambda: laplace_mechanism(0.0, epsilon=1.0, sensitivity=1.0, grid_bits=2000),
            "grid_bits",
        ),
        (lambda: geometric_mechanism(1.5, epsilon=1.0), "value"),
        (lambda: geometric_mechanism(1, epsilon=1.0, sensitivity=1.5), "sensitivity"),
        (lambda: geometric_mechanism(1, epsilon=1.0, sensitivity=0), "sensitivity"),
        (lambda: geometric_mechanism(1, epsilon=1e-13), "epsilon"),
        (lambda: geometric_mechanism(2**63 - 1, epsilon=1.0), "value"),
    ],
)
def test_bad_parameters_name_the_argument(call: object, name: str) -> None:
    with pytest.raises(InvalidParameterError) as info:
        call()  # type: ignore[operator]
    assert info.value.name == name
    assert name in str(info.value)


def test_errors_about_values_do_not_echo_private_data() -> None:
    with pytest.raises(InvalidParameterError) as info:
        laplace_mechanism([123456.789, math.nan], epsilon=1.0, sensitivity=1.0)
    assert "123456" not in str(info.value)
