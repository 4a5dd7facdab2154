"""Tests of the privacy events (src/dpcurator/accounting/_events.py)."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from dpcurator.accounting import (
    ApproxDPEvent,
    ComposedEvent,
    DiscreteGaussianEvent,
    DiscreteLaplaceEvent,
    GaussianEvent,
    LaplaceEvent,
    NeighbourRelation,
    NoOpEvent,
    PoissonSampledEvent,
    PrivacyEvent,
    PureDPEvent,
    RandomizedResponseEvent,
    SampledWithoutReplacementEvent,
    SelfComposedEvent,
    ZCDPEvent,
)
from dpcurator.errors import InvalidParameterError

EXAMPLES: list[tuple[PrivacyEvent, str]] = [
    (PureDPEvent(1.0), "epsilon"),
    (ApproxDPEvent(1.0, 1e-6), "delta"),
    (ZCDPEvent(0.5), "rho"),
    (LaplaceEvent(scale=2.0), "scale"),
    (DiscreteLaplaceEvent(scale=2.0), "sensitivity"),
    (GaussianEvent(sigma=1.0), "sigma"),
    (DiscreteGaussianEvent(sigma=1.0), "sigma"),
    (RandomizedResponseEvent(0.75), "p_truth"),
    (PoissonSampledEvent(0.1, PureDPEvent(1.0)), "sampling_rate"),
    (SampledWithoutReplacementEvent(5, 10, PureDPEvent(1.0)), "sample_size"),
    (ComposedEvent((PureDPEvent(1.0),)), "events"),
    (SelfComposedEvent(PureDPEvent(1.0), count=2), "count"),
]


@pytest.mark.parametrize(("event", "field"), EXAMPLES)
def test_events_are_frozen_and_hashable(event: PrivacyEvent, field: str) -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(event, field, getattr(event, field))
    assert hash(event) == hash(dataclasses.replace(event))
    assert event == dataclasses.replace(event)
    # New attributes are refused too (slots); CPython 3.11 raises TypeError for frozen slotted
    # subclasses here, later versions FrozenInstanceError (an AttributeError).
    with pytest.raises((AttributeError, TypeError)):
        event.extra = 1  # type: ignore[attr-defined]


def test_pure_epsilons() -> None:
    assert LaplaceEvent(scale=10.0).epsilon == 0.1  # lecture 000: scale Delta/eps
    assert LaplaceEvent(scale=4.0, sensitivity=2.0).epsilon == 0.5
    assert DiscreteLaplaceEvent(scale=4.0, sensitivity=3).epsilon == 0.75
    coin = RandomizedResponseEvent(0.75)  # lecture 001: the coin, ln 3
    assert coin.epsilon == pytest.approx(math.log(3.0), rel=1e-15)
    assert coin.p_other == 0.25
    die = RandomizedResponseEvent(2.0 / 3.0)  # ln 2
    assert die.epsilon == pytest.approx(math.log(2.0), rel=1e-15)
    k_ary = RandomizedResponseEvent(0.5, categories=4)  # other values 1/6 each: ln 3
    assert k_ary.p_other == pytest.approx(1 / 6, rel=1e-15)
    assert k_ary.epsilon == pytest.approx(math.log(3.0), rel=1e-15)


def test_derived_quantities() -> None:
    assert GaussianEvent(sigma=3.0, sensitivity=2.0).noise_multiplier == 1.5
    assert SampledWithoutReplacementEvent(25, 100, PureDPEvent(1.0)).sampling_rate == 0.25
    composed = ComposedEvent([PureDPEvent(1.0), LaplaceEvent(scale=1.0)])  # type: ignore[arg-type]
    assert isinstance(composed.events, tuple) and len(composed.events) == 2
    assert ComposedEvent().events == ()
    assert [r.value for r in NeighbourRelation] == ["add_remove", "replace"]


def test_values_are_normalised() -> None:
    assert type(PureDPEvent(1).epsilon) is float
    assert type(LaplaceEvent(scale=np.float64(2.0)).scale) is float
    assert type(DiscreteLaplaceEvent(scale=1.0, sensitivity=np.int64(2)).sensitivity) is int
    assert type(SelfComposedEvent(NoOpEvent(), count=np.int64(3)).count) is int


def test_sample_sizes_are_normalised() -> None:
    event = SampledWithoutReplacementEvent(np.int64(5), np.int64(10), PureDPEvent(1.0))
    assert type(event.sample_size) is int and type(event.population_size) is int


@pytest.mark.parametrize(
    ("build", "pattern"),
    [
        (lambda: PureDPEvent(0.0), r"epsilon must be > 0; got 0\.0"),
        (lambda: PureDPEvent(-1.0), r"epsilon must be > 0; got -1\.0"),
        (lambda: PureDPEvent(math.nan), "epsilon must be a number, not NaN"),
        (lambda: PureDPEvent(math.inf), "epsilon must be finite; got inf"),
        (lambda: PureDPEvent("1"), "epsilon must be a real number; got '1'"),
        (lambda: ApproxDPEvent(-0.1, 0.0), r"epsilon must be >= 0; got -0\.1"),
        (lambda: ApproxDPEvent(1.0, 1.0), r"delta must be in \[0, 1\); got 1\.0"),
        (lambda: ApproxDPEvent(1.0, -0.5), r"delta must be in \[0, 1\); got -0\.5"),
        (lambda: ApproxDPEvent(1.0, math.nan), "delta must be a number, not NaN"),
        (lambda: ZCDPEvent(0.0), r"rho must be > 0; got 0\.0"),
        (lambda: LaplaceEvent(scale=0.0), r"scale must be > 0; got 0\.0"),
        (lambda: LaplaceEvent(scale=-2.0), r"scale must be > 0; got -2\.0"),
        (lambda: LaplaceEvent(scale=1.0, sensitivity=math.inf), "sensitivity must be finite"),
        (lambda: LaplaceEvent(scale=1.0, sensitivity=math.nan), "sensitivity must be a number"),
        (lambda: DiscreteLaplaceEvent(scale=1.0, sensitivity=1.5), "sensitivity must be an int"),
        (lambda: DiscreteLaplaceEvent(scale=1.0, sensitivity=0), "sensitivity must be >= 1; got 0"),
        (lambda: GaussianEvent(sigma=0.0), r"sigma must be > 0; got 0\.0"),
        (lambda: GaussianEvent(sigma=1.0, sensitivity=math.inf), "sensitivity must be finite"),
        (lambda: DiscreteGaussianEvent(sigma=math.inf), "sigma must be finite; got inf"),
        (lambda: RandomizedResponseEvent(0.5), r"p_truth must be > 1/categories = 0\.5"),
        (lambda: RandomizedResponseEvent(1.0), r"p_truth must be in \[0, 1\); got 1\.0"),
        (lambda: RandomizedResponseEvent(0.9, categories=1), "categories must be >= 2; got 1"),
        (lambda: PoissonSampledEvent(0.0, NoOpEvent()), r"sampling_rate must be in \(0, 1\]"),
        (lambda: PoissonSampledEvent(1.5, NoOpEvent()), r"sampling_rate must be in \(0, 1\]"),
        (lambda: PoissonSampledEvent(0.5, 1.0), "event must be a PrivacyEvent; got 1.0"),
        (
            lambda: SampledWithoutReplacementEvent(11, 10, NoOpEvent()),
            "sample_size must be <= population_size = 10; got 11",
        ),
        (
            lambda: SampledWithoutReplacementEvent(0, 10, NoOpEvent()),
            "sample_size must be >= 1; got 0",
        ),
        (lambda: ComposedEvent((NoOpEvent(), "x")), r"events\[1\] must be a PrivacyEvent"),
        (lambda: SelfComposedEvent(NoOpEvent(), count=-1), "count must be >= 0; got -1"),
        (lambda: SelfComposedEvent(NoOpEvent(), count=1.5), "count must be an integer"),
        (lambda: SelfComposedEvent("x", count=1), "event must be a PrivacyEvent"),
    ],
)
def test_validation_names_argument_and_value(build: object, pattern: str) -> None:
    with pytest.raises(InvalidParameterError, match=pattern):
        build()  # type: ignore[operator]


def test_full_sampling_rate_is_allowed() -> None:
    assert PoissonSampledEvent(1.0, PureDPEvent(1.0)).sampling_rate == 1.0
    assert SampledWithoutReplacementEvent(10, 10, PureDPEvent(1.0)).sampling_rate == 1.0
    assert SelfComposedEvent(PureDPEvent(1.0), count=0).count == 0
