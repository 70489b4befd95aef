"""The headline sweeps as jobs run side by side until a deadline: each in a process group of its own (the sweep's
driver and its workers), started together, and at the deadline stopped as Ctrl-C stops a sweep (SIGINT to the group:
each run in training keeps its folder, marked incomplete, with its last checkpoint, and the same sweep goes on from
it), then killed if it has not ended `grace_s` later (the checkpoints are kept all the same).

The groups share the caller's session (not setsid): whatever kills the caller's session ends them too.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

# Workers per experiment at 16 jobs, from the projected GPU wall time (docs/reproductions/README.md, "On one GPU"):
# PRISM's eight early-stopped runs are the longest (125-250 epochs each), so all eight start at once; FastVAE's six
# share three (two rounds of ~210 and ~280 s), RG's 26 two, BIR's three two (XIR's run the longest), HNS's three one
# (300-400 s in a row).
WEIGHTS = {"prism-headline": 8, "fastvae-headline": 3, "rg-headline": 2, "bir-headline": 2, "hns-headline": 1}


def split_jobs(total: int, runs: dict[str, int], weights: dict[str, int] = WEIGHTS) -> dict[str, int]:
    """Workers per experiment: `total` shared in proportion to `weights` (1 for an experiment not listed), at least
    one each and never more than the experiment's runs."""
    share = {name: weights.get(name, 1) for name in runs}
    scale = total / sum(share.values())
    return {name: max(1, min(runs[name], round(share[name] * scale))) for name in runs}


@dataclass
class Job:
    name: str
    command: list[str]
    log: Path
    env: dict = field(default_factory=dict)
    process: subprocess.Popen | None = None
    started: float = 0.0
    seconds: float = 0.0
    code: int | None = None
    stopped: str = ""  # "" (ended by itself), "interrupted" (SIGINT at the deadline) or "killed" (SIGKILL after it)

    def start(self, clock: Callable[[], float]) -> None:
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log, "a") as output:
            self.process = subprocess.Popen(
                self.command,
                env={**os.environ, **self.env},
                stdin=subprocess.DEVNULL,
                stdout=output,
                stderr=subprocess.STDOUT,
                preexec_fn=os.setpgrp,  # a group of its own for the signals, in the caller's session
            )
        self.started = clock()

    def running(self) -> bool:
        return self.process is not None and self.code is None

    def poll(self, clock: Callable[[], float]) -> bool:
        """Whether it has just ended (its code and seconds then set)."""
        if not self.running() or self.process is None or self.process.poll() is None:
            return False
        self.code, self.seconds = self.process.returncode, clock() - self.started
        return True

    def signal(self, number: int) -> None:
        if self.process is not None:
            try:
                os.killpg(self.process.pid, number)
            except ProcessLookupError:  # the group is gone: nothing left to stop
                pass


def run_until(
    jobs: list[Job],
    stop_at: float,
    grace_s: float,
    on_tick: Callable[[list[Job]], None],
    tick_s: float = 30.0,
    clock: Callable[[], float] = time.monotonic,
    poll_s: float = 0.5,
) -> None:
    """Start every job, then wait for them all to end, calling `on_tick(jobs)` every `tick_s` seconds and as each
    ends; at `stop_at` (a `clock()` time) the running ones get SIGINT, and SIGKILL `grace_s` later. Ctrl-C (or
    SIGTERM turned into it by the caller) stops them the same way at once, then is raised again."""
    for job in jobs:
        job.start(clock)
    interrupted_at: float | None = None
    next_tick = clock() + tick_s
    try:
        while any(job.running() for job in jobs):
            ended = [job for job in jobs if job.poll(clock)]
            now = clock()
            if interrupted_at is None and now >= stop_at:
                interrupted_at = now
                _stop(jobs, signal.SIGINT, "interrupted")
            elif interrupted_at is not None and now >= interrupted_at + grace_s:
                _stop(jobs, signal.SIGKILL, "killed")
            if ended or now >= next_tick:
                on_tick(jobs)
                next_tick = now + tick_s
            time.sleep(poll_s)
    except KeyboardInterrupt:
        _stop(jobs, signal.SIGINT, "interrupted")
        _wait(jobs, clock() + grace_s, clock, poll_s)
        _stop(jobs, signal.SIGKILL, "killed")
        _wait(jobs, clock() + grace_s, clock, poll_s)
        raise
    finally:
        for job in jobs:  # a driver that ended leaves no worker behind
            job.signal(signal.SIGKILL)


def _stop(jobs: list[Job], number: int, how: str) -> None:
    for job in jobs:
        if job.running():
            job.stopped = how
            job.signal(number)


def _wait(jobs: list[Job], until: float, clock: Callable[[], float], poll_s: float) -> None:
    while any(job.running() for job in jobs) and clock() < until:
        for job in jobs:
            job.poll(clock)
        time.sleep(poll_s)
