"""Sharing the CPUs with the other recx processes of the machine.

Several processes on the same cores, each with one OpenMP thread per core, wait on each other's descheduled threads
at every parallel region: on 2 cores three training runs side by side took 4.5-5x their fair share
(bench/shared_cores.py). So every recx process registers itself at start-up (a file named by its pid in
`<tmp>/recx-<uid>-cpu/`, locked for the life of the process: the kernel releases a killed process's lock, so a stale
file never counts), and one that was given no thread count takes its share of the usable CPUs:
max(1, ⌊usable / live⌋), live counting the registered processes, itself included. Registration and counting happen
under one lock, so processes started together see each other in turn.

The count is chosen before torch starts (the OpenMP runtime's pool size) and recorded in the run's
environment.json; a training run then follows its share as processes come and go (recx.core.threads.follow_share,
every SHARE_POLL_S seconds). Results do not depend on the thread count (tests/test_thread_invariance.py).
"""

from __future__ import annotations

import atexit
import fcntl
import os
import tempfile
from pathlib import Path

_registration: int | None = None  # the open, locked file of this process's registration (kept for its life)


def default_folder() -> Path:
    return Path(tempfile.gettempdir()) / f"recx-{os.getuid()}-cpu"


def _held_by_another(path: Path) -> bool:
    """True when a live process holds the lock on `path` (a registration); False for a stale or vanished file."""
    try:
        handle = os.open(path, os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(handle, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(handle)
    return False


def register(folder: Path | None = None) -> int:
    """Register this process and return how many registered recx processes are alive (itself included); 1 when the
    folder cannot be used (the process then keeps every usable CPU)."""
    global _registration
    folder = default_folder() if folder is None else folder
    try:
        folder.mkdir(mode=0o700, exist_ok=True)
        guard = os.open(folder / ".lock", os.O_RDWR | os.O_CREAT, 0o600)
    except OSError:
        return 1
    try:
        fcntl.flock(guard, fcntl.LOCK_EX)
        own = folder / str(os.getpid())
        handle = os.open(own, os.O_RDWR | os.O_CREAT, 0o600)
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        if _registration is not None:
            os.close(_registration)
        else:
            atexit.register(unregister, folder)
        _registration = handle
        return live(folder)
    except OSError:
        return 1
    finally:
        os.close(guard)


def live(folder: Path | None = None) -> int:
    """How many registered recx processes are alive (at least 1: this one, registered or not)."""
    folder = default_folder() if folder is None else folder
    try:
        entries = [entry for entry in folder.iterdir() if entry.name.isdigit()]
    except OSError:
        return 1
    own = str(os.getpid())
    return 1 + sum(1 for entry in entries if entry.name != own and _held_by_another(entry))


def unregister(folder: Path | None = None) -> None:
    """Remove this process's registration (at exit; a killed process's file is left, but no longer counts)."""
    global _registration
    if _registration is None:
        return
    folder = default_folder() if folder is None else folder
    (folder / str(os.getpid())).unlink(missing_ok=True)
    os.close(_registration)
    _registration = None


def share(usable: int, live: int) -> int:
    """max(1, ⌊usable / live⌋): this process's threads when `live` recx processes share `usable` CPUs."""
    return max(1, usable // max(1, live))
