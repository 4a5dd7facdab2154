"""The steward's and the analyst's commands: ``dpcurator admin ...`` on the ledger store of a
running server, ``dpcurator query --server URL --key ...`` through it, ``dpcurator serve``
refusing a bad configuration."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from typer.testing import CliRunner

from dpcurator.cli import app
from dpcurator.cli._admin import parse_grant

from .conftest import LiveServer, write_config

runner = CliRunner()
COUNT = "SELECT region, COUNT(*) AS n FROM people GROUP BY region"


def _admin(config: str, *args: str) -> str:
    result = runner.invoke(app, ["admin", *args[:1], config, *args[1:]], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    return result.output


def test_the_steward_manages_analysts_keys_and_budgets(live: Callable[..., LiveServer]) -> None:
    server = live(analysts={"ann": {"people": 0.5}})
    config = server.curator.config.path
    _admin(config, "add-analyst", "cy", "--budget", "people=0.25", "--actor", "sam")
    key = _admin(config, "issue-key", "cy", "--actor", "sam").strip()
    assert key.startswith("dpk_")
    asked = runner.invoke(
        app, ["query", COUNT, "--server", server.url, "--key", key, "--epsilon", "0.25", "--json"]
    )
    assert asked.exit_code == 0, asked.output
    release = json.loads(asked.output)
    assert release["charged"]["epsilon"] == 0.25 and release["remaining"]["epsilon"] == 0.0
    over = runner.invoke(
        app,
        ["query", COUNT, "--server", server.url, "--epsilon", "0.25"],
        env={"DPCURATOR_KEY": key},
    )
    assert over.exit_code == 2 and "Refused" in over.output
    _admin(
        config,
        "raise-budget",
        "people",
        "--analyst",
        "cy",
        "--epsilon",
        "0.5",
        "--reason",
        "second study",
        "--actor",
        "sam",
    )
    again = runner.invoke(
        app, ["query", COUNT, "--server", server.url, "--key", key, "--epsilon", "0.25"]
    )
    assert again.exit_code == 0, again.output
    trail = json.loads(_admin(config, "audit", "--json"))
    assert trail[0]["actor"] == "sam" and "second study" in trail[0]["detail"]
    charges = json.loads(_admin(config, "ledger", "--analyst", "cy", "--json"))
    assert [c["analyst"] for c in charges] == ["cy", "cy"]
    _admin(config, "revoke-key", key.split("_")[1])
    revoked = runner.invoke(
        app, ["query", COUNT, "--server", server.url, "--key", key, "--epsilon", "0.1"]
    )
    assert revoked.exit_code == 2 and "revoked" in revoked.output
    lowered = runner.invoke(
        app,
        [
            "admin",
            "raise-budget",
            config,
            "people",
            "--analyst",
            "cy",
            "--epsilon",
            "0.1",
            "--reason",
            "no",
        ],
    )
    assert lowered.exit_code == 2 and "only" in lowered.output
    keys = json.loads(_admin(config, "keys", "--json"))
    assert all(key not in json.dumps(row) for row in keys) and keys[0]["revoked"]
    standing = json.loads(_admin(config, "analysts", "--json"))
    assert {row["analyst"] for row in standing} == {"ann", "cy"}


def test_explain_through_the_server_is_free(live: Callable[..., LiveServer]) -> None:
    server = live(analysts={"ann": {"people": 0.5}})
    result = runner.invoke(
        app,
        [
            "query",
            COUNT,
            "--server",
            server.url,
            "--key",
            server.key("ann"),
            "--explain",
            "--json",
            "--epsilon",
            "0.25",
        ],
    )
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["verdict"]["answered"]
    assert server.store.history() == []


def test_serve_refuses_a_bad_configuration(tmp_path: Path) -> None:
    config = write_config(tmp_path, analysts={"ann": {"people": 1.0}}, accountant="pld")
    result = runner.invoke(app, ["serve", str(config)])
    assert result.exit_code == 2 and "accountant" in result.output


def test_grants_are_parsed_or_refused() -> None:
    assert parse_grant("people=0.5")[1].epsilon == 0.5
    result = runner.invoke(app, ["admin", "add-analyst", "x.toml", "bob", "--budget", "people"])
    assert result.exit_code == 2
