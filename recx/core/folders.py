"""Folders and files written whole: built under a temporary sibling name, then swapped (renamed) into place.

`.NAME.tmp-PID-HEX` is a folder being written by process PID; `.NAME.old-PID-HEX` is the previous NAME during a
replacement (`--force`), deleted once the new one is in place; `.FILE.part-PID-HEX` is a file being written by
`atomic_file`. The caller of `clean_stale` holds the lock of NAME (recx.core.lock), so those siblings of NAME, and
the partial files inside NAME, that a dead process left are stale: `clean_stale` deletes them with a note, and puts
an `.old` back when a crash came between the two renames of a replacement. Nothing else is ever touched.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import shutil
import sys
import uuid
from pathlib import Path
from typing import Iterator

from recx.core.errors import RecxError

PARTIAL = re.compile(r"\..+\.part-(\d+)-[0-9a-f]{8}")  # atomic_file's partial file of process N


def temp_sibling(final: Path, kind: str = "tmp") -> Path:
    return final.parent / f".{final.name}.{kind}-{os.getpid()}-{uuid.uuid4().hex[:8]}"


def alive(pid: int) -> bool:
    """Whether process `pid` exists (on this machine)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def clean_stale(final: Path) -> list[Path]:
    """Delete what dead processes left of `final`: its temporary sibling folders (an old one without a pid is stale
    too) and the partial files of `atomic_file` directly inside it; a note names them. The caller holds `final`'s
    lock."""
    pattern = re.compile(rf"\.{re.escape(final.name)}\.(tmp|old)-(?:(\d+)-)?[0-9a-f]{{8}}")
    removed: list[Path] = []
    if not final.parent.is_dir():
        return removed
    for entry in sorted(final.parent.iterdir()):
        match = pattern.fullmatch(entry.name)
        if match is None or not entry.is_dir() or (match[2] is not None and alive(int(match[2]))):
            continue
        if match[1] == "old" and not final.exists():
            os.replace(entry, final)
            continue
        shutil.rmtree(entry, ignore_errors=True)
        removed.append(entry)
    if final.is_dir():
        for entry in sorted(final.iterdir()):
            match = PARTIAL.fullmatch(entry.name)
            if match is not None and entry.is_file() and not alive(int(match[1])):
                entry.unlink(missing_ok=True)
                removed.append(entry)
    if removed:
        print(
            f"note: removed what a process that was killed left: {', '.join(str(path) for path in removed)}",
            file=sys.stderr,
        )
    return removed


def swap_in(tmp: Path, final: Path) -> None:
    """Put the complete folder `tmp` at `final`; a folder already there is renamed aside first, then deleted."""
    if not final.exists():
        os.replace(tmp, final)
        return
    old = temp_sibling(final, "old")
    os.replace(final, old)
    os.replace(tmp, final)
    shutil.rmtree(old, ignore_errors=True)


def writable_folder(path: Path, what: str) -> Path:
    """`path` as an existing writable folder (created if missing), or RecxError naming `what`."""
    if path.exists() and not path.is_dir():
        raise RecxError(f"{what} {path} is a file, not a folder")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise RecxError(f"{what} {path} cannot be created ({exc.strerror})") from None
    if not os.access(path, os.W_OK | os.X_OK):
        raise RecxError(f"{what} {path} is not writable")
    return path


def mount_point(path: Path) -> Path:
    """The mount point of the file system that holds `path` (or would hold it)."""
    found = Path(os.path.abspath(path))
    while not found.exists() and found != found.parent:
        found = found.parent
    while not os.path.ismount(found) and found != found.parent:
        found = found.parent
    return found


def no_space(path: Path, exc: BaseException | None = None) -> bool:
    """Whether a failed write to `path` ran out of space: the error says so (ENOSPC, EDQUOT), or, for an error that
    does not (torch.save's RuntimeError), the file system has less than 1 MiB left."""
    if isinstance(exc, OSError) and exc.errno is not None:
        return exc.errno in (errno.ENOSPC, errno.EDQUOT)
    try:
        stats = os.statvfs(mount_point(path))
    except OSError:
        return False
    return stats.f_bavail * stats.f_frsize < 1 << 20


def failure_reason(path: Path, exc: BaseException) -> str:
    """Why writing `path` failed, in words: a full disk is named as such, with the file system's mount point."""
    if no_space(path, exc):
        return f"no space left on device (the file system mounted at {mount_point(path)})"
    if isinstance(exc, OSError):
        return exc.strerror or str(exc)
    return str(exc)


def write_failed(path: Path, exc: BaseException, kept: str) -> RecxError:
    """The one message of a failed write (disk full, name too long, permission): what failed, what was kept, what
    to do. A full disk says so: "no space left on device (the file system mounted at M); nothing of it was written"."""
    if no_space(path, exc):
        return RecxError(
            f"writing {path} failed: {failure_reason(path, exc)}; nothing of it was written; {kept}. Free some "
            "space there, then run the same command again"
        )
    return RecxError(
        f"writing {path} failed ({failure_reason(path, exc)}); {kept}. Free some space or fix the folder's "
        "permissions, then run the same command again"
    )


@contextlib.contextmanager
def atomic_file(path: Path, kept: str = "the previous file, if any, is unchanged") -> Iterator[Path]:
    """Yield a temporary sibling of `path` to write; on success it is renamed to `path` (a reader sees the old file
    or the new one, never a part). On failure the temporary file is deleted; an OSError becomes `write_failed`."""
    partial = path.parent / f".{path.name}.part-{os.getpid()}-{uuid.uuid4().hex[:8]}"  # PARTIAL
    try:
        yield partial
        os.replace(partial, path)
    except OSError as exc:
        partial.unlink(missing_ok=True)
        raise write_failed(path, exc, kept) from None
    except BaseException:
        partial.unlink(missing_ok=True)
        raise


def write_text_atomic(path: Path, text: str, kept: str = "the previous file, if any, is unchanged") -> None:
    with atomic_file(path, kept) as partial:
        partial.write_text(text)
