"""The official hard-negative-sampling code's training epoch on Gowalla, timed (issue 44's paper-path table).

    python3 bench/official/hns_epoch.py --repo WWW_2023_CODE_CHECKOUT --mat-dir FOLDER [--threads 1]
                                        [--cases dns,softmax_v,uniform]

Runs the unmodified main_more.py of swt-user/WWW_2023_code as `__main__` (runpy) on FOLDER/gowalladata.mat (the
authors' .mat, ../shared/data/fastvae-mat) with hns-headline's flags (MF dim 32, batch 4096, Adam lr 0.001 with
coupled decay 0.01, StepLR(5, 0.95), 200 uniform candidates, DNS(2, 200) `--loss_type 1 --lambda_w 2`, Softmax-v(1,
200) `--loss_type 2 --lambda_w 1.0`; uniform BPR: one candidate, unweighted) for one epoch on the CPU, with the
evaluation after it replaced by a no-op and NumPy 2's two shims (`numpy.lib.function_base`, `np.int`), as
bench/official/hns_loop.py does.
The epoch is timed from the creation of train_model's StepLR (before its data and loop) to its first `step()` (the
epoch's end). Prints seconds per epoch per case, for bench/paper_paths.py's recx figures on the same threads.
"""

from __future__ import annotations

import argparse
import runpy
import shlex
import sys
import tempfile
import time
import types
from pathlib import Path

import numpy as np
import torch
from checkout import checkout

COMMON = (
    "--data gowalla --data_dir DATA --log_path LOGS --device cpu --fix_seed --seed 0 --model 0 --sampler 0 "
    "--dims 32 --epoch 1 --batch_size 4096 --learning_rate 0.001 --weight_decay 0.01 --step_size 5 --gamma 0.95"
)
CASES = {
    "dns": "--sample_num 200 --weighted --loss_type 1 --lambda_w 2",
    "softmax_v": "--sample_num 200 --weighted --loss_type 2 --lambda_w 1.0",
    "uniform": "--sample_num 1",
}


def no_metrics(evaluate, model, train_mat, test_mat) -> dict:
    zeros = np.zeros(evaluate.topk)
    return {"item_ndcg": zeros, "item_recall": zeros, "item_prec": zeros}


def epoch_seconds(root: Path, arguments: str, data: Path, logs: Path) -> float:
    """One official epoch's wall seconds (StepLR's creation to its first step)."""
    import utils as official_utils

    marks: list[float] = []
    scheduler = torch.optim.lr_scheduler.StepLR
    original_init, original_step = scheduler.__init__, scheduler.step

    def init(self, *args, **kwargs):
        marks.append(time.perf_counter())
        original_init(self, *args, **kwargs)

    def step(self, *args, **kwargs):
        marks.append(time.perf_counter())
        original_step(self, *args, **kwargs)

    saved = (official_utils.Evaluate.test_GPU_model, sys.argv)
    scheduler.__init__, scheduler.step = init, step
    official_utils.Evaluate.test_GPU_model = no_metrics
    np.int = int  # type: ignore[attr-defined]
    sys.argv = ["main_more.py", *shlex.split(arguments.replace("DATA", str(data)).replace("LOGS", str(logs)))]
    try:
        runpy.run_path(str(root / "main_more.py"), run_name="__main__")
    finally:
        scheduler.__init__, scheduler.step = original_init, original_step
        official_utils.Evaluate.test_GPU_model, sys.argv = saved
    return marks[-1] - marks[0]  # StepLR.__init__ steps once itself; the last step is the epoch's end


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", type=Path, required=True)
    parser.add_argument("--mat-dir", type=Path, required=True, help="the folder holding gowalladata.mat")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--cases", default="dns,softmax_v,uniform")
    options = parser.parse_args()
    torch.set_num_threads(options.threads)
    function_base = types.ModuleType("numpy.lib.function_base")  # gone in NumPy 2; model.py imports an unused name
    function_base.select = None  # type: ignore[attr-defined]
    sys.modules.setdefault("numpy.lib.function_base", function_base)
    with tempfile.TemporaryDirectory() as scratch:
        root, commit = checkout(options.repo, Path(scratch), "main_more.py")
        sys.path.insert(0, str(root))
        print(f"swt-user/WWW_2023_code {commit[:8]}, {options.threads} thread(s), Gowalla (gowalladata.mat)")
        for case in options.cases.split(","):
            logs = Path(scratch) / f"logs-{case}"
            logs.mkdir()
            seconds = epoch_seconds(root, f"{COMMON} {CASES[case]}", options.mat_dir, logs)
            print(f"{case:10s} official epoch {seconds:8.1f} s", flush=True)


if __name__ == "__main__":
    main()
