"""``dpcurator demo-service``: the service end to end on the bundled CPS data."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from dpcurator.cli import app
from dpcurator.service import LedgerStore


@pytest.mark.slow
def test_the_demo_serves_two_analysts_refuses_one_and_writes_the_dashboard(
    tmp_path: Path,
) -> None:
    result = CliRunner().invoke(
        app, ["demo-service", "--out", str(tmp_path)], env={"COLUMNS": "120"}
    )
    assert result.exit_code == 0, result.output
    assert "alice" in result.output and "bob" in result.output
    assert "refused (BudgetExceededError)" in result.output
    shot = tmp_path / "dashboard.png"
    assert shot.read_bytes().startswith(b"\x89PNG") and shot.stat().st_size > 10_000
    with LedgerStore(str(tmp_path / "service.ledger.sqlite")) as books:
        assert len(books.history()) == 4 and len(books.refusals()) == 1
        assert books.standing(None, "cps")[1].epsilon <= 1.25


@pytest.mark.slow
def test_the_demo_in_json(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["demo-service", "--out", str(tmp_path), "--json"])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.output)
    assert summary["analysts"] == ["alice", "bob"] and summary["tables"] == ["cps"]
    answered = [a for a in summary["answers"] if "release" in a]
    refused = [a for a in summary["answers"] if "refused" in a]
    assert len(answered) == 4 and len(summary["ledger"]) == 4
    assert [r["type"] for r in (a["refused"] for a in refused)] == ["BudgetExceededError"]
    assert summary["screenshot"] == str(tmp_path / "dashboard.png")
