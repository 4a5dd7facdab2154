"""Subcommands imported only when they run, so that ``dpcurator --help`` starts fast.

A subcommand whose module imports heavy packages (NumPy, SciPy, the audits) is declared as a
:class:`LazyCommand`: its module, the command (a function or a :class:`typer.Typer`) and its
one-line help. ``dpcurator --help`` lists it from that line without importing anything;
``dpcurator NAME ...`` (``--help`` included) imports the module and runs the real command.
``tests/cli/test_lazy.py`` checks that each line is the real command's own.

Examples
--------
>>> import typer
>>> from typer.testing import CliRunner
>>> app = typer.Typer(cls=lazy_group({"lazy": LazyCommand("calendar", "isleap", "Leap year?")}))
>>> @app.callback()
... def main() -> None:
...     '''A group of commands (with a callback, typer makes a group).'''
>>> "Leap year?" in CliRunner().invoke(app, ["--help"]).output
True
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import click
import typer
from typer.core import TyperGroup

__all__ = ["LazyCommand", "LazyGroup", "lazy_group"]


@dataclass(frozen=True)
class LazyCommand:
    """A subcommand declared without importing its module.

    Parameters
    ----------
    module : str
        The module that defines it (``"dpcurator.cli._audit"``).
    attribute : str
        The command in that module: a typer command function or a :class:`typer.Typer` group.
    help : str
        Its one-line help, as ``dpcurator --help`` lists it (the command's own first line).
    """

    module: str
    attribute: str
    help: str

    def load(self, name: str) -> click.Command:
        """Import the module and build the real click command named ``name``."""
        target = getattr(importlib.import_module(self.module), self.attribute)
        if isinstance(target, typer.Typer):
            command: click.Command = typer.main.get_group(target)
        else:
            single = typer.Typer()
            single.command(name=name)(target)
            command = typer.main.get_command(single)
        command.name = name
        return command


class _Placeholder(click.Command):
    """What ``dpcurator --help`` lists for a lazy command: its name and one-line help."""

    def __init__(self, name: str, spec: LazyCommand) -> None:
        super().__init__(name, help=spec.help, short_help=spec.help)
        self.spec = spec


class LazyGroup(TyperGroup):
    """A typer group some of whose commands are :class:`LazyCommand` (see :func:`lazy_group`)."""

    lazy_commands: ClassVar[Mapping[str, LazyCommand]] = {}

    def __init__(self, **attrs: Any) -> None:
        super().__init__(**attrs)
        self._listing = False
        for name, spec in self.lazy_commands.items():
            self.commands.setdefault(name, _Placeholder(name, spec))

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        """Return the command ``cmd_name``, imported unless the group help is listing it."""
        command = super().get_command(ctx, cmd_name)
        if isinstance(command, _Placeholder) and not self._listing:
            command = command.spec.load(cmd_name)
            self.commands[cmd_name] = command
        return command

    def format_help(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """Write the group's help, listing lazy commands without importing them."""
        self._listing = True
        try:
            super().format_help(ctx, formatter)
        finally:
            self._listing = False


def lazy_group(commands: Mapping[str, LazyCommand]) -> type[LazyGroup]:
    """Make a :class:`LazyGroup` class with these lazy commands, for ``typer.Typer(cls=...)``.

    Parameters
    ----------
    commands : mapping of str to LazyCommand
        Command name -> where it lives and its one-line help.

    Returns
    -------
    type
        A subclass of :class:`LazyGroup`; typer instantiates it when the app runs.
    """
    return type("LazyDpcuratorGroup", (LazyGroup,), {"lazy_commands": dict(commands)})
