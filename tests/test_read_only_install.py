"""recx runs from an install it cannot write (issue 46, item 1): a system site-packages used by another user, a
container run as a non-root user, a shared cluster install. numba's on-disk cache of recx's kernels had no folder to
write there, and every command ended in "internal error: RuntimeError: cannot cache function 'occurrences': no
locator available". recx.kernels.jit now caches where it can ($NUMBA_CACHE_DIR, the install, the user cache folder, a
private temp folder) and compiles in memory where it cannot.

The first tests take numba's cache folders away inside a fresh process (whatever user runs the tests); the last one,
as root, runs recx as an unprivileged user from a read-only copy with an unwritable home, as .ci/run does."""

from __future__ import annotations

import os
import shutil
import site
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# In the child: the locators numba tries are made to fail as they do on a read-only install with an unwritable home
# (`NONE`: every folder fails, $NUMBA_CACHE_DIR and recx's temp folder too), then a recx command and a kernel run.
CHILD = """
import os, sys
import numba.core.caching as caching

what = sys.argv[1]
if what == "none":
    def refuse(self):
        raise PermissionError(13, "Permission denied", self.get_cache_path())
    caching._CacheLocator.ensure_cache_path = refuse
else:  # the install and the home are read-only; $NUMBA_CACHE_DIR (when set) and the temp folder are not
    caching.InTreeCacheLocator.from_function = classmethod(lambda cls, f, p: None)
    caching.UserWideCacheLocator.from_function = classmethod(lambda cls, f, p: None)

import numpy as np
from recx.cli import main
from recx.kernels.row_occurrences import occurrences

sys.argv = ["recx", "list", "samplers"]
try:
    main()
except SystemExit as done:
    assert not done.code, done.code
distinct, starts, positions = occurrences(np.array([3, 1, 3], dtype=np.int64), np.full(5, -1, dtype=np.int64))
print("kernel:", distinct.tolist(), starts.tolist(), positions.tolist(), file=sys.stderr)
"""


def run_child(what: str, tmp_path: Path, **env: str) -> subprocess.CompletedProcess:
    environment = {key: value for key, value in os.environ.items() if key != "NUMBA_CACHE_DIR"}
    environment.update(PYTHONPATH=str(ROOT), TMPDIR=str(tmp_path), **env)
    return subprocess.run(
        [sys.executable, "-c", CHILD, what], cwd=tmp_path, env=environment, capture_output=True, text=True, timeout=600
    )


def cached_files(folder: Path) -> list[Path]:
    return sorted(folder.rglob("*.nbi")) if folder.is_dir() else []


KERNEL = "kernel: [3, 1] [0, 2, 3] [0, 2, 1]"


def test_with_no_folder_to_write_the_kernels_compile_in_memory_with_one_note(tmp_path):
    done = run_child("none", tmp_path)
    assert done.returncode == 0, done.stderr
    assert "internal error" not in done.stderr and "Traceback" not in done.stderr
    assert KERNEL in done.stderr and "uniform" in done.stdout
    assert done.stderr.count("compiled in memory") == 1, done.stderr
    assert "set NUMBA_CACHE_DIR to a folder you can write" in done.stderr


def test_a_private_temp_folder_keeps_them_when_install_and_home_are_read_only(tmp_path):
    done = run_child("read-only", tmp_path)
    assert done.returncode == 0, done.stderr
    assert KERNEL in done.stderr and "compiled in memory" not in done.stderr
    folder = tmp_path / f"recx-numba-{os.getuid()}"
    assert cached_files(folder) and stat.S_IMODE(folder.stat().st_mode) == 0o700


def test_numba_cache_dir_is_respected(tmp_path):
    cache = tmp_path / "numba-cache"
    done = run_child("read-only", tmp_path, NUMBA_CACHE_DIR=str(cache))
    assert done.returncode == 0, done.stderr
    assert cached_files(cache) and not (tmp_path / f"recx-numba-{os.getuid()}").exists()


def test_a_temp_folder_someone_else_can_write_is_not_used(tmp_path, monkeypatch):
    import tempfile

    from recx.core.user_folders import private_folder

    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr(tempfile, "tempdir", None)
    folder = tmp_path / f"recx-numba-{os.getuid()}"
    folder.mkdir()
    folder.chmod(0o777)
    assert private_folder("numba") is None
    folder.chmod(0o700)
    assert private_folder("numba") == folder


NOBODY = 65534
NEEDED = "import torch, numba, numpy, pandas, pyarrow, scipy, typer, rich, yaml"


def as_nobody(command: list[str], env: dict, cwd: Path, timeout: int = 600) -> subprocess.CompletedProcess:
    prefix = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "env", "-i"]
    assignments = [f"{key}={value}" for key, value in env.items()]
    return subprocess.run(prefix + assignments + command, cwd=cwd, capture_output=True, text=True, timeout=timeout)


def interpreter_for_nobody(env: dict, cwd: Path) -> str | None:
    """A Python of this version that the unprivileged user may run and that imports recx's dependencies from this
    environment's site-packages (the venv's own interpreter may live in root's home)."""
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    candidates = [sys.executable, os.path.realpath(sys.executable), shutil.which(version), f"/usr/bin/{version}"]
    for candidate in dict.fromkeys(filter(None, candidates)):
        if as_nobody([candidate, "-c", NEEDED], env, cwd, timeout=120).returncode == 0:
            return candidate
    return None


@pytest.mark.skipif(
    not hasattr(os, "geteuid") or os.geteuid() != 0 or shutil.which("setpriv") is None,
    reason="runs a command as an unprivileged user: needs root and setpriv",
)
def test_an_unprivileged_user_runs_recx_from_a_read_only_install_with_an_unwritable_home(tmp_path):
    import tempfile

    base = Path(tempfile.mkdtemp(prefix="recx-read-only-", dir="/tmp"))  # pytest's own folders are root's only
    try:
        base.chmod(0o755)
        install = base / "site"
        shutil.copytree(ROOT / "recx", install / "recx", ignore=shutil.ignore_patterns("__pycache__"))
        for path in [install, *install.rglob("*")]:
            path.chmod(0o555 if path.is_dir() else 0o444)
        work, temp = base / "work", base / "tmp"
        for folder in (work, temp):
            folder.mkdir()
            os.chown(folder, NOBODY, NOBODY)
        env = {
            "HOME": "/nonexistent",
            "PATH": "/usr/bin:/bin",
            "TMPDIR": str(temp),
            "PYTHONPATH": os.pathsep.join([str(install), *site.getsitepackages()]),
        }
        python = interpreter_for_nobody(env, work)
        if python is None:
            pytest.skip("no Python that the unprivileged user can run imports this environment's packages")
        script = textwrap.dedent(
            """
            import sys, numpy as np
            from recx.kernels.row_occurrences import occurrences
            d, s, p = occurrences(np.array([3, 1, 3], dtype=np.int64), np.full(5, -1, dtype=np.int64))
            print("kernel:", d.tolist(), s.tolist(), p.tolist())
            """
        )
        listed = as_nobody([python, "-m", "recx", "list", "samplers"], env, work)
        assert listed.returncode == 0, listed.stderr
        assert "internal error" not in listed.stderr and "uniform" in listed.stdout
        kernel = as_nobody([python, "-c", script], env, work)
        assert kernel.returncode == 0 and KERNEL in kernel.stdout, kernel.stderr
        assert cached_files(temp / f"recx-numba-{NOBODY}")  # cached in the user's private temp folder
        assert not list(install.rglob("__pycache__"))
    finally:
        for path in [base, *base.rglob("*")]:
            if path.is_dir() and not path.is_symlink():
                path.chmod(0o755)
        shutil.rmtree(base, ignore_errors=True)
