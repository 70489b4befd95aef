"""CI: recx works from a read-only install, run by an unprivileged user whose home cannot be written (issue 46, item
1: every command ended in "internal error: RuntimeError: cannot cache function ...: no locator available").

Run as root inside the venv CI built: recx is installed (not editable) into a folder of its own, which is then made
read-only; as the user `nobody` (setpriv, else runuser, else a child process that drops its privileges itself) with
HOME=/nonexistent, the script prepares a synthetic dataset, trains one short run on it and evaluates it, and fails
on a non-zero exit, an internal error or a traceback. The dependencies come from the venv's site-packages, read by
an interpreter of the same version that the unprivileged user may run.

    python3 .ci/read_only_install.py
"""

from __future__ import annotations

import importlib.util
import os
import pwd
import shutil
import site
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NEEDED = "import torch, numba, numpy, pandas, pyarrow, scipy, typer, rich, yaml, matplotlib"


def unprivileged() -> tuple[int, int]:
    try:
        entry = pwd.getpwnam("nobody")
        return entry.pw_uid, entry.pw_gid
    except KeyError:
        return 65534, 65534


def as_user(uid: int, gid: int, command: list[str], env: dict, cwd: Path) -> subprocess.CompletedProcess:
    if shutil.which("setpriv"):
        prefix = ["setpriv", f"--reuid={uid}", f"--regid={gid}", "--clear-groups"]
        return subprocess.run(prefix + command, env=env, cwd=cwd, capture_output=True, text=True)
    if shutil.which("runuser") and uid == unprivileged()[0]:
        return subprocess.run(
            ["runuser", "-u", "nobody", "--", *command], env=env, cwd=cwd, capture_output=True, text=True
        )

    def drop() -> None:
        os.setgroups([])
        os.setgid(gid)
        os.setuid(uid)

    return subprocess.run(command, env=env, cwd=cwd, capture_output=True, text=True, preexec_fn=drop)


def readable_to_all(path: Path) -> None:
    """Let others traverse the folders above `path` (a venv made under a 0700 temporary folder)."""
    for folder in [path, *path.parents]:
        mode = folder.stat().st_mode
        if not mode & 0o005:
            folder.chmod(mode | 0o005)


def main() -> int:
    if os.geteuid() != 0:
        print("read-only install check: run as root (it switches to an unprivileged user); skipped")
        return 0
    uid, gid = unprivileged()
    base = Path(tempfile.mkdtemp(prefix="recx-read-only-"))
    base.chmod(0o755)
    install, work, temp = base / "site", base / "work", base / "tmp"
    isolation = [] if importlib.util.find_spec("setuptools") is None else ["--no-build-isolation"]
    pip = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-compile", *isolation]
    subprocess.run([*pip, "--target", str(install), str(ROOT)], check=True)
    for path in [install, *install.rglob("*")]:
        path.chmod(0o555 if path.is_dir() else 0o444)
    for folder in (work, temp):
        folder.mkdir()
        os.chown(folder, uid, gid)
    packages = [str(install), *site.getsitepackages()]
    for folder in packages[1:]:
        readable_to_all(Path(folder))
    env = {
        "HOME": "/nonexistent",
        "PATH": "/usr/bin:/bin",
        "TMPDIR": str(temp),
        "PYTHONPATH": os.pathsep.join(packages),
    }
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    candidates = [sys.executable, os.path.realpath(sys.executable), shutil.which(version), f"/usr/bin/{version}"]
    python = next(
        (
            c
            for c in dict.fromkeys(filter(None, candidates))
            if as_user(uid, gid, [c, "-c", NEEDED], env, work).returncode == 0
        ),
        None,
    )
    if python is None:
        print(f"read-only install check: no {version} that uid {uid} may run imports the venv's packages")
        return 1
    recx = [python, "-m", "recx"]
    steps = [
        recx + ["--version"],
        recx + ["prepare", "toy", "--format", "synthetic", "--ratios", "80/10/10"],
        recx
        + ["train", "--dataset", "toy", "--loss", "bpr", "--epochs", "1", "--dim", "8", "--device", "cpu"]
        + ["--run-dir", "runs/one", "--quiet"],
        recx + ["eval", "runs/one", "--ks", "10", "--quiet"],
    ]
    failed = 0
    for step in steps:
        done = as_user(uid, gid, step, env, work)
        output = done.stdout + done.stderr
        bad = done.returncode != 0 or "internal error" in output or "Traceback" in output
        print(f"== uid {uid}, read-only {install}, HOME=/nonexistent: {' '.join(step[2:])} -> exit {done.returncode}")
        if bad:
            print(output)
            failed += 1
    writable = [path for path in install.rglob("__pycache__")]
    if writable:
        print(f"the read-only install was written: {writable[:3]}")
        failed += 1
    for path in [base, *base.rglob("*")]:
        if path.is_dir() and not path.is_symlink():
            path.chmod(0o755)
    shutil.rmtree(base, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
