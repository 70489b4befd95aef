"""The training loop: Adam over shuffled training interactions, validation with early stopping, a run folder."""
from __future__ import annotations

import contextlib
import copy
import math
import time
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import torch
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from recx.config import RunConfig
from recx.data.dataset import Dataset
from recx.errors import RecxError
from recx.eval.evaluator import evaluate
from recx.runs import store
from recx.train.build import build_loss, build_model, build_sampler
from recx.train.device import resolve_device
from recx.train.step import training_loss

DEFAULT_KS = [10, 20, 50]


@dataclass
class RunOutcome:
    folder: Path
    best_epoch: int
    results: pd.DataFrame


def _optimizer(model, loss_fn, config: RunConfig) -> torch.optim.Optimizer:
    """Adam; in `full` weight-decay mode every parameter row decays every step (PyTorch's weight_decay)."""
    decay = config.weight_decay if config.weight_decay_mode == "full" else 0.0
    groups = [{"params": list(model.parameters()), "weight_decay": decay}]
    if loss_fn.parameters():
        groups.append({"params": loss_fn.parameters(), "weight_decay": 0.0})
    return torch.optim.Adam(groups, lr=config.lr)


def make_progress(quiet: bool = False) -> Progress:
    """The progress display shared by training (epochs) and sweeps (runs)."""
    return Progress(TextColumn("[bold]{task.description}"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
                    TextColumn("{task.fields[status]}"), TimeElapsedColumn(), TimeRemainingColumn(),
                    disable=quiet, transient=False)


def train_run(config: RunConfig, dataset: Dataset, folder: Path, progress: Progress | None = None,
              ks: list[int] | None = None) -> RunOutcome:
    """Train, select the epoch with the best validation metric (or the last one), evaluate, mark complete."""
    device = resolve_device(config.device)
    dataset = dataset.to(device)
    ks = sorted(set((ks or DEFAULT_KS) + [config.valid_metric_name[1]]))
    if max(ks) > dataset.n_items:
        raise RecxError(f"K={max(ks)} is larger than the number of items ({dataset.n_items})")
    store.start_run(folder, config, {"seed": config.seed, "data_hash": dataset.data_hash, "device": str(device), "data_folder": str(dataset.folder),
                                     "dataset_card": dataset.card, "packages": store.package_versions()})
    generator = torch.Generator(device=device).manual_seed(config.seed)
    model = build_model(config, dataset, device)
    sampler = build_sampler(config, dataset, generator)
    loss_fn = build_loss(config, dataset, device)
    optimizer = _optimizer(model, loss_fn, config)
    users_of, items_of = dataset.train.row_ids(), dataset.train.indices
    n_steps = math.ceil(items_of.numel() / config.batch_size)
    metric, metric_k = config.valid_metric_name
    has_valid = dataset.valid is not None
    best = (-math.inf, 0, None)
    waited = 0
    owns_progress = progress is None
    progress = progress or make_progress()
    with progress if owns_progress else contextlib.nullcontext():
        task = progress.add_task(f"{config.loss}+{config.sampler}", total=config.epochs, status="")
        for epoch in range(1, config.epochs + 1):
            model.train()
            if sampler.rebuild_every == "epoch":
                with torch.no_grad():
                    sampler.rebuild(None, model.item_table())
            started, total = time.perf_counter(), 0.0
            order = torch.randperm(items_of.numel(), generator=generator, device=device)
            for step in range(n_steps):
                index = order[step * config.batch_size:(step + 1) * config.batch_size]
                loss = training_loss(model, sampler, loss_fn, config, users_of[index], items_of[index])
                value = loss.item()
                if not math.isfinite(value):
                    raise RecxError(f"the loss became {value} at epoch {epoch}, step {step + 1}; "
                                    f"try a smaller lr (now {config.lr}) or a higher temperature")
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                optimizer.step()
                total += value
            record = {"epoch": epoch, "loss": total / n_steps, "seconds": time.perf_counter() - started}
            status = f"loss {record['loss']:.4f}"
            if has_valid and epoch % config.eval_every == 0:
                score = evaluate(model, dataset, "valid", [metric_k], config.eval_batch_size).values[(metric, metric_k, "all")]
                record[f"valid_{config.valid_metric}"] = score
                status += f"  valid {config.valid_metric} {score:.4f}"
                if score > best[0]:
                    best, waited = (score, epoch, copy.deepcopy(model.state_dict())), 0
                else:
                    waited += 1
            store.log_epoch(folder, record)
            progress.update(task, advance=1, status=status)
            if has_valid and waited >= config.patience:
                break
        progress.remove_task(task)
    if best[2] is not None:
        model.load_state_dict(best[2])
    best_epoch = best[1] if best[2] is not None else epoch
    torch.save(model.state_dict(), folder / "model.pt")
    frames = [store.results_frame(config, split, evaluate(model, dataset, split, ks, config.eval_batch_size).values)
              for split in (("valid", "test") if has_valid else ("test",))]
    results = pd.concat(frames, ignore_index=True)
    store.write_results(folder, results)
    store.mark_complete(folder)
    return RunOutcome(folder, best_epoch, results)
