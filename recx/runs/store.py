"""A run folder (DESIGN.md "Runs and results").

    config.yaml       the fully resolved configuration (its hash is the run id)
    environment.json  seed, data hash, device, package versions
    epochs.jsonl      one line per epoch: loss, seconds, validation metric
    model.pt          the weights of the selected epoch
    results.parquet   long format: run_id, dataset, model, loss, sampler, seed, split, metric, k, stratum, value
    COMPLETE          written last; a folder without it is not a completed run
"""
from __future__ import annotations

import json
import platform
import sys
from importlib import metadata
from pathlib import Path

import pandas as pd
import yaml

from recx.config import RunConfig, resolve
from recx.errors import RecxError

MARKER = "COMPLETE"
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


def start_run(folder: Path, config: RunConfig, environment: dict) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / MARKER).unlink(missing_ok=True)
    (folder / "epochs.jsonl").unlink(missing_ok=True)
    (folder / "config.yaml").write_text(yaml.safe_dump(config.to_dict(), sort_keys=True))
    (folder / "environment.json").write_text(json.dumps(environment, indent=2, sort_keys=True) + "\n")


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


def mark_complete(folder: Path) -> None:
    (folder / MARKER).write_text("ok\n")


def open_completed_run(folder: Path) -> RunConfig:
    if not folder.is_dir():
        raise RecxError(f"{folder}: no such run folder")
    if not is_complete(folder):
        raise RecxError(f"{folder} is not a completed run (no {MARKER} marker); train it first")
    return resolve(yaml.safe_load((folder / "config.yaml").read_text()), where=str(folder / "config.yaml"))
