"""`experiment.json` beside a sweep's results.parquet: what a report needs of the experiment that the results do not
hold. The paper's figures (the experiment's `paper:` block, recx.sweeps.experiments.paper_figures), and per dataset
and method the grid points and seeds the experiment plans against those its complete runs cover, so that a report
can say when a row ran a reduced grid or fewer seeds (a smoke run never reads as a reproduction)."""

from __future__ import annotations

import json
from pathlib import Path

from recx.core.errors import RecxError
from recx.core.folders import write_text_atomic
from recx.runs import store
from recx.sweeps.experiments import PlannedRun

FILE = "experiment.json"


def coverage(runs: list[PlannedRun]) -> dict[str, dict[str, dict[str, int]]]:
    """{dataset: {method: {"grid_points": n, "seeds": n}}} of the runs."""
    points: dict[tuple[str, str], set] = {}
    seeds: dict[tuple[str, str], set] = {}
    for run in runs:
        key = (run.config.dataset, run.method)
        points.setdefault(key, set()).add(repr(sorted(run.grid_point.items())))
        seeds.setdefault(key, set()).add(run.config.seed)
    out: dict[str, dict[str, dict[str, int]]] = {}
    for (dataset, method), found in points.items():
        out.setdefault(dataset, {})[method] = {"grid_points": len(found), "seeds": len(seeds[(dataset, method)])}
    return out


def write_record(
    out: Path, name: str, source: Path, paper: dict | None, planned: list[PlannedRun], shown: list[PlannedRun]
) -> None:
    """experiment.json: `planned` are the experiment's runs as its file defines them, `shown` the runs of its
    results (each kept only when complete)."""
    complete = [run for run in shown if store.is_complete(out / "runs" / run.run_id)]
    record = {
        "experiment": name,
        "file": str(source),
        "paper": paper,
        "planned": coverage(planned),
        "run": coverage(complete),
    }
    write_text_atomic(out / FILE, json.dumps(record, indent=1) + "\n")


def read_record(folder: Path) -> dict | None:
    """The experiment.json of a sweep's output folder, None when there is none (a run's own results)."""
    path = folder / FILE
    if not path.is_file():
        return None
    try:
        record = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise RecxError(f"{path}: unreadable ({type(exc).__name__}); run the sweep again to rewrite it") from None
    if not isinstance(record, dict) or not {"planned", "run"} <= set(record):
        raise RecxError(f"{path}: not a recx experiment record; run the sweep again to rewrite it")
    return record
