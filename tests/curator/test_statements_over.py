"""The units beyond their bounds with one group per unit, a key of a run of integers coded.

A key whose public domain is a run of consecutive integers is read by the units-beyond-bounds
statement as a code (its offset in the domain, 0 for any other value or NULL), packed with its
complement and tested for several values per unit by one ``BIT_OR`` instead of ``MIN``, ``MAX``
and ``COUNT`` (``_key_code`` in :mod:`dpcurator.curator._statements`). The flag may list more
units than have several keys (a key in the domain and values outside it, which every query
drops), never fewer. These tests check that on both engines against an independent computation,
with values next to the domain, beyond the SMALLINT and INTEGER ranges and NULL, and that the
bounded aggregates are those of the test on the key's own values.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlglot import exp

from dpcurator.curator import Column, Session, Table
from dpcurator.curator import _statements as statements
from dpcurator.curator._statements import SEVERAL
from tests.curator.conftest import EngineKind, exact_aggregates, open_session
from tests.curator.test_over_cache import _same

DOMAIN = range(4400, 4500)
"""100 consecutive integers (70000 would be 4464 as a SMALLINT, -28368 differs from 4400 in
the sign bit only)."""
OUTSIDE = [None, 4399, 4500, 70000, -70000, 2**40, -(2**40)]
"""Keys outside the domain: NULL, next to it, beyond the SMALLINT and INTEGER ranges."""
LIMIT = 3
QUERY = "SELECT k, COUNT(*), SUM(x), COUNT(DISTINCT pid) FROM t GROUP BY k"


def _table(frame: pd.DataFrame, domain: range = DOMAIN) -> Table:
    columns = [Column("k", domain=list(domain)), Column("x", lower=0, upper=10)]
    return Table(
        "t",
        frame,
        privacy_unit="pid",
        max_rows_per_unit=LIMIT,
        max_groups_per_unit=1,
        columns=columns,
    )


def _frame(keys: list[list[int | None]]) -> pd.DataFrame:
    pid = [unit for unit, rows in enumerate(keys) for _ in rows]
    k = pd.array([key for rows in keys for key in rows], dtype="Int64")
    x = np.linspace(0.0, 10.0, len(pid)).round(3)
    return pd.DataFrame({"pid": pid, "k": k, "x": x})


def _flags(session: Session) -> dict[int, bool]:
    """The units the session's units-beyond-bounds statement lists, with their flags."""
    plan = session.plan(QUERY, epsilon=1.0)
    assert plan.statements.over is not None
    engine: Any = session._engine
    units = engine.materialize(plan.statements.over, "t")
    got = engine.run(exp.select("__u", SEVERAL).from_(units), "t")
    return {int(u): bool(f) for u, f in zip(got["__u"], got[SEVERAL], strict=True)}


def _check_flags(keys: list[list[int | None]], flags: dict[int, bool]) -> None:
    """Listed iff beyond the bounds or flagged; flagged whenever two keys are in the domain."""
    for unit, rows in enumerate(keys):
        inside = {key for key in rows if key in DOMAIN}
        if len(inside) > 1:
            assert flags.get(unit) is True, (unit, rows)
        if len(rows) > LIMIT:
            assert unit in flags, (unit, rows)
        if unit not in flags:
            assert len(rows) <= LIMIT and len(inside) <= 1, (unit, rows)


def _unpacked(frame: pd.DataFrame, monkeypatch: pytest.MonkeyPatch, engine: EngineKind) -> Any:
    """The exact aggregates with the key tested by ``MIN``, ``MAX`` and ``COUNT``."""
    with monkeypatch.context() as patch:
        patch.setattr(statements, "_key_code", lambda key: (statements._key_value(key), None))
        session = open_session(_table(frame), engine=engine)
        plan = session.plan(QUERY, epsilon=1.0)
        assert plan.statements.over is not None
        assert "BIT_OR" not in session._engine.render(plan.statements.over, "t").upper()
        return exact_aggregates(session, QUERY)[1]


def test_the_key_is_tested_packed_and_flags_every_unit_of_two_keys(
    engine_kind: EngineKind, monkeypatch: pytest.MonkeyPatch
) -> None:
    keys: list[list[int | None]] = [
        [4400, 4401],  # two keys: flagged
        [4464, 70000],  # one key in the domain (70000 is 4464 as a SMALLINT)
        [4464, 4465, 70000],  # two keys: flagged
        [4499, None, 2**40, -(2**40)],  # one key in the domain (4 rows: beyond the bound)
        [4450, 4450],  # within its bounds: not listed
        [None, None],  # no key in the domain
        [4400, 4499, 4450, 4401, 4402],  # several keys and rows
        [4500, 4399],  # two keys, none in the domain
        [-32768 + 4400, 4400],  # differ in the sign bit of a SMALLINT only (-28368 is outside)
    ]
    frame = _frame(keys)
    session = open_session(_table(frame), engine=engine_kind)
    plan = session.plan(QUERY, epsilon=1.0)
    assert plan.statements.over is not None
    assert "BIT_OR" in session._engine.render(plan.statements.over, "t").upper()
    flags = _flags(session)
    _check_flags(keys, flags)
    assert {0, 2, 6} <= {unit for unit, flag in flags.items() if flag}
    assert 4 not in flags
    _same(exact_aggregates(session, QUERY)[1], _unpacked(frame, monkeypatch, engine_kind))


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    keys=st.lists(
        st.lists(
            st.one_of(st.sampled_from([4400, 4401, 4464, 4465, 4499]), st.sampled_from(OUTSIDE)),
            min_size=1,
            max_size=6,
        ),
        min_size=1,
        max_size=12,
    )
)
def test_no_unit_of_two_keys_in_the_domain_goes_unflagged(keys: list[list[int | None]]) -> None:
    with pytest.MonkeyPatch.context() as monkeypatch:
        frame = _frame(keys)
        session = open_session(_table(frame))
        _check_flags(keys, _flags(session))
        _same(exact_aggregates(session, QUERY)[1], _unpacked(frame, monkeypatch, "duckdb"))


def test_a_float_key_with_values_between_the_domains_integers() -> None:
    # 4400.4 and 4400.6 are outside the domain (code 0): units 0 and 1 have one key each in it
    # (4400, 4401) and are flagged for the other row, which no query keeps; unit 2 has two keys.
    frame = pd.DataFrame(
        {
            "pid": [0, 0, 1, 1, 2, 2, 3],
            "k": [4400.0, 4400.4, 4401.0, 4400.6, 4401.0, 4402.0, float("nan")],
            "x": [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0],
        }
    )
    session = open_session(_table(frame))
    flags = _flags(session)
    assert flags.get(2) is True and 3 not in flags
    plan, exact = exact_aggregates(session, QUERY)
    count = plan.measurements[0].result
    got = dict(zip(exact.keys, exact.columns[count].tolist(), strict=True))
    # unit 0's row of 4400, unit 1's of 4401, and unit 2's pair of least key hash (one row)
    assert got[(4400,)] == 1 and got[(4401,)] >= 1 and sum(got.values()) == 3


WIDE = range(-50_000, 50_000)
"""100,000 consecutive integers: codes of 17 bits, packed in a BIGINT (31 bits each half)."""


def test_a_wide_domain_is_packed_in_a_bigint_and_flags_every_unit_of_two_keys(
    engine_kind: EngineKind, monkeypatch: pytest.MonkeyPatch
) -> None:
    keys: list[list[int | None]] = [
        [-50_000, 49_999],  # codes 1 and 100,000: flagged
        [-50_000 + 2**15, -50_000],  # codes 32,769 and 1 differ in bit 15 only: flagged
        [-50_000 + 2**16, -50_000 + 2**16 + 2**15],  # differ in bit 15, both above 2**16
        [0, 0, None, 50_000],  # one key in the domain (4 rows: beyond the bound)
        [7, 7],  # within its bounds: not listed
        [50_000, -50_001, 2**40],  # keys outside the domain only
    ]
    frame = _frame(keys)
    session = open_session(_table(frame, WIDE), engine=engine_kind)
    plan = session.plan(QUERY, epsilon=1.0)
    assert plan.statements.over is not None
    over = session._engine.render(plan.statements.over, "t").upper()
    assert "BIT_OR" in over and str(2**31 - 1) in over  # the 31-bit halves
    flags = _flags(session)
    assert {u for u, flag in flags.items() if flag} >= {0, 1, 2}
    assert 3 in flags and 4 not in flags
    with monkeypatch.context() as patch:
        patch.setattr(statements, "_key_code", lambda key: (statements._key_value(key), None))
        unpacked = exact_aggregates(open_session(_table(frame, WIDE), engine=engine_kind), QUERY)
    _same(exact_aggregates(session, QUERY)[1], unpacked[1])
