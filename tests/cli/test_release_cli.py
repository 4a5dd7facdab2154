"""``dpcurator release`` (src/dpcurator/cli/_release.py), through typer's CliRunner.

The command is mounted on a local app here; the package's app registers it as ``release``.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
import typer
from typer.testing import CliRunner

from dpcurator.cli._release import release

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

app = typer.Typer()
app.command()(release)
runner = CliRunner()


def test_census_release_writes_tables_and_reports(tmp_path: Path) -> None:
    out = tmp_path / "release"
    result = runner.invoke(
        app,
        [str(EXAMPLES / "census.toml"), "--out", str(out), "--seed", "1", "--method", "exact",
         "--method", "least_squares", "--format", "parquet"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "insecure seeded noise" in result.output
    assert "CONFIDENTIAL" in result.output
    for level in ("total", "region", "division", "state", "county"):
        assert level in result.output
    table = pd.read_parquet(out / "census.parquet")
    assert table.columns.tolist()[-2:] == ["exact", "least_squares"]
    assert int(table["exact"].iloc[0]) == 328_239_523
    assert "CONFIDENTIAL" not in (out / "census_report.md").read_text(encoding="utf-8")
    assert "CONFIDENTIAL" in (out / "census_steward_report.md").read_text(encoding="utf-8")


def test_epsilon_override(tmp_path: Path) -> None:
    result = runner.invoke(
        app,
        [str(EXAMPLES / "census.toml"), "--out", str(tmp_path), "--epsilon", "0.5",
         "--method", "exact"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "ε = 0.5 (pure DP)" in result.output
    assert (tmp_path / "census.csv").is_file()


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--format", "xlsx"], "must be csv or parquet"),
        (["--rho", "0.5"], "rho does not apply to geometric noise"),
        (["--method", "magic"], "methods must be among"),
    ],
)
def test_refusals_exit_with_status_2(tmp_path: Path, options: list[str], message: str) -> None:
    result = runner.invoke(app, [str(EXAMPLES / "census.toml"), "--out", str(tmp_path), *options])
    assert result.exit_code == 2
    assert message in " ".join(result.output.split())


def test_missing_declaration(tmp_path: Path) -> None:
    result = runner.invoke(app, [str(tmp_path / "none.toml")])
    assert result.exit_code == 2
    assert "does not exist" in " ".join(result.output.split())
