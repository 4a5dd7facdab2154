"""`--json` prints structured, untruncated data; progress shows where no bar can be drawn."""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from typer.testing import CliRunner

from dpcurator.accounting import (
    BasicAccountant,
    GaussianEvent,
    event_from_dict,
    event_to_dict,
    make_accountant,
)
from dpcurator.cli import app
from dpcurator.cli._demo import demo_summary, run_demo
from dpcurator.cli._tour import run_tour
from dpcurator.errors import UnsupportedEventError
from tests.service.conftest import write_config

runner = CliRunner()
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
EXAMPLE = EXAMPLES / "cps.toml"


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


def test_query_json_budgets_are_short_decimals(tmp_path: Path) -> None:
    declaration = tmp_path / "cps.toml"
    shutil.copy(EXAMPLE, declaration)
    query = ["query", "--table", str(declaration), "--json"]
    out: dict[str, Any] = {}
    for _ in range(3):  # 0.1 + 0.1 + 0.1 is 0.30000000000000004 in floats
        out = _json([*query, "--epsilon", "0.1", "SELECT COUNT(*) FROM cps"])
    assert out["spent"]["epsilon"] == 0.3
    assert out["charged"] == {"epsilon": 0.1, "delta": 0.0}
    assert out["remaining"]["epsilon"] == 1.7  # the declared budget is 2.0
    out = _json([*query, "--epsilon", "0.214", "SELECT COUNT(*) FROM cps"])
    assert out["remaining"]["epsilon"] == 1.486
    assert out["budget"] == {"epsilon": 2.0, "delta": out["budget"]["delta"]}
    assert sum(row["epsilon"] for row in out["split"]) == 0.214
    for text in (json.dumps(out["spent"]), json.dumps(out["remaining"])):
        assert len(text) < 60, text  # no 17-digit floats
    ledger = _json(["ledger", str(declaration), "--json"])
    assert ledger["remaining"]["epsilon"] == 1.486
    assert ledger["entries"][-1]["spent"]["epsilon"] == 0.514


def test_release_json_is_one_structured_object(tmp_path: Path) -> None:
    out = tmp_path / "release"
    args = [
        "release", str(EXAMPLES / "census.toml"), "--out", str(out), "--seed", "1",
        "--method", "exact", "--epsilon", "0.5", "--json",
    ]  # fmt: skip
    summary = _json(args)  # stdout is JSON only: no tables, no progress lines
    assert summary["name"] == "census"
    assert summary["epsilon"] == 0.5 and summary["rho"] is None
    assert summary["methods"] == ["exact"]
    assert summary["simulation"] is True and summary["seed"] == 1
    assert [row["level"] for row in summary["levels"]] == [
        "total", "region", "division", "state", "county",
    ]  # fmt: skip
    assert all(row["nodes"] >= 1 for row in summary["levels"])
    assert summary["confidential"] == ["measured"]
    assert [row["level"] for row in summary["measured"]["exact"]] == [
        row["level"] for row in summary["levels"]
    ]
    assert all(Path(path).is_file() for path in summary["written"])
    assert any(path.endswith("census.csv") for path in summary["written"])


def test_release_json_refusal_is_json(tmp_path: Path) -> None:
    args = ["release", str(EXAMPLES / "census.toml"), "--out", str(tmp_path), "--json"]
    result = runner.invoke(app, [*args, "--format", "xlsx"])
    assert result.exit_code == 2
    error = json.loads(result.output)
    assert "csv or parquet" in error["error"] and error["type"] == "InvalidParameterError"


def _admin_json(config: Path, command: str, *args: str) -> Any:
    return _json(["admin", command, str(config), *args, "--actor", "sam", "--json"])


def test_admin_changes_print_what_changed_as_json(tmp_path: Path) -> None:
    config = write_config(tmp_path, analysts={})
    added = _admin_json(config, "add-analyst", "cy", "--budget", "people=0.25:1e-6")
    assert added == {
        "action": "add-analyst",
        "analyst": "cy",
        "budgets": [{"table": "people", "epsilon": 0.25, "delta": 1e-6}],
        "actor": "sam",
    }
    key = _admin_json(config, "issue-key", "cy")
    assert key["action"] == "issue-key" and key["owner"] == "cy"
    assert key["key"].startswith(f"dpk_{key['id']}_")  # the whole key, shown once
    raised = _admin_json(
        config, "raise-budget", "people", "--analyst", "cy", "--epsilon", "0.7",
        "--reason", "a second study",
    )  # fmt: skip
    assert raised["previous"] == {"epsilon": 0.25, "delta": 1e-6}
    assert raised["budget"] == {"epsilon": 0.7, "delta": 1e-6}
    assert raised["reason"] == "a second study" and raised["analyst"] == "cy"
    revoked = _admin_json(config, "revoke-key", key["id"])
    assert revoked == {"action": "revoke-key", "id": key["id"], "actor": "sam"}
    _admin_json(config, "issue-key", "cy")
    removed = _admin_json(config, "remove-analyst", "cy")
    assert removed["keys_revoked"] == 1 and removed["analyst"] == "cy"
    (standing,) = _json(["admin", "analysts", str(config), "--json"])
    assert standing["budget"] == {"epsilon": 0.7, "delta": 1e-6}


def test_admin_refusals_are_json(tmp_path: Path) -> None:
    config = write_config(tmp_path, analysts={})
    args = ["admin", "add-analyst", str(config), "cy", "--budget", "people", "--json"]
    result = runner.invoke(app, args)
    assert result.exit_code == 2
    error = json.loads(result.output)
    assert "TABLE=EPSILON" in error["error"] and error["type"] == "InvalidParameterError"
    both = runner.invoke(app, ["admin", "issue-key", str(config), "cy", "--steward", "--json"])
    assert both.exit_code == 2 and json.loads(both.output)["type"] == "InvalidParameterError"


def test_tour_json_has_every_number_whole(capsys: pytest.CaptureFixture[str]) -> None:
    returned = run_tour(Console(file=io.StringIO()), as_json=True)
    printed = json.loads(capsys.readouterr().out)  # stdout holds the JSON only
    assert printed == json.loads(json.dumps(returned))
    assert set(printed) == {
        "randomized_response",
        "laplace",
        "accounting",
        "budgets",
        "calibration",
    }
    assert printed["randomized_response"]["respondents"] == 10_000
    assert [row["epsilon"] for row in printed["laplace"]] == [0.1, 0.5, 1.0]
    rows = printed["accounting"]["laplace_queries"]["rows"]
    assert [row["k"] for row in rows] == [10, 100, 1000]
    assert rows[0]["epsilon"]["basic"] == pytest.approx(1.0)
    queries = printed["budgets"]["queries"]
    assert [q["answered"] for q in queries] == [True, True, True, False]
    assert "…" not in queries[-1]["refusal"] and len(queries[-1]["refusal"]) > 40
    assert printed["calibration"]["sigma_analytic"] < printed["calibration"]["sigma_classic"]


@pytest.mark.slow
def test_demo_json_has_every_release_and_refusal_whole(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    result = run_demo(Console(), tmp_path / "demo", quick=True, as_json=True)
    summary = json.loads(capsys.readouterr().out)  # nothing but the JSON on stdout
    assert summary == json.loads(json.dumps(demo_summary(result), allow_nan=False))
    assert summary["answered"] == len(summary["releases"]) == result.answered >= 6
    first = summary["releases"][0]
    assert first["question"] == "Tax units by state"
    assert first["release"]["query"].startswith("SELECT state")
    assert first["release"]["charged"] == {"epsilon": 0.3, "delta": 0.0}
    assert len(summary["refusals"]) == 2 and all("…" not in r for r in summary["refusals"])
    assert summary["budget"] == {"epsilon": 2.0, "delta": 1e-6}
    spent = summary["spent"]["epsilon"]
    assert spent + summary["remaining"]["epsilon"] == pytest.approx(2.0)
    assert len(str(spent)) <= 6  # a short decimal, not 1.9000000000000001
    assert [point["epsilon"] for point in summary["simulation"]] == [0.1, 1.0]
    assert Path(summary["ledger"]).is_file()


def test_tour_json_from_the_command_line() -> None:
    result = runner.invoke(app, ["tour", "--json"])
    assert result.exit_code == 0, result.output
    payload = json.loads(result.output)
    assert payload["randomized_response"]["respondents"] > 0
