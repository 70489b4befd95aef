"""Each method's grid points: the one its table row reports, the point with the best mean validation metric over
seeds (the test values of that point), and every point tried with that figure (`grid.parquet` beside the sweep's
results.parquet, which `recx report` turns into grid.csv), so that a row's "best of N points" can be checked."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from recx.core.folders import atomic_file
from recx.sweeps.experiments import PlannedRun

FILE = "grid.parquet"
COLUMNS = ["dataset", "method", "grid_point", "seed", "run_id", "metric", "value", "reported"]


def labelled(results: pd.DataFrame, runs: list[PlannedRun]) -> pd.DataFrame:
    """`results` with each run's grid point as a label (its swept keys and values, sorted)."""
    label = {run.run_id: repr(sorted(run.grid_point.items())) for run in runs}
    return results.assign(grid_point=results.run_id.map(label))


def selection_values(results: pd.DataFrame, runs: list[PlannedRun]) -> tuple[pd.DataFrame, str]:
    """Each run's validation value of the selection metric (the runs' `valid_metric`, overall), and its name."""
    metric, k = runs[0].config.valid_metric_name
    valid = results[
        (results.split == "valid") & (results.metric == metric) & (results.k == k) & (results.stratum == "all")
    ]
    return valid, f"{metric}@{k}"


def best_points(valid: pd.DataFrame) -> pd.DataFrame:
    """(dataset, method, grid_point) of each method's best mean validation value over seeds."""
    means = valid.groupby(["dataset", "method", "grid_point"])["value"].mean().reset_index()
    return means.loc[means.groupby(["dataset", "method"])["value"].idxmax(), ["dataset", "method", "grid_point"]]


def select_grid_points(results: pd.DataFrame, runs: list[PlannedRun]) -> pd.DataFrame:
    """Keep, per (dataset, method), the grid point with the best mean validation metric over seeds."""
    results = labelled(results, runs)
    valid, _ = selection_values(results, runs)
    if valid.empty or results.grid_point.nunique() <= 1:
        return results
    return results.merge(best_points(valid), on=["dataset", "method", "grid_point"])


def tried_points(results: pd.DataFrame, runs: list[PlannedRun]) -> pd.DataFrame:
    """Every run's grid point and validation value of the selection metric (COLUMNS), `reported` True on the points
    `select_grid_points` keeps."""
    results = labelled(results, runs)
    valid, name = selection_values(results, runs)
    if valid.empty:
        return pd.DataFrame(columns=COLUMNS)
    kept = best_points(valid).assign(reported=True)
    tried = valid.merge(kept, on=["dataset", "method", "grid_point"], how="left")
    tried = tried.assign(metric=name, reported=tried.reported.eq(True))
    return tried[COLUMNS].sort_values(["dataset", "method", "grid_point", "seed"]).reset_index(drop=True)


def write_tried_points(tried: pd.DataFrame, out: Path) -> None:
    """grid.parquet in `out`, replaced atomically (two sweeps of one experiment may finish at once)."""
    with atomic_file(out / FILE) as partial:
        tried.to_parquet(partial, index=False)


def read_tried_points(folder: Path) -> pd.DataFrame | None:
    """The grid.parquet in `folder` (a sweep's output folder), None when there is none (an older sweep's)."""
    path = folder / FILE
    return pd.read_parquet(path) if path.is_file() else None
