"""`recx sweep`: expand an experiment of experiments.yaml into runs, run the missing ones, tabulate the results.

An experiment names datasets, methods (each a partial run config), seeds, shared `defaults` and an optional `grid`
of hyper-parameter lists. A method's `per_dataset` maps a dataset to keys for that dataset only (the papers set some
per dataset: FastVAE draws 1,000 negatives on Gowalla and 200 on ML10M). Each (dataset, method, grid point, seed)
is one run, identified by the hash of its resolved config; runs whose folder holds the completion marker are
skipped. When a grid has several points, each method's reported row uses the point with the best mean validation
metric over seeds (test values of that point).
A method's own keys override the grid's: a method that fixes every grid key is planned once per seed. Grid keys
may be dotted (`model_args.alpha: [0.1, 1.0]`), and a method's own `grid` replaces the experiment's for that method
(the papers tune different hyper-parameters per method: lr and weight decay for SGD, α and λ for ALS).
The runs execute on a backend (recx.sweeps: this process, local worker processes, or Ray); every backend writes the
same run store, so a sweep started with one can be resumed with another.
With `track: mlflow` (or --track mlflow) the sweep's completed runs are logged to one MLflow experiment named after
it (recx.tracking); tracking is not part of any run's config.
"""
from __future__ import annotations

import itertools
import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from recx.config import RunConfig, deep_merge, has_key, read_yaml_mapping, resolve
from recx.data.prepare import PrepareOptions, prepare
from recx.errors import RecxError
from recx.folders import atomic_file
from recx.report.report import ReportOptions, write_report
from recx.runs import store
from recx.runs.lock import LockedError
from recx.runs.convergence import FILE as CONVERGENCE
from recx.runs.convergence import convergence_frame
from recx import tracking
from recx.sweeps.backends import Execution, make_backend
from recx.sweeps.drive import DriveReport, drive
from recx.sweeps.task import RunTask

EXPERIMENT_KEYS = {"description", "datasets", "methods", "seeds", "defaults", "grid", "ks", "table", "diagnostics",
                   "track"}


@dataclass
class SweepOverrides:
    """Command-line changes to an experiment: other datasets or seeds, some of its methods only, and config keys
    forced in every run."""

    datasets: list[str] | None = None
    seeds: list[int] | None = None
    settings: dict = field(default_factory=dict)
    methods: list[str] | None = None

    def apply(self, spec: dict, where: str = "experiment") -> dict:
        spec = dict(spec)
        if self.datasets:
            spec["datasets"] = self.datasets
        if self.seeds:
            spec["seeds"] = self.seeds
        if self.methods:
            unknown = [m for m in self.methods if m not in spec["methods"]]
            if unknown:
                raise RecxError(f"--methods: {where} has no method {unknown[0]!r}; its methods: "
                                f"{', '.join(spec['methods'])}")
            spec["methods"] = {m: spec["methods"][m] for m in self.methods}
        return spec


@dataclass
class PlannedRun:
    method: str
    grid_point: dict
    config: RunConfig


def load_experiments(path: Path) -> dict:
    content = read_yaml_mapping(path, "experiments file")
    if not isinstance(content.get("experiments"), dict):
        raise RecxError(f"{path}: expected a top-level 'experiments' mapping")
    return content


def experiment_spec(content: dict, name: str, path: Path) -> dict:
    experiments = content["experiments"]
    if name not in experiments:
        raise RecxError(f"{path}: no experiment {name!r}; defined: {', '.join(experiments)}")
    spec = experiments[name]
    unknown = sorted(set(spec) - EXPERIMENT_KEYS)
    if unknown:
        raise RecxError(f"{path}: experiments.{name}: unknown key {unknown[0]!r}; valid: {', '.join(sorted(EXPERIMENT_KEYS))}")
    for key in ("datasets", "methods"):
        if not spec.get(key):
            raise RecxError(f"{path}: experiments.{name}.{key} is missing or empty")
    for method, method_spec in spec["methods"].items():
        check_per_dataset((method_spec or {}).get("per_dataset", {}), spec["datasets"],
                          f"{path}: experiments.{name}.methods.{method}.per_dataset")
    return spec


def check_per_dataset(per_dataset, datasets: list[str], where: str) -> None:
    """A method's `per_dataset`: a mapping from some of the experiment's datasets to config keys for that dataset."""
    if not isinstance(per_dataset, dict):
        raise RecxError(f"{where}: expected a mapping of dataset name to config keys, got {per_dataset!r}")
    for dataset, keys in per_dataset.items():
        if dataset not in datasets:
            raise RecxError(f"{where}: {dataset!r} is not one of the experiment's datasets ({', '.join(datasets)})")
        if not isinstance(keys, dict):
            raise RecxError(f"{where}.{dataset}: expected a mapping of config keys, got {keys!r}")


def plan(spec: dict, name: str, path: Path, forced: dict | None = None) -> list[PlannedRun]:
    runs, planned = [], set()
    for dataset in spec["datasets"]:
        for method, method_spec in spec["methods"].items():
            where = f"{path}: experiment {name!r}, method {method!r} (experiments.{name}.methods.{method})"
            overrides = dict(method_spec or {})
            for_dataset = overrides.pop("per_dataset", {}).get(dataset) or {}
            overrides = deep_merge(overrides, for_dataset)
            grid = overrides.pop("grid", spec.get("grid")) or {}
            if not isinstance(grid, dict):
                raise RecxError(f"{where}: grid must be a mapping of key to a list of values, got {grid!r}")
            for point in grid_points(grid, where):
                for seed in spec.get("seeds", [0]):
                    raw = deep_merge(deep_merge(spec.get("defaults") or {}, nested(point)), overrides)
                    raw = {**deep_merge(raw, forced or {}), "dataset": dataset, "seed": seed}
                    config = resolve(raw, where=f"{where}, dataset {dataset!r}, seed {seed}{_point(point)}")
                    if (method, config.run_id()) not in planned:
                        planned.add((method, config.run_id()))
                        own = {key: value for key, value in point.items() if not has_key(overrides, key)}
                        runs.append(PlannedRun(method, own, config))
    return runs


def grid_points(grid: dict, where: str) -> list[dict]:
    """Every combination of the grid's values; keys may be dotted (`model_args.alpha`) for nested args."""
    for key, values in grid.items():
        if not isinstance(values, list) or not values:
            raise RecxError(f"{where}: grid.{key} must be a non-empty list of values, got {values!r}")
    return [dict(zip(grid, values)) for values in itertools.product(*grid.values())] or [{}]


def nested(point: dict) -> dict:
    """{"model_args.alpha": 0.1, "lr": 0.01} -> {"model_args": {"alpha": 0.1}, "lr": 0.01}."""
    out: dict = {}
    for key, value in point.items():
        head, _, tail = key.partition(".")
        out = deep_merge(out, {head: {tail: value}} if tail else {head: value})
    return out


def _point(point: dict) -> str:
    return f", grid point {point}" if point else ""


def check_planned(runs: list[PlannedRun], data_root: Path, ks: list[int], name: str, path: Path) -> None:
    """Before the first run: each run's settings against its dataset's catalogue (datasets already prepared)."""
    from recx.config_schema import check_against_dataset

    default_negatives = RunConfig().n_negatives
    for run in runs:
        card = data_root / run.config.dataset / "card.json"
        if card.is_file():
            n_items = int(json.loads(card.read_text())["n_items"])
            valid_k = run.config.valid_metric_name[1]
            check_against_dataset(run.config, n_items, list(ks) + [valid_k], default_negatives,
                                  f"{path}: experiment {name!r}, method {run.method!r}, dataset {run.config.dataset!r}")


def ensure_dataset(content: dict, dataset: str, data_root: Path, base: Path) -> None:
    """Prepare `dataset` from the experiments file's recipe unless it is prepared. When another process is preparing
    it (two sweeps started at once), wait for that process: its lock is released when it ends, even if it dies."""
    card = data_root / dataset / "card.json"
    while not card.is_file():
        try:
            return _prepare_from_recipe(content, dataset, data_root, base)
        except LockedError:
            time.sleep(0.5)


def _prepare_from_recipe(content: dict, dataset: str, data_root: Path, base: Path) -> None:
    recipe = (content.get("datasets") or {}).get(dataset)
    if recipe is None:
        raise RecxError(f"dataset {dataset!r} is not prepared under {data_root} and has no recipe in the "
                        f"experiments file's 'datasets' section")
    recipe = dict(recipe)
    if recipe.get("source") is not None:
        recipe["source"] = (base / recipe["source"]).resolve()
    try:
        options = PrepareOptions(**recipe)
    except TypeError as exc:
        raise RecxError(f"datasets.{dataset}: {exc}") from None
    prepare(dataset, options, data_root)


def select_grid_points(results: pd.DataFrame, runs: list[PlannedRun]) -> pd.DataFrame:
    """Keep, per (dataset, method), the grid point with the best mean validation metric over seeds."""
    label = {run.config.run_id(): repr(sorted(run.grid_point.items())) for run in runs}
    metric, k = runs[0].config.valid_metric_name
    results = results.assign(grid_point=results.run_id.map(label))
    valid = results[(results.split == "valid") & (results.metric == metric) & (results.k == k) & (results.stratum == "all")]
    if valid.empty or results.grid_point.nunique() <= 1:
        return results
    best = valid.groupby(["dataset", "method", "grid_point"])["value"].mean().reset_index()
    best = best.loc[best.groupby(["dataset", "method"])["value"].idxmax(), ["dataset", "method", "grid_point"]]
    return results.merge(best, on=["dataset", "method", "grid_point"])


TABLE_KEYS = {"metrics", "ks", "stratified"}


def table_layout(spec: dict, name: str, path: Path) -> dict:
    """The `table` key of an experiment: metrics (default ndcg, recall), ks (default: the experiment's), and the
    metrics shown per popularity stratum (default ndcg)."""
    layout = spec.get("table") or {}
    unknown = sorted(set(layout) - TABLE_KEYS)
    if unknown:
        raise RecxError(f"{path}: experiments.{name}.table: unknown key {unknown[0]!r}; valid: {', '.join(sorted(TABLE_KEYS))}")
    return {"metrics": tuple(layout.get("metrics", ("ndcg", "recall"))),
            "ks": tuple(layout.get("ks", spec.get("ks", [10, 20, 50]))),
            "stratified": tuple(layout.get("stratified", ("ndcg",)))}


def plan_each_method(spec: dict, name: str, path: Path, forced: dict | None) -> list[PlannedRun]:
    """`plan` method by method, leaving out the methods that --set values do not fit (a sweep narrowed by
    --methods sets keys of its own methods only; the others can have no complete run with those values)."""
    runs = []
    for method, method_spec in spec["methods"].items():
        try:
            runs += plan({**spec, "methods": {method: method_spec}}, name, path, forced)
        except RecxError:
            continue
    return runs


def complete_elsewhere(whole: list[PlannedRun], runs: list[PlannedRun], runs_dir: Path) -> list[PlannedRun]:
    """Runs of the whole experiment (its own datasets, seeds and methods) that this sweep did not plan but that are
    complete in its output folder: a sweep narrowed by --methods, --seeds or --dataset adds to the experiment's
    tables instead of replacing them."""
    planned = {(run.method, run.config.run_id()) for run in runs}
    return [run for run in whole if (run.method, run.config.run_id()) not in planned
            and store.is_complete(runs_dir / run.config.run_id())]


def collect(runs: list[PlannedRun], runs_dir: Path) -> pd.DataFrame:
    frames = []
    for run in runs:
        frame = store.read_parquet(runs_dir / run.config.run_id(), "results.parquet",
                                   "train the run again (recx sweep reruns it after you delete its folder)")
        frames.append(frame.assign(method=run.method))
    return pd.concat(frames, ignore_index=True)


def run_tasks(runs: list[PlannedRun], runs_dir: Path, data_root: Path, out: Path, ks: list[int],
              diagnostics: bool = False) -> list[RunTask]:
    """The runs as tasks a worker can execute anywhere: absolute paths, the resolved config as a mapping."""
    return [RunTask(run.config.to_dict(), str((runs_dir / run.config.run_id()).resolve()), str(data_root.resolve()),
                    list(ks), run.method, str((out / "logs" / f"{run.config.run_id()}.log").resolve()), diagnostics)
            for run in runs]


def execute_runs(tasks: list[RunTask], execution: Execution, name: str, total: int, logs: Path) -> DriveReport:
    """Run the tasks on the chosen backend with a progress bar; a failed run does not stop the others, and the
    sweep then ends with one error naming every failed run."""
    from recx.train.trainer import make_progress

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
        raise RecxError(f"{len(failed)} of {len(tasks)} runs failed ({lines}{more}); the other runs are complete, "
                        f"and a rerun of the sweep retries only the failed ones")
    return report


def write_results(results: pd.DataFrame, out: Path) -> None:
    """results.parquet, replaced atomically (two sweeps of one experiment may finish at once)."""
    out.mkdir(parents=True, exist_ok=True)
    partial = out / f".results.parquet.{os.getpid()}"
    results.to_parquet(partial, index=False)
    os.replace(partial, out / "results.parquet")


def track_runs(tracker: tracking.Tracking | None, name: str, out: Path, runs: list[PlannedRun]) -> None:
    """The sweep's complete runs into MLflow experiment `name` (nothing without a tracker; never raises)."""
    folders = [(run, out / "runs" / run.config.run_id()) for run in runs]
    tracking.log_runs(tracker, name, out, [
        tracking.TrackedRun(folder, f"{run.config.dataset} {run.method} seed {run.config.seed}",
                            {"method": run.method, "grid_point": run.grid_point or ""})
        for run, folder in folders if store.is_complete(folder)])


def run_sweep(path: Path, name: str, out: Path, data_root: Path, dry_run: bool, console,
              overrides: SweepOverrides | None = None, execution: Execution | None = None,
              track: tracking.Tracking | None = None) -> pd.DataFrame | None:
    overrides = overrides or SweepOverrides()
    execution = execution or Execution()
    execution.validate()
    content = load_experiments(path)
    whole = experiment_spec(content, name, path)
    spec = overrides.apply(whole, f"{path}: experiment {name!r}")
    runs = plan(spec, name, path, overrides.settings)
    layout = table_layout(spec, name, path)
    track = track or tracking.Tracking(None)
    tracker = tracking.choose(track.backend, track.uri, spec.get("track"), f"{path}: experiments.{name}") \
        if not dry_run else None
    runs_dir = out / "runs"
    pending = [run for run in runs if not store.is_complete(runs_dir / run.config.run_id())]
    console.print(f"experiment [bold]{name}[/]: {len(runs)} runs, {len(runs) - len(pending)} already complete")
    if dry_run:
        for run in runs:
            state = "done" if run not in pending else "todo"
            console.print(f"  {state}  {run.config.run_id()}  {run.config.dataset}  {run.method}  "
                          f"seed={run.config.seed} {run.grid_point or ''}")
        return None
    for dataset_name in dict.fromkeys(run.config.dataset for run in pending):
        ensure_dataset(content, dataset_name, data_root, path.parent)
    ks = spec.get("ks", [10, 20, 50])
    check_planned(pending, data_root, ks, name, path)
    try:
        report = execute_runs(run_tasks(pending, runs_dir, data_root, out, ks, bool(spec.get("diagnostics"))),
                              execution, name, len(runs), out / "logs")
    except RecxError:  # some runs failed: the complete ones are tracked all the same
        track_runs(tracker, name, out, runs)
        raise
    console.print(f"trained {len(report.done)} runs; {len(report.skipped)} were completed by another process meanwhile")
    shown = runs + complete_elsewhere(plan_each_method(whole, name, path, overrides.settings), runs, runs_dir)
    results = select_grid_points(collect(shown, runs_dir), shown)
    write_results(results, out)
    with atomic_file(out / CONVERGENCE) as partial:
        convergence_frame(shown, runs_dir).to_parquet(partial, index=False)
    write_report(results, {run_id: runs_dir / run_id for run_id in results.run_id.unique()}, out,
                 ReportOptions(metrics=layout["metrics"], ks=layout["ks"], stratified=layout["stratified"],
                               title=f"experiment {name}", sources=[out / "results.parquet"]), force=True)
    console.print((out / "table.md").read_text(), soft_wrap=True, markup=False, highlight=False)
    console.print(f"results: {out / 'results.parquet'}; report: {out / 'report.md'} (tables table.md/.csv/.tex, "
                  f"significance.md/.csv, plots/); per-epoch curves: {out / CONVERGENCE}")
    track_runs(tracker, name, out, runs)
    return results
