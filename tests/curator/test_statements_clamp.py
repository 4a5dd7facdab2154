"""The statements' clamps give each special value what the module says, on both engines.

A clamp into ``[low, high]`` keeps NULL, sends NaN (above every number) and ``+inf`` to
``high``, ``-inf`` to ``low``; a value column's clamp sends NULL and NaN to its midpoint (NULL
where the column is nullable). The CASE tests the common case (within the bounds) first; these
tests check every branch against Python on both engines.
"""

from __future__ import annotations

import math

import pandas as pd
import pytest
from sqlglot import exp

from dpcurator.curator import Column, Table
from dpcurator.curator._specs import ValueSpec
from dpcurator.curator._statements import _clamp, _clamped
from dpcurator.noise import FixedPointRange
from tests.curator.conftest import EngineKind, open_session

LOW, HIGH = -2.5, 10.0
VALUES = [None, "NaN", "Infinity", "-Infinity", -0.0, 0.0, LOW, HIGH, -3.0, 11.0, 4.25, 1e300]


def _literal(value: object) -> exp.Expr:
    double = exp.DataType.build("DOUBLE")
    if value is None:
        return exp.cast(exp.null(), double)
    if isinstance(value, str):
        return exp.cast(exp.Literal.string(value), double)
    return exp.cast(exp.Literal.number(repr(value)), double)


def _expected_clamp(value: float | None) -> float | None:
    if value is None:
        return None
    if math.isnan(value) or value > HIGH:
        return HIGH
    return LOW if value < LOW else value


def _expected_clamped(value: float | None, nullable: bool) -> float | None:
    if value is None or math.isnan(value):
        return None if nullable else (LOW + HIGH) / 2
    return _expected_clamp(value)


@pytest.mark.parametrize("nullable", [False, True])
def test_every_branch_of_the_clamps(engine_kind: EngineKind, nullable: bool) -> None:
    frame = pd.DataFrame({"v": [1.0]})
    table = Table("t", frame, columns=[Column("v", lower=LOW, upper=HIGH)])
    session = open_session(table, engine=engine_kind)
    spec = ValueSpec("v", "__x", FixedPointRange.from_bounds(LOW, HIGH), nullable)
    rows = [(exp.Literal.number(i), _literal(v)) for i, v in enumerate(VALUES)]
    source = exp.values(rows, alias="__t", columns=["i", "v"])
    low, high = exp.Literal.number(repr(LOW)), exp.Literal.number(repr(HIGH))
    clamp = _clamp(exp.column("v", quoted=True), low, high)
    statement = exp.select(
        "i", exp.alias_(clamp, "clamp"), exp.alias_(_clamped(spec), "clamped")
    ).from_(source)
    got = session._engine.run(statement, "t")
    order = sorted(range(len(VALUES)), key=lambda j: got["i"][j])
    numbers = [float(v) if v is not None else None for v in VALUES]
    for j, value in zip(order, numbers, strict=True):
        clamped, expected = got["clamped"][j], _expected_clamped(value, nullable)
        assert got["clamp"][j] == _expected_clamp(value), value
        assert clamped == expected or (clamped is None and expected is None), value
