"""Errors on the command line say "Did you mean ...?" for a misspelt name (cli/_suggest.py)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from dpcurator.cli import app

runner = CliRunner()
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def cps(tmp_path: Path) -> Path:
    declaration = tmp_path / "cps.toml"
    shutil.copy(ROOT / "examples" / "cps.toml", declaration)
    return declaration


def _error(args: list[str]) -> str:
    result = runner.invoke(app, args, terminal_width=1000)
    assert result.exit_code == 2, result.output
    return " ".join(result.output.split())


@pytest.mark.parametrize(
    ("args", "meant"),
    [
        (["epsilon", "--noise-multiplier", "1", "--accountant", "pdl"], "pld"),
        (["compose", "gaussian:sigma=2", "--accountant", "zdcp"], "zcdp"),
        (["noise", "--epsilon", "1", "--mechanism", "gausian"], "gaussian"),
        (["local", "simulate", "--protocol", "oeu", "--no-plot"], "oue"),
        (["audit", "--only", "lapalce", "--quick"], "laplace"),
        (["release", str(ROOT / "examples" / "census.toml"), "--method", "exat"], "exact"),
    ],
)
def test_misspelt_options_get_a_suggestion(args: list[str], meant: str) -> None:
    assert f"Did you mean '{meant}'?" in _error(args)


def test_misspelt_columns_and_tables_get_a_suggestion(cps: Path) -> None:
    query = ["query", "--table", str(cps), "--explain", "--epsilon", "0.1"]
    assert "Did you mean 'wages'?" in _error([*query, "SELECT AVG(wage) FROM cps"])
    assert "Did you mean 'cps'?" in _error([*query, "SELECT COUNT(*) FROM cpss"])
    out = json.loads(_error([*query, "--json", "SELECT AVG(wage) FROM cps"]))
    assert out["error"].endswith("Did you mean 'wages'?")


def test_no_suggestion_when_nothing_is_close(cps: Path) -> None:
    assert "Did you mean" not in _error(
        ["epsilon", "--noise-multiplier", "1", "--accountant", "zzz"]
    )
    query = ["query", "--table", str(cps), "--explain", "--epsilon", "0.1"]
    assert "Did you mean" not in _error([*query, "SELECT AVG(xyzzy) FROM cps"])
