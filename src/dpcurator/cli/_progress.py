r"""Progress of a command's steps: a bar on a terminal, a plain line per finished step elsewhere.

Output that goes to a log or a pipe cannot show a progress bar (it would print escape codes or
nothing), so there each finished step is reported on a line of stderr, with how long the
command has run; stdout keeps the results alone.

Examples
--------
>>> import io, contextlib
>>> from rich.console import Console
>>> log, not_a_terminal = io.StringIO(), Console(file=io.StringIO())
>>> with contextlib.redirect_stderr(log), Steps("example", 2, console=not_a_terminal) as steps:
...     steps.done("first")
>>> log.getvalue()
'example: 1/2 first, 0 s\n'
"""

from __future__ import annotations

import time
from types import TracebackType
from typing import Self

import typer
from rich.console import Console
from rich.progress import BarColumn, Progress, TaskID, TextColumn, TimeElapsedColumn

__all__ = ["Steps"]


class Steps:
    """Report ``total`` steps of the command ``name`` (``show=False``: nothing, for ``--json``)."""

    def __init__(self, name: str, total: int, *, console: Console, show: bool = True) -> None:
        self._name = name
        self._total = total
        self._show = show
        self._count = 0
        self._start = time.monotonic()
        self._progress: Progress | None = None
        self._task: TaskID | None = None
        if show and console.is_terminal:
            self._progress = Progress(
                TextColumn(f"{name}: {{task.description}}"),
                BarColumn(),
                TextColumn("{task.completed}/{task.total}"),
                TimeElapsedColumn(),
                console=console,
                transient=True,
            )

    def __enter__(self) -> Self:
        self._start = time.monotonic()
        if self._progress is not None:
            self._progress.start()
            self._task = self._progress.add_task("", total=self._total)
        return self

    def done(self, what: str) -> None:
        """Say that one more step has finished, and what it was."""
        self._count += 1
        if self._progress is not None and self._task is not None:
            self._progress.update(self._task, advance=1, description=what)
        elif self._show:
            elapsed = time.monotonic() - self._start
            line = f"{self._name}: {self._count}/{self._total} {what}, {elapsed:.0f} s"
            typer.echo(line, err=True)

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        if self._progress is not None:
            self._progress.stop()
