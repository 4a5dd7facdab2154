"""The units-beyond-bounds test reads an integer key as a packed code: the same aggregates.

With one group per unit, the statement that finds the units beyond their bounds tests whether
each unit's rows have more than one key. A key whose domain is a set of integers is read there
as a code (its offset in the domain, 0 for every row outside it or NULL), packed with its
complement so that one ``BIT_OR`` per unit tells whether the codes differ: no statement keeps
the rows outside the domain, so the bounded aggregates must be exactly those computed with the
key's own values (``MIN`` and ``MAX``, and ``COUNT`` for NULLs). Checked on both engines, on a
file (the session caches the units, and the scaled statement keeps the single pair of units not
flagged) and on a DataFrame, with a negative control: a code that merges two values of the
domain changes the aggregates.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from sqlglot import exp

from dpcurator.curator import Column, Table
from dpcurator.curator import _statements as statements
from tests.curator.conftest import EngineKind, exact_aggregates, open_session

QUERIES = [
    "SELECT g, COUNT(*), SUM(x), AVG(x) FROM t GROUP BY g",
    "SELECT g, COUNT(*), SUM(x) FROM t WHERE x > 30 GROUP BY g",
    "SELECT h, COUNT(*), SUM(x) FROM t GROUP BY h",
    "SELECT w, COUNT(*), SUM(x) FROM t GROUP BY w",
]


def _frame(seed: int = 3) -> pd.DataFrame:
    """Units of 1 to 4 rows: most of one key, some with two, NULL or out-of-domain keys."""
    rng = np.random.default_rng(seed)
    rows: list[tuple[int, float, float, int]] = []
    for unit in range(300):
        size = int(rng.integers(1, 5))
        own = int(rng.integers(0, 20))
        kind = unit % 6
        for i in range(size):
            g: float = own
            if kind == 1 and i == size - 1:
                g = (own + 1) % 20  # two keys of the domain
            elif kind == 2 and i == 0:
                g = np.nan  # NULL and a key
            elif kind == 3:
                g = 100 + i  # only keys outside the domain (several of them)
            elif kind == 4 and i == 0:
                g = -7  # a key outside the domain and one inside
            elif kind == 5 and size > 2:
                g = [1, 2, 3][i % 3]  # codes 2, 3, 4: no two share a bit pattern trivially
            rows.append((unit, g, float(rng.uniform(0, 100)), int(rng.integers(0, 3))))
    frame = pd.DataFrame(rows, columns=["u", "g", "x", "h"])
    frame["g"] = frame["g"].astype("Int64")
    frame["w"] = frame["g"] * 2000  # a domain of 40,000 keys: BIGINT codes (31 bits)
    return frame


def _table(source: Any) -> Table:
    return Table(
        "t",
        source,
        privacy_unit="u",
        max_rows_per_unit=3,
        max_groups_per_unit=1,
        columns=[
            Column("g", domain=list(range(20))),  # a range test (16 values or more)
            Column("h", domain=[0, 1, 2]),  # an IN list
            Column("w", domain=list(range(40_000))),  # too wide for 15 bits: packed in 31
            Column("x", lower=0, upper=100, nullable=False),
        ],
    )


def _aggregates(source: Any, engine: EngineKind) -> list[Any]:
    session = open_session(_table(source), engine=engine)
    out = []
    for query in QUERIES * 2:  # the second round reads the session's cached units
        _, exact = exact_aggregates(session, query)
        order = sorted(range(len(exact.keys)), key=lambda i: repr(exact.keys[i]))
        out.append(
            (
                [exact.keys[i] for i in order],
                {name: column[order].tolist() for name, column in exact.columns.items()},
            )
        )
    return out


@pytest.mark.parametrize("on_file", [True, False])
def test_codes_give_the_aggregates_of_the_keys_own_values(
    engine_kind: EngineKind, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, on_file: bool
) -> None:
    frame = _frame()
    path = tmp_path / "t.parquet"
    frame.to_parquet(path)
    source = str(path) if on_file else frame
    coded = _aggregates(source, engine_kind)
    monkeypatch.setattr(statements, "_key_code", lambda key: (statements._key_value(key), None))
    assert coded == _aggregates(source, engine_kind)


def test_a_code_that_merges_two_keys_changes_the_aggregates(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Negative control: the comparison above sees a code that merges two of the domain's keys."""
    frame = _frame()
    own = _aggregates(frame, "duckdb")
    original = statements._key_code

    def merging(key: Any) -> Any:
        value, bits = original(key)
        if bits is not None:  # every row of the domain gets code 1: the domain's values merged
            inside = value.find(exp.Case).args["ifs"][0]
            inside.set("true", exp.cast(exp.Literal.number(1), "INT"))
        return value, bits

    monkeypatch.setattr(statements, "_key_code", merging)
    assert own != _aggregates(frame, "duckdb")
