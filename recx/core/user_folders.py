"""Folders of this user's own where recx's caches go when the usual ones cannot be written (a
read-only install and an unwritable $HOME, as a container run as a non-root user or a shared cluster install).

`private_folder(name)` is `<temp dir>/recx-<name>-<uid>`, created with mode 0700 and used only when it is a real
folder that belongs to this user and that nobody else can write: what is cached there (numba's compiled kernels) is
loaded as code, so never from a folder another user could have filled.
"""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path


def writable(folder: Path) -> bool:
    """Whether this user can write in `folder`, or create it (nothing is created: its nearest existing ancestor is
    checked)."""
    for candidate in (folder, *folder.parents):
        if candidate.exists():
            return candidate.is_dir() and os.access(candidate, os.W_OK | os.X_OK)
    return False


def private_folder(name: str) -> Path | None:
    """`<temp dir>/recx-<name>-<uid>` (created if missing) when only this user can write it; else None (also off
    POSIX, where there are no user ids to check)."""
    getuid = getattr(os, "getuid", None)
    if getuid is None:
        return None
    folder = Path(tempfile.gettempdir()) / f"recx-{name}-{getuid()}"
    try:
        folder.mkdir(mode=0o700, exist_ok=True)
        found = os.lstat(folder)
    except OSError:
        return None
    if not stat.S_ISDIR(found.st_mode) or found.st_uid != getuid() or found.st_mode & 0o022:
        return None
    return folder if os.access(folder, os.W_OK | os.X_OK) else None


def matplotlib_config() -> None:
    """Point matplotlib at a private folder when its own config folder ($MPLCONFIGDIR, else
    $XDG_CONFIG_HOME/matplotlib or ~/.config/matplotlib) cannot be written: it would otherwise warn at every recx
    command that it made a temporary one. Call before matplotlib is imported; a set $MPLCONFIGDIR is kept."""
    if os.environ.get("MPLCONFIGDIR"):
        return
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    if writable(Path(base) / "matplotlib"):
        return
    folder = private_folder("matplotlib")
    if folder is not None:
        os.environ["MPLCONFIGDIR"] = str(folder)
