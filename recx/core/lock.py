"""An OS file lock (fcntl.flock) around work on a run folder or a dataset: the kernel releases it when its holder
dies, even by kill -9, so a crashed holder never blocks the next process. Its file is removed when the holder is
done; one that a killed holder left is taken over by the next process and removed when that one is done."""

from __future__ import annotations

import contextlib
import fcntl
import os
import sys
from pathlib import Path
from typing import Iterator

from recx.core.errors import RecxError


class LockedError(RecxError):
    """Another live process holds the lock (a sweep may skip that run and come back to it)."""


def _holder(path: Path) -> str:
    try:
        return path.read_text().strip() or "unknown"
    except OSError:
        return "unknown"


def _open(lock_path: Path) -> tuple[int, bool]:
    """(descriptor, whether this call created the file)."""
    try:
        return os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644), True
    except FileExistsError:
        return os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644), False


def _ours(lock_path: Path, fd: int) -> bool:
    """Whether `lock_path` is still the file open as `fd` (not deleted or replaced by its previous holder)."""
    try:
        return os.stat(lock_path).st_ino == os.fstat(fd).st_ino
    except FileNotFoundError:
        return False


@contextlib.contextmanager
def exclusive(lock_path: Path, what: str) -> Iterator[None]:
    """Hold `lock_path` exclusively (created if missing; its content is the holder's pid) or raise LockedError at
    once: "<what> is being written by process N". Locks are per open file: a process that holds a lock and asks for
    it again is refused too, so take each lock at one level only.

    The lock file is deleted when the block ends, however it ends, while the lock is still held: a command leaves no
    lock file behind. A file found at `lock_path` but not locked was left by a process that died holding it (kill -9)
    or by an older recx: it is taken over (and deleted at the end), with a note. Since a lock file may thus
    disappear, the lock is taken only on the file that is still at `lock_path` (else the open is retried)."""
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    while True:
        fd, created = _open(lock_path)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise LockedError(f"{what} is being written by process {_holder(lock_path)}") from None
        if _ours(lock_path, fd):
            break
        os.close(fd)  # deleted (or replaced) by its previous holder between our open and our lock
    try:
        if not created:
            left_by = _holder(lock_path)
            print(
                f"note: {lock_path} was left by process {left_by}, which ended without removing it (killed, or an "
                "older recx): taken over, and removed when this command ends",
                file=sys.stderr,
            )
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        yield
    finally:
        if _ours(lock_path, fd):
            lock_path.unlink(missing_ok=True)
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)
