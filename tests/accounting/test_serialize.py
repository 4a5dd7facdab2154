"""Tests of dpcurator.accounting._serialize: exact JSON round trips of every privacy event."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpcurator.accounting import _events
from dpcurator.accounting._events import (
    ApproxDPEvent,
    ComposedEvent,
    DiscreteGaussianEvent,
    DiscreteLaplaceEvent,
    GaussianEvent,
    LaplaceEvent,
    NoOpEvent,
    PoissonSampledEvent,
    PrivacyEvent,
    PureDPEvent,
    RandomizedResponseEvent,
    SampledWithoutReplacementEvent,
    SelfComposedEvent,
    ZCDPEvent,
)
from dpcurator.accounting._serialize import (
    EVENT_TYPES,
    event_from_dict,
    event_from_json,
    event_to_dict,
    event_to_json,
)
from dpcurator.errors import InvalidParameterError

positive = st.floats(min_value=0.0, max_value=1e300, exclude_min=True, allow_subnormal=True)
unit_open = st.floats(min_value=0.0, max_value=1.0, exclude_min=True, exclude_max=True)
delta = st.floats(min_value=0.0, max_value=1.0, exclude_max=True)
small_int = st.integers(min_value=1, max_value=10**12)


@st.composite
def randomized_response(draw: st.DrawFn) -> RandomizedResponseEvent:
    k = draw(st.integers(min_value=2, max_value=1000))
    p = draw(st.floats(min_value=1.0 / k, max_value=1.0, exclude_min=True, exclude_max=True))
    return RandomizedResponseEvent(p_truth=p, categories=k)


@st.composite
def without_replacement(draw: st.DrawFn, inner: st.SearchStrategy[PrivacyEvent]) -> PrivacyEvent:
    n = draw(small_int)
    m = draw(st.integers(min_value=1, max_value=n))
    return SampledWithoutReplacementEvent(m, n, draw(inner))


LEAVES: st.SearchStrategy[PrivacyEvent] = st.one_of(
    st.just(NoOpEvent()),
    st.builds(PureDPEvent, positive),
    st.builds(ApproxDPEvent, st.floats(min_value=0.0, max_value=1e300), delta),
    st.builds(ZCDPEvent, positive),
    st.builds(LaplaceEvent, positive, positive),
    st.builds(DiscreteLaplaceEvent, positive, small_int),
    st.builds(GaussianEvent, positive, positive),
    st.builds(DiscreteGaussianEvent, positive, positive, small_int),
    randomized_response(),
)


def _extend(inner: st.SearchStrategy[PrivacyEvent]) -> st.SearchStrategy[PrivacyEvent]:
    return st.one_of(
        st.builds(PoissonSampledEvent, unit_open | st.just(1.0), inner),
        without_replacement(inner),
        st.builds(ComposedEvent, st.lists(inner, max_size=4).map(tuple)),
        st.builds(SelfComposedEvent, inner, st.integers(min_value=0, max_value=10**9)),
    )


EVENTS = st.recursive(LEAVES, _extend, max_leaves=12)


def _types(event: PrivacyEvent) -> set[str]:
    out = {type(event).__name__}
    for value in vars_of(event):
        if isinstance(value, PrivacyEvent):
            out |= _types(value)
        elif isinstance(value, tuple):
            for item in value:
                out |= _types(item)
    return out


def vars_of(event: PrivacyEvent) -> list[Any]:
    return [getattr(event, name) for name in event.__dataclass_fields__]


def _same_bits(a: object, b: object) -> bool:
    """Equality that also tells -0.0 from 0.0 and checks the types (int stays int)."""
    if isinstance(a, PrivacyEvent):
        return type(a) is type(b) and all(
            _same_bits(x, y) for x, y in zip(vars_of(a), vars_of(b), strict=True)
        )
    if isinstance(a, tuple):
        return isinstance(b, tuple) and all(_same_bits(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float):
        return isinstance(b, float) and a.hex() == b.hex()
    return type(a) is type(b) and a == b


def test_every_event_class_is_serializable_and_generated() -> None:
    declared = {
        name
        for name in _events.__all__
        if isinstance(getattr(_events, name), type)
        and issubclass(getattr(_events, name), PrivacyEvent)
        and name != "PrivacyEvent"
    }
    assert set(EVENT_TYPES) == declared
    seen: set[str] = set()

    @settings(max_examples=300, database=None)
    @given(EVENTS)
    def collect(event: PrivacyEvent) -> None:
        seen.update(_types(event))

    collect()
    assert seen == declared


@settings(max_examples=300, database=None)
@given(EVENTS)
def test_round_trip_is_exact(event: PrivacyEvent) -> None:
    data = event_to_dict(event)
    assert data["type"] == type(event).__name__
    back = event_from_dict(data)
    assert back == event and _same_bits(back, event)
    text = event_to_json(event)
    assert json.loads(text) == data
    again = event_from_json(text)
    assert again == event and _same_bits(again, event)
    assert event_to_json(again) == text


def test_nested_layout() -> None:
    event = ComposedEvent(
        (
            SelfComposedEvent(PoissonSampledEvent(0.1, GaussianEvent(2.0)), count=5),
            SampledWithoutReplacementEvent(3, 10, PureDPEvent(0.1)),
        )
    )
    assert event_to_dict(event) == {
        "type": "ComposedEvent",
        "events": [
            {
                "type": "SelfComposedEvent",
                "event": {
                    "type": "PoissonSampledEvent",
                    "sampling_rate": 0.1,
                    "event": {"type": "GaussianEvent", "sigma": 2.0, "sensitivity": 1.0},
                },
                "count": 5,
            },
            {
                "type": "SampledWithoutReplacementEvent",
                "sample_size": 3,
                "population_size": 10,
                "event": {"type": "PureDPEvent", "epsilon": 0.1},
            },
        ],
    }


def test_awkward_floats_survive() -> None:
    for sigma in (0.1, 1 / 3, 5e-324, 1.7976931348623157e308, math.nextafter(1.0, 2.0)):
        event = GaussianEvent(sigma=sigma, sensitivity=math.pi)
        back = event_from_json(event_to_json(event))
        assert isinstance(back, GaussianEvent)
        assert back.sigma.hex() == sigma.hex() and back.sensitivity == math.pi


def test_missing_defaulted_fields_take_their_default() -> None:
    assert event_from_dict({"type": "GaussianEvent", "sigma": 2.0}) == GaussianEvent(2.0)
    assert event_from_dict({"type": "ComposedEvent"}) == ComposedEvent(())
    assert event_from_dict({"type": "PureDPEvent", "epsilon": 1}) == PureDPEvent(1.0)


class _MyEvent(GaussianEvent):
    pass


@pytest.mark.parametrize(
    ("data", "name"),
    [
        ([1, 2], "data"),
        ({"sigma": 1.0}, "data.type"),
        ({"type": "FancyEvent"}, "data.type"),
        ({"type": "PrivacyEvent"}, "data.type"),
        ({"type": 3}, "data.type"),
        ({"type": "GaussianEvent"}, "data.sigma"),
        ({"type": "GaussianEvent", "sigma": "1.0"}, "data.sigma"),
        ({"type": "GaussianEvent", "sigma": True}, "data.sigma"),
        ({"type": "GaussianEvent", "sigma": 0.0}, "data.sigma"),
        ({"type": "GaussianEvent", "sigma": float("nan")}, "data.sigma"),
        ({"type": "GaussianEvent", "sigma": 1.0, "rho": 2.0}, "data.rho"),
        ({"type": "SelfComposedEvent", "event": {"type": "NoOpEvent"}, "count": 1.0}, "data.count"),
        ({"type": "SelfComposedEvent", "event": {"type": "NoOpEvent"}, "count": -1}, "data.count"),
        ({"type": "SelfComposedEvent", "event": 3, "count": 1}, "data.event"),
        (
            {"type": "PoissonSampledEvent", "sampling_rate": 0.5, "event": {"type": "X"}},
            "data.event.type",
        ),
        (
            {
                "type": "PoissonSampledEvent",
                "sampling_rate": 0.5,
                "event": {"type": "LaplaceEvent", "scale": -1.0},
            },
            "data.event.scale",
        ),
        ({"type": "ComposedEvent", "events": {"type": "NoOpEvent"}}, "data.events"),
        (
            {"type": "ComposedEvent", "events": [{"type": "NoOpEvent"}, {"type": "Nope"}]},
            "data.events[1].type",
        ),
        (
            {
                "type": "SampledWithoutReplacementEvent",
                "sample_size": 5,
                "population_size": 3,
                "event": {"type": "NoOpEvent"},
            },
            "data.sample_size",
        ),
    ],
)
def test_malformed_data_names_the_field(data: object, name: str) -> None:
    with pytest.raises(InvalidParameterError) as info:
        event_from_dict(data)
    assert info.value.name == name
    assert name in str(info.value)


def test_refuses_unknown_event_classes() -> None:
    with pytest.raises(InvalidParameterError, match=r"^event must be one of"):
        event_to_dict(_MyEvent(1.0))
    with pytest.raises(InvalidParameterError, match=r"^event must be one of"):
        event_to_dict("GaussianEvent")  # type: ignore[arg-type]
    with pytest.raises(InvalidParameterError, match=r"^event\.events\[1\] must be one of"):
        event_to_dict(ComposedEvent((NoOpEvent(), _MyEvent(1.0))))


def test_bad_json_text() -> None:
    with pytest.raises(InvalidParameterError, match=r"^text must be valid JSON"):
        event_from_json("{not json")
    with pytest.raises(InvalidParameterError, match=r"^text must be a JSON string"):
        event_from_json(3)  # type: ignore[arg-type]
    with pytest.raises(InvalidParameterError) as info:
        event_from_json('{"type": "ZCDPEvent", "rho": Infinity}')
    assert info.value.name == "data.rho"
