"""The wire format: a :class:`~dpcurator.curator.QueryRelease` as JSON, and back, exactly.

The service sends a release as :func:`release_to_json` writes it, and the client rebuilds the
same object with :func:`release_from_json`: the released table with its column order, dtypes
and values (floats round-trip exactly through their shortest repr; NaN and infinities as the
strings ``"nan"``, ``"inf"`` and ``"-inf"``, since strict JSON has none), the budget split, the
privacy events (:func:`~dpcurator.accounting.event_to_dict`), the charge and the budget left.

Examples
--------
>>> import pandas as pd
>>> from dpcurator.accounting import Budget
>>> from dpcurator.curator import Column, Session, Table
>>> from dpcurator.noise import InsecureSeededSource
>>> t = Table("t", pd.DataFrame({"x": [1.0, 2.0]}), columns=[Column("x", lower=0, upper=4)])
>>> with Session(t, Budget(1.0), ledger=":memory:", source=InsecureSeededSource(0)) as s:
...     release = s.sql("SELECT COUNT(*) AS n, AVG(x) FROM t", epsilon=0.5)
>>> back = release_from_json(release_to_json(release))
>>> back.table.equals(release.table) and back.split == release.split
True
>>> back.events == release.events and back.charged == release.charged
True
"""

from __future__ import annotations

import datetime
import json
import math
from typing import Any

import numpy as np
import pandas as pd

from dpcurator.accounting import Budget, event_from_dict, event_to_dict
from dpcurator.curator import GaussianNoise, Measurement, QueryRelease
from dpcurator.errors import InvalidParameterError

__all__ = [
    "budget_from_json",
    "budget_to_json",
    "frame_from_json",
    "frame_to_json",
    "release_from_dict",
    "release_from_json",
    "release_to_dict",
    "release_to_json",
]

_NON_FINITE = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}


def budget_to_json(budget: Budget) -> dict[str, Any]:
    """``{"epsilon": ..., "delta": ...}`` (an infinite epsilon as ``"inf"``)."""
    return {"epsilon": _number(budget.epsilon), "delta": _number(budget.delta)}


def budget_from_json(raw: Any) -> Budget:
    """Inverse of :func:`budget_to_json`."""
    return Budget(_float(raw["epsilon"]), _float(raw["delta"]))


def _number(value: float) -> float | str:
    if math.isfinite(value):
        return float(value)
    return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")


def _float(value: Any) -> float:
    if isinstance(value, str):
        return _NON_FINITE[value]
    return float(value)


def _cell(value: Any) -> Any:
    if value is None or value is pd.NA or value is pd.NaT:
        return None
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float):
        return _number(value)
    if isinstance(value, datetime.date):  # a date or a timestamp key, read back by its dtype
        return value.isoformat()
    return value


def _column_values(column: pd.Series[Any]) -> list[Any]:
    """Return a column's values as JSON-ready Python values (numpy columns at once)."""
    dtype = column.dtype
    if isinstance(dtype, np.dtype) and dtype.kind in "iub":
        return list(column.to_numpy().tolist())
    if isinstance(dtype, np.dtype) and dtype.kind == "f":
        values = column.to_numpy()
        if bool(np.isfinite(values).all()):
            return list(values.tolist())
        return [_cell(v) for v in values.tolist()]
    # a missing value of a column of another type (a string, a nullable integer) is null
    return [None if pd.isna(v) else _cell(v) for v in column.tolist()]


def frame_to_json(frame: pd.DataFrame) -> dict[str, Any]:
    """Write a DataFrame as ``{"columns": [...], "dtypes": [...], "data": [[values] ...]}``."""
    return {
        "columns": [str(c) for c in frame.columns],
        "dtypes": [str(t) for t in frame.dtypes],
        "data": [_column_values(column) for _, column in frame.items()],
    }


def frame_from_json(raw: Any) -> pd.DataFrame:
    """Inverse of :func:`frame_to_json` (column order, dtypes and values)."""
    columns: dict[str, Any] = {}
    for name, dtype, raw_values in zip(raw["columns"], raw["dtypes"], raw["data"], strict=True):
        columns[name] = _column_from_json(dtype, raw_values)
    return pd.DataFrame(columns, columns=list(raw["columns"]), copy=False)


def _column_from_json(dtype: str, values: list[Any]) -> Any:
    """Return a column of :func:`frame_to_json` in its dtype (numpy columns at once)."""
    if dtype.startswith("float"):
        return np.array([math.nan if v is None else _float(v) for v in values], dtype=dtype)
    if dtype in _NUMPY_EXACT:
        return np.array(values, dtype=dtype)
    return pd.Series(values, dtype=dtype)


_NUMPY_EXACT = frozenset({"int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "bool"})
"""Dtypes whose JSON values (never null) convert to numpy exactly (uint64 is left to pandas)."""


def _measurement_to_json(m: Measurement) -> dict[str, Any]:
    return {
        "name": m.name,
        "kind": m.kind,
        "column": m.column,
        "mechanism": m.mechanism,
        "epsilon": m.epsilon,
        "delta": m.delta,
        "sensitivity": _number(m.sensitivity),
        "scale": _number(m.scale),
        "units": m.units,
        "unit_value": m.unit_value,
        "quantile": m.quantile,
        "bits": m.bits,
        "result": m.result,
        "gaussian": None
        if m.gaussian is None
        else {"sigma": m.gaussian.sigma, "l2": m.gaussian.l2, "l2_squared": m.gaussian.l2_squared},
        "why": m.why,
    }


def _measure(kind: str, column: str | None, quantile: float | None) -> Any:
    """Return the typed measure of a measurement, from its kind (its one-to-one label)."""
    from dpcurator.curator import _measures as ms  # noqa: PLC0415 - private: see _measure

    col = "" if column is None else column
    measures: dict[str, Any] = {
        "count": ms.RowCount(),
        "count_distinct": ms.UnitCount(),
        "selection": ms.UnitCount(selection=True),
        "count_column": ms.ColumnCount(col),
        "sum": ms.ValueSum(col, "raw"),
        "centered_sum": ms.ValueSum(col, "centred"),
        "centered_squares": ms.ValueSum(col, "squares"),
        "quantile": ms.QuantileCounts(col, 0.5 if quantile is None else quantile),
    }
    if kind not in measures:
        raise InvalidParameterError("kind", kind, "must be a known kind of measurement")
    return measures[kind]


def _measurement_from_json(raw: Any) -> Measurement:
    return Measurement(
        name=raw["name"],
        kind=raw["kind"],
        column=raw["column"],
        mechanism=raw["mechanism"],
        epsilon=float(raw["epsilon"]),
        delta=float(raw["delta"]),
        sensitivity=_float(raw["sensitivity"]),
        scale=_float(raw["scale"]),
        measure=_measure(raw["kind"], raw["column"], raw["quantile"]),
        units=int(raw["units"]),
        unit_value=float(raw["unit_value"]),
        quantile=raw["quantile"],
        bits=int(raw["bits"]),
        result=raw["result"],
        gaussian=_gaussian_from_json(raw.get("gaussian")),
        why=str(raw.get("why", "")),
    )


def _gaussian_from_json(raw: Any) -> GaussianNoise | None:
    if raw is None:
        return None
    return GaussianNoise(float(raw["sigma"]), float(raw["l2"]), int(raw["l2_squared"]))


def release_to_dict(release: QueryRelease) -> dict[str, Any]:
    """Return a release as JSON-ready data (see the module's notes)."""
    return {
        "query": release.query,
        "table": frame_to_json(release.table),
        "value_columns": list(release.value_columns),
        "intervals": dict(release.intervals),
        "split": [_measurement_to_json(m) for m in release.split],
        "events": [event_to_dict(e) for e in release.events],
        "charged": budget_to_json(release.charged),
        "spent": budget_to_json(release.spent),
        "remaining": budget_to_json(release.remaining),
        "entry_id": release.entry_id,
        "confidence": release.confidence,
        "bounded_sql": release.bounded_sql,
        "threshold": release.threshold,
        "rank_errors": dict(release.rank_errors),
    }


def release_from_dict(raw: Any) -> QueryRelease:
    """Inverse of :func:`release_to_dict`.

    Raises
    ------
    InvalidParameterError
        If ``raw`` is not a release as :func:`release_to_dict` writes it.
    """
    try:
        return QueryRelease(
            query=str(raw["query"]),
            table=frame_from_json(raw["table"]),
            value_columns=tuple(raw["value_columns"]),
            intervals=dict(raw["intervals"]),
            split=tuple(_measurement_from_json(m) for m in raw["split"]),
            events=tuple(event_from_dict(e) for e in raw["events"]),
            charged=budget_from_json(raw["charged"]),
            spent=budget_from_json(raw["spent"]),
            remaining=budget_from_json(raw["remaining"]),
            entry_id=int(raw["entry_id"]),
            confidence=float(raw["confidence"]),
            bounded_sql=str(raw["bounded_sql"]),
            threshold=None if raw["threshold"] is None else int(raw["threshold"]),
            rank_errors={str(k): float(v) for k, v in raw.get("rank_errors", {}).items()},
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise InvalidParameterError(
            "release", type(raw).__name__, f"is malformed ({exc})"
        ) from None


def release_to_json(release: QueryRelease) -> str:
    """Return a release as strict JSON text."""
    return json.dumps(release_to_dict(release), allow_nan=False, separators=(",", ":"))


def release_from_json(text: str) -> QueryRelease:
    """Inverse of :func:`release_to_json`."""
    return release_from_dict(json.loads(text))
