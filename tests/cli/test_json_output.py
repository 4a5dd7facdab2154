"""`--json` prints structured, untruncated data; progress shows where no bar can be drawn."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from dpcurator.accounting import (
    BasicAccountant,
    GaussianEvent,
    event_from_dict,
    event_to_dict,
    make_accountant,
)
from dpcurator.cli import app
from dpcurator.errors import UnsupportedEventError

runner = CliRunner()
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "cps.toml"


def _json(args: list[str]) -> Any:
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def test_compose_notes_are_whole_in_json() -> None:
    out = _json(["compose", "gaussian:sigma=4", "--delta", "1e-6", "--json"])
    notes = {row["accountant"]: row["note"] for row in out}
    try:
        BasicAccountant().compose(GaussianEvent(4.0))
    except UnsupportedEventError as exc:
        expected = str(exc)
    assert notes["basic"] == expected
    assert len(expected) > 100 and "…" not in notes["basic"]
    for row in out:  # every accountant that refuses says why, in full; the others say nothing
        if row["epsilon"] is None:
            assert row["note"] and not row["note"].endswith("…")
        else:
            assert row["note"] == ""


def test_compose_table_still_shortens_notes() -> None:
    result = runner.invoke(app, ["compose", "gaussian:sigma=4", "--delta", "1e-6"])
    assert result.exit_code == 0, result.output
    assert "cannot account" in result.output


def test_ledger_json_events_are_exact_dictionaries(tmp_path: Path) -> None:
    declaration = tmp_path / "cps.toml"
    shutil.copy(EXAMPLE, declaration)
    query = ["query", "--table", str(declaration), "--json", "--epsilon", "0.1"]
    _json([*query, "SELECT COUNT(*) FROM cps"])
    out = _json(["ledger", str(declaration), "--json"])
    (entry,) = out["entries"]
    events = entry["events"]
    assert all(isinstance(event, dict) and "type" in event for event in events)
    assert [event_to_dict(event_from_dict(event)) for event in events] == events
    accountant = make_accountant("basic")
    for event in events:
        accountant.compose(event_from_dict(event))
    assert accountant.get_epsilon(0.0) == entry["charged"]["epsilon"]


def test_audit_reports_progress_in_plain_lines_when_not_a_terminal() -> None:
    result = runner.invoke(app, ["audit", "--quick", "--seed", "1", "--only", "laplace,geometric"])
    assert result.exit_code == 0, result.output
    lines = [line for line in result.stderr.splitlines() if line.startswith("audit: ")]
    assert [line.split(" s")[0].rsplit(",", 1)[0] for line in lines] == [
        "audit: 1/2 audited (laplace)",
        "audit: 2/2 audited (geometric)",
    ]
    assert "audit: " not in result.stdout
    quiet = runner.invoke(app, ["audit", "--quick", "--seed", "1", "--only", "laplace", "--json"])
    assert "audit: " not in quiet.output  # --json prints JSON only


def test_long_commands_report_steps_in_plain_lines_when_not_a_terminal(tmp_path: Path) -> None:
    simulate = [
        "local",
        "simulate",
        "--devices",
        "2000",
        "--domain-size",
        "20",
        "--sweep",
        "0.5,1",
        "--plot",
        str(tmp_path / "plot.png"),
    ]
    result = runner.invoke(app, simulate)
    assert result.exit_code == 0, result.output
    lines = [line for line in result.stderr.splitlines() if line.startswith("local simulate: ")]
    assert [line.split(" devices")[0] for line in lines] == [
        "local simulate: 1/2 2,000",
        "local simulate: 2/2 2,000",
    ]
    quiet = runner.invoke(app, [*simulate, "--json"])
    assert "local simulate: " not in quiet.stderr
    json.loads(quiet.stdout)

    census = Path(__file__).resolve().parents[2] / "examples" / "midwest_race.toml"
    result = runner.invoke(app, ["release", str(census), "--out", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    lines = [line for line in result.stderr.splitlines() if line.startswith("release: ")]
    assert len(lines) == 2 and lines[0].startswith("release: 1/2 counted, noised and post")
    assert lines[1].startswith(f"release: 2/2 written to {tmp_path / 'out'}")
