"""Folders and files written whole: built under a temporary sibling name, then swapped (renamed) into place.

`.NAME.tmp-PID-HEX` is a folder being written by process PID; `.NAME.old-PID-HEX` is the previous NAME during a
replacement (`--force`), deleted once the new one is in place. The caller holds the lock of NAME
(recx.core.lock), so siblings left by a dead process are stale: `clean_stale` deletes them, and puts an `.old`
back when a crash came between the two renames of a replacement. Nothing else in the parent is ever touched.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import uuid
from pathlib import Path
from typing import Iterator

from recx.core.errors import RecxError


def temp_sibling(final: Path, kind: str = "tmp") -> Path:
    return final.parent / f".{final.name}.{kind}-{os.getpid()}-{uuid.uuid4().hex[:8]}"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def clean_stale(final: Path) -> list[Path]:
    """Delete the temporary siblings of `final` left by dead processes (an old one without a pid is stale too)."""
    pattern = re.compile(rf"\.{re.escape(final.name)}\.(tmp|old)-(?:(\d+)-)?[0-9a-f]{{8}}")
    removed: list[Path] = []
    if not final.parent.is_dir():
        return removed
    for entry in sorted(final.parent.iterdir()):
        match = pattern.fullmatch(entry.name)
        if match is None or not entry.is_dir() or (match[2] is not None and _alive(int(match[2]))):
            continue
        if match[1] == "old" and not final.exists():
            os.replace(entry, final)
            continue
        shutil.rmtree(entry, ignore_errors=True)
        removed.append(entry)
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


def write_failed(path: Path, exc: OSError, kept: str) -> RecxError:
    """The one message of a failed write (disk full, name too long, permission): what failed, what was kept, what
    to do."""
    reason = exc.strerror or str(exc)
    return RecxError(
        f"writing {path} failed ({reason}); {kept}. Free some space or fix the folder's permissions, "
        "then run the same command again"
    )


@contextlib.contextmanager
def atomic_file(path: Path, kept: str = "the previous file, if any, is unchanged") -> Iterator[Path]:
    """Yield a temporary sibling of `path` to write; on success it is renamed to `path` (a reader sees the old file
    or the new one, never a part). On failure the temporary file is deleted; an OSError becomes `write_failed`."""
    partial = path.parent / f".{path.name}.part-{os.getpid()}-{uuid.uuid4().hex[:8]}"
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
