"""`recx eval`: evaluate a trained run's saved weights, write long-format results and optionally the top-K lists."""
from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import torch

from recx.data.dataset import load_dataset
from recx.errors import RecxError
from recx.eval.diagnostics import diagnostics
from recx.eval.evaluator import evaluate
from recx.runs import store
from recx.train.build import build_model
from recx.train.device import resolve_device
from recx.train.progress import make_progress, shown_task


def write_topk(path: Path, users: torch.Tensor, topk: torch.Tensor) -> None:
    """Parquet with columns user, rank (1-based), item: one row per (evaluated user, rank)."""
    k = topk.shape[1]
    table = pa.table({
        "user": pa.array(users.repeat_interleave(k).cpu().numpy().astype("int32")),
        "rank": pa.array(torch.arange(1, k + 1).repeat(users.numel()).numpy().astype("int32")),
        "item": pa.array(topk.reshape(-1).cpu().numpy().astype("int32")),
    })
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, path)


def open_saved_run(folder: Path, device: torch.device, data_root: Path | None = None):
    """(config, dataset on `device`, model with the saved weights) of a trained run; the dataset is the one recorded
    in environment.json (or `data_root`'s of the same name) and must have the recorded data hash."""
    config = store.open_trained_run(folder)
    environment = store.read_environment(folder)
    if data_root is not None:
        dataset = load_dataset(data_root, config.dataset)
    else:
        recorded = Path(environment["data_folder"])
        dataset = load_dataset(recorded.parent, recorded.name)
    if dataset.data_hash != environment["data_hash"]:
        raise RecxError(f"dataset {dataset.folder} differs from the one the run was trained on (data hash changed)")
    dataset = dataset.to(device)
    model = build_model(config, dataset, device)
    store.load_weights(model, folder, device)
    return config, dataset, model


def evaluate_saved_run(folder: Path, split: str, ks: list[int], batch_size: int, device_name: str,
                       data_root: Path | None, dump_topk: Path | None, auc_beta: float | None = None,
                       with_diagnostics: bool = False, quiet: bool = False) -> tuple[dict, dict | None]:
    """(metric values, embedding diagnostics when asked); `auc_beta` adds AUC and OPAUC(β)."""
    config, dataset, model = open_saved_run(folder, resolve_device(device_name), data_root)
    found = None
    with make_progress(quiet) as progress:
        with shown_task(progress, f"evaluating {split}") as advance:
            result = evaluate(model, dataset, split, ks, batch_size, keep_topk=dump_topk is not None,
                              auc_beta=auc_beta, after_batch=advance)
        if with_diagnostics:
            with shown_task(progress, "diagnostics"):
                found = diagnostics(model, dataset, [split], ks, batch_size)
    store.write_results(folder, store.results_frame(config, split, result.values), f"eval_{split}.parquet")
    if dump_topk is not None:
        write_topk(dump_topk, result.users, result.topk)
    return result.values, found
