"""recx from Python: prepare a dataset, train and evaluate runs, run an experiment's sweep, write a report, read a run,
evaluate another system's lists. The command line is a thin shell over these functions, so both give the same
results, write the same folders and raise the same errors: a user error is a `RecxError` whose message is the one
line the command line prints.

    import recx
    recx.prepare("synthetic", format="synthetic", ratios="80/10/10")
    run = recx.train({"dataset": "synthetic", "loss": "bpr", "epochs": 5})
    run.results.query("split == 'test' and metric == 'ndcg' and stratum == 'all'")
    results = recx.sweep("experiments.yaml", "quickstart")
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Sequence

import pandas as pd
from rich.console import Console

from recx.config.run_config import RunConfig, deep_merge, load_config_file, resolve
from recx.config.schema import check_values
from recx.core import plugins
from recx.core.errors import RecxError
from recx.core.progress import make_progress
from recx.data.dataset import load_dataset
from recx.data.prepare import PrepareOptions
from recx.data.prepare import prepare as prepare_dataset
from recx.data.root import default_data_root
from recx.reports.report import ReportOptions, report_sweep, write_report
from recx.runs import store, tracking
from recx.runs.collection import base_label, load_results
from recx.runs.collection import epochs as epoch_records
from recx.runs.evaluate import evaluate_saved_run
from recx.runs.lists import lists_evaluation
from recx.runs.per_user import file_name
from recx.runs.train_run import DEFAULT_KS, train_run
from recx.sweeps.backends import Execution
from recx.sweeps.experiments import SweepOverrides
from recx.sweeps.sweep import run_sweep

PathLike = str | Path


def use_plugins(*specs: str) -> None:
    """Load plugins (module names or `.py` files) beside the installed ones; their samplers, losses, models, formats
    and metrics then work wherever a built-in name does.

        recx.use_plugins("my_sampler.py")
    """
    plugins.request(*specs)


def _root(data_root: PathLike | None) -> Path:
    return Path(data_root) if data_root is not None else default_data_root()


@contextlib.contextmanager
def _progress(shown) -> Iterator[Any]:
    """`shown`: a progress display of the caller's (used as is), True (a new one) or False (nothing shown)."""
    if shown is True or shown is False:
        with make_progress(quiet=not shown) as progress:
            yield progress
    else:
        yield shown


@dataclass(frozen=True)
class Run:
    """A run folder: a trained run, or a folder of evaluated lists (`lists.json`).

    run = recx.load_run("runs/3f2a9c1e0b7d")
    run.results          # long format: split, metric, k, stratum, value
    run.per_user("test") # the paired tests' input
    run.epochs           # loss, seconds and validation metric per epoch
    """

    path: Path

    @property
    def config(self) -> dict:
        """The resolved configuration (config.yaml); for lists, lists.json."""
        if (self.path / store.LISTS_FILE).is_file():
            return json.loads((self.path / store.LISTS_FILE).read_text())
        return store.read_config(self.path)

    @property
    def state(self) -> str:
        """absent, empty, incomplete, trained, complete or foreign (recx.runs.store.state)."""
        return store.state(self.path)

    @property
    def results(self) -> pd.DataFrame:
        return store.read_parquet(self.path, "results.parquet", "train the run again with --force")

    def per_user(self, split: str = "test") -> pd.DataFrame:
        """user, metric, k, stratum, value for each user evaluated on `split`."""
        return store.read_parquet(self.path, file_name(split), "train the run again with --force")

    @property
    def epochs(self) -> pd.DataFrame:
        return epoch_records(self.path)

    @property
    def best_epoch(self) -> int:
        """The epoch whose weights were evaluated (0: nothing was trained)."""
        return store.trained_epoch(self.path)


def load_run(path: PathLike) -> Run:
    """The run in `path` (refused when it is not a folder recx wrote as a run or as evaluated lists)."""
    folder = Path(path)
    if store.state(folder) in ("absent", "empty", "foreign") and not (folder / store.LISTS_FILE).is_file():
        raise RecxError(f"{folder}: not a run folder recx wrote")
    return Run(folder)


def prepare(
    name: str,
    format: str | None = None,
    source: PathLike | None = None,
    *,
    data_root: PathLike | None = None,
    force: bool = False,
    **options,
) -> Path:
    """Prepare a dataset under the data root (default $RECX_DATA, else ./data) and return its folder. `options`:
    ratios, seed, rating, min_rating, kcore, split, preset, skip_bad_lines, dataset, synthetic (a mapping of the
    generator's settings), as `recx prepare` takes them.

        recx.prepare("gowalla", format="lightgcn", source="../shared/data/gowalla")
    """
    from recx.core.names import check_name

    check_name(name, "dataset name")
    settings = PrepareOptions(format=format, source=Path(source) if source is not None else None, **options)
    return prepare_dataset(name, settings, _root(data_root), force)


def run_config(
    config: RunConfig | dict | PathLike | None = None, settings: dict | None = None, source: str = "arguments"
) -> RunConfig:
    """The resolved RunConfig of a configuration (a RunConfig, a mapping or a YAML file) with `settings` over it. A
    bad value is refused naming its file (or `source`, where the mapping and settings came from), key, value and
    range.

        recx.run_config({"loss": "bpr"}, {"epochs": 5}).run_id()
    """
    if isinstance(config, RunConfig) and not settings:
        return config
    if isinstance(config, RunConfig):  # its methods' arguments go with them: a method changed by `settings` starts anew
        config = {
            key: value
            for key, value in config.to_dict().items()
            if not (key.endswith("_args") and key[: -len("_args")] in (settings or {}))
        }
    defaults = RunConfig()
    if config is None or isinstance(config, dict):
        raw, where = dict(config or {}), source
    else:
        raw, where = load_config_file(Path(config)), str(config)
    check_values(raw, defaults, where)
    check_values(settings or {}, defaults, source)
    return resolve(deep_merge(raw, settings or {}), where=where)


def train(
    config: RunConfig | dict | PathLike | None = None,
    *,
    data_root: PathLike | None = None,
    run_dir: PathLike | None = None,
    ks: list[int] | tuple[int, ...] = tuple(DEFAULT_KS),
    force: bool = False,
    diagnostics: bool = False,
    checkpoint_every: int | None = None,
    progress=False,
    track: str | None = None,
    track_uri: str | None = None,
    **settings,
) -> Run:
    """Train one run and evaluate it; returns the Run (folder `run_dir`, default runs/<run id>). `config`: a
    RunConfig, a mapping or a YAML file; `settings` (any RunConfig key) override it. An interrupted run goes on
    from its checkpoint when trained again; a completed one is refused unless `force`.

        run = recx.train(dataset="synthetic", model="mf", loss="bpr", sampler="uniform", epochs=5)
        run.results
    """
    resolved = run_config(config, settings or None)
    folder = Path(run_dir) if run_dir is not None else Path("runs") / resolved.run_id()
    from recx.core.names import check_name

    check_name(folder.name, "run folder name (--run-dir)")
    tracker = tracking.choose(track, track_uri, home=folder.parent)
    dataset = load_dataset(_root(data_root), resolved.dataset)
    with _progress(progress) as shown:
        train_run(
            resolved,
            dataset,
            folder,
            progress=shown,
            ks=list(ks),
            force=force,
            diagnostics=diagnostics,
            checkpoint_every=checkpoint_every,
        )
    name = f"{resolved.dataset} {base_label(resolved.model, resolved.loss, resolved.sampler)} seed {resolved.seed}"
    tracking.log_runs(tracker, tracking.TRAIN_EXPERIMENT, folder.parent, [tracking.TrackedRun(folder, name)])
    return Run(folder)


@dataclass
class Evaluated:
    """`recx.evaluate`'s answer: the results (long format, also written to eval_<split>.parquet) and, when asked,
    the embedding diagnostics."""

    results: pd.DataFrame
    diagnostics: dict | None = None


def evaluate(
    run: Run | PathLike,
    split: str = "test",
    ks: list[int] | tuple[int, ...] = tuple(DEFAULT_KS),
    *,
    batch_size: int = 1024,
    device: str = "auto",
    data_root: PathLike | None = None,
    dump_topk: PathLike | None = None,
    auc_beta: float | None = None,
    diagnostics: bool = False,
    force: bool = False,
    progress: bool = False,
) -> Evaluated:
    """Full-ranking evaluation of a trained run on `split` (eval_<split>.parquet in the run folder); `dump_topk`:
    also each user's top-K list in the lists format (original ids); `auc_beta`: also AUC and OPAUC(β).

        recx.evaluate("runs/3f2a9c1e0b7d", "valid", [10, 20]).results
    """
    folder = run.path if isinstance(run, Run) else Path(run)
    if split not in ("valid", "test"):
        raise RecxError(f"--split {split!r}: expected valid or test")
    if auc_beta is not None and not 0 < auc_beta <= 1:
        raise RecxError(f"--opauc-beta {auc_beta}: expected a fraction in (0, 1]")
    if batch_size < 1:
        raise RecxError(f"--batch-size {batch_size}: expected an integer >= 1")
    _, found = evaluate_saved_run(
        folder,
        split,
        list(ks),
        batch_size,
        device,
        Path(data_root) if data_root is not None else None,
        Path(dump_topk) if dump_topk is not None else None,
        auc_beta,
        diagnostics,
        not progress,
        force,
    )
    results = store.read_parquet(folder, f"eval_{split}.parquet", "evaluate the run again")
    return Evaluated(results, found)


def evaluate_lists(
    lists: PathLike,
    dataset: str,
    split: str = "test",
    ks: list[int] | tuple[int, ...] = tuple(DEFAULT_KS),
    *,
    data_root: PathLike | None = None,
    run_dir: PathLike | None = None,
    name: str | None = None,
) -> Run:
    """Evaluate top-K lists written by any system (Parquet or TSV: user, item, rank or score, in the dataset's
    original ids) with recx's metrics, strata and per-user files, into a run-like folder (recx.runs.lists); `recx
    report` compares it with recx's runs.

        lists = recx.evaluate_lists("als_top50.tsv", "gowalla", name="implicit ALS")
        lists.results
    """
    if split not in ("valid", "test"):
        raise RecxError(f"--split {split!r}: expected valid or test")
    data = load_dataset(_root(data_root), dataset)
    outcome = lists_evaluation(
        Path(lists), data, split, sorted(set(ks)), Path(run_dir) if run_dir is not None else None, name
    )
    return Run(outcome.folder)


def sweep(
    file: PathLike,
    experiment: str,
    *,
    out: PathLike | None = None,
    data_root: PathLike | None = None,
    dry_run: bool = False,
    datasets: list[str] | None = None,
    seeds: list[int] | None = None,
    methods: list[str] | None = None,
    settings: dict | None = None,
    max_runs: int | None = None,
    backend: str = "local",
    jobs: int = 1,
    address: str | None = None,
    track: str | None = None,
    track_uri: str | None = None,
    console: Console | None = None,
) -> pd.DataFrame | None:
    """Run an experiment's missing runs (datasets x methods x grid x seeds), write results.parquet and the report
    into `out` (default results/<experiment>); returns the results (one grid point per method), None for a dry run
    (the plan is printed on `console`). `datasets`, `seeds`, `methods` and `settings` narrow or change it as the
    command line's --dataset, --seeds, --methods and --set do; `max_runs` raises the most runs a sweep plans (10,000).

        results = recx.sweep("experiments.yaml", "quickstart", jobs=2)
    """
    shown = console if console is not None else Console(quiet=True)
    outcome = run_sweep(
        Path(file),
        experiment,
        Path(out) if out is not None else Path("results") / experiment,
        _root(data_root),
        dry_run,
        shown,
        SweepOverrides(datasets=datasets, seeds=seeds, settings=settings or {}, methods=methods, max_runs=max_runs),
        Execution(backend, jobs, address),
        tracking.Tracking(track, track_uri),
    )
    report_sweep(outcome, shown)
    return None if outcome is None else outcome.results


def report(
    results: PathLike | Sequence[PathLike],
    out: PathLike,
    *,
    runs: PathLike | None = None,
    baseline: str | None = None,
    metrics: tuple[str, ...] | None = None,
    ks: tuple[int, ...] | None = None,
    stratified: tuple[str, ...] | None = None,
    split: str = "test",
    correction: str = "holm",
    resamples: int = 10_000,
    alpha: float = 0.05,
    params: tuple[str, ...] = (),
    pairs: str = "baseline",
    force: bool = False,
) -> Path:
    """Tables (mean ± std, best in bold), paired tests against a baseline and plots for one or more results files
    (sweeps', runs' or evaluated lists'); returns report.md's path. `metrics` and `stratified` default to the
    metrics marked for the table (ndcg, recall) and their per-stratum columns; `pairs="all"` also tests every pair
    of methods (a matrix of adjusted p-values).

        recx.report(["results/quickstart/results.parquet", "runs/als-lists/results.parquet"], "report/")
    """
    if resamples < 1 or not 0 < alpha < 1:
        raise RecxError(f"--resamples {resamples} / --alpha {alpha}: expected at least 1 resample and 0 < alpha < 1")
    paths = [Path(results)] if isinstance(results, (str, Path)) else [Path(path) for path in results]
    frame, folders = load_results(paths, Path(runs) if runs is not None else None)
    options = ReportOptions(
        baseline=baseline,
        ks=ks,
        split=split,
        correction=correction,
        resamples=resamples,
        alpha=alpha,
        parameters=tuple(params),
        sources=list(paths),
        pairs=pairs,
    )
    if metrics is not None:
        options.metrics = tuple(metrics)
    if stratified is not None:
        options.stratified = tuple(stratified)
    write_report(frame, folders, Path(out), options, force)
    return Path(out) / "report.md"
