"""A run folder (docs/design.md "Runs and results").

    INCOMPLETE        written first: training started and has not finished
    config.yaml       the fully resolved configuration (its hash is the run id)
    environment.json  seed, data hash, device, package versions
    epochs.jsonl      one line per epoch: loss, seconds, validation metric
    checkpoint.pt     while training: the state at the last checkpoint, after an epoch or between two steps
                      (recx.training.checkpoint); a later train resumes from it; removed once model.pt is written
    model.pt          the weights of the selected epoch
    TRAINED           written after model.pt: {"best_epoch": n}; evaluation may still be missing
    results.parquet   long format: run_id, dataset, model, loss, sampler, seed, split, metric, k, stratum, value
    per_user_<split>.parquet, topk_<split>.parquet, catalogue.parquet
                      per-user values, the top-K lists and the catalogue they were scored on (recx.runs.per_user)
    diagnostics.json  embedding diagnostics (only with --diagnostics)
    checksums.json    the sha256 of each artifact above (weights, results, per-user results, diagnostics, eval_*),
                      recorded when the artifact is complete and checked on every read
    error.log         the traceback of an unexpected internal error
    COMPLETE          written last; a folder without it is not a completed run

A folder of evaluated lists (recx.runs.lists) holds `lists.json` (what was evaluated) instead of config.yaml and the
training files, and the same results, per-user results, checksums and COMPLETE.

Every file is written whole (a temporary name, then a rename): a failed or interrupted write leaves the previous
file, never a part of one. A folder written by an older recx has no checksums.json: it is read unchecked, with one
note saying so.

States (`state`): absent, empty, incomplete (a later train resumes it from its checkpoint, else restarts it),
trained (`recx eval` works; a later train
finishes the evaluation), complete (a later train refuses it unless --force), foreign (not a run folder: refused).
"""

from __future__ import annotations

import json
import pickle
import platform
import sys
import zipfile
from dataclasses import fields
from importlib import metadata
from pathlib import Path
from typing import Callable

import pandas as pd
import torch
import yaml

from recx.config.run_config import RunConfig
from recx.core.errors import RecxError
from recx.core.folders import atomic_file, write_failed, write_text_atomic
from recx.data.dataset import Dataset
from recx.data.dataset_folder import sha256_of
from recx.models.registry import own_objective

COMPLETE = "COMPLETE"
TRAINED = "TRAINED"
INCOMPLETE = "INCOMPLETE"
CHECKPOINT = "checkpoint.pt"
CHECKSUMS = "checksums.json"
LISTS_FILE = "lists.json"
RUN_FILES = (
    COMPLETE,
    TRAINED,
    "epochs.jsonl",
    "model.pt",
    "results.parquet",
    "per_user_valid.parquet",
    "per_user_test.parquet",
    "topk_valid.parquet",
    "topk_test.parquet",
    "catalogue.parquet",
    "diagnostics.json",
    "error.log",
    CHECKPOINT,
    CHECKSUMS,
)
NOT_KEPT = "the run is not complete: the same command restarts or finishes it"
_NOTED: set[str] = set()
STARTED_FILES = (INCOMPLETE, "config.yaml", "environment.json")
RESULT_COLUMNS = ["run_id", "dataset", "model", "loss", "sampler", "seed", "split", "metric", "k", "stratum", "value"]
PACKAGES = ("recx", "torch", "numpy", "pandas", "pyarrow", "scipy")


def package_versions() -> dict[str, str]:
    versions = {"python": sys.version.split()[0], "platform": platform.platform()}
    for name in PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = "not installed"
    return versions


def is_complete(folder: Path) -> bool:
    return (folder / COMPLETE).is_file()


def state(folder: Path) -> str:
    """absent, empty, incomplete, trained, complete, or foreign (a folder recx did not write as a run)."""
    if not folder.exists():
        return "absent"
    if not folder.is_dir():
        return "foreign"
    if is_complete(folder):
        return "complete"
    if (folder / TRAINED).is_file() and (folder / "model.pt").is_file():
        return "trained"
    if (folder / INCOMPLETE).is_file():
        return "incomplete"
    return "empty" if not any(folder.iterdir()) else "foreign"


def start_run(folder: Path, config: RunConfig, environment: dict) -> None:
    """Mark the folder incomplete, clear what an earlier attempt left, write config and environment."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        write_text_atomic(folder / INCOMPLETE, "training started; not finished\n")
        for name in RUN_FILES:
            (folder / name).unlink(missing_ok=True)
    except OSError as exc:
        raise write_failed(folder / INCOMPLETE, exc, NOT_KEPT) from None
    write_text_atomic(folder / "config.yaml", yaml.safe_dump(config.to_dict(), sort_keys=True), NOT_KEPT)
    write_text_atomic(folder / "environment.json", json.dumps(environment, indent=2, sort_keys=True) + "\n", NOT_KEPT)


def resumable(folder: Path) -> bool:
    """An incomplete run with a checkpoint to train on from."""
    return state(folder) == "incomplete" and (folder / CHECKPOINT).is_file()


def resume_run(folder: Path, epochs_done: int) -> None:
    """Keep the first `epochs_done` lines of epochs.jsonl (an epoch logged after the last checkpoint is trained
    again) and the error.log of the attempt before is removed."""
    path = folder / "epochs.jsonl"
    lines = path.read_text().splitlines(keepends=True)[:epochs_done] if path.is_file() else []
    write_text_atomic(path, "".join(lines), NOT_KEPT)
    (folder / "error.log").unlink(missing_ok=True)


def drop_checkpoint(folder: Path) -> None:
    (folder / CHECKPOINT).unlink(missing_ok=True)


def read_environment(folder: Path) -> dict:
    """environment.json, which must name the data folder and hash; errors name the file."""
    path = folder / "environment.json"
    try:
        environment = json.loads(path.read_text())
        environment["data_folder"], environment["data_hash"]
    except FileNotFoundError:
        raise RecxError(f"{path}: missing; the run folder is damaged (train it again with --force)") from None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise RecxError(f"{path}: unreadable ({type(exc).__name__}); train the run again with --force") from None
    return environment


def trained_on(folder: Path, dataset: Dataset) -> bool:
    """Whether the run in `folder` recorded `dataset`'s data (its identity, or for a run written before recx hashed
    the content, the files' bytes or the same card: Dataset.holds_data_of)."""
    environment = read_environment(folder)
    recorded, identity = environment["data_hash"], environment.get("data_identity")
    same = dataset.holds_data_of(recorded, identity, environment.get("dataset_card"))
    if same and identity is None and recorded != dataset.file_hash:
        print(
            f"note: {folder} recorded its data by the Parquet files' bytes (a recx before content identity); "
            f"{dataset.folder} holds other bytes with the same card (source, parameters, counts): taken as the same data",
            file=sys.stderr,
        )
    return same


def log_epoch(folder: Path, record: dict) -> None:
    """One line appended to epochs.jsonl (a line is the unit: a run restarted reads whole lines only)."""
    try:
        with open(folder / "epochs.jsonl", "a") as handle:
            handle.write(json.dumps(record, sort_keys=True) + "\n")
    except OSError as exc:
        raise write_failed(folder / "epochs.jsonl", exc, NOT_KEPT) from None


def recorded_checksums(folder: Path) -> dict | None:
    """name -> sha256 of the run's artifacts, or None for a folder written before recx recorded them."""
    path = folder / CHECKSUMS
    try:
        content = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise RecxError(f"{path}: unreadable ({type(exc).__name__}); train the run again with --force") from None
    if not isinstance(content, dict):
        raise RecxError(f"{path}: expected a mapping of file names to sha256; train the run again with --force")
    return content


def record_checksum(folder: Path, name: str, kept: str = NOT_KEPT) -> None:
    """Add (or replace) the sha256 of `folder/name`, now complete, in checksums.json."""
    checksums = recorded_checksums(folder) or {}
    checksums[name] = sha256_of(folder / name)
    write_text_atomic(folder / CHECKSUMS, json.dumps(checksums, indent=2, sort_keys=True) + "\n", kept)


def _note_unchecked(folder: Path, name: str) -> None:
    if str(folder) not in _NOTED:
        _NOTED.add(str(folder))
        print(
            f"note: {folder} has no recorded checksum of {name} (written by an older recx): its files are read "
            "without a damage check",
            file=sys.stderr,
        )


def verify(folder: Path, name: str, remedy: str) -> None:
    """Refuse `folder/name` when its sha256 differs from the recorded one; without a record, say so once."""
    expected = (recorded_checksums(folder) or {}).get(name)
    if expected is None:
        _note_unchecked(folder, name)
        return
    try:
        actual = sha256_of(folder / name)
    except FileNotFoundError:
        raise RecxError(f"{folder / name}: missing; the run folder is damaged ({remedy})") from None
    if actual != expected:
        raise RecxError(
            f"{folder / name}: changed or damaged since recx wrote it (its sha256 differs from the one "
            f"recorded in {CHECKSUMS}); {remedy}"
        )


def write_artifact(folder: Path, name: str, write: Callable[[Path], object], kept: str = NOT_KEPT) -> None:
    """`write(path)` to a temporary name, renamed to `folder/name` when complete; then its checksum is recorded."""
    with atomic_file(folder / name, kept) as partial:
        write(partial)
    record_checksum(folder, name, kept)


def results_frame(config: RunConfig, split: str, values: dict[tuple[str, int, str], float]) -> pd.DataFrame:
    """Long-format results; a model with its own objective (`losses = ()`: ALS, MostPop) records no loss and no
    sampler (its configuration's are defaults it never used)."""
    none = own_objective(config.model)
    run = {
        "run_id": config.run_id(),
        "dataset": config.dataset,
        "model": config.model,
        "loss": None if none else config.loss,
        "sampler": None if none else config.sampler,
        "seed": config.seed,
    }
    return result_rows(run, split, values)


def result_rows(run: dict, split: str, values: dict[tuple[str, int, str], float]) -> pd.DataFrame:
    """The long results format (RESULT_COLUMNS): a row per (metric, k, stratum) of `values`, each with the run's
    identity `run` (run_id, dataset, model, loss, sampler, seed) and `split`."""
    rows = [
        {**run, "split": split, "metric": metric, "k": k, "stratum": stratum, "value": value}
        for (metric, k, stratum), value in sorted(values.items())
    ]
    return pd.DataFrame(rows, columns=RESULT_COLUMNS)


def write_results(folder: Path, frame: pd.DataFrame, name: str = "results.parquet", kept: str = NOT_KEPT) -> None:
    write_artifact(folder, name, lambda path: frame.to_parquet(path, index=False), kept)


def read_parquet(folder: Path, name: str, remedy: str) -> pd.DataFrame:
    """A run's Parquet artifact, checked against its recorded sha256; a damaged file is named with `remedy`."""
    verify(folder, name, remedy)
    try:
        return pd.read_parquet(folder / name)
    except FileNotFoundError:
        raise RecxError(f"{folder / name}: missing; {remedy}") from None
    except (OSError, ValueError) as exc:  # pyarrow's ArrowInvalid is a ValueError
        raise RecxError(f"{folder / name}: truncated or not a Parquet file ({type(exc).__name__}); {remedy}") from None


def clear_run(folder: Path) -> None:
    """Remove every file a run writes (for a folder that was empty before the run started)."""
    for name in RUN_FILES + STARTED_FILES:
        (folder / name).unlink(missing_ok=True)


def _save_state(state: dict, path: Path) -> None:
    """torch.save through a file object: an OS error (a full disk: ENOSPC) reaches the caller as the OSError it is,
    where torch.save to a path reports it as "[enforce fail at inline_container.cc]"."""
    with open(path, "wb") as handle:
        torch.save(state, handle)


def save_weights(model, folder: Path) -> None:
    """model.pt written whole; a failed write is one message (a full disk named as such)."""
    try:
        write_artifact(folder, "model.pt", lambda path: _save_state(model.state_dict(), path))
    except RuntimeError as exc:  # torch's own writer failed for a reason it does not give as an OSError
        raise write_failed(folder / "model.pt", exc, NOT_KEPT) from None


def load_weights(model, folder: Path, device) -> None:
    """model.pt into `model`; a missing, changed (checksum), truncated, mismatched or non-finite file is named."""
    path = folder / "model.pt"
    remedy = "train the run again with --force"
    try:
        state = torch.load(path, map_location=device, weights_only=True)
        verify(folder, "model.pt", remedy)
        model.load_state_dict(state)
    except FileNotFoundError:
        raise RecxError(f"{path}: missing; the run folder is damaged (train it again with --force)") from None
    except (
        OSError,
        RuntimeError,
        EOFError,
        ValueError,
        KeyError,
        TypeError,
        AttributeError,
        pickle.UnpicklingError,
        zipfile.BadZipFile,
    ) as exc:
        raise RecxError(
            f"{path}: truncated, corrupt or from another configuration ({type(exc).__name__}); {remedy}"
        ) from None
    bad = sum(
        int((~torch.isfinite(t)).sum()) for t in state.values() if isinstance(t, torch.Tensor) and t.is_floating_point()
    )
    if bad:
        raise RecxError(f"{path}: {bad:,} weights are not finite (nan or inf): the file is damaged; {remedy}")


def mark_trained(folder: Path, best_epoch: int) -> None:
    """TRAINED, after model.pt is saved: the weights' checksum is recorded here (however they were written)."""
    record_checksum(folder, "model.pt")
    write_text_atomic(folder / TRAINED, json.dumps({"best_epoch": best_epoch}) + "\n", NOT_KEPT)


def trained_epoch(folder: Path) -> int:
    try:
        return int(json.loads((folder / TRAINED).read_text())["best_epoch"])
    except (OSError, ValueError, KeyError, TypeError):
        raise RecxError(f"{folder / TRAINED}: unreadable; train the run again with --force") from None


def mark_complete(folder: Path) -> None:
    write_text_atomic(folder / COMPLETE, "ok\n", NOT_KEPT)
    (folder / INCOMPLETE).unlink(missing_ok=True)


def read_epochs(folder: Path) -> list[dict]:
    """The records of epochs.jsonl, one per trained epoch (epoch, loss, seconds, valid_<metric>); [] if absent."""
    path = folder / "epochs.jsonl"
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def epochs_recorded(folder: Path) -> int:
    path = folder / "epochs.jsonl"
    return len(path.read_text().splitlines()) if path.is_file() else 0


def read_config(folder: Path, required: bool = True) -> dict:
    """The raw mapping of the run's config.yaml ({} when absent and not `required`); errors name the file."""
    path = folder / "config.yaml"
    if not required and not path.is_file():
        return {}
    try:
        content = yaml.safe_load(path.read_text())
    except FileNotFoundError:
        raise RecxError(f"{path}: missing; the run folder is damaged (train it again with --force)") from None
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise RecxError(
            f"{path}: unreadable or not valid YAML ({type(exc).__name__}); train the run again with --force"
        ) from None
    if not isinstance(content, dict):
        raise RecxError(f"{path}: expected a mapping of config keys; train the run again with --force")
    return content


def open_trained_run(folder: Path) -> RunConfig:
    """The config of a complete or trained run (weights saved), as recorded: evaluating its saved model needs its
    model's name and arguments, not its loss or sampler (a plugin's may not be loaded); errors name the folder or
    file at fault."""
    if not folder.is_dir():
        raise RecxError(f"{folder}: no such run folder")
    if state(folder) not in ("complete", "trained"):
        raise RecxError(f"{folder} is not a completed run (no {COMPLETE} or {TRAINED} marker); train it first")
    if (folder / LISTS_FILE).is_file() and not (folder / "config.yaml").exists():
        raise RecxError(
            f"{folder} holds evaluated lists (recx eval --lists), not a trained run: it has no model to evaluate; "
            "its results are results.parquet (recx report reads them)"
        )
    return recorded_config(folder)


def recorded_config(folder: Path) -> RunConfig:
    """config.yaml as a RunConfig without resolving its names against the registries (it was resolved when the run
    was written): keys RunConfig does not know are refused."""
    raw = read_config(folder)
    known = {field.name for field in fields(RunConfig)}
    unknown = sorted(set(raw) - known)
    if unknown:
        raise RecxError(
            f"{folder / 'config.yaml'}: unknown key {unknown[0]!r} (written by another recx?); valid keys: "
            f"{', '.join(sorted(known))}"
        )
    return RunConfig(**raw)


def recorded_plugin(folder: Path, kind: str, name: str) -> str:
    """Which plugin environment.json records as registering `kind` `name` (`plugin P, version V, source S, code
    sha256 H`), else the plugins it records, else that it records none."""
    try:
        recorded = json.loads((folder / "environment.json").read_text()).get("plugins") or []
    except (OSError, ValueError, AttributeError):
        return f"{folder / 'environment.json'} records no plugin"

    def describe(plugin: dict) -> str:
        parts = [f"plugin {plugin.get('name')}", f"source {plugin.get('source')}", f"module {plugin.get('module')}"]
        if plugin.get("version"):
            parts.insert(1, f"version {plugin['version']}")
        if plugin.get("sha256"):
            parts.append(f"code sha256 {str(plugin['sha256'])[:12]}")
        return ", ".join(parts)

    owners = [plugin for plugin in recorded if f"{kind} {name}" in (plugin.get("names") or [])]
    if owners:
        return f"recorded in environment.json: {describe(owners[0])}"
    if recorded:
        return "environment.json records the plugins " + "; ".join(describe(plugin) for plugin in recorded)
    return f"{folder / 'environment.json'} records no plugin"
