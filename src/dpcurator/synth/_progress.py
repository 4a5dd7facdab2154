"""Progress of a long fit: a rich progress bar on a terminal, a plain periodic line elsewhere."""

from __future__ import annotations

import sys
import time
from types import TracebackType
from typing import Self, TextIO

from rich.console import Console
from rich.progress import BarColumn, Progress, TaskID, TextColumn, TimeElapsedColumn

__all__ = ["Reporter"]


class Reporter:
    """Report what a fit is doing (``show=False``: nothing).

    On a terminal a rich progress bar of the budget spent; otherwise a plain line (to
    ``stream``, default stderr) at most every ``every`` seconds, and one at the end.
    """

    def __init__(self, show: bool, *, stream: TextIO | None = None, every: float = 5.0) -> None:
        self._show = show
        self._stream = sys.stderr if stream is None else stream
        self._every = every
        self._last = -float("inf")
        self._progress: Progress | None = None
        self._task: TaskID | None = None
        if show and self._stream.isatty():
            self._progress = Progress(
                TextColumn("[bold]synth[/]"),
                BarColumn(),
                TextColumn("{task.percentage:>3.0f}% of the budget"),
                TextColumn("{task.description}"),
                TimeElapsedColumn(),
                console=Console(file=self._stream),
                transient=False,
            )

    def __enter__(self) -> Self:
        if self._progress is not None:
            self._progress.start()
            self._task = self._progress.add_task("", total=1.0)
        return self

    def update(self, fraction: float, message: str, *, force: bool = False) -> None:
        """Say that ``fraction`` of the budget is spent and what happens now."""
        if not self._show:
            return
        if self._progress is not None and self._task is not None:
            self._progress.update(self._task, completed=fraction, description=message)
            return
        now = time.monotonic()
        if force or now - self._last >= self._every:
            self._last = now
            print(
                f"synth: {100 * fraction:3.0f}% of the budget spent; {message}", file=self._stream
            )
            self._stream.flush()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if self._progress is not None:
            self._progress.stop()
