"""Privacy events as JSON: exact, versionless round trips for ledgers and audit logs.

An event becomes a dict holding its class name under ``"type"`` and its fields by name; nested
events (:class:`~dpcurator.accounting.PoissonSampledEvent`,
:class:`~dpcurator.accounting.SampledWithoutReplacementEvent`,
:class:`~dpcurator.accounting.SelfComposedEvent`) hold a nested dict, and
:class:`~dpcurator.accounting.ComposedEvent` a list of them. Floats survive exactly: JSON writes
them with ``repr``, the shortest string that reads back to the same double. Reading checks the
data as strictly as writing: an unknown type, a missing or unknown field, or a value of the
wrong kind raises :class:`~dpcurator.errors.InvalidParameterError` naming the field by its path
(``data.event.sigma``, ``data.events[2].type``). Fields with a default may be missing (events
only ever gain optional fields), so data written by older versions still reads.

Examples
--------
>>> from dpcurator.accounting import GaussianEvent, PoissonSampledEvent
>>> from dpcurator.accounting._serialize import event_from_json, event_to_dict, event_to_json
>>> step = PoissonSampledEvent(sampling_rate=0.01, event=GaussianEvent(sigma=1.1))
>>> event_to_dict(step)
{'type': 'PoissonSampledEvent', 'sampling_rate': 0.01, 'event': {'type': 'GaussianEvent', \
'sigma': 1.1, 'sensitivity': 1.0}}
>>> event_from_json(event_to_json(step)) == step
True
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

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
from dpcurator.errors import InternalError, InvalidParameterError

__all__ = ["EVENT_TYPES", "event_from_dict", "event_from_json", "event_to_dict", "event_to_json"]

EVENT_TYPES: dict[str, type[PrivacyEvent]] = {
    cls.__name__: cls
    for cls in (
        ApproxDPEvent,
        ComposedEvent,
        DiscreteGaussianEvent,
        DiscreteLaplaceEvent,
        GaussianEvent,
        LaplaceEvent,
        NoOpEvent,
        PoissonSampledEvent,
        PureDPEvent,
        RandomizedResponseEvent,
        SampledWithoutReplacementEvent,
        SelfComposedEvent,
        ZCDPEvent,
    )
}
"""The event classes that serialize, by the name written under ``"type"``."""

_EVENT = "PrivacyEvent"
_EVENTS = "tuple[PrivacyEvent, ...]"


def event_to_dict(event: PrivacyEvent) -> dict[str, Any]:
    """Return ``event`` as a JSON-compatible dict (``{"type": class name, field: value ...}``).

    Parameters
    ----------
    event : PrivacyEvent
        An event of one of the classes in :data:`EVENT_TYPES` (subclasses defined elsewhere
        are refused: they could not be read back as themselves).

    Returns
    -------
    dict
        ``"type"`` first, then every field in declaration order; nested events as dicts,
        :class:`ComposedEvent`'s events as a list of dicts.

    Raises
    ------
    InvalidParameterError
        If ``event`` is not an event of a known class.

    Examples
    --------
    >>> from dpcurator.accounting import ComposedEvent, LaplaceEvent, NoOpEvent
    >>> from dpcurator.accounting._serialize import event_to_dict
    >>> event_to_dict(ComposedEvent((LaplaceEvent(scale=2.0), NoOpEvent())))
    {'type': 'ComposedEvent', 'events': [{'type': 'LaplaceEvent', 'scale': 2.0, \
'sensitivity': 1.0}, {'type': 'NoOpEvent'}]}
    """
    return _to_dict(event, "event")


def _to_dict(event: object, path: str) -> dict[str, Any]:
    name = type(event).__name__
    if not isinstance(event, PrivacyEvent) or EVENT_TYPES.get(name) is not type(event):
        raise InvalidParameterError(
            path, event, f"must be one of the privacy events {', '.join(sorted(EVENT_TYPES))}"
        )
    out: dict[str, Any] = {"type": name}
    for f in dataclasses.fields(event):
        value = getattr(event, f.name)
        where = f"{path}.{f.name}"
        if f.type == _EVENT:
            out[f.name] = _to_dict(value, where)
        elif f.type == _EVENTS:
            out[f.name] = [_to_dict(e, f"{where}[{i}]") for i, e in enumerate(value)]
        elif f.type in ("float", "int"):
            out[f.name] = value
        else:  # pragma: no cover - a new event field type needs a rule here
            raise InternalError(f"{name}.{f.name} has a field type {f.type!r} with no JSON rule.")
    return out


def event_from_dict(data: object) -> PrivacyEvent:
    """Rebuild an event from :func:`event_to_dict`'s output (exactly the same event).

    Parameters
    ----------
    data : dict
        ``{"type": class name, field: value ...}``; fields with a default may be missing.

    Returns
    -------
    PrivacyEvent
        The event, validated by its own constructor.

    Raises
    ------
    InvalidParameterError
        If ``data`` is not such a dict: unknown type, missing or unknown field, or a value of the
        wrong kind or out of its domain. The error names the field by its path from ``data``.

    Examples
    --------
    >>> from dpcurator.accounting._serialize import event_from_dict
    >>> event_from_dict({"type": "SelfComposedEvent", "count": 3,
    ...                  "event": {"type": "PureDPEvent", "epsilon": 0.5}})
    SelfComposedEvent(event=PureDPEvent(epsilon=0.5), count=3)
    >>> event_from_dict({"type": "GaussianEvent", "sigma": -1.0})
    Traceback (most recent call last):
    ...
    dpcurator.errors.InvalidParameterError: data.sigma must be > 0; got -1.0.
    """
    return _from_dict(data, "data")


def _from_dict(data: object, path: str) -> PrivacyEvent:
    if not isinstance(data, dict):
        raise InvalidParameterError(path, data, "must be a dict describing a privacy event")
    name = data.get("type")
    if not isinstance(name, str) or name not in EVENT_TYPES:
        raise InvalidParameterError(
            f"{path}.type", name, f"must be one of {', '.join(sorted(EVENT_TYPES))}"
        )
    cls = EVENT_TYPES[name]
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(str(k) for k in data if k != "type" and k not in fields)
    if unknown:
        where = f"{path}.{unknown[0]}"
        raise InvalidParameterError(where, data[unknown[0]], f"is not a field of {name}")
    kwargs: dict[str, Any] = {}
    for field_name, f in fields.items():
        where = f"{path}.{field_name}"
        if field_name not in data:
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                raise InvalidParameterError(where, None, f"is required for {name} (missing)")
            continue
        value = data[field_name]
        if f.type == _EVENT:
            kwargs[field_name] = _from_dict(value, where)
        elif f.type == _EVENTS:
            if not isinstance(value, list | tuple):
                raise InvalidParameterError(where, value, "must be a list of privacy events")
            kwargs[field_name] = tuple(
                _from_dict(item, f"{where}[{i}]") for i, item in enumerate(value)
            )
        elif f.type == "float":
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise InvalidParameterError(where, value, "must be a number")
            kwargs[field_name] = float(value)
        elif f.type == "int":
            if isinstance(value, bool) or not isinstance(value, int):
                raise InvalidParameterError(where, value, "must be an integer")
            kwargs[field_name] = value
        else:  # pragma: no cover - a new event field type needs a rule here
            raise InternalError(f"{name}.{field_name} has a field type {f.type!r} with no rule.")
    try:
        return cls(**kwargs)
    except InvalidParameterError as exc:
        if exc.name in fields:  # the constructor names its own field: say where it is
            raise InvalidParameterError(f"{path}.{exc.name}", exc.value, exc.requirement) from exc
        raise


def event_to_json(event: PrivacyEvent) -> str:
    """Return ``event`` as a compact JSON string (see :func:`event_to_dict`).

    Examples
    --------
    >>> from dpcurator.accounting import ZCDPEvent
    >>> from dpcurator.accounting._serialize import event_to_json
    >>> event_to_json(ZCDPEvent(rho=0.125))
    '{"type":"ZCDPEvent","rho":0.125}'
    """
    return json.dumps(event_to_dict(event), separators=(",", ":"), allow_nan=False)


def event_from_json(text: str | bytes) -> PrivacyEvent:
    """Rebuild an event from :func:`event_to_json`'s output.

    Raises
    ------
    InvalidParameterError
        If ``text`` is not JSON (named ``text``) or does not describe an event (see
        :func:`event_from_dict`).

    Examples
    --------
    >>> from dpcurator.accounting._serialize import event_from_json
    >>> event_from_json('{"type": "LaplaceEvent", "scale": 2.0}')
    LaplaceEvent(scale=2.0, sensitivity=1.0)
    """
    if not isinstance(text, str | bytes):
        raise InvalidParameterError("text", text, "must be a JSON string")
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise InvalidParameterError("text", text, f"must be valid JSON ({exc})") from exc
    return event_from_dict(data)
