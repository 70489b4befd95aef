"""The driver loop every backend shares: dispatch pending runs up to the backend's capacity, collect outcomes, put
runs that another process holds ("locked") back in the queue after a pause, and skip any run found complete.

A backend is an object with `capacity` (runs at once), `start(task)` (returns a handle), `poll(timeout)` (the
(handle, Outcome) pairs finished since the last call, waiting at most `timeout` seconds) and `close()`.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from recx.core.errors import Interrupted
from recx.runs import store
from recx.sweeps.task import DONE, FAILED, LOCKED, SKIPPED, Outcome, RunTask

RETRY_LOCKED_S = 1.0
POLL_S = 0.2


@dataclass
class DriveReport:
    done: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)


def drive(tasks: list[RunTask], backend, on_change: Callable[[str, RunTask, Outcome | None], None]) -> DriveReport:
    """Run every task to an end (done, found complete, or failed). `on_change(event, task, outcome)` is called with
    event "start" (outcome None) and with each outcome's status."""
    report = DriveReport()
    queue = deque(tasks)
    held: list[tuple[RunTask, float]] = []
    running: dict[object, RunTask] = {}
    try:
        while queue or held or running:
            now = time.monotonic()
            queue.extend(task for task, ready in held if ready <= now)
            held = [(task, ready) for task, ready in held if ready > now]
            while queue and len(running) < backend.capacity:
                task = queue.popleft()
                if store.is_complete(Path(task.folder)):
                    report.skipped.append(task.run_id)
                    on_change(SKIPPED, task, Outcome(SKIPPED))
                    continue
                running[backend.start(task)] = task
                on_change("start", task, None)
            if not running:
                time.sleep(max(0.0, min(ready for _, ready in held) - time.monotonic()) if held else 0.0)
                continue
            for handle, outcome in backend.poll(POLL_S):
                task = running.pop(handle)
                if outcome.status == LOCKED:
                    held.append((task, time.monotonic() + RETRY_LOCKED_S))
                elif outcome.status == FAILED:
                    report.failed[task.run_id] = outcome.message
                else:
                    (report.done if outcome.status == DONE else report.skipped).append(task.run_id)
                on_change(outcome.status, task, outcome)
    except KeyboardInterrupt as interrupt:
        if isinstance(interrupt, Interrupted) or not running:
            raise
        stopped = ", ".join(sorted(task.run_id for task in running.values()))
        raise Interrupted(
            f"recx sweep; {len(running)} runs in progress were stopped ({stopped}) and are kept in "
            f"their folders, marked incomplete (or trained, when stopped in evaluation); "
            f"{len(report.done)} runs finished before are complete; the same sweep restarts or "
            "finishes the stopped runs and skips the complete ones"
        ) from None
    finally:
        backend.close()
    return report
