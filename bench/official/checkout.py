"""The files of an official repository at HEAD, from a checkout or a bare mirror (shared by bench/official/*.py)."""

from __future__ import annotations

import subprocess
from pathlib import Path


def checkout(repo: Path, scratch: Path, marker: str, suffixes: tuple[str, ...] = (".py",)) -> tuple[Path, str]:
    """(a folder with the repository's files, its commit): `repo` itself when `marker` exists in it (a checkout),
    else its files ending in one of `suffixes` (Python files by default) at HEAD extracted into `scratch` (a bare
    mirror, whose data files may be absent)."""
    git = ["git", "-C", str(repo)]
    commit = subprocess.run(git + ["rev-parse", "HEAD"], check=True, capture_output=True, text=True).stdout.strip()
    if (repo / marker).exists():
        return repo, commit
    listed = subprocess.run(git + ["ls-tree", "-r", "--name-only", "HEAD"], check=True, capture_output=True, text=True)
    sources = [name for name in listed.stdout.splitlines() if name.endswith(suffixes)]
    archive = subprocess.run(git + ["archive", "HEAD", "--", *sources], check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(scratch)], input=archive, check=True)
    return scratch, commit
