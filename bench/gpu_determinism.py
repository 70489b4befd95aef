"""Do runs on a GPU repeat? Two uninterrupted runs from one seed, and one killed after an epoch's checkpoint and
trained again, compared with the first (weights bit for bit, results.parquet, the epochs' losses). Prints a Markdown
table (its lines start with "|"; the runs' own header lines go between them).

With `--deterministic` every run sets `deterministic = true` (torch's deterministic algorithms on CUDA).
On the CPU recx promises the same numbers for the same seed and a resumed run equal to the uninterrupted one
(tests/test_resume.py). On CUDA some kernels sum in an order that depends on thread scheduling (atomic adds in
index_add_ / scatter_add_, embedding backward, cuSPARSE's products), so this bench measures, per training kind, what
holds there: "same" or the largest absolute weight difference; a case that fails is printed in the table, the others
still run, and the bench exits 1. Under `--deterministic` LightGCN's graph product and the ALS models' conjugate-
gradient products (the wrmf and rgx cases) are summed in a fixed order (recx.models.segments); rgx's form text also
sums RG's item weights by index_add_, which torch makes deterministic in that mode. Run by hand on a GPU machine (the
CPU run is the control):

    PYTHONPATH=. python3 bench/gpu_determinism.py --device cuda [--epochs 3] [--users 2000] [--items 1000] [--mean-length 30]
    PYTHONPATH=. python3 bench/gpu_determinism.py --quick   # make ci-bench-quick: 2 epochs, 300 x 800, ~12 a user
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import pandas as pd
import quick
import torch

from recx.config.run_config import resolve
from recx.core.progress import make_progress
from recx.data.dataset import load_dataset
from recx.data.prepare import PrepareOptions, prepare
from recx.runs.train_run import train_run
from recx.training import checkpoint

CASES = {
    "mf bpr, uniform (row-wise Adagrad)": {"model": "mf", "loss": "bpr", "sampler": "uniform"},
    "mf softmax, 500 shared uniform (default loss)": {"model": "mf", "n_negatives": 500},
    "mf softmax, xir": {"model": "mf", "loss": "softmax", "sampler": "xir", "batch_size": 256},
    "mf directau, adam, fixed order": {
        "model": "mf",
        "loss": "directau",
        "n_negatives": 1,
        "optimizer": "adam",
        "fixed_order": True,
    },
    "lightgcn bpr": {"model": "lightgcn", "loss": "bpr", "sampler": "uniform"},
    "multvae": {"model": "multvae", "loss": "full_softmax", "batch_size": 128},
    "fastvae midx_uni": {"model": "fastvae", "loss": "softmax", "sampler": "midx_uni", "n_negatives": 50},
    "wrmf": {"model": "wrmf"},
    "rgx eq18, form text": {"model": "rgx", "model_args": {"weights": "eq18", "form": "text"}},
}


class Killed(BaseException):
    """Stands for kill -9 after a checkpoint."""


def difference(first: Path, second: Path) -> str:
    """ "same" when weights, results and losses are equal bit for bit, else what differs and by how much."""
    a, b = torch.load(first / "model.pt"), torch.load(second / "model.pt")
    worst = max((a[k].double() - b[k].double()).abs().max().item() for k in a if a[k].is_floating_point())
    results = pd.read_parquet(first / "results.parquet").equals(pd.read_parquet(second / "results.parquet"))
    losses = [
        [json.loads(line)["loss"] for line in (f / "epochs.jsonl").read_text().splitlines()] for f in (first, second)
    ]
    if worst == 0 and results and losses[0] == losses[1]:
        return "same"
    return f"weights max abs diff {worst:.2e}, results {'equal' if results else 'differ'}, losses {'equal' if losses[0] == losses[1] else 'differ'}"


def killed_then_resumed(config, dataset, folder: Path) -> None:
    save = checkpoint.save

    def save_then_die(path, runner, loop):
        save(path, runner, loop)
        if loop.epoch == 1:
            raise Killed

    checkpoint.save = save_then_die
    try:
        train_run(config, dataset, folder, make_progress(quiet=True), checkpoint_every=1)
    except Killed:
        pass
    finally:
        checkpoint.save = save
    train_run(config, dataset, folder, make_progress(quiet=True))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument(
        "--deterministic", action="store_true", help="every run with deterministic = true (recx's switch)"
    )
    parser.add_argument("--users", type=int, default=2_000)
    parser.add_argument("--items", type=int, default=1_000)
    parser.add_argument("--mean-length", type=int, default=30, help="interactions a user, on average")
    quick.option(parser, epochs=2, users=300, items=800, mean_length=12)
    options = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="recx-determinism-") as scratch:
        root = Path(scratch)
        synthetic = {"n_users": options.users, "n_items": options.items, "mean_length": options.mean_length}
        prepare("repeat", PrepareOptions(format="synthetic", ratios="80/10/10", synthetic=synthetic), root / "data")
        dataset = load_dataset(root / "data", "repeat").to(torch.device(options.device))
        setting = f"device {options.device}{', deterministic algorithms' if options.deterministic else ''}, {options.epochs} epochs, {options.users:,} users x {options.items:,} items, seed 3"
        print(f"| case ({setting}) | two runs, one seed | killed after epoch 1, resumed |\n| --- | --- | --- |")
        failures = 0
        for name, case in CASES.items():
            epochs = {"epochs": options.epochs, "patience": options.epochs}
            settings = {"seed": 3, "dim": 32, "device": options.device, "deterministic": options.deterministic}
            config = resolve({**settings, **epochs, **case})
            folder = root / "runs" / name.replace(" ", "-").replace(",", "")
            try:
                train_run(config, dataset, folder / "first", make_progress(quiet=True))
                train_run(config, dataset, folder / "second", make_progress(quiet=True))
                killed_then_resumed(config, dataset, folder / "resumed")
                twice, resumed = (
                    difference(folder / "first", folder / "second"),
                    difference(folder / "first", folder / "resumed"),
                )
            except Exception as failed:  # one case's failure is printed, the others still run
                twice, resumed = f"failed: {type(failed).__name__}: {failed}"[:200], ""
                failures += 1
            print(f"| {name} | {twice} | {resumed} |", flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
