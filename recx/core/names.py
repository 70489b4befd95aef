"""Names of datasets and runs: one path component of letters, digits, '.', '_' or '-', never '.' or '..'.

An experiment's method names may also hold '+' (`bpr+uniform`), which a folder name can hold too.

A name becomes a folder under the data root (or the runs folder) that recx may later replace, so a name that
could point anywhere else (`..`, `a/b`, an empty string) is refused before anything touches the disk. So is a name
longer than MAX_LENGTH: with the temporary siblings' suffixes (`.NAME.tmp-PID-HEX`) it must stay under the 255-byte
limit of a file name, and a long name would otherwise fail only after the work was done.
"""

from __future__ import annotations

import re

from recx.core.errors import RecxError

NAME = re.compile(r"[A-Za-z0-9._-]+")
METHOD_NAME = re.compile(r"[A-Za-z0-9._+-]+")  # an experiment's methods: also '+' (bpr+uniform, ssm+wd)
MAX_LENGTH = 200


def check_name(name: str, what: str, pattern: re.Pattern = NAME) -> str:
    """`name` itself, or RecxError naming `what` (e.g. "dataset name") and the rule (`pattern`: NAME, or
    METHOD_NAME for an experiment's method names)."""
    if not isinstance(name, str) or not pattern.fullmatch(name) or name in (".", ".."):
        signs = "'.', '_', '-' or '+'" if pattern is METHOD_NAME else "'.', '_' or '-'"
        raise RecxError(f"{what} {name!r}: expected letters, digits, {signs} (one folder name, not '.' or '..')")
    if len(name) > MAX_LENGTH:
        raise RecxError(f"{what} {name[:40]}... is {len(name)} characters long; expected at most {MAX_LENGTH}")
    return name
