"""`recx sweep`: expand an experiment of experiments.yaml into runs, run the missing ones, tabulate the results.

An experiment names datasets, methods (each a partial run config), seeds, shared `defaults` and an optional `grid`
of hyper-parameter lists. Each (dataset, method, grid point, seed) is one run, identified by the hash of its
resolved config; runs whose folder holds the completion marker are skipped. When a grid has several points, each
method's reported row uses the point with the best mean validation metric over seeds (test values of that point).
A method's own keys override the grid's: a method that fixes every grid key is planned once per seed.
"""
from __future__ import annotations

import itertools
import json
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from recx.config import RunConfig, deep_merge, read_yaml_mapping, resolve
from recx.data.dataset import load_dataset
from recx.data.prepare import PrepareOptions, prepare
from recx.errors import RecxError
from recx.eval import tables
from recx.runs import store
from recx.runs.convergence import FILE as CONVERGENCE
from recx.runs.convergence import convergence_frame
from recx.train.trainer import train_run

EXPERIMENT_KEYS = {"description", "datasets", "methods", "seeds", "defaults", "grid", "ks", "table", "diagnostics"}


@dataclass
class SweepOverrides:
    """Command-line changes to an experiment: other datasets or seeds, and config keys forced in every run."""

    datasets: list[str] | None = None
    seeds: list[int] | None = None
    settings: dict = field(default_factory=dict)

    def apply(self, spec: dict) -> dict:
        spec = dict(spec)
        if self.datasets:
            spec["datasets"] = self.datasets
        if self.seeds:
            spec["seeds"] = self.seeds
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
    return spec


def plan(spec: dict, name: str, path: Path, forced: dict | None = None) -> list[PlannedRun]:
    grid = spec.get("grid") or {}
    points = [dict(zip(grid, values)) for values in itertools.product(*grid.values())] or [{}]
    runs, planned = [], set()
    for dataset in spec["datasets"]:
        for method, overrides in spec["methods"].items():
            for point in points:
                for seed in spec.get("seeds", [0]):
                    raw = deep_merge({**(spec.get("defaults") or {}), **point}, overrides or {})
                    raw = {**deep_merge(raw, forced or {}), "dataset": dataset, "seed": seed}
                    where = f"{path}: experiment {name!r}, method {method!r} (experiments.{name}.methods.{method})"
                    config = resolve(raw, where=f"{where}, dataset {dataset!r}, seed {seed}{_point(point)}")
                    if (method, config.run_id()) not in planned:
                        planned.add((method, config.run_id()))
                        own = {key: value for key, value in point.items() if key not in (overrides or {})}
                        runs.append(PlannedRun(method, own, config))
    return runs


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
    if (data_root / dataset / "card.json").is_file():
        return
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


def write_tables(results: pd.DataFrame, out: Path, layout: dict) -> str:
    table = tables.summary(results, **layout)
    markdown = tables.to_markdown(table)
    (out / "table.md").write_text(markdown)
    (out / "table.csv").write_text(tables.to_csv(table))
    (out / "table.tex").write_text(tables.to_latex(table))
    return markdown


def collect(runs: list[PlannedRun], runs_dir: Path) -> pd.DataFrame:
    frames = []
    for run in runs:
        frame = pd.read_parquet(runs_dir / run.config.run_id() / "results.parquet")
        frames.append(frame.assign(method=run.method))
    return pd.concat(frames, ignore_index=True)


def run_sweep(path: Path, name: str, out: Path, data_root: Path, dry_run: bool, console,
              overrides: SweepOverrides | None = None) -> pd.DataFrame | None:
    from recx.train.trainer import make_progress

    overrides = overrides or SweepOverrides()
    content = load_experiments(path)
    spec = overrides.apply(experiment_spec(content, name, path))
    runs = plan(spec, name, path, overrides.settings)
    layout = table_layout(spec, name, path)
    runs_dir = out / "runs"
    pending = [run for run in runs if not store.is_complete(runs_dir / run.config.run_id())]
    console.print(f"experiment [bold]{name}[/]: {len(runs)} runs, {len(runs) - len(pending)} already complete")
    if dry_run:
        for run in runs:
            state = "done" if run not in pending else "todo"
            console.print(f"  {state}  {run.config.run_id()}  {run.config.dataset}  {run.method}  "
                          f"seed={run.config.seed} {run.grid_point or ''}")
        return None
    ks = spec.get("ks", [10, 20, 50])
    check_planned(pending, data_root, ks, name, path)
    with make_progress() as progress:
        overall = progress.add_task(f"sweep {name}", total=len(runs), completed=len(runs) - len(pending), status="")
        loaded: dict = {}
        for run in pending:
            dataset_name = run.config.dataset
            if dataset_name not in loaded:
                ensure_dataset(content, dataset_name, data_root, path.parent)
                loaded = {dataset_name: load_dataset(data_root, dataset_name)}
            progress.update(overall, status=f"{dataset_name} {run.method} seed {run.config.seed}")
            train_run(run.config, loaded[dataset_name], runs_dir / run.config.run_id(), progress=progress, ks=ks,
                      diagnostics=bool(spec.get("diagnostics")))
            progress.advance(overall)
    results = select_grid_points(collect(runs, runs_dir), runs)
    out.mkdir(parents=True, exist_ok=True)
    results.to_parquet(out / "results.parquet", index=False)
    convergence_frame(runs, runs_dir).to_parquet(out / CONVERGENCE, index=False)
    console.print(write_tables(results, out, layout))
    console.print(f"results: {out / 'results.parquet'}; tables: {out / 'table.md'}, table.csv, table.tex; "
                  f"per-epoch curves: {out / CONVERGENCE}")
    return results
