"""The real runs the GPU check puts beside the CPU's: one definition for bench/gpu_pack.py (which trains their CPU
side on the machine that packs) and bench/gpu_check.py (which trains their GPU side on the lent machine).

- `real`: `recx train --dataset gowalla` with its defaults (MF, sampled softmax over 2,000 shared uniform negatives,
  cosine scores, row-wise Adagrad) for 10 epochs, seed 0, on the LightGCN split of Gowalla.
- `headline`: PRISM Table 1's "MAWU + PRISM" row (prism-gowalla's `mawu+prism` method at lr 0.01: MF dim 64, PRISM
  init, MAWU γ 2.6 / 1.4, batch 4096, Adam, no weight decay, early stopping on validation NDCG@20 with patience 10,
  up to 1000 epochs) on the PRISM split of gowalladata.mat. The CPU side runs `cpu_epochs` epochs only: its epoch
  time is the figure compared; the GPU side trains until early stopping or its time is up.

Each `dry` size is what the forced-CPU dry run (`make gpu-check-cpu`) trains on the pack's synthetic data.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import yaml


@dataclass(frozen=True)
class PackedRun:
    name: str
    dataset: str
    prepare: list[str]  # `recx prepare DATASET` options; {data} is the pack's data folder
    config: dict
    epochs: int  # the GPU side's epochs
    cpu_epochs: int  # the CPU side's epochs (the pack)
    dry_epochs: int  # both sides' epochs in the dry run
    train_args: tuple[str, ...] = ()  # more `recx train` options


REAL = PackedRun(
    name="real",
    dataset="gowalla",
    prepare=["--format", "lightgcn", "--source", "{data}/gowalla"],
    config={"dataset": "gowalla", "seed": 0},
    epochs=10,
    cpu_epochs=10,
    dry_epochs=2,
)

HEADLINE = PackedRun(
    name="headline",
    dataset="gowalla-prism",
    prepare=["--format", "mat", "--source", "{data}/fastvae-mat/gowalladata.mat", "--preset", "prism", "--seed", "0"],
    config={
        "dataset": "gowalla-prism",
        "seed": 0,
        "model": "mf",
        "dim": 64,
        "model_args": {"init": "prism"},
        "loss": "mawu",
        "loss_args": {"gamma_user": 2.6, "gamma_item": 1.4},
        "sampler": "uniform",
        "n_negatives": 1,
        "batch_size": 4096,
        "optimizer": "adam",
        "lr": 0.01,
        "weight_decay": 0.0,
        "weight_decay_mode": "full",
        "patience": 10,
        "valid_metric": "ndcg@20",
    },
    train_args=("--ks", "20"),
    epochs=1000,
    cpu_epochs=2,
    dry_epochs=2,
)

RUNS = (REAL, HEADLINE)
RUN_FILES = ("config.yaml", "epochs.jsonl", "results.parquet", "environment.json")  # what the pack keeps of a run


def prepare_command(python: str, run: PackedRun, data: Path, root: Path) -> list[str]:
    """`recx prepare` of the run's dataset from the pack's data folder into the data root `root`."""
    options = [part.replace("{data}", str(data)) for part in run.prepare]
    return [python, "-m", "recx", "prepare", run.dataset, *options, "--data-root", str(root)]


def train_command(python: str, run: PackedRun, root: Path, folder: Path, device: str, epochs: int) -> list[str]:
    """`recx train` of the run on `device` for at most `epochs` epochs into `folder` (its config file beside it)."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    config = folder.parent / f"{folder.name}.yaml"
    config.write_text(yaml.safe_dump({**run.config, "epochs": epochs, "device": device}, sort_keys=False))
    return [
        *(python, "-m", "recx", "train", "--config", str(config), "--data-root", str(root)),
        *("--run-dir", str(folder), "--quiet", "--checkpoint-every", "0", *run.train_args),
    ]
