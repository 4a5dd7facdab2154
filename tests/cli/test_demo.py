"""``dpcurator demo`` (src/dpcurator/cli/_demo.py): the demo, its declaration, its plot."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from dpcurator.accounting import Budget
from dpcurator.cli import app
from dpcurator.cli._demo import (
    BUDGET,
    STATES,
    ErrorPoint,
    cps_declaration,
    declaration_toml,
    simulate_errors,
    write_plot,
)
from dpcurator.curator import Column, Ledger, Session, Table, read_declaration
from dpcurator.datasets import dataset_path
from dpcurator.noise import InsecureSeededSource

runner = CliRunner()

PNG = b"\x89PNG\r\n\x1a\n"


@pytest.mark.slow
def test_quick_demo_answers_refuses_and_plots(tmp_path: Path) -> None:
    out = tmp_path / "demo"
    result = runner.invoke(app, ["demo", "--quick", "--out", str(out)], env={"COLUMNS": "250"})
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())  # the console width may wrap lines anywhere
    assert "Traceback" not in text
    # The questions, each with error bars and the budget left.
    for needle in ("Tax units by state", "MEDIAN", "HISTOGRAM", "WHERE age_head >= 65", "builder"):
        assert needle in text, needle
    assert text.count("±") >= 6 and "left ε=" in text
    # The refusals: not an aggregate, then over budget, and nothing spent by either.
    assert "refused (not an aggregate)" in text
    assert "refused:" in text and "nothing was spent" in text
    # The plot of the simulation, and the ledger.
    plot = out / "error_vs_epsilon.png"
    assert plot.read_bytes()[:8] == PNG and plot.stat().st_size > 10_000
    assert "simulation" in text.lower()
    with Ledger.open(out / "cps.ledger.sqlite") as books:
        entries = books.entries()
        assert books.budget == BUDGET
        assert books.budget.covers(books.spent)
        # Six questions, then repeats at epsilon 0.2 until fewer than 0.2 was left.
        assert len(entries) >= 7
        assert books.remaining.epsilon < 0.2 + 1e-9
        assert sum(e.charged.epsilon for e in entries) == pytest.approx(books.spent.epsilon)
    squashed = "".join(result.output.split())  # long paths wrap mid-word
    assert f"dpcuratorledger{out / 'cps.ledger.sqlite'}" in squashed
    # The TOML it wrote declares the same table, next to its database.
    declaration = read_declaration(out / "cps.toml")
    assert declaration.budget == BUDGET
    assert declaration.table.columns == cps_declaration(out / "cps.duckdb").columns
    assert declaration.ledger_path == str(out / "cps.ledger.sqlite")


def test_declaration_toml_reads_back_the_same_table(tmp_path: Path) -> None:
    cps = cps_declaration(dataset_path("cps"), source_table=None)
    path = tmp_path / "cps.toml"
    path.write_text(declaration_toml(cps, source=str(dataset_path("cps")), budget=Budget(1.5)))
    again = read_declaration(path)
    assert again.table.columns == cps.columns
    assert again.table.privacy_unit == "household_id"
    assert again.table.max_rows_per_unit == cps.max_rows_per_unit == 4
    assert again.table.max_groups_per_unit == cps.max_groups_per_unit
    assert again.budget == Budget(1.5)
    assert len(STATES) == 51 and len(set(STATES)) == 51


def test_declaration_toml_quotes_names_and_values(tmp_path: Path) -> None:
    odd = Table(
        "t",
        pd.DataFrame({"a b": ['x "y"'], "n": [1.5]}),
        columns=[
            Column("a b", domain=['x "y"', "z\\w", "é"]),
            Column("n", lower=-0.25, upper=1e6, bins=[-0.25, 0.5, 1e6], nullable=False),
        ],
    )
    path = tmp_path / "odd.toml"
    path.write_text(declaration_toml(odd, source="odd.csv", comment="line one\nline two"))
    assert path.read_text().startswith("# line one\n# line two\n[table]")
    assert read_declaration(path).table.columns == odd.columns
    with pytest.raises(TypeError, match="TOML"):
        declaration_toml(
            Table("u", pd.DataFrame({"k": [1]}), columns=[Column("k", domain=[1, 2])]),
            source=object(),  # type: ignore[arg-type]
        )


def _small_cps(rows_per_state: int) -> Table:
    """A synthetic table with the demo's columns: ``rows_per_state`` people in each state."""
    size = rows_per_state * len(STATES)
    wages = (np.arange(size) * 7919 % 100_000).astype(np.float64)  # fixture data, no noise
    frame = pd.DataFrame(
        {
            "household_id": np.arange(size),
            "state": np.repeat(STATES, rows_per_state),
            "wages": wages,
        }
    )
    return Table(
        "cps",
        frame,
        privacy_unit="household_id",
        max_rows_per_unit=1,
        columns=[
            Column("state", domain=STATES),
            Column("wages", lower=0, upper=100_000, nullable=False),
        ],
    )


@pytest.mark.statistical
def test_simulated_errors_match_the_prediction() -> None:
    """Observed MAE of the counts against the Laplace prediction (std / sqrt 2).

    A count's noise is two-sided geometric with scale b = 1/eps_i (sensitivity 1): E|Z| =
    2a/(1 - a^2) and std = sqrt(2a)/(1 - a), a = exp(-1/b), so E|Z|/std = sqrt(2a)/(1 + a),
    1/sqrt(2) to within 3.1 % for b = 2 (a = 0.607: 0.686 against 0.707). Over 51 states x 20
    releases = 1,020 independent draws the observed MAE has a relative standard error of
    sd|Z| / (E|Z| sqrt(1020)) ~ 1/31.9 = 3.1 % (Laplace: sd|Z| = E|Z| = b); the tolerance is
    4 standard errors plus the 3.1 % shape difference: 16 %. Negative control: a prediction
    off by 1.5x fails it.
    """
    table = _small_cps(60)
    with Session(
        table, Budget.unlimited(), ledger=":memory:", source=InsecureSeededSource(11)
    ) as s:
        reference = s.sql(
            "SELECT state, COUNT(*) AS tax_units, AVG(wages) AS mean_wages FROM cps GROUP BY state",
            epsilon=1e5,
        )
        assert reference.table["tax_units"].tolist() == [60] * 51
        (point,) = simulate_errors(s, [1.0], 20, reference)
    assert point.repeats == 20 and point.epsilon == 1.0
    # Two measurements (count, centred sum): each gets epsilon 0.5, so b = 2.
    a = math.exp(-1 / 2)
    assert point.count_predicted == pytest.approx(math.sqrt(2 * a) / (1 - a) / math.sqrt(2))
    ratio = point.count_mae / point.count_predicted
    assert abs(ratio - 1.0) < 0.16
    assert abs(point.count_mae / (1.5 * point.count_predicted) - 1.0) > 0.16  # negative control
    # The mean's prediction (normal shape) is in the same range as the observed error.
    assert 0.6 < point.mean_mae / point.mean_predicted < 1.4


def test_write_plot_writes_a_png(tmp_path: Path) -> None:
    points = [ErrorPoint(e, 3, 4 / e, 4 / e, 300 / e, 320 / e) for e in (0.1, 0.5, 1.0)]
    path = tmp_path / "figs" / "error.png"
    assert write_plot(path, points, count_bias=20.0, mean_bias=900.0)
    assert path.read_bytes()[:8] == PNG


def test_write_plot_without_matplotlib(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib -> ImportError
    path = tmp_path / "error.png"
    assert (
        write_plot(path, [ErrorPoint(1.0, 1, 1.0, 1.0, 1.0, 1.0)], count_bias=0, mean_bias=0)
        is False
    )
    assert not path.exists()


def test_tour_is_still_available() -> None:
    result = runner.invoke(app, ["tour"])
    assert result.exit_code == 0, result.output
    assert "Randomized response" in result.output
