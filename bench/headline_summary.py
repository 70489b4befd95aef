"""What the headline runs reached, read from their folders: one row per planned run (experiment, dataset, method,
grid point) with its state, epochs against its cap, what stopped it, its training and wall seconds and its test
figure of the experiment's headline metric beside the paper's; rendered as markdown and JSON.

Why a run stopped: a complete run's reason is the report's (recx.reports.budget: early stopping, fixed budget, epoch
cap); an incomplete one was stopped by the time budget (its checkpoint kept, or none written yet: checkpoints are
written every 60 s), or failed (error.log), or ended with its sweep; a run with no folder was not started.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

import pandas as pd

from recx.reports.budget import run_budget
from recx.runs import store
from recx.sweeps.experiments import PlannedRun


@dataclass
class RunRow:
    experiment: str
    dataset: str
    method: str
    grid_point: str
    run_id: str
    cap: int
    metric: str  # the figure compared, on the test split
    paper: float | None = None
    state: str = "not started"  # or complete, trained, stopped, failed
    epochs: int = 0
    stopped_by: str = ""
    train_s: float = 0.0
    wall_s: float | None = None
    test: float | None = None


def headline_metric(paper: dict | None, run: PlannedRun) -> tuple[str, int]:
    """The experiment's first paper figure's metric (the one its headline compares), else the run's validation one."""
    values = (paper or {}).get("values") or []
    return (values[0]["metric"], int(values[0]["k"])) if values else run.config.valid_metric_name


def paper_value(paper: dict | None, run: PlannedRun, metric: str, k: int) -> float | None:
    wanted = (run.config.dataset, run.method, metric, k)
    values = (paper or {}).get("values") or []
    return next((v["value"] for v in values if (v["dataset"], v["method"], v["metric"], int(v["k"])) == wanted), None)


def test_value(folder: Path, metric: str, k: int) -> float | None:
    frame = pd.read_parquet(folder / "results.parquet")
    rows = frame[(frame.split == "test") & (frame.stratum == "all") & (frame.metric == metric) & (frame.k == k)]
    return float(rows.value.iloc[0]) if len(rows) else None


def wall_seconds(folder: Path, end: str) -> float | None:
    """From config.yaml's writing (the run's start) to `end`'s last change (time between resumed tries included)."""
    start, last = folder / "config.yaml", folder / end
    if not (start.is_file() and last.is_file()):
        return None
    return round(last.stat().st_mtime - start.stat().st_mtime, 1)


def unfinished(folder: Path, sweep_stopped: bool) -> tuple[str, str]:
    """(state, why) of a run folder that is not complete."""
    if store.state(folder) == "trained":
        return "trained", "the time budget, in evaluation (weights kept: the sweep finishes it)"
    if (folder / "error.log").is_file():
        return "failed", "an error (error.log)"
    if not sweep_stopped:
        return "stopped", "its sweep's end (see the sweep's log)"
    kept = "checkpoint kept" if (folder / store.CHECKPOINT).is_file() else "no checkpoint yet: restarts from epoch 1"
    return "stopped", f"the time budget ({kept})"


def run_row(experiment: str, run: PlannedRun, folder: Path, paper: dict | None, sweep_stopped: bool) -> RunRow:
    """The row of one planned run from its folder; `sweep_stopped`: its sweep was stopped by the time budget."""
    metric, k = headline_metric(paper, run)
    point = ", ".join(f"{key}={value}" for key, value in sorted(run.grid_point.items()))
    row = RunRow(experiment, run.config.dataset, run.method, point, run.run_id, run.config.epochs, f"{metric}@{k}")
    row.paper = paper_value(paper, run, metric, k)
    if not folder.is_dir():
        row.stopped_by = "the time budget (not started)" if sweep_stopped else "its sweep's end (not started)"
        return row
    budget = run_budget(folder, (paper or {}).get("epochs"))
    row.epochs, row.train_s = budget.epochs, round(budget.seconds, 1)
    if store.is_complete(folder):
        row.state, row.stopped_by = "complete", budget.stopped
        row.wall_s, row.test = wall_seconds(folder, store.COMPLETE), test_value(folder, metric, k)
    else:
        row.state, row.stopped_by = unfinished(folder, sweep_stopped)
        row.wall_s = wall_seconds(folder, "epochs.jsonl")
    return row


def _cell(value) -> str:
    if value is None:
        return ""
    return f"{value:.4f}" if isinstance(value, float) else str(value)


def markdown(rows: list[RunRow], sweeps: dict[str, dict], header: list[str]) -> str:
    """The summary: `header` lines, then per experiment its sweep's line and one table row per run."""
    lines = [*header, ""]
    for experiment, sweep in sweeps.items():
        mine = [row for row in rows if row.experiment == experiment]
        done = sum(row.state == "complete" for row in mine)
        lines += [f"## {experiment}", "", f"{done} of {len(mine)} runs complete; {sweep['line']}", ""]
        lines += [
            "| dataset | method | grid point | state | epochs / cap | stopped by | train s | wall s | test | paper |",
            "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
        ]
        for row in mine:
            test = f"{row.metric} {_cell(row.test)}" if row.test is not None else ""
            cells = [row.dataset, row.method, row.grid_point, row.state, f"{row.epochs} / {row.cap}", row.stopped_by]
            cells += [f"{row.train_s:.0f}", _cell(None if row.wall_s is None else round(row.wall_s)), test]
            lines.append("| " + " | ".join([*cells, _cell(row.paper)]) + " |")
        lines.append("")
    return "\n".join(lines)


def as_json(rows: list[RunRow], sweeps: dict[str, dict], about: dict) -> dict:
    return {
        **about,
        "experiments": {
            name: {**sweep, "runs": [asdict(r) for r in rows if r.experiment == name]} for name, sweep in sweeps.items()
        },
    }
