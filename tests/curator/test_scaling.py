"""Scaled bounding: a unit beyond its bounds counts ``min(n, k)`` rows and its sums are scaled.

For statements without quantiles or histogram bins, each (unit, group) pair of a unit beyond
its bounds contributes a weight ``m`` (``min(n, c)``, then at most ``k`` over the unit's kept
pairs, filled in the order of the key's MD5) and each of its exact integer sums ``s`` (of
fixed-point indices, or of non-NULL rows for ``COUNT(col)``) as ``(s m) DIV n``, rounding
toward zero. These tests check the exact values on both engines against an independent
computation (numpy's fixed-point encoding, Python's MD5 and integer arithmetic), that the two
ways a session runs the statement (rows split by a join with the units beyond their bounds, or
every unit's pairs scaled) agree, that removing any unit stays within the sensitivity, and an
empirical privacy audit of the scaled sum with a negative control.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlglot import exp

from dpcurator.curator import Column, Plan, Session, Table
from dpcurator.curator._engine import SOURCE
from dpcurator.curator._measure import Exact, compute, fetch
from dpcurator.curator._measures import ColumnCount, RowCount, UnitCount, ValueSum
from dpcurator.curator._statements import all_pairs, scale_part, without_heavy
from dpcurator.noise import InsecureSeededSource
from tests.curator.conftest import (
    STATES,
    EngineKind,
    exact_aggregates,
    open_session,
    session_engine,
)
from tests.curator.test_bounding import _check
from tests.curator.test_over_cache import _same
from tests.privacy_check import audit, threshold_events

QUERY = (
    "SELECT state, COUNT(*), COUNT(income), SUM(income), AVG(income), VARIANCE(income), "
    "COUNT(DISTINCT pid) FROM people GROUP BY state"
)
COLUMNS = [Column("state", domain=STATES), Column("income", lower=0, upper=1000)]


def _table(frame: pd.DataFrame, **bounds: Any) -> Table:
    return Table("people", frame, privacy_unit="pid", columns=COLUMNS, **bounds)


def _div(a: int, b: int) -> int:
    """``a DIV b`` rounding toward zero (both engines' integer division)."""
    q = abs(a) // b
    return q if a >= 0 else -q


def _expected(plan: Plan, rows: pd.DataFrame, m: int) -> dict[str, int]:
    """One (unit, group) pair's exact contribution to each measure for weight ``m``."""
    n = len(rows)
    income = rows["income"].dropna().to_numpy(dtype=np.float64)
    values = {v.column: v for v in plan.values}
    out: dict[str, int] = {}
    for meas in plan.measurements:
        measure = meas.measure
        if isinstance(measure, RowCount):
            out[meas.result] = m
        elif isinstance(measure, UnitCount):
            out[meas.result] = 1 if m > 0 else 0
        elif isinstance(measure, ColumnCount):
            out[meas.result] = _div(len(income) * m, n)
        elif isinstance(measure, ValueSum):
            encoding = values[measure.column].range.encoding(meas.bits, measure.encoding)
            total = int(encoding.indices(income).sum()) if len(income) else 0
            out[meas.result] = _div(total * m, n)
    return out


def _by_group(exact: Exact) -> dict[Any, dict[str, int]]:
    return {
        key[0]: {name: int(column[i]) for name, column in exact.columns.items()}
        for i, key in enumerate(exact.keys)
    }


def test_a_unit_beyond_its_bound_counts_k_rows_and_its_sums_are_scaled(
    engine_kind: EngineKind,
) -> None:
    # Unit 1: 7 rows in CA (2 NULL incomes, some beyond the bounds); bound k = 3.
    # Unit 2: 2 rows in NY, within its bounds: counted as they are.
    heavy = pd.DataFrame(
        {
            "pid": 1,
            "state": "CA",
            "income": [12.5, 250.25, None, 999.0, 1500.0, -40.0, None],
        }
    )
    light = pd.DataFrame({"pid": 2, "state": "NY", "income": [100.75, 333.0]})
    frame = pd.concat([heavy, light], ignore_index=True)
    session = open_session(_table(frame, max_rows_per_unit=3), engine=engine_kind)
    plan, exact = exact_aggregates(session, QUERY, delta=1e-6)
    got = _by_group(exact)
    assert got["CA"] == _expected(plan, heavy, 3)
    assert got["NY"] == _expected(plan, light, 2)
    count = plan.measurement_for(RowCount()).result
    assert got["CA"][count] == 3  # min(n, k)


def test_pairs_beyond_the_bound_fill_k_rows_in_key_hash_order(engine_kind: EngineKind) -> None:
    # One unit with 4, 2 and 1 rows in three states; k = 5, g = 3, c = 3: the pairs take
    # min(n, 3) = 3, 2, 1 rows in the order of MD5(state) until 5 are taken.
    sizes = {"CA": 4, "NY": 2, "TX": 1}
    frame = pd.DataFrame(
        {
            "pid": 7,
            "state": [s for s, n in sizes.items() for _ in range(n)],
            "income": np.linspace(10.0, 990.0, sum(sizes.values())).round(3),
        }
    )
    bounds = {"max_rows_per_unit": 5, "max_groups_per_unit": 3, "max_rows_per_group": 3}
    session = open_session(_table(frame, **bounds), engine=engine_kind)
    plan, exact = exact_aggregates(session, QUERY)
    got = _by_group(exact)
    taken = 0
    expected: dict[str, dict[str, int]] = {}
    for state in sorted(sizes, key=lambda s: hashlib.md5(s.encode()).hexdigest()):
        m = max(0, min(sizes[state], 3, 5 - taken))
        taken += min(sizes[state], 3)
        if m > 0:
            expected[state] = _expected(plan, frame[frame["state"] == state], m)
    assert got == expected
    assert sum(v[plan.measurement_for(RowCount()).result] for v in got.values()) == 5


def test_one_group_per_unit_keeps_the_pair_of_least_key_hash_in_every_way(
    engine_kind: EngineKind,
) -> None:
    # g = 1, k = c = 3. The units beyond their bounds carry a flag: several keys or not.
    # Unit 1: 4, 2 and 1 rows in CA, NY, TX (several keys): its pair of least MD5, 3 rows.
    # Unit 2: 5 rows in WA (one key, too many rows): that pair, 3 rows.
    # Unit 3: 2 rows in CA and one of NULL state (flagged; the NULL row is outside the
    # domain, so one pair is left): CA, 2 rows. Unit 4: 1 row in NY, within its bounds.
    from dpcurator.curator._statements import SEVERAL, with_over

    sizes = {1: {"CA": 4, "NY": 2, "TX": 1}, 2: {"WA": 5}, 3: {"CA": 2, None: 1}, 4: {"NY": 1}}
    frame = pd.DataFrame(
        [
            (pid, state)
            for pid, states in sizes.items()
            for state, n in states.items()
            for _ in range(n)
        ],
        columns=["pid", "state"],
    )
    frame["income"] = np.linspace(10.0, 990.0, len(frame)).round(3)
    bounds = {"max_rows_per_unit": 3, "max_groups_per_unit": 1}
    session = open_session(_table(frame, **bounds), engine=engine_kind)
    plan, exact = exact_aggregates(session, QUERY, delta=1e-6)
    first = min(("CA", "NY", "TX"), key=lambda s: hashlib.md5(s.encode()).hexdigest())
    chosen = {1: (first, min(sizes[1][first], 3)), 2: ("WA", 3), 3: ("CA", 2), 4: ("NY", 1)}
    expected: dict[str, dict[str, int]] = {}
    for pid, (state, m) in chosen.items():
        rows = frame[(frame["pid"] == pid) & (frame["state"] == state)]
        part = _expected(plan, rows, m)
        into = expected.setdefault(state, dict.fromkeys(part, 0))
        for name, value in part.items():
            into[name] += value
    assert _by_group(exact) == expected
    engine = session._engine
    assert plan.statements.over is not None
    units = engine.materialize(plan.statements.over, "people")
    flags = engine.run(exp.select("__u", SEVERAL).from_(units), "people")
    assert dict(zip(flags["__u"], flags[SEVERAL], strict=True)) == {1: True, 2: False, 3: True}
    for change in (
        all_pairs,
        lambda statement: with_over(statement, units),
        lambda statement: all_pairs(with_over(statement, units)),
    ):
        _same(exact, fetch(plan, _runner(session, change)))


def _runner(session: Session, change: Callable[[exp.Query], exp.Query]) -> Any:
    """Run a statement, changed by ``change``, on the session's engine (no cache)."""
    return lambda statement: session._engine.run(change(statement), "people")


def _frame(sizes: list[int], states: list[str], nulls: list[bool]) -> pd.DataFrame:
    pid = np.repeat(np.arange(len(sizes)), sizes)
    income = np.linspace(-100.0, 1200.0, pid.size)
    return pd.DataFrame(
        {
            "pid": pid,
            "state": states[: pid.size],
            "income": np.where(np.array(nulls[: pid.size]), np.nan, income),
        }
    )


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    sizes=st.lists(st.integers(1, 12), min_size=2, max_size=10),
    states=st.lists(st.sampled_from(STATES), min_size=120, max_size=120),
    nulls=st.lists(st.booleans(), min_size=120, max_size=120),
    k=st.integers(1, 6),
    g=st.integers(1, 4),
    c=st.integers(1, 6),
    victim=st.integers(0, 9),
)
def test_both_ways_agree_and_a_removed_unit_stays_within_the_sensitivity(  # noqa: PLR0917
    sizes: list[int], states: list[str], nulls: list[bool], k: int, g: int, c: int, victim: int
) -> None:
    frame = _frame(sizes, states, nulls)
    bounds = {"max_rows_per_unit": k, "max_groups_per_unit": g, "max_rows_per_group": min(c, k)}
    exacts = []
    for rows in (frame, frame[frame["pid"] != victim % len(sizes)]):
        session = open_session(_table(rows, **bounds))
        plan = session.plan(QUERY, epsilon=1.0, delta=1e-6)
        assert "__own" in {cte.alias for cte in plan.statements.main.find_all(exp.CTE)}
        joined = fetch(plan, _runner(session, lambda statement: statement))
        scaled = fetch(plan, _runner(session, all_pairs))
        _same(joined, scaled)
        exacts.append(joined)
    changes = _check(plan, exacts[0], exacts[1])
    assert changes  # every measurement checked


def test_without_units_beyond_the_bounds_the_rows_are_summed_as_they_are(
    people: pd.DataFrame,
) -> None:
    # 1 to 3 rows per unit, in at most 3 groups: no unit beyond its bounds.
    session = open_session(_table(people, max_rows_per_unit=3, max_groups_per_unit=3))
    plan = session.plan(QUERY, epsilon=1.0, delta=1e-6)
    exact = fetch(plan, _runner(session, lambda statement: statement))
    _same(exact, fetch(plan, _runner(session, without_heavy)))
    _same(exact, fetch(plan, _runner(session, all_pairs)))


def test_a_session_with_many_units_beyond_bounds_scales_every_pair(
    people: pd.DataFrame, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import dpcurator.curator._session as session_module

    heavy = pd.DataFrame({"pid": -1, "state": STATES * 5, "income": 2000.0})
    frame = pd.concat([people, heavy], ignore_index=True)
    path = tmp_path / "people.parquet"
    frame.to_parquet(path)
    inline = open_session(_table(frame, max_rows_per_unit=3))
    monkeypatch.setattr(session_module, "_PAIRS_FROM", 1)
    cached = open_session(_table(str(path), max_rows_per_unit=3))  # type: ignore[arg-type]
    ran: list[exp.Query] = []
    run = cached._engine.run

    def recorded(statement: exp.Query, table: str) -> Any:
        ran.append(statement)
        return run(statement, table)

    monkeypatch.setattr(cached._engine, "run", recorded)
    for query in (QUERY, "SELECT COUNT(*), SUM(income) FROM people WHERE income > 300"):
        _, from_cache = exact_aggregates(cached, query, delta=1e-6)
        _, recomputed = exact_aggregates(inline, query, delta=1e-6)
        _same(from_cache, recomputed)
    read = [{t.name for t in s.find_all(exp.Table)} for s in ran]
    assert any("__scaled" in names and "__over" not in names for names in read)


def test_a_pair_total_is_scaled_exactly_in_both_integer_widths(engine_kind: EngineKind) -> None:
    # (s m) DIV n for exact pair totals s on both sides of the BIGINT fast path's bound
    # (|s| <= (2**63 - 1) // 15): the same quotient as Python's, rounding toward zero.
    limit = 15
    bound = (2**63 - 1) // limit
    cases = [
        (n * v + r, m, n)
        for n in (1, 3, 7, 10**6, 10**12)
        for v in (0, 1, -1, 2**30, -(2**30), 2**40 + 3, -(2**40) - 5)
        for r in (0, n // 2, -(n // 3))
        for m in (0, 1, 3, 5)
    ]
    cases += [(s, 5, 10**6) for s in (bound, bound + 1, -bound, -bound - 1)]
    assert any(abs(s) > bound for s, _, _ in cases) and any(abs(s) <= bound for s, _, _ in cases)
    frame = pd.DataFrame(
        {
            "i": range(len(cases)),
            "s": [str(s) for s, _, _ in cases],
            "m": [m for _, m, _ in cases],
            "n": [n for _, _, n in cases],
        }
    )
    table = Table("pairs", frame, columns=[Column("i"), Column("s"), Column("m"), Column("n")])
    engine = session_engine(engine_kind)
    if engine is None:
        from dpcurator.curator import DuckDBEngine

        engine = DuckDBEngine()
    wide = "HUGEINT" if engine.dialect == "duckdb" else "DECIMAL(38, 0)"
    total = exp.cast(exp.column("s", quoted=True), exp.DataType.build(wide, dialect="duckdb"))
    scaled = scale_part(total, exp.column("m", quoted=True), exp.column("n", quoted=True), limit)
    as_text = exp.cast(scaled, exp.DataType.build("VARCHAR"))
    statement = exp.select(exp.column("i", quoted=True), exp.alias_(as_text, "q")).from_(SOURCE)
    try:
        engine.register(table)
        got = engine.run(statement, "pairs")
    finally:
        engine.close()
    by_row = {int(i): int(q) for i, q in zip(got["i"], got["q"], strict=True)}
    assert by_row == {i: _div(s * m, n) for i, (s, m, n) in enumerate(cases)}


# -- empirical privacy of the scaled sum ------------------------------------------------------
N = 3000
ALPHA = 1e-3
SUM_QUERY = "SELECT state, COUNT(*) AS n, SUM(income) AS total FROM people GROUP BY state"


def _sum_neighbours(people: pd.DataFrame, bound: int) -> tuple[Plan, Exact, Exact]:
    # The differing unit: 1,000 rows in CA, beyond the bound of 3, with varied values whose
    # scaled sum is near the sensitivity (most are clamped to the upper bound).
    income = np.concatenate([np.full(900, 5000.0), np.linspace(0.0, 1000.0, 100)])
    heavy = pd.DataFrame({"pid": -1, "state": "CA", "income": income})
    with_unit = pd.concat([people, heavy], ignore_index=True)
    sessions = [open_session(_table(f, max_rows_per_unit=bound)) for f in (with_unit, people)]
    plan, exact = exact_aggregates(sessions[0], SUM_QUERY)
    _, exact_other = exact_aggregates(sessions[1], SUM_QUERY)
    return plan, exact, exact_other


def _totals(plan: Plan, exact: Exact, seed: int, n: int) -> np.ndarray:
    source = InsecureSeededSource(seed)
    out = np.empty(n)
    for i in range(n):
        table, _, _ = compute(plan, exact, source=source, confidence=0.95)
        out[i] = table.loc[table["state"] == "CA", "total"].iloc[0]
    return out


@pytest.mark.statistical
@pytest.mark.slow
def test_scaled_sum_privacy_on_neighbouring_tables(people: pd.DataFrame) -> None:
    plan, exact, exact_other = _sum_neighbours(people, bound=3)
    totals = _totals(plan, exact, 1, N), _totals(plan, exact_other, 2, N)
    truth = float(np.median(totals[1]))
    spread = float(np.std(totals[1]))
    events = threshold_events(truth + d * spread for d in np.arange(-1.0, 3.01, 0.25))
    result = audit(*totals, events, alpha=ALPHA)
    # The sum measurement has epsilon 1/2 (COUNT and SUM split epsilon 1).
    assert result.epsilon_lower_bound <= 0.5, result
    assert result.epsilon_lower_bound > 0.15, result  # the audit has power
    # Negative control: the unit not bounded, noise for a bound of 3 rows.
    _, loose, _ = _sum_neighbours(people, bound=1000)
    broken = _totals(plan, loose, 3, 500), totals[1][:500]
    assert audit(*broken, events, alpha=ALPHA).epsilon_lower_bound > 0.5


def test_a_division_by_zero_in_the_filter_selects_no_row(
    people: pd.DataFrame, engine_kind: EngineKind
) -> None:
    # DuckDB divides a float by zero into an infinity, which `> 3` would select; the filter's
    # TRY semantics (and Spark) make it NULL: the rows with age 40 are not selected.
    frame = people.assign(age=np.where(people.index % 5 == 0, 40, people["age"]))
    columns = [*COLUMNS, Column("age", lower=0, upper=100)]
    table = Table("people", frame, privacy_unit="pid", max_rows_per_unit=3, columns=columns)
    session = open_session(table, engine=engine_kind)
    query = "SELECT COUNT(*) FROM people WHERE income / (age - 40) > 3"
    plan, exact = exact_aggregates(session, query)
    selected = frame[(frame["age"] != 40) & (frame["income"] / (frame["age"] - 40) > 3)]
    assert int(exact.columns[plan.measurement_for(RowCount()).result][0]) == len(selected)
