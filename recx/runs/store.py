"""A run folder (docs/design.md "Runs and results").

    INCOMPLETE        written first: training started and has not finished
    config.yaml       the fully resolved configuration (its hash is the run id)
    environment.json  seed, data hash, device, package versions
    epochs.jsonl      one line per epoch: loss, seconds, validation metric
    checkpoint.pt     while training: the state after the last checkpointed epoch (recx.train.checkpoint); a later
                      train resumes from it; removed once model.pt is written
    model.pt          the weights of the selected epoch
    TRAINED           written after model.pt: {"best_epoch": n}; evaluation may still be missing
    results.parquet   long format: run_id, dataset, model, loss, sampler, seed, split, metric, k, stratum, value
    diagnostics.json  embedding diagnostics (only with --diagnostics)
    error.log         the traceback of an unexpected internal error
    COMPLETE          written last; a folder without it is not a completed run

States (`state`): absent, empty, incomplete (a later train resumes it from its checkpoint, else restarts it), trained (`recx eval` works; a later train
finishes the evaluation), complete (a later train refuses it unless --force), foreign (not a run folder: refused).
"""
from __future__ import annotations

import json
import pickle
import platform
import sys
import zipfile
from importlib import metadata
from pathlib import Path

import pandas as pd
import torch
import yaml

from recx.config import RunConfig, resolve
from recx.errors import RecxError

MARKER = "COMPLETE"
TRAINED = "TRAINED"
INCOMPLETE = "INCOMPLETE"
CHECKPOINT = "checkpoint.pt"
RUN_FILES = (MARKER, TRAINED, "epochs.jsonl", "model.pt", "results.parquet", "per_user_valid.parquet",
             "per_user_test.parquet", "diagnostics.json", "error.log", CHECKPOINT)
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
    return (folder / MARKER).is_file()


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
    folder.mkdir(parents=True, exist_ok=True)
    (folder / INCOMPLETE).write_text("training started; not finished\n")
    for name in RUN_FILES:
        (folder / name).unlink(missing_ok=True)
    (folder / "config.yaml").write_text(yaml.safe_dump(config.to_dict(), sort_keys=True))
    (folder / "environment.json").write_text(json.dumps(environment, indent=2, sort_keys=True) + "\n")


def resumable(folder: Path) -> bool:
    """An incomplete run with a checkpoint to train on from."""
    return state(folder) == "incomplete" and (folder / CHECKPOINT).is_file()


def resume_run(folder: Path, epochs_done: int) -> None:
    """Keep the first `epochs_done` lines of epochs.jsonl (an epoch logged after the last checkpoint is trained
    again) and the error.log of the attempt before is removed."""
    path = folder / "epochs.jsonl"
    lines = path.read_text().splitlines(keepends=True)[:epochs_done] if path.is_file() else []
    partial = folder / ".epochs.jsonl.partial"
    partial.write_text("".join(lines))
    partial.replace(path)
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


def log_epoch(folder: Path, record: dict) -> None:
    with open(folder / "epochs.jsonl", "a") as handle:
        handle.write(json.dumps(record, sort_keys=True) + "\n")


def results_frame(config: RunConfig, split: str, values: dict[tuple[str, int, str], float]) -> pd.DataFrame:
    rows = [{"run_id": config.run_id(), "dataset": config.dataset, "model": config.model, "loss": config.loss,
             "sampler": config.sampler, "seed": config.seed, "split": split, "metric": metric, "k": k,
             "stratum": stratum, "value": value}
            for (metric, k, stratum), value in sorted(values.items())]
    return pd.DataFrame(rows, columns=RESULT_COLUMNS)


def write_results(folder: Path, frame: pd.DataFrame, name: str = "results.parquet") -> None:
    frame.to_parquet(folder / name, index=False)


def clear_run(folder: Path) -> None:
    """Remove every file a run writes (for a folder that was empty before the run started)."""
    for name in RUN_FILES + STARTED_FILES:
        (folder / name).unlink(missing_ok=True)


def load_weights(model, folder: Path, device) -> None:
    """model.pt into `model`; a missing, truncated or mismatched file is named."""
    path = folder / "model.pt"
    try:
        model.load_state_dict(torch.load(path, map_location=device))
    except FileNotFoundError:
        raise RecxError(f"{path}: missing; the run folder is damaged (train it again with --force)") from None
    except (OSError, RuntimeError, EOFError, ValueError, KeyError, TypeError, AttributeError,
            pickle.UnpicklingError, zipfile.BadZipFile) as exc:
        raise RecxError(f"{path}: truncated, corrupt or from another configuration ({type(exc).__name__}); "
                        "train the run again with --force") from None


def mark_trained(folder: Path, best_epoch: int) -> None:
    (folder / TRAINED).write_text(json.dumps({"best_epoch": best_epoch}) + "\n")


def trained_epoch(folder: Path) -> int:
    try:
        return int(json.loads((folder / TRAINED).read_text())["best_epoch"])
    except (OSError, ValueError, KeyError, TypeError):
        raise RecxError(f"{folder / TRAINED}: unreadable; train the run again with --force") from None


def mark_complete(folder: Path) -> None:
    (folder / MARKER).write_text("ok\n")
    (folder / INCOMPLETE).unlink(missing_ok=True)


def epochs_recorded(folder: Path) -> int:
    path = folder / "epochs.jsonl"
    return len(path.read_text().splitlines()) if path.is_file() else 0


def read_config(folder: Path) -> dict:
    """The raw mapping of the run's config.yaml; errors name the file."""
    path = folder / "config.yaml"
    try:
        content = yaml.safe_load(path.read_text())
    except FileNotFoundError:
        raise RecxError(f"{path}: missing; the run folder is damaged (train it again with --force)") from None
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise RecxError(f"{path}: unreadable or not valid YAML ({type(exc).__name__}); "
                        "train the run again with --force") from None
    if not isinstance(content, dict):
        raise RecxError(f"{path}: expected a mapping of config keys; train the run again with --force")
    return content


def open_trained_run(folder: Path) -> RunConfig:
    """The config of a complete or trained run (weights saved); errors name the folder or file at fault."""
    if not folder.is_dir():
        raise RecxError(f"{folder}: no such run folder")
    if state(folder) not in ("complete", "trained"):
        raise RecxError(f"{folder} is not a completed run (no {MARKER} or {TRAINED} marker); train it first")
    return resolve(read_config(folder), where=str(folder / "config.yaml"))
