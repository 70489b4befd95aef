"""The report's grid points (grid.csv and its section): every grid point each method's sweep tried, with its
validation value of the selection metric (mean over seeds), the point the method's row reports marked, from the
sweeps' grid.parquet (recx.sweeps.grid). A row that is "the best of N points" can then be checked point by point."""

from __future__ import annotations

import ast
from pathlib import Path

import pandas as pd

from recx.sweeps.grid import COLUMNS, read_tried_points


def tried(sources: list, results: pd.DataFrame) -> pd.DataFrame:
    """The grid points tried for the (dataset, method) rows of `results`, from the grid.parquet beside each results
    file (none for an older sweep's)."""
    frames = [frame for source in sources if (frame := read_tried_points(Path(source).parent)) is not None]
    if not frames:
        return pd.DataFrame(columns=COLUMNS)
    points = pd.concat(frames, ignore_index=True).drop_duplicates("run_id", keep="last")
    shown = results[["dataset", "method"]].drop_duplicates()
    return points.merge(shown, on=["dataset", "method"]).reset_index(drop=True)


def shown_point(label: str) -> str:
    """A grid point's label (repr of its sorted (key, value) pairs) as `key=value, ...` ('(none)' without keys)."""
    pairs = ast.literal_eval(label) if label else []
    return ", ".join(f"{key}={value}" for key, value in pairs) or "(none)"


def to_markdown(points: pd.DataFrame, planned: dict) -> list[str]:
    """One table per (dataset, method) with more than one point: each point, its seeds, its mean validation value
    and whether the row reports it; `planned` the sweeps' record ({dataset: {method: {"grid_points": n}}})."""
    lines = []
    for (dataset, method), group in points.groupby(["dataset", "method"], sort=False):
        per_point = group.groupby("grid_point", sort=False).agg(
            seeds=("seed", "nunique"), value=("value", "mean"), reported=("reported", "any")
        )
        if len(per_point) < 2:
            continue
        of = planned.get(dataset, {}).get(method, {}).get("grid_points")
        metric = group.metric.iloc[0]
        lines += [
            f"**{dataset}, {method}**: {len(per_point)}{f' of {of}' if of else ''} grid points",
            "",
            f"| grid point | seeds | validation {metric} | reported |",
            "| --- | ---: | ---: | --- |",
            *[
                f"| {shown_point(label)} | {row.seeds} | {row.value:.4f} | {'**yes**' if row.reported else ''} |"
                for label, row in per_point.sort_values("value", ascending=False).iterrows()
            ],
            "",
        ]
    return lines


def section(points: pd.DataFrame, planned: dict) -> list[str]:
    """The report.md section (nothing when no method tried more than one point)."""
    tables = to_markdown(points, planned)
    if not tables:
        return []
    return [
        "## Grid points",
        "",
        "Each method's row is its grid point with the best mean validation value of the runs' selection metric over "
        "seeds; every point tried, best first (`grid.csv`: one row per run).",
        "",
        *tables,
    ]
