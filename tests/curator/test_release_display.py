"""How a query release shows itself: text (CLI), a short repr, and HTML for notebooks."""

from __future__ import annotations

import html
import re

import numpy as np
import pandas as pd
import pytest

from dpcurator.accounting import Budget
from dpcurator.curator import Column, QueryRelease, Session, Table
from dpcurator.noise import InsecureSeededSource

BOUNDED = "for the bounded query (values clamped to their declared bounds"


@pytest.fixture(scope="module")
def release() -> QueryRelease:
    frame = pd.DataFrame(
        {"pid": np.arange(200), "g": ["a", "b"] * 100, "x": np.linspace(0.0, 4.0, 200)}
    )
    table = Table(
        "t",
        frame,
        privacy_unit="pid",
        max_rows_per_unit=1,
        columns=[Column("g", domain=["a", "b"]), Column("x", lower=0, upper=4)],
    )
    with Session(table, Budget(10.0), ledger=":memory:", source=InsecureSeededSource(0)) as s:
        return s.sql("SELECT g, COUNT(*) AS n, MEDIAN(x) AS med FROM t GROUP BY g", epsilon=1.0)


def test_text_labels_intervals_as_covering_the_bounded_query(release: QueryRelease) -> None:
    text = str(release)
    assert "± std, [95% interval]" in text
    assert BOUNDED in " ".join(text.split())
    assert "not for the raw data" in " ".join(text.split())


def test_a_median_shows_its_value_without_a_dash(release: QueryRelease) -> None:
    assert release.intervals["med"] == "none"
    text = str(release)
    assert "± -" not in text and "(no std)" in text
    for value in release.table["med"]:
        assert re.search(rf"│\s+{re.escape(f'{value:.4g}')}\s+│", text), value


def test_repr_is_short_and_names_the_charge(release: QueryRelease) -> None:
    text = repr(release)
    assert text.startswith("QueryRelease(query='SELECT g, COUNT(*) AS n, MEDIAN(x) AS med")
    assert "rows=2" in text and "values=('n', 'med')" in text
    assert "charged=Budget(epsilon=1.0, delta=0.0)" in text and "entry_id=1" in text
    assert "\n" not in text and len(text) < 300 and " at 0x" not in text


def test_html_is_a_table_with_error_bars_and_the_bounded_label(release: QueryRelease) -> None:
    page = release._repr_html_()
    assert page.count("<tr>") == 1 + len(release.table)
    assert "<th>n ± std, [95% interval]</th>" in page and "<th>med (no std)</th>" in page
    count, std = release.table["n"][0], release.table["n_std"][0]
    assert f"<td>{count:,} ± {std:.4g} [" in page
    assert html.escape(release.interval_note) in page
    assert "exponential mechanism" in page and "ledger entry 1" in page
    assert "± -" not in page


def test_html_escapes_the_query() -> None:
    frame = pd.DataFrame({"x": [1.0, 2.0]})
    table = Table("t", frame, columns=[Column("x", lower=0, upper=4)])
    with Session(table, Budget(1.0), ledger=":memory:", source=InsecureSeededSource(1)) as s:
        release = s.sql("SELECT COUNT(*) AS n FROM t WHERE x < 3", epsilon=0.5)
    page = release._repr_html_()
    assert "x &lt; 3" in page and "x < 3" not in page
