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


def check_trains(
    settings: dict, workdir: Path | None = None, lowers_loss: bool = True, adaptive: bool = False
) -> api.Run:
    """Two epochs complete with finite results and, when the model trains, a lower training loss in the second
    epoch; `adaptive` (a proposal that moves with the model, whose loss is not comparable across epochs): a lower
    full-softmax loss on held-out pairs after the two epochs than at the start instead, the reason printed.
    `workdir` None: a temporary folder, removed after."""
    if workdir is None:
        with tempfile.TemporaryDirectory() as folder:
            return check_trains(settings, Path(folder), lowers_loss, adaptive)
    run = train_briefly(settings, workdir)
    shown = {**SETTINGS, **settings}
    if run.state != "complete":
        raise AssertionError(f"the run of {shown} did not complete (state {run.state})")
    values = run.results["value"]
    if values.empty or not all(math.isfinite(v) for v in values):
        raise AssertionError(f"the run of {shown} has no results or non-finite ones")
    if lowers_loss:
        losses = run.epochs["loss"].tolist() if not run.epochs.empty else []
        if len(losses) != 2 or not all(math.isfinite(v) and abs(v) < 1e6 for v in losses):
            raise AssertionError(f"the run of {shown} recorded epoch losses {losses}, expected 2 finite ones")
        if adaptive:
            before, after = held_out_softmax_loss(run, workdir)
            print(
                f"adaptive proposal: its training loss is not comparable across epochs ({losses}); checked instead: "
                f"the full-softmax loss on held-out pairs, {before:.4f} at the start, {after:.4f} after 2 epochs"
            )
            if not after < before:
                raise AssertionError(
                    f"two epochs of {shown} did not lower the full-softmax loss on held-out pairs: {before:.6f} at "
                    f"the start, {after:.6f} after (its sampler is adaptive: the training loss {losses} is not compared)"
                )
        elif not losses[1] < losses[0]:
            raise AssertionError(
                f"two epochs of {shown} did not lower the training loss: {losses} (a sampler whose proposal moves "
                "with the model declares adaptive = True, or the kit's check_sampler(..., adaptive=True))"
            )
    return run


def held_out_softmax_loss(run: api.Run, workdir: Path) -> tuple[float, float]:
    """(at initialisation, after training): the mean over the test pairs (u, i) of -log softmax_j(s(u, j))[i] over
    every item: a quantity of the model alone, whatever the sampler proposes."""
    import torch

    from recx.config.run_config import resolve
    from recx.data.dataset import load_dataset
    from recx.runs import store
    from recx.training.build import build_model

    config = resolve(store.read_config(run.path))
    dataset = load_dataset(tiny_data(workdir), config.dataset)
    device = torch.device("cpu")

    def loss(model) -> float:
        users, items = dataset.test.row_ids(), dataset.test.indices
        with torch.no_grad():
            scores = model.query(users) @ model.item_table().T
            return float(
                (torch.logsumexp(scores.double(), 1) - scores.double()[torch.arange(users.numel()), items]).mean()
            )

    start = build_model(config, dataset, device)  # the run's initial weights: the same seed
    trained = build_model(config, dataset, device)
    store.load_weights(trained, run.path, device)
    return loss(start), loss(trained)
