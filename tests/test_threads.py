"""The compute thread count: RECX_THREADS, else OMP_NUM_THREADS, else the CPUs the affinity mask and the cgroup
quota allow."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from recx.core import cpu_share, threads
from recx.core.cpu_share import share
from recx.core.errors import RecxError

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize(
    "content, expected",
    [("max 100000\n", None), ("150000 100000\n", 2), ("50000 100000", 1), ("400000 100000", 4), ("garbage", None)],
)
def test_cgroup_v2_quota_is_rounded_up_to_whole_cpus(tmp_path, monkeypatch, content, expected):
    (tmp_path / "cpu.max").write_text(content)
    monkeypatch.setattr(threads, "CGROUP_V2", tmp_path / "cpu.max")
    assert threads.cgroup_cpu_limit() == expected


def test_cgroup_v1_quota(tmp_path, monkeypatch):
    quota, period = tmp_path / "quota", tmp_path / "period"
    quota.write_text("250000\n")
    period.write_text("100000\n")
    monkeypatch.setattr(threads, "CGROUP_V2", tmp_path / "absent")
    monkeypatch.setattr(threads, "CGROUP_V1", (quota, period))
    assert threads.cgroup_cpu_limit() == 3
    quota.write_text("-1\n")
    assert threads.cgroup_cpu_limit() is None


def test_usable_cpus_is_the_affinity_mask_capped_by_the_quota(monkeypatch):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2, 3, 4, 5})
    monkeypatch.setattr(threads, "cgroup_cpu_limit", lambda: 2)
    assert threads.usable_cpus() == 2
    monkeypatch.setattr(threads, "cgroup_cpu_limit", lambda: None)
    assert threads.usable_cpus() == 6


def test_recx_threads_wins_then_omp_num_threads_then_the_usable_cpus(monkeypatch):
    monkeypatch.setattr(threads, "usable_cpus", lambda: 5)
    assert threads.compute_threads({"RECX_THREADS": "3", "OMP_NUM_THREADS": "2"}) == 3
    assert threads.compute_threads({"OMP_NUM_THREADS": "2"}) == 2
    assert threads.compute_threads({}) == 5
    for bad in ("0", "-1", "two", "1.5"):
        with pytest.raises(RecxError, match=f"RECX_THREADS='{bad}'"):
            threads.compute_threads({"RECX_THREADS": bad})


def test_the_recx_command_runs_torch_and_the_kernels_with_the_chosen_threads():
    script = (
        "from recx.core.threads import prepare_environment; prepare_environment()\n"
        "import os, numba, torch\n"
        "print(torch.get_num_threads(), os.environ.get('OMP_WAIT_POLICY', 'unset'), numba.get_num_threads())"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "OMP_WAIT_POLICY", "NUMBA_NUM_THREADS")}
    done = subprocess.run(
        [sys.executable, "-c", script],
        env={**env, "RECX_THREADS": "1", "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.stdout.split() == ["1", "unset", "1"], done.stderr
    done = subprocess.run(
        [sys.executable, "-m", "recx", "list", "metrics"],
        cwd=ROOT,
        env={**env, "RECX_THREADS": "zero", "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1 and "RECX_THREADS='zero'" in done.stderr and "Traceback" not in done.stderr


def test_the_share_divides_the_usable_cpus_among_the_live_processes():
    assert [share(2, live) for live in (1, 2, 3)] == [2, 1, 1]
    assert [share(16, live) for live in (1, 2, 3, 5, 40)] == [16, 8, 5, 3, 1]


def _hold_registration(folder: Path) -> subprocess.Popen:
    """Another process registered in `folder` (it prints the live count it saw, then waits for stdin to close)."""
    script = (
        "import sys; from pathlib import Path; from recx.core.cpu_share import register\n"
        f"print(register(Path({str(folder)!r})), flush=True); sys.stdin.read()"
    )
    process = subprocess.Popen(
        [sys.executable, "-c", script],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    process.live_seen = int(process.stdout.readline())  # type: ignore[attr-defined]
    return process


def test_registrations_count_the_live_recx_processes_only(tmp_path):
    first = _hold_registration(tmp_path)
    second = _hold_registration(tmp_path)
    assert (first.live_seen, second.live_seen) == (1, 2)
    assert cpu_share.register(tmp_path) == 3
    cpu_share.unregister(tmp_path)
    assert not (tmp_path / str(os.getpid())).exists()
    first.kill()  # killed: its file stays, but its lock is gone, so it no longer counts
    first.wait()
    assert (tmp_path / str(first.pid)).exists()
    assert cpu_share.register(tmp_path) == 2
    cpu_share.unregister(tmp_path)
    second.stdin.close()
    second.wait()
    assert not (tmp_path / str(second.pid)).exists()  # a process that exits removes its own registration


def test_threads_option_anywhere_on_the_command_line(monkeypatch):
    monkeypatch.setattr(os, "environ", {k: v for k, v in os.environ.items() if k != "RECX_THREADS"})
    assert threads.pop_threads_option(["train", "--threads", "3", "--epochs", "2"]) == ["train", "--epochs", "2"]
    assert os.environ["RECX_THREADS"] == "3"
    assert threads.pop_threads_option(["--threads=1", "sweep"]) == ["sweep"]
    assert threads.given_threads() == 1
    with pytest.raises(RecxError, match="--threads"):
        threads.pop_threads_option(["train", "--threads"])


def test_a_process_without_a_given_count_follows_its_share_as_processes_come_and_go(monkeypatch):
    import numba
    import torch

    before = torch.get_num_threads()
    monkeypatch.setattr(threads, "usable_cpus", lambda: 2)
    monkeypatch.setattr(threads, "SHARE_POLL_S", 0.0)
    running = {"live": 1}
    monkeypatch.setattr(threads, "live", lambda: running["live"])
    monkeypatch.setattr(threads, "register", lambda: running["live"])
    for name in ("RECX_THREADS", *threads.THREAD_VARIABLES):
        monkeypatch.delenv(name, raising=False)
    try:
        assert threads.prepare_environment() == 2
        seen = []
        for running["live"] in (2, 3, 1):
            threads.follow_share()
            seen.append((torch.get_num_threads(), numba.get_num_threads()))
        assert seen == [(1, 1), (1, 1), (2, min(2, numba.config.NUMBA_NUM_THREADS))]
        monkeypatch.setenv("RECX_THREADS", "2")
        threads.prepare_environment()
        running["live"] = 2
        threads.follow_share()  # a given count is kept
        assert torch.get_num_threads() == 2
    finally:
        monkeypatch.setattr(threads, "_follower", None)
        threads.set_compute_threads(before)


def test_live_counts_the_registered_processes_that_hold_their_lock(tmp_path):
    assert cpu_share.live(tmp_path) == 1  # this process, registered or not
    (tmp_path / "999999").write_text("")  # a stale registration: nobody holds its lock
    assert cpu_share.live(tmp_path) == 1
