"""Convergence curves of a sweep (the RG paper's Figure 1: validation metric against wall-clock training time).

One row per (run, epoch) from each run's epochs.jsonl: method, dataset, seed, epoch, the epoch's training seconds,
`cumulative_seconds` (training time up to the end of the epoch, validation excluded), the training loss and the
validation metric of that epoch.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from recx.runs import store

FILE = "convergence.parquet"


COLUMNS = ["run_id", "method", "dataset", "model", "seed", "epoch", "seconds", "cumulative_seconds", "loss"]


def convergence_frame(runs, runs_dir: Path) -> pd.DataFrame:
    """`runs`: the sweep's planned runs (method, config); their folders under `runs_dir`. A run without epochs
    (MostPop: nothing to train) has no rows."""
    return _stacked(
        _curve(
            runs_dir / run.config.run_id(),
            {
                "run_id": run.config.run_id(),
                "method": run.method,
                "dataset": run.config.dataset,
                "model": run.config.model,
                "seed": run.config.seed,
            },
            run.config.valid_metric,
        )
        for run in runs
    )


def run_curves(runs: pd.DataFrame, folders: dict[str, Path]) -> pd.DataFrame:
    """The same rows for the runs of a results table (columns run_id, method, dataset, model, seed; one or more rows
    a run), read from `folders[run_id]`; the validation metric is the one its epochs.jsonl holds."""
    identities = runs.drop_duplicates("run_id")[["run_id", "method", "dataset", "model", "seed"]]
    return _stacked(
        _curve(folders[identity["run_id"]], identity, None)
        for identity in identities.to_dict("records")
        if identity["run_id"] in folders
    )


def _curve(folder: Path, identity: dict, valid_metric: str | None) -> pd.DataFrame | None:
    """One run's rows: its identity, then epoch, seconds, cumulative_seconds, loss, valid_metric and valid_value
    (NaN where it was not validated); None when it has no epochs. `valid_metric` None: the epochs' own."""
    records = pd.DataFrame(store.read_epochs(folder))
    if records.empty:
        return None
    if valid_metric is None:
        named = [column[len("valid_") :] for column in records.columns if column.startswith("valid_")]
        valid_metric = named[0] if named else ""
    valid = f"valid_{valid_metric}"
    return pd.DataFrame(
        {
            **identity,
            "epoch": records["epoch"],
            "seconds": records["seconds"],
            "cumulative_seconds": records["seconds"].cumsum(),
            "loss": records["loss"],
            "valid_metric": valid_metric,
            "valid_value": records[valid] if valid in records else float("nan"),
        }
    )


def _stacked(curves) -> pd.DataFrame:
    """The runs' rows one under another (the columns alone when no run has epochs)."""
    frames = [curve for curve in curves if curve is not None]
    empty = pd.DataFrame(columns=[*COLUMNS, "valid_metric", "valid_value"])
    return pd.concat(frames, ignore_index=True) if frames else empty
