"""`train_run`: one run folder, locked, trained by `recx.training.fit` (resumed from its last checkpoint), evaluated on
valid and test, marked complete; a failed or interrupted run leaves its folder in a state the same command finishes."""

from __future__ import annotations

import contextlib
import glob
import shutil
import sys
import traceback
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import torch
from rich.progress import Progress

from recx.config.run_config import (
    RunConfig,
    bundle_note,
    check_against_dataset,
    describe_code,
    non_default_settings,
)
from recx.core import plugins
from recx.core.device import deterministic_algorithms, resolve_device
from recx.core.errors import Interrupted, RecxError, attach_log
from recx.core.folders import clean_stale, swap_in, temp_sibling, writable_folder, write_text_atomic
from recx.core.lock import LockedError, exclusive
from recx.core.memory import keep_freed_memory
from recx.core.names import check_name
from recx.core.progress import make_progress, shown_task
from recx.data.dataset import Dataset
from recx.data.dataset_folder import IDENTITY
from recx.eval.evaluator import evaluate
from recx.runs import store
from recx.runs.diagnostics import write_diagnostics
from recx.runs.per_user import write_per_user, write_topk
from recx.training import checkpoint
from recx.training.build import build_model
from recx.training.fit import FitHooks, fit

DEFAULT_KS = [10, 20, 50]


@dataclass
class RunOutcome:
    folder: Path
    best_epoch: int
    results: pd.DataFrame


def train_run(
    config: RunConfig,
    dataset: Dataset,
    folder: Path,
    progress: Progress | None = None,
    ks: list[int] | None = None,
    force: bool = False,
    diagnostics: bool = False,
    checkpoint_every: int | None = None,
    label: str | None = None,
) -> RunOutcome:
    """Train, evaluate on valid and test, mark complete, holding the run's lock throughout. `label` names the run
    in its progress lines (a sweep's method name; default: the model, or loss+sampler).

    By the folder's state (recx.runs.store): absent/empty: train from scratch; incomplete: train on from its
    checkpoint (`recx.training.fit.fit`, for `checkpoint_every`), else from scratch; trained: finish the
    evaluation from the saved weights; complete: refused unless `force`. With `force` an existing run is replaced
    whole: the new one is written under a temporary name and swapped in at the end. A failed run leaves no folder
    it created; Ctrl-C raises `Interrupted` saying what was kept. Freed memory is kept in the process
    (recx.core.memory), as the `recx` command does at its start, so that a run from Python steps as fast.
    """
    keep_freed_memory()
    check_name(folder.name, "run name")
    ks = sorted(set((ks or DEFAULT_KS) + [config.valid_metric_name[1]]))
    check_against_dataset(config, dataset.n_items, ks, RunConfig.n_negatives, f"run {folder.name}")
    writable_folder(folder.parent, "runs folder")
    with exclusive(run_lock(folder), f"run {folder.name}"):
        return _train_locked(config, dataset, folder, progress, ks, force, diagnostics, checkpoint_every, label)


def run_lock(folder: Path) -> Path:
    return folder.parent / f".{folder.name}.lock"


def tidy(folder: Path) -> None:
    """Remove what a killed command left of a run that is not trained again (a `--force` run's temporary folder,
    the run's lock file), holding the run's lock; nothing while another process holds it."""
    name = glob.escape(folder.name)
    left = [run_lock(folder), *folder.parent.glob(f".{name}.tmp-*"), *folder.parent.glob(f".{name}.old-*")]
    if not any(path.exists() for path in left):
        return
    try:
        with exclusive(run_lock(folder), f"run {folder.name}"):
            clean_stale(folder)
    except LockedError:
        pass


def _check_folder(config: RunConfig, folder: Path, force: bool) -> str:
    current = store.state(folder)
    if current == "foreign":
        raise RecxError(f"{folder} exists and is not a run folder recx wrote (no run marker); choose another --run-dir")
    if current == "complete" and not force:
        raise RecxError(f"run {folder.name} is already complete in {folder}; pass --force to train it again")
    recorded = store.read_config(folder) if current in ("incomplete", "trained") and not force else None
    if recorded is not None and recorded != config.to_dict():
        if _without_code(recorded) == _without_code(config.to_dict()):
            raise RecxError(
                f"{folder} holds an unfinished run of these settings trained with other plugin code: "
                f"{_code_change(folder, recorded, config)}. Load the plugin the run was trained with to finish it, "
                "or pass --force to train it again with the loaded code"
            )
        raise RecxError(
            f"{folder} holds an unfinished run of another configuration; pass --force to replace it "
            "or choose another --run-dir"
        )
    return current


def _without_code(settings: dict) -> dict:
    return {key: value for key, value in settings.items() if key != "plugin_code"}


def _code_change(folder: Path, recorded: dict, config: RunConfig) -> str:
    """Per role whose plugin code differs: what the run recorded (environment.json's plugin) and what is loaded."""
    before, now = recorded.get("plugin_code") or {}, config.plugin_code
    parts = []
    for role in sorted(set(before) | set(now)):
        if before.get(role) == now.get(role):
            continue
        name = {"model": config.model, "loss": config.loss, "sampler": config.sampler}.get(
            role, config.valid_metric_name[0]
        )
        trained = f"sha256 {str(before.get(role))[:12]}" if role in before else "recx's own"
        loaded = describe_code(config, role) if role in now else f"{role} {name!r} (recx's own)"
        parts.append(
            f"{role} {name!r} was trained with code {trained} ({store.recorded_plugin(folder, role, name)}); "
            f"loaded now: {loaded}"
        )
    return "; ".join(parts)


def _note_runs_of_other_code(config: RunConfig, folder: Path, shown) -> None:
    """A new run of a plugin's names: say which unfinished runs beside it hold the same settings trained with other
    plugin code (a plugin edited, or loaded from another source: a file instead of its package)."""
    if not config.plugin_code or not folder.parent.is_dir():
        return
    mine = _without_code(config.to_dict())
    for other in sorted(folder.parent.iterdir()):
        if other == folder or not (other / "config.yaml").is_file() or store.state(other) == "complete":
            continue
        try:
            settings = store.read_config(other)
        except RecxError:
            continue
        if _without_code(settings) == mine and settings.get("plugin_code") != config.plugin_code:
            shown.console.print(
                f"note: {other} holds an unfinished run of these settings trained with other plugin code "
                f"({_code_change(other, settings, config)}); run {folder.name} trains the loaded code from the start",
                highlight=False,
                soft_wrap=True,
            )


@contextlib.contextmanager
def _run_context(config: RunConfig, device, progress: Progress | None) -> Iterator[Progress]:
    """The run's progress display, within torch's deterministic algorithms when the run asks (on CUDA)."""
    with (
        deterministic_algorithms(config.deterministic, device),
        make_progress() if progress is None else contextlib.nullcontext(progress) as shown,
    ):
        yield shown


def _train_locked(
    config, dataset, folder, progress, ks, force, with_diagnostics, checkpoint_every, label
) -> RunOutcome:
    clean_stale(folder)
    current = _check_folder(config, folder, force)
    device = resolve_device(config.device)
    dataset = dataset.to(device)
    replacing = force and current not in ("absent", "empty")
    target = temp_sibling(folder) if replacing else folder
    created = current == "absent"
    finish_only = current == "trained" and not force
    phase = "evaluation" if finish_only else "training"
    try:
        with _run_context(config, device, progress) as shown:
            if finish_only:
                model = build_model(config, dataset, device)
                store.load_weights(model, folder, device)
                best_epoch = store.trained_epoch(folder)
            else:
                _open_run(config, dataset, folder, target, current, replacing, device, shown, label)
                model, best_epoch = _trained(
                    config, dataset, target, device, shown, _hooks(config, dataset, target, checkpoint_every, label)
                )
            phase = "evaluation"
            results = _evaluate_splits(config, dataset, model, ks, shown, target)
            store.write_results(target, results)
            if with_diagnostics:
                with shown_task(shown, "diagnostics"):
                    write_diagnostics(target, model, dataset, ks, config.eval_batch_size)
            store.mark_complete(target)
        if replacing:
            swap_in(target, folder)
    except KeyboardInterrupt:
        if replacing:
            shutil.rmtree(target, ignore_errors=True)
        raise Interrupted(_interrupted(folder, phase, replacing)) from None
    except checkpoint.WriteFailed as error:
        if replacing:
            shutil.rmtree(target, ignore_errors=True)
        raise RecxError(f"{error}; {_kept_after_failed_checkpoint(folder, replacing)}") from None
    except RecxError:
        if replacing or (created and phase == "training"):
            shutil.rmtree(target, ignore_errors=True)
        elif current == "empty" and phase == "training":
            store.clear_run(folder)
        raise
    except Exception as exc:
        if replacing:
            shutil.rmtree(target, ignore_errors=True)
        log = _save_traceback(folder) if folder.is_dir() else None
        if log is not None:
            attach_log(exc, log)
        blamed = plugins.blame(exc)
        if blamed is not None:  # a plugin's bug, not recx's: named, with what the run folder kept
            where = f"; the traceback is in {log}" if log is not None else ""
            raise RecxError(f"{blamed}; stopped the {_interrupted(folder, phase, replacing)}{where}") from None
        raise
    return RunOutcome(folder, best_epoch, results)


def _open_run(config, dataset, folder: Path, target: Path, current: str, replacing: bool, device, shown, label) -> None:
    """Say what the run trains, then write its folder's start (`target`: `folder`, or the sibling that replaces it)
    unless it goes on from its checkpoint; a resumable run's data must be the data it trained on."""
    named = f" ({label})" if label else ""
    shown.console.print(f"run {config.run_id()}{named}: {non_default_settings(config)}", highlight=False)
    note = bundle_note(config)
    if note:
        shown.console.print(f"note: {note}", highlight=False, soft_wrap=True)
    if not replacing and store.resumable(folder) and not store.trained_on(folder, dataset):
        raise RecxError(
            f"{folder} holds an unfinished run trained on other data (dataset "
            f"{dataset.folder} changed since); pass --force to train it again"
        )
    if replacing or not store.resumable(folder):
        if current == "absent":
            _note_runs_of_other_code(config, folder, shown)
        store.start_run(target, config, _environment(config, dataset, device))


def _trained(config: RunConfig, dataset: Dataset, target: Path, device, shown, hooks: FitHooks):
    """(model, selected epoch): the model built and fitted (from its checkpoint when `target` holds one), its
    weights saved and the run marked trained."""
    model = _built(config, dataset, device)
    best_epoch = fit(config, dataset, model, shown, hooks)
    store.save_weights(model, target)
    store.mark_trained(target, best_epoch)
    store.drop_checkpoint(target)
    return model, best_epoch


def _environment(config: RunConfig, dataset: Dataset, device) -> dict:
    """environment.json's run-specific part: seed, data identity, device, threads, packages and plugins."""
    return {
        "seed": config.seed,
        "data_hash": dataset.data_hash,
        "data_identity": IDENTITY,
        "device": str(device),
        "threads": torch.get_num_threads(),
        "data_folder": str(dataset.folder),
        "dataset_card": dataset.card,
        "packages": store.package_versions(),
        "plugins": plugins.recorded(),
    }


def _hooks(config: RunConfig, dataset: Dataset, folder: Path, checkpoint_every: int | None, label) -> FitHooks:
    """The loop's validation (the config's metric on the valid split, when there is one), epochs.jsonl and
    checkpoint.pt in `folder`; `label` names the run's progress lines."""
    metric, k = config.valid_metric_name

    def validate(model, after_batch) -> float:
        return evaluate(model, dataset, "valid", [k], config.eval_batch_size, after_batch=after_batch).values[
            (metric, k, "all")
        ]

    return FitHooks(
        validate=validate if dataset.valid is not None else None,
        log_epoch=lambda record: store.log_epoch(folder, record),
        checkpoint=folder / store.CHECKPOINT,
        checkpoint_every=checkpoint_every,
        resumed=lambda epochs_done: store.resume_run(folder, epochs_done),
        label=label,
    )


def _built(config: RunConfig, dataset: Dataset, device: torch.device):
    try:
        return build_model(config, dataset, device)
    except (MemoryError, RuntimeError) as exc:
        if isinstance(exc, RuntimeError) and "memory" not in str(exc).lower() and "alloc" not in str(exc).lower():
            raise
        gib = (dataset.n_users + dataset.n_items) * config.dim * 4 / 2**30
        raise RecxError(
            f"dim = {config.dim}: the embedding tables alone need about {gib:,.1f} GiB on {device}, "
            "more than is available; choose a smaller dim"
        ) from None


def _evaluate_splits(
    config: RunConfig, dataset: Dataset, model, ks: list[int], progress: Progress, folder: Path
) -> pd.DataFrame:
    """Long results of valid (when present) and test; each split's per-user values go to `folder`."""
    splits = ("valid", "test") if dataset.valid is not None else ("test",)
    frames = []
    for split in splits:
        with shown_task(progress, f"evaluating {split}") as advance:
            evaluation = evaluate(
                model,
                dataset,
                split,
                ks,
                config.eval_batch_size,
                keep_topk=True,
                keep_per_user=True,
                after_batch=advance,
            )
        write_per_user(folder, split, evaluation)
        write_topk(folder, split, evaluation)
        frames.append(store.results_frame(config, split, evaluation.values))
    return pd.concat(frames, ignore_index=True)


def _interrupted(folder: Path, phase: str, replacing: bool) -> str:
    if replacing:
        return f"{phase} of run {folder.name} (--force); the previous run in {folder} is unchanged"
    if phase == "evaluation":
        return (
            f"evaluation of run {folder.name}; kept its weights and {store.epochs_recorded(folder)} epochs in "
            f"{folder} (trained): `recx eval {folder}` works, and the same train (or sweep) finishes the evaluation"
        )
    if store.resumable(folder):
        return (
            f"training of run {folder.name} after {store.epochs_recorded(folder)} epochs; {folder} is kept "
            "with its checkpoint: the same train (or sweep) goes on from its last checkpoint"
        )
    return (
        f"training of run {folder.name} after {store.epochs_recorded(folder)} epochs; {folder} is kept and "
        "marked incomplete: the same train (or sweep) restarts it from the first epoch"
    )


def _kept_after_failed_checkpoint(folder: Path, replacing: bool) -> str:
    """What a checkpoint that could not be written leaves (the run is kept as an interrupted one would be)."""
    if replacing:
        kept = f"the previous run in {folder} is unchanged (--force writes the new one aside)"
    elif store.resumable(folder):
        kept = f"{folder} keeps its previous checkpoint, from which the same command goes on"
    else:
        kept = f"{folder} is kept, marked incomplete: the same command trains it from the first epoch"
    return f"{kept}. Free some space (or raise the file-size limit), then run the same command again"


def _save_traceback(folder: Path) -> Path | None:
    """The full traceback of the exception being handled, in the run folder's error.log."""
    log = folder / "error.log"
    try:
        write_text_atomic(log, "".join(traceback.format_exception(*sys.exc_info())))
    except RecxError:
        return None
    return log
