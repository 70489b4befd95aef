"""Helpers of the bad-input tests: a snapshot of every path under some folders, to prove nothing changed."""

from __future__ import annotations

from pathlib import Path


def snapshot(*roots: Path, strict: bool = False) -> dict:
    """path -> (is_dir, size, mtime) of every path under `roots` (the roots included).

    Not strict: folder mtimes and `.lock` files are left out (another process may hold a lock file meanwhile).
    """
    found = {}
    for root in roots:
        for path in [root, *sorted(root.rglob("*"))] if root.exists() else []:
            if not strict and path.name.endswith(".lock"):
                continue
            stat = path.stat()
            is_dir = path.is_dir()
            found[str(path)] = (is_dir, 0 if is_dir else stat.st_size, stat.st_mtime_ns if strict or not is_dir else 0)
    return found


def assert_user_error(result, *expected: str, code: int = 1) -> None:
    """Exit code `code`, each expected text in the message (line breaks ignored), no traceback."""
    message = (result.err + result.out).replace("\n", "")
    assert result.code == code, (result.code, result.err)
    for text in expected:
        assert text in message, (text, message)
    assert "Traceback" not in result.err + result.out
