"""Nothing left behind: a command that ends leaves no lock file; what a killed one left (its temporary folder, partial
files, lock file) is removed by the next command on the same name, with a note; a full disk is named as such."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import torch

from recx.core.errors import RecxError
from recx.core.folders import clean_stale
from recx.core.lock import exclusive
from recx.runs import store
from recx.runs.train_run import tidy
from tests.safety_helpers import assert_user_error

ROOT = Path(__file__).resolve().parents[1]
FAST = ["--dim", "8", "--epochs", "2", "--batch-size", "256", "--n-negatives", "5", "--quiet", "--device", "cpu"]


def train(recx_cli, tiny_root, run, *extra):
    return recx_cli("train", "--dataset", "tiny", "--data-root", tiny_root, "--run-dir", run, *FAST, *extra)


def hidden(folder: Path) -> list[str]:
    """The dot files recx names: lock files, temporary folders and partial files."""
    return sorted(p.name for p in folder.rglob(".*"))


def dead_pid() -> int:
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


def test_no_lock_or_temporary_file_after_commands_that_end(tiny_root, tmp_path, recx_cli):
    """prepare, train, train --force, eval --dump-topk, eval --lists (new, then --force) and a refused train."""
    runs = tmp_path / "runs"
    assert recx_cli("prepare", "tiny2", "--format", "synthetic", "--data-root", tiny_root).code == 0
    assert train(recx_cli, tiny_root, runs / "r").code == 0
    assert train(recx_cli, tiny_root, runs / "r", "--force").code == 0
    assert_user_error(train(recx_cli, tiny_root, runs / "r"), "already complete")
    top = tmp_path / "top.parquet"
    assert recx_cli("eval", runs / "r", "--dump-topk", top).code == 0
    for extra in ([], ["--force"]):
        lists = ["eval", "--lists", top, "--dataset", "tiny", "--data-root", tiny_root, "--out", runs / "l"]
        result = recx_cli(*lists, *extra)
        assert result.code == 0, result.err
    assert hidden(tiny_root) == [] and hidden(runs) == [] and hidden(tmp_path) == []


KILLED_FORCE = """
import os, signal, sys
import recx.runs.train_run as t
real = t.store.log_epoch
def log_then_die(folder, record):
    real(folder, record)
    os.kill(os.getpid(), signal.SIGKILL)
t.store.log_epoch = log_then_die
sys.argv = ["recx"] + sys.argv[1:]
from recx.cli import main
main()
"""


def test_what_a_killed_train_force_left_is_removed_by_the_next_command(tiny_root, tmp_path, recx_cli):
    """SIGKILL during `train --force` leaves `.r.tmp-PID-HEX` and `.r.lock`; the next train of the run (refused:
    the run is complete) removes both with a note and leaves the complete run as it was."""
    run = tmp_path / "runs" / "r"
    assert train(recx_cli, tiny_root, run).code == 0
    before = pd.read_parquet(run / "results.parquet")
    args = ["train", "--dataset", "tiny", "--data-root", str(tiny_root), "--run-dir", str(run), *FAST, "--force"]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    killed = subprocess.run([sys.executable, "-c", KILLED_FORCE, *args], env=env, capture_output=True, text=True)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    left = hidden(run.parent)
    assert ".r.lock" in left and [name for name in left if name.startswith(".r.tmp-")], left
    result = train(recx_cli, tiny_root, run)
    assert_user_error(result, "already complete")
    assert f"{run.parent / '.r.lock'} was left by process" in result.err.replace("\n", "")
    assert "note: removed what a process that was killed left" in result.err.replace("\n", "")
    assert hidden(run.parent) == []
    pd.testing.assert_frame_equal(before, pd.read_parquet(run / "results.parquet"))


def test_a_sweep_that_skips_a_complete_run_removes_what_a_killed_command_left(tmp_path):
    """A complete run beside a dead process's `--force` folder and lock file: tidy (the sweep's skip) removes both;
    a live process's temporary folder and a lock held by another process are kept."""
    run = tmp_path / "r"
    run.mkdir()
    store.mark_complete(run)
    dead = dead_pid()
    stale = tmp_path / f".r.tmp-{dead}-0123abcd"
    stale.mkdir()
    (tmp_path / ".r.lock").write_text(f"{dead}\n")
    alive = tmp_path / f".r.tmp-{os.getpid()}-89abcdef"
    alive.mkdir()
    tidy(run)
    assert not stale.exists() and not (tmp_path / ".r.lock").exists() and alive.exists() and store.is_complete(run)
    other = tmp_path / "o"
    other.mkdir()
    with exclusive(tmp_path / ".o.lock", "run o"):
        code = f"from pathlib import Path; from recx.runs.train_run import tidy; tidy(Path({str(other)!r}))"
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        assert subprocess.run([sys.executable, "-c", code], env=env).returncode == 0
        assert (tmp_path / ".o.lock").exists()  # held: not touched
    assert not (tmp_path / ".o.lock").exists()  # removed by its holder


def test_partial_files_of_dead_writers_inside_the_folder_are_removed(tmp_path, capsys):
    """atomic_file's `.NAME.part-PID-HEX` inside the locked folder: a dead writer's is removed with a note, a live
    one's and files recx does not name are kept."""
    folder = tmp_path / "r"
    folder.mkdir()
    dead = folder / f".results.parquet.part-{dead_pid()}-0123abcd"
    live = folder / f".results.parquet.part-{os.getpid()}-89abcdef"
    theirs = [folder / ".results.parquet.part-x", folder / "notes.part-1-0123abcd"]
    for path in (dead, live, *theirs):
        path.write_text("half")
    assert clean_stale(folder) == [dead]
    assert not dead.exists() and live.exists() and all(path.exists() for path in theirs)
    assert "note: removed what a process that was killed left" in capsys.readouterr().err


def test_a_refused_lock_is_not_removed(tmp_path):
    """A second holder is refused and the first holder's lock file stays until it is done."""
    lock = tmp_path / ".r.lock"
    with exclusive(lock, "run r"):
        code = f"from pathlib import Path; from recx.core.lock import exclusive\nwith exclusive(Path({str(lock)!r}), 'r'): pass"
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        refused = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
        assert f"r is being written by process {os.getpid()}" in refused.stderr and lock.exists()
    assert not lock.exists()


def full_device() -> Path:
    device = Path("/dev/full")
    if not (device.exists() and stat.S_ISCHR(device.stat().st_mode)):
        pytest.skip("no /dev/full character device")
    return device


def test_weights_written_to_a_full_device_fail_with_no_space(tmp_path):
    """torch.save to a path reports a full disk as "[enforce fail at inline_container.cc]"; recx writes through a
    file object, so the kernel's ENOSPC reaches it."""
    with pytest.raises(OSError) as raised:
        store._save_state({"w": torch.zeros(100_000)}, full_device())
    assert raised.value.errno == 28


def test_a_full_disk_is_named_as_such(tiny_root, tmp_path, recx_cli, monkeypatch):
    """`recx train` whose model.pt lands on a full device (/dev/full: the kernel's real ENOSPC): one message saying
    no space is left and nothing of the file was written; no torch message, no traceback, no partial file."""
    device = full_device()
    real = store._save_state
    monkeypatch.setattr(store, "_save_state", lambda state, path: real(state, device))
    run = tmp_path / "runs" / "r"
    result = train(recx_cli, tiny_root, run)
    assert_user_error(
        result,
        f"writing {run / 'model.pt'} failed: no space left on device (the file system mounted at",
        "nothing of it was written",
        "Free some space there",
    )
    assert "enforce fail" not in result.err and "inline_container" not in result.err
    assert not list(run.parent.rglob(".*part-*")) and hidden(run.parent) == []
    assert stat.S_ISCHR(device.stat().st_mode)  # the device is untouched


def test_a_failed_weights_write_of_torch_names_the_full_disk(tmp_path, monkeypatch):
    """torch's own writer failing with a RuntimeError on a file system without space: named as a full disk."""

    def broken(*args, **kwargs):
        raise RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 704 vs 598")

    monkeypatch.setattr(torch, "save", broken)
    monkeypatch.setattr(os, "statvfs", lambda path: os.statvfs_result((4096, 4096, 100, 0, 0, 10, 0, 0, 0, 255)))
    (tmp_path / "run").mkdir()
    with pytest.raises(RecxError, match="model.pt failed: no space left on device .* nothing of it was written"):
        store.save_weights(torch.nn.Linear(2, 2), tmp_path / "run")
    assert not any((tmp_path / "run").iterdir())
