"""One-off JIT compilation is not training time (issue 44, item 1): a fresh process with an empty numba cache
compiles its routines during the first epoch; that epoch's `seconds` leave the compilation out and record it as
`compile_seconds`, so the first epoch is as long as the next ones and time-to-accuracy plots start every run at the
same point."""

from __future__ import annotations

import json
import os
import subprocess
import sys
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
    assert first["compile_seconds"] > 0.5  # BPR's row gradients and row-wise Adagrad compiled in epoch 1
    assert all("compile_seconds" not in record for record in later)
    # without the compilation the first epoch is an epoch like the others (compiling alone takes several seconds;
    # 0.3 s of slack for a loaded machine)
    assert first["seconds"] <= 1.3 * max(record["seconds"] for record in later) + 0.3, (first, later)
