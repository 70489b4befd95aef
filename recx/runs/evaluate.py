"""`recx eval`: evaluate a trained run's saved weights, write long-format results and optionally the top-K lists."""

from __future__ import annotations

import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import torch

from recx.core.device import resolve_device
from recx.core.errors import RecxError
from recx.core.folders import atomic_file, write_failed
from recx.core.memory import keep_freed_memory
from recx.core.progress import make_progress, shown_task
from recx.data.dataset import load_dataset
from recx.data.dataset_folder import read_ids
from recx.eval.diagnostics import diagnostics
from recx.eval.evaluator import evaluate
from recx.models.registry import MODELS
from recx.runs import store
from recx.training.build import build_model

TOPK_MARK = {b"recx": b"topk"}  # Parquet metadata of a top-K file recx wrote: recx may replace such a file


def check_topk_target(path: Path, force: bool) -> None:
    """Before any work: --dump-topk writes a new file, or replaces one recx wrote (or any file with --force)."""
    if path.is_dir():
        raise RecxError(f"--dump-topk {path}: a folder; give the path of a file to write")
    if not path.exists() or force:
        return
    try:
        ours = (pq.read_schema(path).metadata or {}).get(b"recx") == TOPK_MARK[b"recx"]
    except (OSError, pa.ArrowException):
        ours = False
    if not ours:
        raise RecxError(
            f"--dump-topk {path}: a file recx did not write exists there; recx does not replace it "
            "(pass --force to replace it, or choose another path)"
        )


def write_topk(path: Path, users: torch.Tensor, topk: torch.Tensor, folder: Path) -> None:
    """Parquet with columns user, item (the dataset's original ids, from `folder`'s id maps), rank (1-based), and
    user_index, item_index (the contiguous ids): one row per (evaluated user, rank), written whole. The lists format
    `recx eval --lists` reads."""
    k = topk.shape[1]
    user_index = users.repeat_interleave(k).cpu().numpy().astype("int32")
    item_index = topk.reshape(-1).cpu().numpy().astype("int32")
    user_ids, item_ids = read_ids(folder, "users"), read_ids(folder, "items")
    if user_ids is None or item_ids is None:
        raise RecxError(f"{folder}: no users.parquet or items.parquet (the original ids); prepare the dataset again")
    table = pa.table(
        {
            "user": user_ids.take(pa.array(user_index)),
            "item": item_ids.take(pa.array(item_index)),
            "rank": pa.array(torch.arange(1, k + 1).repeat(users.numel()).numpy().astype("int32")),
            "user_index": pa.array(user_index),
            "item_index": pa.array(item_index),
        }
    ).replace_schema_metadata(TOPK_MARK)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise write_failed(path, exc, "the evaluation results were written") from None
    with atomic_file(path, "the evaluation results were written; a previous top-K file is unchanged") as partial:
        pq.write_table(table, partial)


def check_model_code(folder: Path, config) -> None:
    """The run's model must be registered (its plugin loaded: the message names the plugin environment.json
    records); a plugin model whose loaded code differs from the run's gets a note. The loss and sampler are not
    needed to evaluate saved weights."""
    if config.model not in MODELS:
        raise RecxError(
            f"run {folder.name}: model {config.model!r} is not registered now, and evaluating the run's weights needs "
            f"it; {store.recorded_plugin(folder, 'model', config.model)}. Load that plugin (install it, or pass "
            "--plugin with its file or folder) and run the command again"
        )
    recorded, loaded = config.plugin_code.get("model"), MODELS.code_hash(config.model)
    if recorded is not None and recorded != loaded:
        print(
            f"note: run {folder.name}: model {config.model!r} was trained with code sha256 {recorded[:12]} "
            f"({store.recorded_plugin(folder, 'model', config.model)}); the loaded code is sha256 "
            f"{str(loaded)[:12]}: evaluating with the loaded code",
            file=sys.stderr,
        )


def open_saved_run(folder: Path, device: torch.device, data_root: Path | None = None):
    """(config, dataset on `device`, model with the saved weights) of a trained run; the dataset is the one recorded
    in environment.json (or `data_root`'s of the same name) and must have the recorded data hash."""
    config = store.open_trained_run(folder)
    check_model_code(folder, config)
    environment = store.read_environment(folder)
    if data_root is not None:
        dataset = load_dataset(data_root, config.dataset)
    else:
        recorded = Path(environment["data_folder"])
        dataset = load_dataset(recorded.parent, recorded.name)
    if not store.trained_on(folder, dataset):
        raise RecxError(f"dataset {dataset.folder} differs from the one the run was trained on (data hash changed)")
    dataset = dataset.to(device)
    model = build_model(config, dataset, device)
    store.load_weights(model, folder, device)
    return config, dataset, model


def evaluate_saved_run(
    folder: Path,
    split: str,
    ks: list[int],
    batch_size: int,
    device_name: str,
    data_root: Path | None,
    dump_topk: Path | None,
    auc_beta: float | None = None,
    with_diagnostics: bool = False,
    quiet: bool = False,
    force: bool = False,
) -> tuple[dict, dict | None]:
    """(metric values, embedding diagnostics when asked); `auc_beta` adds AUC and OPAUC(β). `force` lets
    --dump-topk replace a file recx did not write. Freed memory is kept in the process (recx.core.memory), as
    in `train_run`."""
    keep_freed_memory()
    if dump_topk is not None:
        check_topk_target(dump_topk, force)
    config, dataset, model = open_saved_run(folder, resolve_device(device_name), data_root)
    found = None
    with make_progress(quiet) as progress:
        with shown_task(progress, f"evaluating {split}") as advance:
            result = evaluate(
                model,
                dataset,
                split,
                ks,
                batch_size,
                keep_topk=dump_topk is not None,
                auc_beta=auc_beta,
                after_batch=advance,
            )
        if with_diagnostics:
            with shown_task(progress, "diagnostics"):
                found = diagnostics(model, dataset, [split], ks, batch_size)
    store.write_results(
        folder,
        store.results_frame(config, split, result.values),
        f"eval_{split}.parquet",
        kept=f"the previous eval_{split}.parquet, if any, is unchanged",
    )
    if dump_topk is not None:
        write_topk(dump_topk, *result.listed(), dataset.folder)
    return result.values, found
