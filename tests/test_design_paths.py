"""docs/design.md names files that exist: a path with a folder, relative to the repository's root or to recx/; a bare
module name (`fit.py`), somewhere in the repository (a file that moved leaves a stale name, which this fails on)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NAMED = re.compile(r"`([A-Za-z0-9_./-]+\.py)`")


def missing(text: str, tracked: set[str]) -> list[str]:
    names = {Path(path).name for path in tracked}
    absent = []
    for path in sorted(set(NAMED.findall(text))):
        found = path in tracked or f"recx/{path}" in tracked if "/" in path else path in names
        if not found:
            absent.append(path)
    return absent


def tracked_files() -> set[str]:
    listed = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True)
    return set(listed.stdout.split())


def test_every_file_design_md_names_exists():
    assert missing((ROOT / "docs" / "design.md").read_text(), tracked_files()) == []


def test_a_moved_file_is_found_stale():
    tracked = {"recx/kernels/lanes.py", "recx/training/fit.py"}
    text = "`kernels/lanes.py` `fit.py` `core/lanes.py` `gone.py`"
    assert missing(text, tracked) == ["core/lanes.py", "gone.py"]
