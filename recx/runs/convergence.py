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


def convergence_frame(runs, runs_dir: Path) -> pd.DataFrame:
    """`runs`: the sweep's planned runs (method, config); their folders under `runs_dir`. A run without epochs
    (MostPop: nothing to train) has no rows."""
    frames = []
    for run in runs:
        records = pd.DataFrame(store.read_epochs(runs_dir / run.config.run_id()))
        if records.empty:
            continue
        valid = f"valid_{run.config.valid_metric}"
        frames.append(
            pd.DataFrame(
                {
                    "run_id": run.config.run_id(),
                    "method": run.method,
                    "dataset": run.config.dataset,
                    "model": run.config.model,
                    "seed": run.config.seed,
                    "epoch": records["epoch"],
                    "seconds": records["seconds"],
                    "cumulative_seconds": records["seconds"].cumsum(),
                    "loss": records["loss"],
                    "valid_metric": run.config.valid_metric,
                    "valid_value": records[valid] if valid in records else float("nan"),
                }
            )
        )
    columns = ["run_id", "method", "dataset", "model", "seed", "epoch", "seconds", "cumulative_seconds", "loss"]
    empty = pd.DataFrame(columns=[*columns, "valid_metric", "valid_value"])
    return pd.concat(frames, ignore_index=True) if frames else empty
