"""The training loop: Adam over shuffled training interactions, validation with early stopping, a run folder."""
from __future__ import annotations

import contextlib
import copy
import math
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import torch
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from recx.config import RunConfig
from recx.data.dataset import Dataset
from recx.errors import RecxError
from recx.eval.diagnostics import write_diagnostics
from recx.eval.evaluator import evaluate
from recx.eval.per_user import evaluate_splits
from recx.runs import store
from recx.runs.lock import exclusive
from recx.train.build import build_model
from recx.train.device import resolve_device
from recx.train.runners import RUNNERS

DEFAULT_KS = [10, 20, 50]


@dataclass
class RunOutcome:
    folder: Path
    best_epoch: int
    results: pd.DataFrame


def make_progress(quiet: bool = False) -> Progress:
    """The progress display shared by training (epochs) and sweeps (runs)."""
    return Progress(TextColumn("[bold]{task.description}"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
                    TextColumn("{task.fields[status]}"), TimeElapsedColumn(), TimeRemainingColumn(),
                    disable=quiet, transient=False)


def first_bad_step(losses: torch.Tensor) -> int | None:
    """1-based index of the first non-finite loss in `losses` (host tensor), or None."""
    bad = torch.nonzero(~torch.isfinite(losses))
    return int(bad[0]) + 1 if bad.numel() else None


def fit(config: RunConfig, dataset: Dataset, model, folder: Path, progress: Progress) -> int:
    """Train `model` in place; returns the selected epoch (best validation metric, else the last epoch).

    The epoch's steps are the runner's (recx.train.runners, by the model's training kind); losses stay on the
    device during the epoch and are read once at its end.
    """
    generator = torch.Generator(device=model.device).manual_seed(config.seed)
    runner = RUNNERS.get(model.training_kind)(config, dataset, model, generator)
    metric, metric_k = config.valid_metric_name
    best_score, best_epoch, best_state, waited = -math.inf, 0, None, 0
    task = progress.add_task(f"{config.loss}+{config.sampler}", total=config.epochs, status="")
    epoch = 0
    for epoch in range(1, config.epochs + 1 if runner.n_steps else 1):
        model.train()
        started = time.perf_counter()
        losses = torch.zeros(runner.n_steps, device=model.device)
        runner.train_epoch(epoch, losses, lambda step: None)
        losses = losses.cpu()
        bad = first_bad_step(losses)
        if bad is not None:
            raise RecxError(f"the loss became {float(losses[bad - 1])} at epoch {epoch}, step {bad}; "
                            f"try a smaller lr (now {config.lr}) or a higher temperature")
        record = {"epoch": epoch, "loss": float(losses.mean()), "seconds": time.perf_counter() - started}
        status = f"loss {record['loss']:.4f}"
        if dataset.valid is not None and epoch % config.eval_every == 0:
            score = evaluate(model, dataset, "valid", [metric_k], config.eval_batch_size).values[(metric, metric_k, "all")]
            record[f"valid_{config.valid_metric}"] = score
            status += f"  valid {config.valid_metric} {score:.4f}"
            if score > best_score:
                best_score, best_epoch, best_state, waited = score, epoch, copy.deepcopy(model.state_dict()), 0
            else:
                waited += 1
        store.log_epoch(folder, record)
        progress.update(task, advance=1, status=status)
        if waited >= config.patience:
            break
    progress.remove_task(task)
    if best_state is None:
        return epoch
    model.load_state_dict(best_state)
    return best_epoch


def train_run(config: RunConfig, dataset: Dataset, folder: Path, progress: Progress | None = None,
              ks: list[int] | None = None) -> RunOutcome:
    """Train, evaluate on valid and test, mark complete. A failed run leaves no folder it created."""
    device = resolve_device(config.device)
    dataset = dataset.to(device)
    ks = sorted(set((ks or DEFAULT_KS) + [config.valid_metric_name[1]]))
    if max(ks) > dataset.n_items:
        raise RecxError(f"K={max(ks)} is larger than the number of items ({dataset.n_items})")
    with exclusive(folder.parent / f".{folder.name}.lock", f"run {folder.name}"):
        created = not folder.exists()
        try:
            store.start_run(folder, config, {"seed": config.seed, "data_hash": dataset.data_hash, "device": str(device),
                                             "data_folder": str(dataset.folder), "dataset_card": dataset.card,
                                             "packages": store.package_versions()})
            model = build_model(config, dataset, device)
            with make_progress() if progress is None else contextlib.nullcontext(progress) as shown:
                best_epoch = fit(config, dataset, model, folder, shown)
            torch.save(model.state_dict(), folder / "model.pt")
            results = evaluate_splits(model, dataset, config, ks, folder)
            store.write_results(folder, results)
            write_diagnostics(folder, model, dataset, ks, config.eval_batch_size)
            store.mark_complete(folder)
        except BaseException:
            if created:
                shutil.rmtree(folder, ignore_errors=True)
            raise
    return RunOutcome(folder, best_epoch, results)
