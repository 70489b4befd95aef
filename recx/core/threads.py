"""How many compute threads a recx process uses.

A process may use the CPUs of its affinity mask, capped by its cgroup's CPU quota (a container given 2 CPUs of a
64-core host): `usable_cpus`. The thread count is RECX_THREADS when set, else OMP_NUM_THREADS when set, else the
usable CPUs. `prepare_environment` runs before torch is imported (the OpenMP runtime reads its settings once, at
start-up).

Idle OpenMP threads spin by default, which is fastest alone but costly when several processes share the cores
(bench/shared_cores.py, 2 cores, synthetic MF: three runs side by side 2.6-5.7x their fair share spinning, 1.1-1.2x
with OMP_WAIT_POLICY=PASSIVE; but PASSIVE makes a lone Gowalla BPR epoch ~30% slower, and one thread ~15%), so the
wait policy is left to the user: the README says when to set it.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from pathlib import Path

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


def compute_threads(environ: Mapping[str, str] | None = None) -> int:
    """RECX_THREADS, else OMP_NUM_THREADS, else `usable_cpus()`; a bad RECX_THREADS is a RecxError."""
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
    return usable_cpus()


def prepare_environment(threads: int | None = None) -> int:
    """Set the OpenMP/MKL thread counts for this process (and the workers it starts), before torch is imported;
    returns the thread count."""
    count = compute_threads() if threads is None else threads
    os.environ["OMP_NUM_THREADS"] = os.environ["MKL_NUM_THREADS"] = str(count)
    return count
