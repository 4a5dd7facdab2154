"""``dpcurator audit`` (src/dpcurator/cli/_audit.py), through typer's CliRunner.

The integrator registers the command in cli/_app.py with
``app.command(name="audit")(audit_command)``; these tests mount it on a root app the same way.
Runs are seeded (``--seed``) so that the numbers are reproducible.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import typer
from typer.testing import CliRunner

from dpcurator.audit import AUDIT_CASES, AuditCase, register_audit_case
from dpcurator.cli._audit import audit
from dpcurator.mechanisms import randomized_response
from dpcurator.noise import RandomSource

runner = CliRunner()
root = typer.Typer()
root.command(name="audit")(audit)


@root.command()
def _other() -> None:  # a second command, as in the real app (keeps "audit" a subcommand)
    """Placeholder."""


def _run(args: list[str], code: int = 0) -> Any:
    result = runner.invoke(root, ["audit", *args])
    assert result.exit_code == code, result.output
    return result


@pytest.mark.statistical
def test_quick_json_covers_every_mechanism(tmp_path: Path) -> None:
    plot = tmp_path / "audit.png"
    result = _run(["--quick", "--json", "--seed", "7", "--plot", str(plot)])
    payload = json.loads(result.output)
    assert [r["name"] for r in payload["results"]] == list(AUDIT_CASES)
    assert payload["refuted"] == [] and payload["quick"] and payload["seeded"]
    for record in payload["results"]:
        assert 0.4 < record["epsilon_lower_bound"] <= record["claimed_epsilon"]
        assert record["consistent"] and record["confidence"] > 0.99  # Bonferroni share
    assert payload["plot"] == str(plot) and plot.stat().st_size > 10_000
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_table_output_and_selection() -> None:
    result = _run(["--quick", "--seed", "1", "--only", "laplace, randomized_response"])
    assert "claimed vs certified" in result.output
    assert "laplace" in result.output and "randomized_response" in result.output
    assert "local_olh" not in result.output
    assert "family-wise confidence 0.95" in result.output.replace("\n", " ")


def test_seeded_runs_are_reproducible() -> None:
    first = json.loads(_run(["--quick", "--json", "--seed", "3", "--only", "geometric"]).output)
    again = json.loads(_run(["--quick", "--json", "--seed", "3", "--only", "geometric"]).output)
    bound = first["results"][0]["epsilon_lower_bound"]
    assert bound == again["results"][0]["epsilon_lower_bound"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--only", "nonsense"], "only must list registered mechanisms"),
        (["--only", ","], "only must list registered mechanisms"),
        (["--seed", "-1"], "seed must be >= 0"),
        (["--confidence", "1.5", "--only", "laplace"], "confidence must be in (0, 1)"),
    ],
)
def test_bad_options_exit_2(args: list[str], message: str) -> None:
    result = _run(["--quick", *args], code=2)
    assert message in result.output.replace("\n", " ")


def _broken(bit: int, size: int, source: RandomSource) -> Any:
    return randomized_response(np.full(size, bit), p_truth="9/10", source=source).value


@pytest.fixture
def broken_case() -> Iterator[str]:
    register_audit_case(AuditCase("broken_cli_rr", "RR at ln 9 claimed 1", 1.0, 0.0, _broken, 0, 1))
    yield "broken_cli_rr"
    AUDIT_CASES.pop("broken_cli_rr")


@pytest.mark.statistical
def test_refuted_claim_exits_1(broken_case: str, tmp_path: Path) -> None:
    result = _run(["--quick", "--seed", "2", "--only", f"laplace,{broken_case}"], code=1)
    assert "REFUTED" in result.output and "claims refuted" in result.output
    payload = json.loads(
        _run(["--quick", "--json", "--seed", "2", "--only", broken_case], code=1).output
    )
    assert payload["refuted"] == [broken_case]
    assert payload["results"][0]["epsilon_lower_bound"] > 1.5
    plot = tmp_path / "refuted.png"
    _run(["--quick", "--seed", "2", "--only", broken_case, "--plot", str(plot)], code=1)
    assert plot.exists()
