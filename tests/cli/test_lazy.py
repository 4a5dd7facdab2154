"""Lazy subcommands: ``dpcurator --help`` lists them without importing them, and they run."""

from __future__ import annotations

import re

import click
import pytest
import typer
from typer.testing import CliRunner

from dpcurator.accounting import ACCOUNTANT_NAMES
from dpcurator.cli import app
from dpcurator.cli._app import _ACCOUNTANT_HELP, _DEMO_OUT
from dpcurator.cli._demo import DEFAULT_OUT
from dpcurator.cli._lazy import LazyCommand, LazyGroup, lazy_group

runner = CliRunner()


def _group() -> LazyGroup:
    group = typer.main.get_command(app)
    assert isinstance(group, LazyGroup)
    return group


def _first_paragraph(text: str | None) -> str:
    return " ".join((text or "").split("\n\n")[0].split())


@pytest.mark.parametrize("name", sorted(_group().lazy_commands))
def test_the_listed_help_is_the_real_commands_own(name: str) -> None:
    spec = _group().lazy_commands[name]
    real = spec.load(name)
    assert real.name == name
    assert spec.help == _first_paragraph(real.help)


def test_help_lists_every_command() -> None:
    result = runner.invoke(app, ["--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0
    for name in ("query", "ledger", "release", "epsilon", "compose", "demo", "audit", "local"):
        assert re.search(rf"│ {name}\s", result.output), name
    assert "Audit every mechanism: claimed epsilon against the certified lower bound." in (
        result.output
    )


def test_lazy_commands_run_with_their_own_options() -> None:
    audit = runner.invoke(app, ["audit", "--help"], env={"COLUMNS": "200"})
    assert audit.exit_code == 0 and "--quick" in audit.output and "--only" in audit.output
    local = runner.invoke(app, ["local", "--help"], env={"COLUMNS": "200"})
    assert local.exit_code == 0 and "simulate" in local.output


def test_a_typo_of_a_lazy_command_gets_a_suggestion() -> None:
    result = runner.invoke(app, ["audti"])
    assert result.exit_code == 2
    assert "Did you mean 'audit'" in result.output


def test_a_lazy_group_loads_a_command_when_it_runs() -> None:
    demo = typer.Typer(cls=lazy_group({"leap": LazyCommand("calendar", "isleap", "Leap?")}))

    @demo.callback()
    def main() -> None:
        """A callback, so that typer makes a group."""

    group = typer.main.get_command(demo)
    assert isinstance(group, LazyGroup)
    assert type(group.commands["leap"]).__name__ == "_Placeholder"
    assert "Leap?" in runner.invoke(demo, ["--help"]).output
    context = click.Context(group)
    loaded = group.get_command(context, "leap")
    assert loaded is not None and loaded.name == "leap"
    assert type(loaded).__name__ != "_Placeholder" and group.commands["leap"] is loaded


def test_written_out_constants_match_their_sources() -> None:
    """--help imports neither the accountants (SciPy) nor the demo (NumPy): the copies agree."""
    expected = f"Accountant: one of {', '.join(ACCOUNTANT_NAMES)}, or 'all'."
    assert expected == _ACCOUNTANT_HELP
    assert _DEMO_OUT == DEFAULT_OUT
