"""One-off JIT compilation is not training time (issue 44, item 1): a fresh process with an empty numba cache
compiles its routines during the first epoch; that epoch's `seconds` leave the compilation out and record it as
`compile_seconds`, so the first epoch is as long as the next ones and time-to-accuracy plots start every run at the
same point."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from recx.data.prepare import PrepareOptions, prepare

ROOT = Path(__file__).resolve().parents[1]


def test_a_fresh_processs_first_epoch_leaves_its_compilation_out(tmp_path):
    data = tmp_path / "data"
    prepare(
        "mid",
        PrepareOptions(
            format="synthetic", ratios="80/10/10", synthetic={"n_users": 4000, "n_items": 2000, "mean_length": 40}
        ),
        data,
    )
    run = tmp_path / "run"
    command = [sys.executable, "-m", "recx", "train", "--dataset", "mid", "--loss", "bpr", "--epochs", "3"]
    command += ["--data-root", str(data), "--run-dir", str(run), "--device", "cpu", "--quiet", "--threads", "1"]
    cache = tmp_path / "numba-cache"  # empty: every numba routine of the run compiles in this process
    env = {**os.environ, "NUMBA_CACHE_DIR": str(cache), "PYTHONPATH": str(ROOT)}
    done = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    first, *later = [json.loads(line) for line in (run / "epochs.jsonl").read_text().splitlines()]
    assert first["compile_seconds"] > 0  # BPR's row gradients and row-wise Adagrad compiled in epoch 1
    assert all("compile_seconds" not in record for record in later)


def test_the_compilation_an_epoch_holds_is_left_out_of_its_seconds(tiny, tmp_path, monkeypatch):
    """The clock is the test's: a compilation (numba's compiler lock held) during the first step moves it 1,000 s
    on, so the epoch's seconds leave it out whatever the machine's speed or load (no wall-clock bound: issue 46)."""
    from numba.core import event

    from recx.config.run_config import resolve
    from recx.core.compile_clock import LOCK
    from recx.runs import store
    from recx.runs.train_run import train_run
    from recx.training import fit as fit_module

    offset, follow = [0.0], fit_module.follow_share
    real = time.perf_counter
    monkeypatch.setattr(time, "perf_counter", lambda: real() + offset[0])

    def compiling_once():
        if not offset[0]:
            with event.trigger_event(LOCK):
                offset[0] += 1000.0
        follow()

    monkeypatch.setattr(fit_module, "follow_share", compiling_once)
    config = resolve({"dataset": "tiny", "loss": "bpr", "dim": 8, "epochs": 2, "batch_size": 256, "device": "cpu"})
    train_run(config, tiny, tmp_path / "run")
    first, second = store.read_epochs(tmp_path / "run")
    assert first["compile_seconds"] >= 1000 and 0 < first["seconds"] < 1000, first
    assert "compile_seconds" not in second and 0 < second["seconds"] < 1000, second
