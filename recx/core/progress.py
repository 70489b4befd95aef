"""What a user sees while recx works: rich progress bars on a terminal; on a pipe or a file (CI, `nohup`, a cluster
job's log) one plain line per epoch and, in between, a plain progress line at a steady interval (a long epoch sent to a file
is never silent)."""

from __future__ import annotations

import contextlib
import datetime
import time
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, Progress, ProgressColumn, Task, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.text import Text

PLAIN_INTERVAL_S = 30.0  # seconds between two plain progress lines of a long phase


class CountColumn(ProgressColumn):
    """`done/total`, or `done` alone while the total is not known (it showed `0/None`)."""

    def render(self, task: Task) -> Text:
        return Text(counts(task))


def counts(task: Task) -> str:
    done = f"{int(task.completed):,}"
    return done if task.total is None else f"{done}/{int(task.total):,}"


def _duration(seconds: float | None) -> str:
    return "?" if seconds is None else str(datetime.timedelta(seconds=round(seconds)))


class RunProgress(Progress):
    """Progress bars on a terminal; on a pipe or file (or with `quiet`) no bar: `line` prints one plain line per
    epoch, and a task that moves prints a plain line (`plain_line`) at most every PLAIN_INTERVAL_S seconds, unless
    `quiet`."""

    def __init__(self, quiet: bool = False, console: Console | None = None):
        console = console or Console(stderr=False)
        self.plain = not quiet and not console.is_terminal
        self.interval = PLAIN_INTERVAL_S
        self._last_line = time.monotonic()
        super().__init__(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            CountColumn(),
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
            self._last_line = time.monotonic()

    def update(self, task_id, **changes: Any) -> None:
        super().update(task_id, **changes)
        self._steady(task_id)

    def advance(self, task_id, advance: float = 1) -> None:
        super().advance(task_id, advance)
        self._steady(task_id)

    def _steady(self, task_id) -> None:
        if self.plain and time.monotonic() - self._last_line >= self.interval:
            task = next((task for task in self.tasks if task.id == task_id), None)
            if task is not None:
                self.line(plain_line(task))


def plain_line(task: Task) -> str:
    """`description: [unit] done/total (p%), rate/s, elapsed, about T left  status`, as a pipe shows a task (`unit`:
    the task's field, e.g. "step" for training)."""
    unit = task.fields.get("unit")
    parts = [f"{unit} {counts(task)}" if unit else counts(task)]
    if task.total:
        parts[0] += f" ({100 * task.completed / task.total:.0f}%)"
    if task.speed:
        parts.append(f"{task.speed:,.1f}/s")
    parts.append(f"{_duration(task.elapsed)} elapsed")
    if task.total:
        parts.append(f"about {_duration(task.time_remaining)} left")
    status = str(task.fields.get("status") or "").strip()
    return f"{task.description}: {', '.join(parts)}" + (f"  {status}" if status else "")


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
