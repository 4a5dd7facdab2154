"""``dpcurator power`` and ``dpcurator transit`` on the bundled data."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from dpcurator.cli import app


def test_power_prints_json_and_tables() -> None:
    runner = CliRunner()
    result = runner.invoke(
        app,
        ["power", "--case", "ieee14", "--epsilon", "1", "--alpha", "1", "--seed", "0", "--json"],
    )
    assert result.exit_code == 0, result.output
    row = json.loads(result.output)
    assert row["case"] == "ieee14" and row["cbdp_feasible"] is True
    table = runner.invoke(app, ["power", "--case", "ieee30", "--seed", "1"])
    assert table.exit_code == 0 and "CBDP" in table.output and "CONFIDENTIAL" in table.output


def test_transit_prints_json() -> None:
    result = CliRunner().invoke(app, ["transit", "--months", "1", "--seed", "0", "--json"])
    assert result.exit_code == 0, result.output
    row = json.loads(result.output)
    assert row["cbdp_negative"] == 0 and row["cbdp_inconsistent"] == 0


def test_refusals_exit_with_status_2() -> None:
    runner = CliRunner()
    assert runner.invoke(app, ["power", "--case", "ieee9999"]).exit_code == 2
    assert runner.invoke(app, ["transit", "--months", "13"]).exit_code == 2
    assert runner.invoke(app, ["power", "--epsilon", "-1"]).exit_code == 2
