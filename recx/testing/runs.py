"""Two epochs of a configuration on a tiny synthetic dataset, through the same path as `recx train`."""

from __future__ import annotations

import math
import tempfile
from pathlib import Path

from recx import api

TINY = {"n_users": 200, "n_items": 100, "mean_length": 12}
SETTINGS = {"dim": 16, "epochs": 2, "batch_size": 128, "lr": 0.01, "seed": 0, "device": "cpu", "patience": 5}


def tiny_data(workdir: Path) -> Path:
    """`workdir/data` holding the synthetic dataset `tiny` (200 users, 100 items, split 80/10/10), prepared once."""
    root = workdir / "data"
    if not (root / "tiny" / "card.json").is_file():
        api.prepare("tiny", format="synthetic", ratios="80/10/10", synthetic=TINY, data_root=root)
    return root


def train_briefly(settings: dict, workdir: Path) -> api.Run:
    """Train `settings` (over SETTINGS: dim 16, 2 epochs, batch 128, lr 0.01, CPU) on `tiny` into
    `workdir/<run id>` (a run already complete there is read, not trained again)."""
    config = api.run_config({"dataset": "tiny", **SETTINGS, **settings})
    folder = workdir / config.run_id()
    if (folder / "COMPLETE").is_file():
        return api.load_run(folder)
    return api.train(config, data_root=tiny_data(workdir), run_dir=folder, ks=[10])


def check_trains(settings: dict, workdir: Path | None = None, lowers_loss: bool = True) -> api.Run:
    """Two epochs complete with finite results (and, when the model trains, a lower training loss in the second
    epoch); `workdir` None: a temporary folder, removed after."""
    if workdir is None:
        with tempfile.TemporaryDirectory() as folder:
            return check_trains(settings, Path(folder), lowers_loss)
    run = train_briefly(settings, workdir)
    if run.state != "complete":
        raise AssertionError(f"the run of {settings} did not complete (state {run.state})")
    values = run.results["value"]
    if values.empty or not all(math.isfinite(v) for v in values):
        raise AssertionError(f"the run of {settings} has no results or non-finite ones")
    if lowers_loss:
        losses = run.epochs["loss"].tolist() if not run.epochs.empty else []
        if len(losses) != 2 or not all(math.isfinite(v) and abs(v) < 1e6 for v in losses):
            raise AssertionError(f"the run of {settings} recorded epoch losses {losses}, expected 2 finite ones")
        if not losses[1] < losses[0]:
            raise AssertionError(f"two epochs of {settings} did not lower the training loss: {losses}")
    return run
