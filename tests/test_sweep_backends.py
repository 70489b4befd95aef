"""Sweep backends: worker processes give the same results as one process; kill -9 of the driver loses and repeats
nothing; two sweeps of one experiment never train a run twice; a Ray cluster gives the same results (marked ray)."""

import re

import pandas as pd
import pytest
import yaml
from sweep_helpers import (
    EPOCHS,
    FOUR_RUNS,
    completed,
    kill_after_first_completion,
    reap,
    start_driver,
    sweep_in_process,
)

from recx.core.errors import RecxError
from recx.sweeps.backends import Execution


@pytest.fixture(scope="module")
def reference_out(tmp_path_factory):
    """The four-run sweep in this process, one run after another."""
    folder = tmp_path_factory.mktemp("reference")
    sweep_in_process(folder, folder / "out")
    return folder / "out"


@pytest.fixture(scope="module")
def reference(reference_out) -> pd.DataFrame:
    return pd.read_parquet(reference_out / "results.parquet")


def test_two_jobs_give_the_results_of_one(reference, reference_out, tmp_path):
    out = tmp_path / "out"
    results = sweep_in_process(tmp_path, out, jobs=2)
    pd.testing.assert_frame_equal(results, reference)
    for run_id in set(results.run_id):
        assert len((out / "runs" / run_id / "epochs.jsonl").read_text().splitlines()) == EPOCHS
        for split in ("valid", "test"):
            name = f"per_user_{split}.parquet"
            pd.testing.assert_frame_equal(
                pd.read_parquet(out / "runs" / run_id / name), pd.read_parquet(reference_out / "runs" / run_id / name)
            )
    assert {log.name for log in (out / "logs").iterdir()} == {"worker-0.log", "worker-1.log"}


def test_kill_driver_then_resume(reference, tmp_path):
    out = tmp_path / "out"
    driver = start_driver(tmp_path, out, "--jobs", "2")
    try:
        before = kill_after_first_completion(driver, out)
        assert 1 <= len(before) < 4, "the driver should be killed mid-sweep"
        sweep_in_process(tmp_path, out)
    finally:
        reap(driver)
    after = completed(out)
    assert set(after) == set(reference.run_id)
    assert all(after[run_id] == mtime for run_id, mtime in before.items()), "a completed run was trained again"
    pd.testing.assert_frame_equal(pd.read_parquet(out / "results.parquet"), reference)


def trained(output: str) -> int:
    found = re.search(r"trained (\d+) runs?\b", output)
    return int(found.group(1)) if found else 0


def test_two_concurrent_sweeps_never_train_a_run_twice(reference, tmp_path):
    out = tmp_path / "out"
    first, second = start_driver(tmp_path, out), start_driver(tmp_path, out, "--jobs", "2")
    outputs = [first.communicate()[0], second.communicate()[0]]
    assert first.returncode == 0 and second.returncode == 0, outputs
    assert trained(outputs[0]) + trained(outputs[1]) == 4, outputs
    pd.testing.assert_frame_equal(pd.read_parquet(out / "results.parquet"), reference)


def test_backend_options_are_checked():
    with pytest.raises(RecxError, match="--backend 'slurm'"):
        Execution(backend="slurm").validate()
    with pytest.raises(RecxError, match="--jobs 0"):
        Execution(jobs=0).validate()
    with pytest.raises(RecxError, match="--address"):
        Execution(address="10.0.0.1:6379").validate()


@pytest.mark.ray
def test_ray_sweep_gives_the_local_results(reference, tmp_path):
    pytest.importorskip("ray")
    results = sweep_in_process(tmp_path, tmp_path / "out", backend="ray", jobs=2)
    pd.testing.assert_frame_equal(results, reference)


@pytest.mark.ray
def test_ray_driver_killed_then_resumed_by_the_local_backend(reference, tmp_path):
    pytest.importorskip("ray")
    out = tmp_path / "out"
    driver = start_driver(tmp_path, out, "--backend", "ray", "--jobs", "2")
    try:
        before = kill_after_first_completion(driver, out)
        assert len(before) < 4, "the driver should be killed mid-sweep"
        results = sweep_in_process(tmp_path, out)
    finally:
        reap(driver)
    after = completed(out)
    assert all(after[run_id] == mtime for run_id, mtime in before.items()), "a completed run was trained again"
    pd.testing.assert_frame_equal(results, reference)


def test_workers_are_pinned_to_one_gpu_each_or_share_the_threads(monkeypatch, tmp_path):
    from recx.sweeps import local
    from recx.sweeps.task import RunTask

    monkeypatch.setenv("OMP_NUM_THREADS", "8")
    monkeypatch.setattr(local, "visible_gpus", lambda: ["2", "5"])
    backend = local.LocalProcesses(3, tmp_path)
    task = lambda device: RunTask({"device": device}, str(tmp_path / "r"), "", [5], "m", "")  # noqa: E731
    assert backend.threads == 2
    assert [backend.gpu(task("auto"), slot) for slot in range(3)] == ["2", "5", "2"]
    assert backend.gpu(task("cpu"), 0) is None
    env = backend.environment(backend.gpu(task("cuda"), 1))
    assert env["CUDA_VISIBLE_DEVICES"] == "5" and env["OMP_NUM_THREADS"] == env["NUMBA_NUM_THREADS"] == "2"
    monkeypatch.setattr(local, "visible_gpus", lambda: [])
    assert local.LocalProcesses(16, tmp_path).threads == 1
    assert local.LocalProcesses(2, tmp_path).gpu(task("auto"), 0) is None


def test_a_failed_run_does_not_stop_the_others(tmp_path, recx_cli):

    spec = yaml.safe_load(yaml.safe_dump(FOUR_RUNS))
    spec["experiments"]["four"]["methods"]["ssm"].update(lr=1e30, model_args={"scoring": "dot"})  # fails in training
    spec["experiments"]["four"]["defaults"]["epochs"] = 2
    path = tmp_path / "experiments.yaml"
    path.write_text(yaml.safe_dump(spec))
    result = recx_cli("sweep", path, "-e", "four", "--out", tmp_path / "out", "--data-root", tmp_path / "data")
    assert result.code == 1 and "2 of 4 runs failed" in result.err and "Traceback" not in result.err, result.err
    assert "the loss became" in result.err
    assert len(completed(tmp_path / "out")) == 2
