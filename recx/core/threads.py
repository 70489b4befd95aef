"""How many compute threads a recx process uses.

A process may use the CPUs of its affinity mask, capped by its cgroup's CPU quota (a container given 2 CPUs of a
64-core host): `usable_cpus`. The thread count is RECX_THREADS when set, else OMP_NUM_THREADS when set, else the
usable CPUs divided among the recx processes running (recx.core.cpu_share), followed as they come and go
(`follow_share`). `prepare_environment` runs before torch is imported (the OpenMP runtime reads its settings once,
at start-up). `recx --threads N` (anywhere on the command
line) sets RECX_THREADS: `pop_threads_option`.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Mapping
from pathlib import Path

from recx.core.cpu_share import live, register, share
from recx.core.errors import RecxError

CGROUP_V2 = Path("/sys/fs/cgroup/cpu.max")
CGROUP_V1 = (Path("/sys/fs/cgroup/cpu/cpu.cfs_quota_us"), Path("/sys/fs/cgroup/cpu/cpu.cfs_period_us"))


def cgroup_cpu_limit() -> int | None:
    """ceil(quota / period) of the cgroup's CPU bandwidth limit, None when there is none (or it cannot be read)."""
    try:
        if CGROUP_V2.is_file():
            quota, period = CGROUP_V2.read_text().split()[:2]
            return None if quota == "max" else max(1, math.ceil(int(quota) / int(period)))
        quota_file, period_file = CGROUP_V1
        if quota_file.is_file() and period_file.is_file():
            quota_us = int(quota_file.read_text())
            return None if quota_us <= 0 else max(1, math.ceil(quota_us / int(period_file.read_text())))
    except (OSError, ValueError):
        return None
    return None


def usable_cpus() -> int:
    """CPUs this process may run on: its affinity mask, capped by the cgroup quota."""
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    limit = cgroup_cpu_limit()
    return max(1, min(cpus, limit) if limit else cpus)


def given_threads(environ: Mapping[str, str] | None = None) -> int | None:
    """RECX_THREADS (--threads), else OMP_NUM_THREADS, else None; a bad RECX_THREADS is a RecxError."""
    if environ is None:
        environ = os.environ
    given = environ.get("RECX_THREADS", "").strip()
    if given:
        if not given.isdigit() or int(given) < 1:
            raise RecxError(f"RECX_THREADS={given!r}: expected a whole number of threads >= 1")
        return int(given)
    configured = environ.get("OMP_NUM_THREADS", "").strip()
    if configured.isdigit() and int(configured) > 0:
        return int(configured)
    return None


def compute_threads(environ: Mapping[str, str] | None = None, live: int = 1) -> int:
    """The given count (`given_threads`), else this process's share of the usable CPUs when `live` recx processes
    run (recx.core.cpu_share.share)."""
    given = given_threads(environ)
    return given if given is not None else share(usable_cpus(), live)


def pop_threads_option(argv: list[str]) -> list[str]:
    """`argv` without `--threads N` / `--threads=N`, whose value goes to RECX_THREADS (checked by `given_threads`)."""
    kept, index = [], 0
    while index < len(argv):
        arg = argv[index]
        if arg == "--threads":
            if index + 1 == len(argv):
                raise RecxError("--threads: expected a whole number of threads >= 1")
            os.environ["RECX_THREADS"] = argv[index + 1]
            index += 2
            continue
        if arg.startswith("--threads="):
            os.environ["RECX_THREADS"] = arg.partition("=")[2]
        else:
            kept.append(arg)
        index += 1
    return kept


THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS")  # torch's OpenMP, MKL, numba's kernels


def thread_environment(count: int) -> dict[str, str]:
    """The environment variables that give a process (read at its start-up) `count` compute threads."""
    return dict.fromkeys(THREAD_VARIABLES, str(count))


def set_compute_threads(count: int) -> None:
    """Give this process `count` compute threads now: the compiled kernels' (numba's pool cannot grow past the size it
    started with), then torch's. In that order: starting numba's OpenMP pool resets the OpenMP thread count that
    torch reads to the pool's size."""
    import numba
    import torch

    numba.set_num_threads(min(count, numba.config.NUMBA_NUM_THREADS))
    torch.set_num_threads(count)


class ShareFollower:
    """Keeps a process that was given no thread count at its share of the usable CPUs as recx processes start and
    end: `poll()` recounts them at most every SHARE_POLL_S seconds and sets the compute threads when the share
    changed (a start-up share of 2 on 2 cores drops to 1 while another run is alive, and comes back)."""

    def __init__(self, threads: int):
        self.threads, self.checked = threads, time.monotonic()

    def poll(self) -> None:
        now = time.monotonic()
        if now - self.checked < SHARE_POLL_S:
            return
        self.checked = now
        count = share(usable_cpus(), live())
        if count != self.threads:
            set_compute_threads(count)
            self.threads = count


SHARE_POLL_S = 2.0
_follower: ShareFollower | None = None  # set by prepare_environment when no thread count was given


def follow_share() -> None:
    """Poll this process's share (the training loop calls it after every step; a no-op unless `recx` chose the
    thread count from the share at start-up)."""
    if _follower is not None:
        _follower.poll()


def prepare_environment() -> int:
    """Register this process among the machine's recx processes, then set the OpenMP/MKL/numba thread counts for it
    (and the workers it starts), before torch is imported; returns the thread count. Without a given count the
    process follows its share from then on (`follow_share`)."""
    global _follower
    following = given_threads() is None
    count = compute_threads(live=register())
    os.environ.update(thread_environment(count))
    _follower = ShareFollower(count) if following else None
    return count
