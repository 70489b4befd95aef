"""`recx sweep`: run the missing runs of an experiment (recx.sweeps.experiments) and collect their results.

Runs whose folder holds the completion marker are skipped. When a grid has several points, each method's reported
row uses the point with the best mean validation metric over seeds (test values of that point).
The runs execute on a backend (recx.sweeps: this process, local worker processes, or Ray); every backend writes the
same run store, so a sweep started with one can be resumed with another.
With `track: mlflow` (or --track mlflow) the sweep's completed runs are logged to one MLflow experiment named after
it (recx.runs.tracking); tracking is not part of any run's config.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from recx.config.run_config import RunConfig, bundle_note
from recx.core import plugins
from recx.core.errors import RecxError
from recx.core.folders import atomic_file
from recx.core.lock import LockedError
from recx.core.words import counted
from recx.data.prepare import PrepareOptions, prepare
from recx.runs import store, tracking
from recx.runs.convergence import FILE as CONVERGENCE
from recx.runs.convergence import convergence_frame
from recx.sweeps.backends import Execution, make_backend
from recx.sweeps.device_memory import check_fits
from recx.sweeps.drive import DriveReport, drive
from recx.sweeps.experiments import (
    PlannedRun,
    SweepOverrides,
    experiment_spec,
    load_experiments,
    paper_figures,
    plan,
    plan_each_method,
    table_layout,
)
from recx.sweeps.grid import select_grid_points, tried_points, write_tried_points
from recx.sweeps.record import write_record
from recx.sweeps.task import RunTask


def check_planned(runs: list[PlannedRun], data_root: Path, ks: list[int], name: str, path: Path) -> None:
    """Before the first run: each run's settings against its dataset's catalogue (datasets already prepared)."""
    from recx.config.run_config import check_against_dataset

    default_negatives = RunConfig().n_negatives
    for run in runs:
        card = data_root / run.config.dataset / "card.json"
        if card.is_file():
            n_items = int(json.loads(card.read_text())["n_items"])
            valid_k = run.config.valid_metric_name[1]
            check_against_dataset(
                run.config,
                n_items,
                list(ks) + [valid_k],
                default_negatives,
                f"{path}: experiment {name!r}, method {run.method!r}, dataset {run.config.dataset!r}",
            )


def check_device_memory(runs: list[PlannedRun], data_root: Path, execution: Execution) -> None:
    """With --jobs N > 1 on the local backend, the runs that go to CUDA (device cuda, or auto where CUDA is there)
    held against the free memory of the GPU with least (worker i is pinned to GPU i mod the count: ceil(N / count)
    share each; recx.sweeps.device_memory); Ray gives each CUDA task a GPU of its own."""
    if execution.backend != "local" or execution.jobs < 2:
        return
    import torch

    on_gpu = [run for run in runs if run.config.device in ("cuda", "auto")]
    if not on_gpu or not torch.cuda.is_available():
        return
    count = torch.cuda.device_count()
    free = min(torch.cuda.mem_get_info(index)[0] for index in range(count))
    check_fits(on_gpu, data_root, -(-execution.jobs // count), free, "each GPU" if count > 1 else "cuda")


def ensure_dataset(content: dict, dataset: str, data_root: Path, base: Path) -> None:
    """Prepare `dataset` from the experiments file's recipe unless it is prepared. When another process is preparing
    it (two sweeps started at once), wait for that process: its lock is released when it ends, even if it dies."""
    card = data_root / dataset / "card.json"
    while not card.is_file():
        try:
            return _prepare_from_recipe(content, dataset, data_root, base)
        except LockedError:
            time.sleep(0.5)


def dataset_state(content: dict, dataset: str, data_root: Path, base: Path) -> str:
    """What a dry run says of a dataset the pending runs need: nothing when it is prepared, else whether the sweep
    would prepare it (and from what) or cannot."""
    if (data_root / dataset / "card.json").is_file():
        return ""
    recipe = (content.get("datasets") or {}).get(dataset)
    if recipe is None:
        return (
            f"not prepared under {data_root}, and the experiments file has no recipe for it in 'datasets': prepare it "
            f"first (recx prepare {dataset} ...)"
        )
    source = recipe.get("source")
    if source is not None and not (base / source).exists():
        return f"not prepared under {data_root}, and its source {(base / source).resolve()} does not exist"
    origin = f"from {(base / source).resolve()}" if source is not None else "(no source needed)"
    return f"not prepared under {data_root} yet: the sweep prepares it ({recipe.get('format')} {origin})"


def _prepare_from_recipe(content: dict, dataset: str, data_root: Path, base: Path) -> None:
    recipe = (content.get("datasets") or {}).get(dataset)
    if recipe is None:
        raise RecxError(
            f"dataset {dataset!r} is not prepared under {data_root} and has no recipe in the "
            f"experiments file's 'datasets' section"
        )
    recipe = dict(recipe)
    if recipe.get("source") is not None:
        recipe["source"] = (base / recipe["source"]).resolve()
    try:
        options = PrepareOptions(**recipe)
    except TypeError as exc:
        raise RecxError(f"datasets.{dataset}: {exc}") from None
    prepare(dataset, options, data_root)


def complete_elsewhere(whole: list[PlannedRun], runs: list[PlannedRun], runs_dir: Path) -> list[PlannedRun]:
    """Runs of the whole experiment (its own datasets, seeds and methods) that this sweep did not plan but that are
    complete in its output folder: a sweep narrowed by --methods, --seeds or --dataset adds to the experiment's
    tables instead of replacing them."""
    planned = {(run.method, run.run_id) for run in runs}
    return [
        run for run in whole if (run.method, run.run_id) not in planned and store.is_complete(runs_dir / run.run_id)
    ]


def collect(runs: list[PlannedRun], runs_dir: Path) -> pd.DataFrame:
    frames = []
    for run in runs:
        frame = store.read_parquet(
            runs_dir / run.run_id,
            "results.parquet",
            "train the run again (recx sweep reruns it after you delete its folder)",
        )
        frames.append(frame.assign(method=run.method))
    return pd.concat(frames, ignore_index=True)


def run_tasks(
    runs: list[PlannedRun], runs_dir: Path, data_root: Path, out: Path, ks: list[int], diagnostics: bool = False
) -> list[RunTask]:
    """The runs as tasks a worker can execute anywhere: absolute paths, the resolved config as a mapping, the plugins
    this process was asked to load (installed ones load by their entry points everywhere)."""
    return [
        RunTask(
            run.config.to_dict(),
            str((runs_dir / run.run_id).resolve()),
            str(data_root.resolve()),
            list(ks),
            run.method,
            str((out / "logs" / f"{run.run_id}.log").resolve()),
            diagnostics,
            plugins.worker_specs(),
        )
        for run in runs
    ]


def execute_runs(tasks: list[RunTask], execution: Execution, name: str, total: int, logs: Path) -> DriveReport:
    """Run the tasks on the chosen backend with a progress bar; a failed run does not stop the others, and the
    sweep then ends with one error naming every failed run."""
    from recx.core.progress import make_progress

    with make_progress() as progress:
        overall = progress.add_task(f"sweep {name}", total=total, completed=total - len(tasks), status="")
        running: dict[str, str] = {}

        def on_change(event: str, task: RunTask, outcome) -> None:
            if event == "start":
                running[task.run_id] = f"{task.method} seed {task.config['seed']}"
            else:
                running.pop(task.run_id, None)
                if event != "locked":
                    progress.advance(overall)
            progress.update(overall, status=", ".join(running.values()))

        report = drive(tasks, make_backend(execution, logs, progress), on_change)
    if report.failed:
        failed = list(report.failed.items())
        lines = "; ".join(f"run {run_id}: {message}" for run_id, message in failed[:3])
        more = f"; and {len(failed) - 3} more" if len(failed) > 3 else ""
        raise RecxError(
            f"{len(failed)} of {len(tasks)} runs failed ({lines}{more}); the other runs are complete, "
            f"and a rerun of the sweep retries only the failed ones"
        )
    return report


def write_sweep_results(results: pd.DataFrame, out: Path) -> None:
    """results.parquet, replaced atomically (two sweeps of one experiment may finish at once)."""
    out.mkdir(parents=True, exist_ok=True)
    with atomic_file(out / "results.parquet") as partial:
        results.to_parquet(partial, index=False)


def track_runs(tracker: tracking.Tracking | None, name: str, out: Path, runs: list[PlannedRun]) -> None:
    """The sweep's complete runs into MLflow experiment `name` (nothing without a tracker; never raises)."""
    folders = [(run, out / "runs" / run.run_id) for run in runs]
    tracking.log_runs(
        tracker,
        name,
        out,
        [
            tracking.TrackedRun(
                folder,
                f"{run.config.dataset} {run.method} seed {run.config.seed}",
                {"method": run.method, "grid_point": run.grid_point or ""},
            )
            for run, folder in folders
            if store.is_complete(folder)
        ],
    )


@dataclass
class SweepOutcome:
    """What a sweep leaves for its report: the results (one grid point per method), each run's folder, the
    experiment's table layout (recx.sweeps.experiments.table_layout), and where results and curves were written."""

    name: str
    out: Path
    results: pd.DataFrame
    folders: dict[str, Path]
    layout: dict


def _print_plan(runs: list, pending: list, content: dict, data_root: Path, path: Path, console) -> None:
    """A dry run: each planned run (todo or done), the loss bundles methods leave out, the datasets not prepared."""
    todo = {id(run) for run in pending}
    for run in runs:
        state = "todo" if id(run) in todo else "done"
        console.print(
            f"  {state}  {run.run_id}  {run.config.dataset}  {run.method}  seed={run.config.seed} {run.grid_point or ''}",
            highlight=False,
        )
    for method, note in dict.fromkeys((run.method, bundle_note(run.config)) for run in runs):
        if note:  # the loss's default bundle the method's runs leave out, and why
            console.print(f"  note: method {method}: {note}", highlight=False, soft_wrap=True)
    for dataset_name in dict.fromkeys(run.config.dataset for run in pending):
        missing = dataset_state(content, dataset_name, data_root, path.parent)
        if missing:
            console.print(f"  dataset {dataset_name}: {missing}", highlight=False, soft_wrap=True)


def _write_tables(whole: dict, name: str, path: Path, overrides: SweepOverrides, runs: list, out: Path):
    """results.parquet (one grid point per method; the experiment's runs already complete in `out` too), every
    grid point tried (grid.parquet), the sweep's record and convergence.parquet; returns the results."""
    runs_dir = out / "runs"
    shown = runs + complete_elsewhere(
        plan_each_method(whole, name, path, overrides.settings, overrides.max_runs), runs, runs_dir
    )
    collected = collect(shown, runs_dir)
    results = select_grid_points(collected, shown)
    write_sweep_results(results, out)
    write_tried_points(tried_points(collected, shown), out)
    planned = plan_each_method(whole, name, path, None, overrides.max_runs)
    write_record(out, name, path, paper_figures(whole, name, path), planned, shown)
    with atomic_file(out / CONVERGENCE) as partial:
        convergence_frame(shown, runs_dir).to_parquet(partial, index=False)
    return results


def finished_tables(path: Path, name: str, out: Path, settings: dict | None = None) -> SweepOutcome | None:
    """The tables of the experiment's runs complete in `out`, training nothing: what a sweep stopped midway (Ctrl-C,
    a time budget) finished, for its report (recx.reports.report.report_sweep). Writes results.parquet,
    experiment.json and convergence.parquet as a finished sweep does (a method's row at its best complete grid point;
    its reduced grid marked in the report); None when no run is complete. `settings`: the sweep's --set values (the
    run ids hold them)."""
    whole = experiment_spec(load_experiments(path), name, path)
    overrides = SweepOverrides(settings=dict(settings or {}))
    runs_dir = out / "runs"
    if not complete_elsewhere(plan_each_method(whole, name, path, overrides.settings), [], runs_dir):
        return None
    results = _write_tables(whole, name, path, overrides, [], out)
    folders = {run_id: runs_dir / run_id for run_id in results.run_id.unique()}
    return SweepOutcome(name, out, results, folders, table_layout(whole, name, path))


def run_sweep(
    path: Path,
    name: str,
    out: Path,
    data_root: Path,
    dry_run: bool,
    console,
    overrides: SweepOverrides | None = None,
    execution: Execution | None = None,
    track: tracking.Tracking | None = None,
) -> SweepOutcome | None:
    """Plan the experiment, train its missing runs, write results.parquet and convergence.parquet to `out` and log
    the runs to the tracker; None with `dry_run` (the plan is printed)."""
    overrides = overrides or SweepOverrides()
    execution = execution or Execution()
    execution.validate()
    content = load_experiments(path)
    whole = experiment_spec(content, name, path)
    spec = overrides.apply(whole, f"{path}: experiment {name!r}")
    runs = plan(spec, name, path, overrides.settings, overrides.max_runs)
    layout = table_layout(spec, name, path)
    track = track or tracking.Tracking(None)
    tracker = (
        tracking.choose(track.service, track.uri, spec.get("track"), f"{path}: experiments.{name}", out)
        if not dry_run
        else None
    )
    runs_dir = out / "runs"
    pending = [run for run in runs if not store.is_complete(runs_dir / run.run_id)]
    console.print(
        f"experiment [bold]{name}[/]: {counted(len(runs), 'run')}, {len(runs) - len(pending)} already complete"
    )
    if dry_run:
        _print_plan(runs, pending, content, data_root, path, console)
        return None
    for dataset_name in dict.fromkeys(run.config.dataset for run in pending):
        ensure_dataset(content, dataset_name, data_root, path.parent)
    ks = spec.get("ks", [10, 20, 50])
    check_planned(pending, data_root, ks, name, path)
    check_device_memory(pending, data_root, execution)
    try:
        report = execute_runs(
            run_tasks(pending, runs_dir, data_root, out, ks, bool(spec.get("diagnostics"))),
            execution,
            name,
            len(runs),
            out / "logs",
        )
    except RecxError:  # some runs failed: the complete ones are tracked all the same
        track_runs(tracker, name, out, runs)
        raise
    console.print(
        f"trained {counted(len(report.done), 'run')}; {len(report.skipped)} "
        f"{'was' if len(report.skipped) == 1 else 'were'} completed by another process meanwhile"
    )
    results = _write_tables(whole, name, path, overrides, runs, out)
    track_runs(tracker, name, out, runs)
    return SweepOutcome(name, out, results, {run_id: runs_dir / run_id for run_id in results.run_id.unique()}, layout)
