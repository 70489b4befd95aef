"""Names of datasets and runs: one path component of letters, digits, '.', '_' or '-', never '.' or '..'.

A name becomes a folder under the data root (or the runs folder) that recx may later replace, so a name that
could point anywhere else (`..`, `a/b`, an empty string) is refused before anything touches the disk.
"""
from __future__ import annotations

import re

from recx.errors import RecxError

NAME = re.compile(r"[A-Za-z0-9._-]+")


def check_name(name: str, what: str) -> str:
    """`name` itself, or RecxError naming `what` (e.g. "dataset name") and the rule."""
    if not isinstance(name, str) or not NAME.fullmatch(name) or name in (".", ".."):
        raise RecxError(f"{what} {name!r}: expected letters, digits, '.', '_' or '-' (one folder name, "
                        "not '.' or '..')")
    return name
