"""Experiments files: an experiment of experiments.yaml expanded into planned, resolved runs.

An experiment names datasets, methods (each a partial run config), seeds, shared `defaults` and an optional `grid`
of hyper-parameter lists. A method's `per_dataset` maps a dataset to keys for that dataset only (the papers set some
per dataset: FastVAE draws 1,000 negatives on Gowalla and 200 on ML10M). Each (dataset, method, grid point, seed)
is one run, identified by the hash of its resolved config.
A method's own keys override the grid's: a method that fixes every grid key is planned once per seed. Grid keys
may be dotted (`model_args.alpha: [0.1, 1.0]`), and a method's own `grid` replaces the experiment's for that method
(the papers tune different hyper-parameters per method: lr and weight decay for SGD, α and λ for ALS).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from pathlib import Path

from recx.config.run_config import RunConfig, deep_merge, has_key, read_yaml_mapping, resolve
from recx.core.errors import RecxError
from recx.core.names import METHOD_NAME, check_name
from recx.eval.metrics.registry import METRICS, stratified_metrics, table_metrics

EXPERIMENT_KEYS = {
    "description",
    "datasets",
    "methods",
    "seeds",
    "defaults",
    "grid",
    "ks",
    "table",
    "diagnostics",
    "track",
    "paper",
}
PAPER_KEYS = {"source", "tolerance", "epochs", "values"}
MAX_RUNS = 10_000  # a sweep plans at most this many runs unless --max-runs raises it


@dataclass
class SweepOverrides:
    """Command-line changes to an experiment: other datasets or seeds, some of its methods only, config keys
    forced in every run, and the most runs it may plan (None: MAX_RUNS)."""

    datasets: list[str] | None = None
    seeds: list[int] | None = None
    settings: dict = field(default_factory=dict)
    methods: list[str] | None = None
    max_runs: int | None = None

    def apply(self, spec: dict, where: str = "experiment") -> dict:
        spec = dict(spec)
        if self.datasets:
            spec["datasets"] = self.datasets
        if self.seeds:
            spec["seeds"] = self.seeds
        if self.methods:
            unknown = [m for m in self.methods if m not in spec["methods"]]
            if unknown:
                raise RecxError(
                    f"--methods: {where} has no method {unknown[0]!r}; its methods: {', '.join(spec['methods'])}"
                )
            spec["methods"] = {m: spec["methods"][m] for m in self.methods}
        return spec


@dataclass
class PlannedRun:
    method: str
    grid_point: dict
    config: RunConfig
    run_id: str  # config.run_id(), computed once


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
    if not isinstance(spec, dict):
        raise RecxError(
            f"{path}: experiments.{name}: expected a mapping of keys (datasets, methods, ...), got {spec!r}"
        )
    unknown = sorted(set(spec) - EXPERIMENT_KEYS)
    if unknown:
        raise RecxError(
            f"{path}: experiments.{name}: unknown key {unknown[0]!r}; valid: {', '.join(sorted(EXPERIMENT_KEYS))}"
        )
    for key in ("datasets", "methods"):
        if not spec.get(key):
            raise RecxError(f"{path}: experiments.{name}.{key} is missing or empty")
    if not isinstance(spec["methods"], dict):
        raise RecxError(f"{path}: experiments.{name}.methods: expected a mapping of method names to their settings")
    for method, method_spec in spec["methods"].items():
        check_name(method, f"{path}: experiments.{name}.methods: method name", METHOD_NAME)  # as datasets' names
        if method_spec is not None and not isinstance(method_spec, dict):
            raise RecxError(f"{path}: experiments.{name}.methods.{method}: expected a mapping of config keys")
        check_per_dataset(
            (method_spec or {}).get("per_dataset", {}),
            spec["datasets"],
            f"{path}: experiments.{name}.methods.{method}.per_dataset",
        )
    paper_figures(spec, name, path)
    return spec


def paper_figures(spec: dict, name: str, path: Path) -> dict | None:
    """An experiment's `paper:` block, checked and flattened: {source, tolerance, epochs, values: [{dataset,
    method, metric, k, value, source}]}; None without one.

        paper:
          source: "PRISM, Table 1, MF, Gowalla"   # the reference of every value (a value may name its own)
          tolerance: 0.05                           # relative; default 0.05
          epochs: 1000                              # the paper's epoch budget (optional)
          values: {DATASET: {METHOD: {METRIC@K: number, or {value: number, source: "Table 5"}}}}
    `values` may be left out when the paper prints no figure (plots only) but states its epochs.
    """
    paper = spec.get("paper")
    if paper is None:
        return None
    where = f"{path}: experiments.{name}.paper"
    if not isinstance(paper, dict):
        raise RecxError(f"{where}: expected a mapping with keys {', '.join(sorted(PAPER_KEYS))}, got {paper!r}")
    unknown = sorted(set(paper) - PAPER_KEYS)
    if unknown:
        raise RecxError(f"{where}: unknown key {unknown[0]!r}; valid: {', '.join(sorted(PAPER_KEYS))}")
    source, tolerance, epochs = paper.get("source"), paper.get("tolerance", 0.05), paper.get("epochs")
    if not isinstance(source, str) or not source.strip():
        raise RecxError(f'{where}.source: the paper and table the figures come from, e.g. "PRISM, Table 1"')
    if isinstance(tolerance, bool) or not isinstance(tolerance, (int, float)) or not 0 <= tolerance < 1:
        raise RecxError(f"{where}.tolerance: a relative difference in [0, 1), e.g. 0.05; got {tolerance!r}")
    if epochs is not None and (isinstance(epochs, bool) or not isinstance(epochs, int) or epochs < 1):
        raise RecxError(f"{where}.epochs: the paper's epoch budget, a positive integer; got {epochs!r}")
    values = paper.get("values", {})
    if not isinstance(values, dict) or not (values or epochs):
        raise RecxError(
            f"{where}.values: expected {{dataset: {{method: {{metric@k: value}}}}}} (or none, with the paper's "
            f"epochs alone), got {values!r}"
        )
    ks = spec.get("ks", [10, 20, 50])
    figures = []
    for dataset, methods in values.items():
        if dataset not in spec["datasets"]:
            raise RecxError(
                f"{where}.values: {dataset!r} is not a dataset of the experiment ({', '.join(spec['datasets'])})"
            )
        if not isinstance(methods, dict):
            raise RecxError(f"{where}.values.{dataset}: expected a mapping of method to figures, got {methods!r}")
        for method, cells in methods.items():
            if method not in spec["methods"]:
                raise RecxError(f"{where}.values.{dataset}: {method!r} is not a method of the experiment")
            if not isinstance(cells, dict) or not cells:
                raise RecxError(f"{where}.values.{dataset}.{method}: expected {{metric@k: value}}, got {cells!r}")
            for cell, figure in cells.items():
                figures.append(_paper_figure(f"{where}.values.{dataset}.{method}.{cell}", cell, figure, ks, source))
                figures[-1].update(dataset=dataset, method=method)
    return {"source": source, "tolerance": float(tolerance), "epochs": epochs, "values": figures}


def _paper_figure(where: str, cell: str, figure, ks: list, source: str) -> dict:
    metric, _, k = str(cell).partition("@")
    if metric not in METRICS or not METRICS.get(metric).cutoff or not k.isdigit() or int(k) not in ks:
        raise RecxError(
            f"{where}: expected METRIC@K with a cut-off metric ({', '.join(n for n in METRICS.names() if METRICS.get(n).cutoff)}) "
            f"and K among the experiment's ks ({', '.join(map(str, ks))})"
        )
    if isinstance(figure, dict):
        figure, source = figure.get("value"), figure.get("source", source)
    if isinstance(figure, bool) or not isinstance(figure, (int, float)) or not isinstance(source, str):
        raise RecxError(f"{where}: expected a number, or {{value: number, source: text}}; got {figure!r}")
    return {"metric": metric, "k": int(k), "value": float(figure), "source": source}


def check_per_dataset(per_dataset, datasets: list[str], where: str) -> None:
    """A method's `per_dataset`: a mapping from some of the experiment's datasets to config keys for that dataset."""
    if not isinstance(per_dataset, dict):
        raise RecxError(f"{where}: expected a mapping of dataset name to config keys, got {per_dataset!r}")
    for dataset, keys in per_dataset.items():
        if dataset not in datasets:
            raise RecxError(f"{where}: {dataset!r} is not one of the experiment's datasets ({', '.join(datasets)})")
        if not isinstance(keys, dict):
            raise RecxError(f"{where}.{dataset}: expected a mapping of config keys, got {keys!r}")


def _method_grid(spec: dict, dataset: str, method_spec, where: str) -> tuple[dict, dict]:
    """(the method's keys for `dataset`, its grid: its own, else the experiment's)."""
    overrides = dict(method_spec or {})
    for_dataset = overrides.pop("per_dataset", {}).get(dataset) or {}
    overrides = deep_merge(overrides, for_dataset)
    grid = overrides.pop("grid", spec.get("grid")) or {}
    if not isinstance(grid, dict):
        raise RecxError(f"{where}: grid must be a mapping of key to a list of values, got {grid!r}")
    return overrides, grid


def _where(path: Path, name: str, method: str) -> str:
    return f"{path}: experiment {name!r}, method {method!r} (experiments.{name}.methods.{method})"


def count_runs(spec: dict, name: str, path: Path) -> int:
    """The runs `plan` builds at most (datasets x each method's grid points x seeds), from the sizes alone."""
    seeds = len(spec.get("seeds", [0]))
    total = 0
    for dataset in spec["datasets"]:
        for method, method_spec in spec["methods"].items():
            where = _where(path, name, method)
            _, grid = _method_grid(spec, dataset, method_spec, where)
            total += math.prod(len(values) for values in _checked_grid(grid, where).values()) * seeds
    return total


def plan(
    spec: dict, name: str, path: Path, forced: dict | None = None, max_runs: int | None = None
) -> list[PlannedRun]:
    """Every run of the experiment, resolved; refused before any is built when there are more than `max_runs`
    (None: MAX_RUNS)."""
    limit = MAX_RUNS if max_runs is None else max_runs
    total = count_runs(spec, name, path)
    if total > limit:
        raise RecxError(
            f"{path}: experiment {name!r} makes {total:,} runs (datasets x grid points x seeds), more than the "
            f"{limit:,} a sweep plans; narrow its grid, or pass --max-runs {total} to plan them all"
        )
    runs, planned = [], set()
    for dataset in spec["datasets"]:
        for method, method_spec in spec["methods"].items():
            where = _where(path, name, method)
            overrides, grid = _method_grid(spec, dataset, method_spec, where)
            for point in grid_points(grid, where):
                for seed in spec.get("seeds", [0]):
                    raw = deep_merge(deep_merge(spec.get("defaults") or {}, nested(point)), overrides)
                    raw = {**deep_merge(raw, forced or {}), "dataset": dataset, "seed": seed}
                    config = resolve(raw, where=f"{where}, dataset {dataset!r}, seed {seed}{_point(point)}")
                    if (method, run_id := config.run_id()) not in planned:
                        planned.add((method, run_id))
                        own = {  # the grid keys this run takes from the grid (not its method's, not --set's)
                            key: value
                            for key, value in point.items()
                            if not has_key(overrides, key) and not has_key(forced or {}, key)
                        }
                        runs.append(PlannedRun(method, own, config, run_id))
    return runs


def _checked_grid(grid: dict, where: str) -> dict:
    for key, values in grid.items():
        if not isinstance(values, list) or not values:
            raise RecxError(f"{where}: grid.{key} must be a non-empty list of values, got {values!r}")
    return grid


def grid_points(grid: dict, where: str) -> list[dict]:
    """Every combination of the grid's values; keys may be dotted (`model_args.alpha`) for nested args."""
    _checked_grid(grid, where)
    return [dict(zip(grid, values, strict=True)) for values in itertools.product(*grid.values())] or [{}]


def nested(point: dict) -> dict:
    """{"model_args.alpha": 0.1, "lr": 0.01} -> {"model_args": {"alpha": 0.1}, "lr": 0.01}."""
    out: dict = {}
    for key, value in point.items():
        head, _, tail = key.partition(".")
        out = deep_merge(out, {head: {tail: value}} if tail else {head: value})
    return out


def _point(point: dict) -> str:
    return f", grid point {point}" if point else ""


TABLE_KEYS = {"metrics", "ks", "stratified"}


def table_layout(spec: dict, name: str, path: Path) -> dict:
    """The `table` key of an experiment: metrics (default: the metrics marked for the table, ndcg and recall), ks
    (default: the experiment's), and the metrics shown per popularity stratum (default: the table's additive ones,
    ndcg and recall)."""
    layout = spec.get("table") or {}
    unknown = sorted(set(layout) - TABLE_KEYS)
    if unknown:
        raise RecxError(
            f"{path}: experiments.{name}.table: unknown key {unknown[0]!r}; valid: {', '.join(sorted(TABLE_KEYS))}"
        )
    return {
        "metrics": tuple(layout.get("metrics", table_metrics())),
        "ks": tuple(layout.get("ks", spec.get("ks", [10, 20, 50]))),
        "stratified": tuple(layout.get("stratified", stratified_metrics())),
    }


def plan_each_method(
    spec: dict, name: str, path: Path, forced: dict | None, max_runs: int | None = None
) -> list[PlannedRun]:
    """`plan` method by method, leaving out the methods that --set values do not fit (a sweep narrowed by
    --methods sets keys of its own methods only; the others can have no complete run with those values)."""
    runs = []
    for method, method_spec in spec["methods"].items():
        try:
            runs += plan({**spec, "methods": {method: method_spec}}, name, path, forced, max_runs)
        except RecxError:
            continue
    return runs
