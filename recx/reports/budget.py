"""What each report row ran: epochs and why they stopped, grid points, seeds, device and
training time, so that a smoke run never reads as a reproduction.

Per run, from its folder: the epochs it ran (epochs.jsonl), its cap (config `epochs`), its patience, whether it
validated (a `valid_*` figure per epoch), the device (environment.json) and its training seconds (Σ of its epochs'
seconds: validation and checkpoints excluded). Why it stopped:
- `early stopping`: fewer epochs than its cap (patience ran out);
- `epoch cap, below the paper's N`: it reached a cap below the paper's epochs (`paper.epochs`; not for an alternating
  solver, whose iteration count is a tuned hyper-parameter, e.g. FastVAE Table 3's WRMF rows): marked ‡;
- `epoch cap`: it reached its cap while early stopping could still have ended it (it validated, patience < cap): it
  was still improving, so the row is marked ‡ (not converged);
- `fixed budget`: the cap is the protocol (no validation, or patience >= cap: the paper's fixed epoch count);
- `nothing to train`: no epoch (MostPop).
A row is marked § when it ran fewer grid points or seeds than its experiment plans (experiment.json), and ¶ when
runs of its results were left out because their folders are missing, incomplete or damaged
(recx.runs.collection.checked_runs): its seeds count the runs read ("1 of 2"), and `left out` names the others. A row
that ran more seeds than planned (`recx sweep --seeds`) says so: "3 (1 planned)".
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import pandas as pd

from recx.models.registry import MODELS
from recx.runs import store
from recx.runs.collection import LeftOut

CAPPED, REDUCED, LEFT_OUT = "‡", "§", "¶"
COLUMNS = [
    "dataset",
    "method",
    "mark",
    "seeds",
    "grid points",
    "epochs",
    "cap",
    "stopped by",
    "device",
    "training s per run",
    "left out",
]
LEGEND = {
    CAPPED: "stopped at its epoch cap before early stopping (or capped below the paper's epochs): not converged",
    REDUCED: "ran fewer grid points or seeds than its experiment plans",
    LEFT_OUT: "runs of its results are missing, incomplete or damaged: left out of its means, counts and tests",
}


@dataclass
class RunBudget:
    epochs: int
    cap: int | None
    stopped: str
    device: str
    seconds: float
    capped: bool


def alternates(config: dict) -> bool:
    """The run's model is fitted by alternating solves (ALS): its epochs are iterations."""
    model = str(config.get("model", ""))
    return model in MODELS and MODELS.get(model).alternates


def run_budget(folder: Path, paper_epochs: int | None) -> RunBudget:
    records = store.read_epochs(folder) if (folder / "epochs.jsonl").is_file() else []
    config = store.read_config(folder, required=False)
    cap, patience = config.get("epochs"), config.get("patience")
    validated = any(key.startswith("valid_") for record in records for key in record)
    if not records:
        stopped, capped = "nothing to train", False
    elif cap is not None and len(records) < cap:
        stopped, capped = f"early stopping (patience {patience})", False
    elif paper_epochs is not None and cap is not None and cap < paper_epochs and not alternates(config):
        stopped, capped = f"epoch cap, below the paper's {paper_epochs}", True
    elif validated and patience is not None and cap is not None and patience < cap:
        stopped, capped = "epoch cap", True
    else:
        stopped, capped = "fixed budget", False
    environment = folder / "environment.json"
    device = json.loads(environment.read_text()).get("device", "?") if environment.is_file() else "?"
    seconds = float(sum(record.get("seconds", 0.0) for record in records))
    return RunBudget(len(records), cap, stopped, device, seconds, capped)


def budget_rows(
    results: pd.DataFrame, folders: dict[str, Path], record: dict | None, left: Sequence[LeftOut] = ()
) -> pd.DataFrame:
    """One row per (dataset, method) of the results or of the runs `left` out: seeds (the runs read, of those the
    results or the plan hold), grid points, epochs, cap, why stopped, device, training seconds per run, the runs
    left out and why, and the mark of the row (‡, §, ¶ or none)."""
    paper_epochs = ((record or {}).get("paper") or {}).get("epochs")
    rows = []
    groups = {key: group for key, group in results.groupby(["dataset", "method"], sort=False)}
    for gone in left:
        groups.setdefault((gone.dataset, gone.method), results.iloc[:0])
    for (dataset, method), group in groups.items():
        budgets = [run_budget(folders[run_id], paper_epochs) for run_id in group.run_id.unique() if run_id in folders]
        omitted = [gone for gone in left if (gone.dataset, gone.method) == (dataset, method)]
        planned: dict = ((record or {}).get("planned", {}).get(dataset) or {}).get(method) or {}
        run: dict = ((record or {}).get("run", {}).get(dataset) or {}).get(method) or {}
        reduced = bool(planned and run) and (
            run["grid_points"] < planned["grid_points"] or run["seeds"] < planned["seeds"]
        )
        seeds = group.run_id.nunique()
        epochs = sorted({b.epochs for b in budgets})
        of = planned["seeds"] if planned else seeds + len(omitted)
        marks = (CAPPED if any(b.capped for b in budgets) else "") + (REDUCED if reduced else "")
        rows.append(
            {
                "dataset": dataset,
                "method": method,
                "mark": marks + (LEFT_OUT if omitted else ""),
                "seeds": (f"{seeds} of {of}" if seeds <= of else f"{seeds} ({of} planned)")
                if planned or omitted
                else str(seeds),
                "grid points": f"{run['grid_points'] if seeds else 0} of {planned['grid_points']}"
                if planned and run
                else "",
                "epochs": "–".join(map(str, (epochs[0], epochs[-1]) if len(epochs) > 1 else epochs)) if epochs else "",
                "cap": "/".join(sorted({str(b.cap) for b in budgets})),
                "stopped by": "; ".join(dict.fromkeys(b.stopped for b in budgets)),
                "device": "/".join(sorted({b.device for b in budgets})),
                "training s per run": round(sum(b.seconds for b in budgets) / len(budgets), 1) if budgets else "",
                "left out": "; ".join(f"run {gone.run_id} (seed {gone.seed}): {gone.why}" for gone in omitted),
            }
        )
    return pd.DataFrame(rows, columns=COLUMNS)


def left_out_notes(rows: pd.DataFrame) -> list[str]:
    """One note per row with runs left out: which, why, and what the row then rests on."""
    return [
        f"{row['dataset']} {row['method']}: {row['seeds']} runs read; left out of its means, counts and tests: "
        f"{row['left out']}"
        for _, row in rows.iterrows()
        if row["left out"]
    ]


def legend(rows: pd.DataFrame) -> str:
    """The marks the rows carry, explained ('' when none)."""
    found = [f"{mark}: {text}" for mark, text in LEGEND.items() if rows["mark"].str.contains(mark).any()]
    return "; ".join(found) + "." if found else ""


def to_markdown(rows: pd.DataFrame) -> str:
    columns = [c for c in rows.columns if c != "mark"]
    shown = rows.assign(method=rows.method + rows["mark"].map(lambda mark: f" {mark}" if mark else ""))
    lines = ["| " + " | ".join(columns) + " |", "| " + " | ".join("---" for _ in columns) + " |"]
    lines += ["| " + " | ".join(str(row[c]) for c in columns) + " |" for _, row in shown.iterrows()]
    return "\n".join(lines) + "\n"
