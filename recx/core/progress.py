"""What a user sees while recx works: rich progress bars on a terminal, one plain line per epoch on a pipe."""

from __future__ import annotations

import contextlib

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn


class RunProgress(Progress):
    """Progress bars on a terminal; on a pipe or file (or with `quiet`) no bar, and `line` prints one plain line
    per epoch unless `quiet`."""

    def __init__(self, quiet: bool = False, console: Console | None = None):
        console = console or Console(stderr=False)
        self.plain = not quiet and not console.is_terminal
        super().__init__(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            TextColumn("{task.completed}/{task.total}"),
            TextColumn("{task.fields[status]}"),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
            console=console,
            disable=quiet or self.plain,
            transient=False,
        )

    def line(self, text: str) -> None:
        if self.plain:
            self.console.print(text, highlight=False, soft_wrap=True)
            self.console.file.flush()


def make_progress(quiet: bool = False) -> RunProgress:
    """The progress display shared by training (steps within epochs), evaluation and sweeps (runs)."""
    return RunProgress(quiet)


@contextlib.contextmanager
def shown_task(progress: Progress, description: str, total: int | None = None):
    """A task on the display for the duration of a phase; yields a callback `(done, total)` that advances it."""
    task = progress.add_task(description, total=total, status="")
    try:
        yield lambda done, total=None: progress.update(task, completed=done, total=total)
    finally:
        progress.remove_task(task)
