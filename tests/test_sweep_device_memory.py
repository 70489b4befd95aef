"""`recx sweep --jobs N` on one GPU: N runs at once are held against the device's free memory before any starts
(recx.sweeps.device_memory), by the estimate its docstring states, checked here by hand on a card's sizes."""

from __future__ import annotations

import json

import pytest

from recx.config.run_config import resolve
from recx.core.errors import RecxError
from recx.sweeps import device_memory, sweep
from recx.sweeps.backends import Execution
from recx.sweeps.experiments import PlannedRun

GIB = 2**30


def _run(method: str, **settings) -> PlannedRun:
    config = resolve({"dataset": "big", **settings})
    return PlannedRun(method, {}, config, config.run_id())


@pytest.fixture
def big_root(tmp_path):
    (tmp_path / "big").mkdir()
    (tmp_path / "big" / "card.json").write_text(json.dumps({"n_users": 100_000, "n_items": 50_000}))
    return tmp_path


def test_the_estimate_is_the_documented_sum():
    run = _run("bpr", model="mf", dim=64, batch_size=1000, n_negatives=9, eval_batch_size=100)
    estimate = device_memory.run_memory(run, 300, 200)
    assert estimate.tables == 4 * 4 * 500 * 64
    assert estimate.step == 4 * 3 * 1000 * 10 * 65
    assert estimate.evaluation == 4 * 3 * 100 * 200
    assert estimate.total == estimate.tables + estimate.step + estimate.evaluation
    vae = _run("vae", model="multvae", batch_size=256)
    assert device_memory.run_memory(vae, 300, 200).step == 4 * 3 * 256 * 200
    chunk = 4 * (2 * 2**27 + 3 * 2**26)  # an exact ALS chunk at its memory bound (recx.models.als.layout)
    assert device_memory.run_memory(_run("rg", model="rg2", model_args={"solver": "cholesky"}), 300, 200).step == chunk
    in_double = _run("rg", model="rg2", model_args={"solver": "cholesky", "dtype": "float64"})
    assert device_memory.run_memory(in_double, 300, 200).step == 2 * chunk


def test_jobs_that_do_not_fit_are_refused_naming_the_largest_run_and_what_fits(big_root):
    small = _run("small", dim=8, eval_batch_size=64)
    large = _run("large", dim=512, eval_batch_size=4096)
    each = device_memory.largest_run([small, large], big_root)
    assert each.method == "large"
    per_job = each.total + device_memory.CONTEXT_BYTES
    device_memory.check_fits([small, large], big_root, 4, 4 * per_job, "cuda")  # exactly fits
    with pytest.raises(RecxError) as refused:
        device_memory.check_fits([small, large], big_root, 4, 4 * per_job - 1, "cuda")
    message = str(refused.value)
    assert "--jobs 4 on cuda" in message and "'large' on 'big'" in message and "at most --jobs 3" in message
    with pytest.raises(RecxError, match="one run alone does not fit"):
        device_memory.check_fits([large], big_root, 2, per_job // 2, "cuda")
    device_memory.check_fits([large], big_root, 1, 0, "cuda")  # one job: nothing to share
    device_memory.check_fits([_run("x", dataset="unprepared")], big_root, 8, 0, "cuda")  # no card: no estimate


def test_the_sweep_checks_only_local_jobs_that_go_to_cuda(big_root, monkeypatch):
    large = _run("large", dim=512)
    monkeypatch.setattr("torch.cuda.is_available", lambda: True)
    monkeypatch.setattr("torch.cuda.device_count", lambda: 1)
    monkeypatch.setattr("torch.cuda.mem_get_info", lambda *device: (1 * GIB, 80 * GIB))
    with pytest.raises(RecxError, match="--jobs 2 on cuda"):
        sweep.check_device_memory([large], big_root, Execution(jobs=2))
    sweep.check_device_memory([_run("cpu", dim=512, device="cpu")], big_root, Execution(jobs=2))
    sweep.check_device_memory([large], big_root, Execution(jobs=1))
    monkeypatch.setattr("torch.cuda.device_count", lambda: 2)  # workers 0 and 2 on GPU 0, 1 and 3 on GPU 1
    with pytest.raises(RecxError, match="--jobs 2 on each GPU"):
        sweep.check_device_memory([large], big_root, Execution(jobs=4))
    sweep.check_device_memory([large], big_root, Execution(jobs=2))  # one a GPU
    monkeypatch.setattr("torch.cuda.is_available", lambda: False)
    sweep.check_device_memory([large], big_root, Execution(jobs=2))
