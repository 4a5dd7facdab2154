"""Mechanism specifications for the command line: ``NAME:key=value,...`` or a TOML file.

Grammar (case-insensitive names)::

    laplace:scale=10[,sensitivity=1]        laplace:epsilon=0.1
    gaussian:sigma=2[,sensitivity=1]        gaussian:noise_multiplier=1.1
    discrete-laplace:scale=10               discrete-gaussian:sigma=3
    rr:p=0.75[,k=2]                         rr:epsilon=1.0,k=4
    pure:epsilon=0.5                        approx:epsilon=0.5,delta=1e-6
    zcdp:rho=0.1
    sampled-gaussian:q=0.01,noise_multiplier=1.0

Any specification also takes ``count=N`` (run N times) and ``q=RATE`` (Poisson subsampling of the
mechanism at that rate). A TOML file holds a list of tables ``[[mechanism]]`` with ``type`` and the
same keys.

Examples
--------
>>> parse_spec("gaussian:sigma=2,count=3")
SelfComposedEvent(event=GaussianEvent(sigma=2.0, sensitivity=1.0), count=3)
"""

from __future__ import annotations

import math
import tomllib
from collections.abc import Mapping
from pathlib import Path

from dpcurator.accounting import (
    ApproxDPEvent,
    DiscreteGaussianEvent,
    DiscreteLaplaceEvent,
    GaussianEvent,
    LaplaceEvent,
    PoissonSampledEvent,
    PrivacyEvent,
    PureDPEvent,
    RandomizedResponseEvent,
    SelfComposedEvent,
    ZCDPEvent,
)
from dpcurator.errors import InvalidParameterError

__all__ = ["MECHANISM_NAMES", "parse_spec", "parse_spec_file", "spec_to_event"]

MECHANISM_NAMES = (
    "laplace",
    "gaussian",
    "discrete-laplace",
    "discrete-gaussian",
    "rr",
    "pure",
    "approx",
    "zcdp",
    "sampled-gaussian",
)

_ALIASES = {"sampling_rate": "q", "steps": "count", "noise-multiplier": "noise_multiplier"}


def _number(key: str, raw: object) -> float:
    try:
        return float(raw)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise InvalidParameterError(key, raw, "must be a number") from None


def _pop(params: dict[str, float], key: str, default: float | None = None) -> float:
    if key in params:
        return params.pop(key)
    if default is None:
        raise InvalidParameterError(key, None, "is required for this mechanism")
    return default


def spec_to_event(name: str, raw: Mapping[str, object]) -> PrivacyEvent:
    """Build the privacy event of one mechanism from its name and parameters.

    >>> spec_to_event("laplace", {"epsilon": 0.1})
    LaplaceEvent(scale=10.0, sensitivity=1.0)
    """
    kind = name.strip().lower().replace("_", "-")
    params = {_ALIASES.get(k, k).replace("-", "_"): _number(k, v) for k, v in raw.items()}
    count = int(_pop(params, "count", 1))
    rate = params.pop("q", None)
    sensitivity = _pop(params, "sensitivity", 1.0)
    event: PrivacyEvent
    if kind == "laplace":
        scale = params.pop("scale", None)
        event = LaplaceEvent(
            scale=scale if scale is not None else sensitivity / _pop(params, "epsilon"),
            sensitivity=sensitivity,
        )
    elif kind in ("gaussian", "sampled-gaussian"):
        sigma = params.pop("sigma", None)
        if sigma is None:
            sigma = _pop(params, "noise_multiplier") * sensitivity
        event = GaussianEvent(sigma=sigma, sensitivity=sensitivity)
        if kind == "sampled-gaussian" and rate is None:
            raise InvalidParameterError("q", None, "is required for sampled-gaussian")
    elif kind == "discrete-laplace":
        event = DiscreteLaplaceEvent(scale=_pop(params, "scale"), sensitivity=int(sensitivity))
    elif kind == "discrete-gaussian":
        event = DiscreteGaussianEvent(sigma=_pop(params, "sigma"), sensitivity=sensitivity)
    elif kind == "rr":
        k = int(_pop(params, "k", 2))
        p = params.pop("p", None)
        if p is None:
            eps = _pop(params, "epsilon")
            p = math.exp(eps) / (math.exp(eps) + k - 1)
        event = RandomizedResponseEvent(p_truth=p, categories=k)
    elif kind == "pure":
        event = PureDPEvent(epsilon=_pop(params, "epsilon"))
    elif kind == "approx":
        event = ApproxDPEvent(epsilon=_pop(params, "epsilon"), delta=_pop(params, "delta"))
    elif kind == "zcdp":
        event = ZCDPEvent(rho=_pop(params, "rho"))
    else:
        raise InvalidParameterError(
            "mechanism", name, f"must be one of {', '.join(MECHANISM_NAMES)}"
        )
    if params:
        raise InvalidParameterError(
            "parameters", sorted(params), f"are not parameters of the {kind} mechanism"
        )
    if rate is not None:
        event = PoissonSampledEvent(sampling_rate=rate, event=event)
    return SelfComposedEvent(event, count) if count != 1 else event


def parse_spec(spec: str) -> PrivacyEvent:
    """Parse ``NAME:key=value,...`` into a privacy event.

    >>> parse_spec("sampled-gaussian:q=0.01,noise_multiplier=1,steps=1000").count
    1000
    """
    name, _, rest = spec.partition(":")
    params: dict[str, object] = {}
    for item in filter(None, (part.strip() for part in rest.split(","))):
        key, sep, value = item.partition("=")
        if not sep:
            raise InvalidParameterError("spec", spec, "must look like NAME:key=value,key=value")
        params[key.strip()] = value.strip()
    return spec_to_event(name, params)


def parse_spec_file(path: Path) -> tuple[list[PrivacyEvent], float | None]:
    """Read ``[[mechanism]]`` tables (and an optional top-level ``delta``) from a TOML file."""
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise InvalidParameterError(
            "file", str(path), f"must be a readable TOML file ({exc})"
        ) from None
    tables = data.get("mechanism", [])
    if not isinstance(tables, list) or not tables:
        raise InvalidParameterError("file", str(path), "must hold at least one [[mechanism]] table")
    events = []
    for table in tables:
        params = dict(table)
        kind = params.pop("type", None)
        if not isinstance(kind, str):
            raise InvalidParameterError(
                "type", kind, "must name the mechanism in each [[mechanism]]"
            )
        events.append(spec_to_event(kind, params))
    delta = data.get("delta")
    return events, (None if delta is None else _number("delta", delta))
