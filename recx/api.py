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
import dataclasses
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

import pandas as pd
from rich.console import Console
from rich.progress import Progress

from recx.config.run_config import RunConfig, deep_merge, load_config_file, resolve
from recx.config.schema import check_values
from recx.core import call_arguments as arguments
from recx.core import plugins
from recx.core.errors import RecxError
from recx.core.names import check_name
from recx.core.progress import make_progress
from recx.data.dataset import load_dataset
from recx.data.prepare import PrepareOptions
from recx.data.prepare import prepare as prepare_dataset
from recx.data.prepare import refresh as refresh_dataset
from recx.data.root import default_data_root
from recx.reports.report import PAIRS, ReportOptions, report_sweep, write_report
from recx.reports.stats import CORRECTIONS
from recx.runs import store, tracking
from recx.runs.collection import base_label, load_results
from recx.runs.collection import epochs as epoch_records
from recx.runs.evaluate import evaluate_saved_run
from recx.runs.lists import check_folder as check_lists_folder
from recx.runs.lists import lists_evaluation, read_lists
from recx.runs.per_user import file_name
from recx.runs.train_run import DEFAULT_KS, train_run
from recx.sweeps.backends import Execution
from recx.sweeps.experiments import SweepOverrides
from recx.sweeps.sweep import run_sweep

PathLike = str | os.PathLike


def use_plugins(*specs: str | os.PathLike) -> None:
    """Load plugins (module names, `.py` files or package folders) beside the installed ones; their samplers, losses,
    models, formats and metrics then work wherever a built-in name does.

        recx.use_plugins("my_sampler.py")
    """
    names = []
    for spec in specs:
        if isinstance(spec, os.PathLike):
            spec = os.fspath(spec)
        if not isinstance(spec, str) or not spec.strip():
            raise arguments.refuse("specs", spec, "expected a module name, or the path of a .py file or package folder")
        names.append(spec)
    plugins.request(*names)


def _root(data_root: PathLike | None) -> Path:
    folder = arguments.optional_path(data_root, "data_root")
    return folder if folder is not None else default_data_root()


def _progress_argument(shown: Any) -> Any:
    if not isinstance(shown, (bool, Progress)):
        raise arguments.refuse("progress", shown, "expected True, False or a rich Progress display")
    return shown


@contextlib.contextmanager
def _progress(shown) -> Iterator[Any]:
    """`shown`: a progress display of the caller's (used as is), True (a new one) or False (nothing shown)."""
    if shown is True or shown is False:
        with make_progress(quiet=not shown) as progress:
            yield progress
    else:
        yield shown


def _folder_of(run: Any) -> Path:
    return run.path if isinstance(run, Run) else arguments.path(run, "run", "RUN_DIR")


@dataclass(frozen=True)
class Run:
    """A run folder: a trained run, or a folder of evaluated lists (`lists.json`). Every attribute reads the folder
    when it is asked for (nothing is cached), each file checked against its recorded checksum.

    run = recx.load_run("runs/3f2a9c1e0b7d")
    run.path             # the folder (pathlib.Path)
    run.config           # the resolved configuration (config.yaml); for lists, lists.json
    run.state            # absent, empty, incomplete, trained, complete or foreign
    run.results          # long format: split, metric, k, stratum, value
    run.per_user("test") # the paired tests' input: user, metric, k, stratum, value
    run.epochs           # loss, seconds and validation metric per epoch
    run.best_epoch       # the epoch whose weights were evaluated
    """

    path: Path
    """The run's folder: runs/<run id> by default, or the folder given as run_dir (--run-dir, --out)."""

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
        """results.parquet: run_id, dataset, model, loss, sampler, seed, split, metric, k, stratum, value (and method
        for evaluated lists), one row per split, metric, cut-off and popularity stratum."""
        return store.read_parquet(self.path, "results.parquet", "train the run again with --force")

    def per_user(self, split: str = "test") -> pd.DataFrame:
        """user, metric, k, stratum, value for each user evaluated on `split` ("valid" or "test")."""
        return store.read_parquet(self.path, file_name(arguments.split(split)), "train the run again with --force")

    @property
    def epochs(self) -> pd.DataFrame:
        """epochs.jsonl as a frame: one row per trained epoch (epoch, loss, seconds, valid_<metric>, ...)."""
        return epoch_records(self.path)

    @property
    def best_epoch(self) -> int:
        """The epoch whose weights were evaluated (0: nothing was trained)."""
        return store.trained_epoch(self.path)


def load_run(path: PathLike) -> Run:
    """The run in `path` (refused when it is not a folder recx wrote as a run or as evaluated lists).

    run = recx.load_run("runs/3f2a9c1e0b7d")
    """
    folder = arguments.path(path, "path")
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
    refresh_checksums: bool = False,
    **options,
) -> Path:
    """Prepare a dataset under the data root (default $RECX_DATA, else ./data) and return its folder. `options`:
    ratios, seed, rating, kcore, split, preset, skip_bad_lines, dataset, synthetic (a mapping of the
    generator's settings), as `recx prepare` takes them. `refresh_checksums`: instead, record the current checksums
    of an existing dataset's files in its card.json, once their content is checked to be the one the card records
    (files a pipeline saved again with other Parquet options).

        recx.prepare("gowalla", format="lightgcn", source="../shared/data/gowalla")
    """
    check_name(name, "dataset name")
    if arguments.flag(refresh_checksums, "refresh_checksums"):
        given = {"format": format, "source": source, "force": force, **options}
        extra = [arguments.label(key) for key, value in given.items() if value not in (None, False, 0)]
        if extra:
            raise RecxError(
                f"{arguments.label('refresh_checksums')} records the checksums of an existing dataset's files; "
                f"not with {', '.join(extra)}"
            )
        return refresh_dataset(name, _root(data_root))
    settings = _prepare_options(
        arguments.optional_text(format, "format"), arguments.optional_path(source, "source"), options
    )
    return prepare_dataset(name, settings, _root(data_root), arguments.flag(force, "force"))


def _prepare_options(format: str | None, source: Path | None, options: dict) -> PrepareOptions:
    """`recx.prepare`'s options checked by name and type (their values by the preparation, as the CLI's)."""
    from recx.core.registry import did_you_mean

    known = [f.name for f in dataclasses.fields(PrepareOptions) if f.name not in ("format", "source")]
    for key in options:
        if key not in known:
            raise RecxError(f"unknown option {key!r}{did_you_mean(key, known)}; valid: {', '.join(known)}")
    checks: dict[str, Callable[[Any, str], Any]] = {
        "ratios": arguments.optional_text,
        "rating": arguments.optional_text,
        "split": arguments.optional_text,
        "preset": arguments.optional_text,
        "dataset": arguments.optional_text,
        "synthetic": arguments.optional_mapping,
        "seed": arguments.integer,
        "skip_bad_lines": arguments.flag,
    }
    checked: dict[str, Any] = {}
    for key, value in options.items():
        if key == "kcore":
            checked[key] = arguments.optional_integer(value, key, minimum=0, note="(0: off)")
        else:
            checked[key] = checks[key](value, key)
    if checked.get("synthetic") is None:
        checked.pop("synthetic", None)
    return PrepareOptions(format=format, source=source, **checked)


def run_config(
    config: RunConfig | dict | PathLike | None = None,
    settings: dict | None = None,
    source: str = "arguments",
    **keywords,
) -> RunConfig:
    """The resolved RunConfig of a configuration (a RunConfig, a mapping or a YAML file) with `settings` (a mapping)
    and keyword settings over it, as `recx.train` takes them. A bad value is refused naming its file (or `source`,
    where the mapping and settings came from), key, value and range.

        recx.run_config({"loss": "bpr"}, {"epochs": 5}).run_id()
        recx.run_config(loss="bpr", epochs=5).run_id()  # the same run
    """
    settings = arguments.optional_mapping(settings, "settings")
    if keywords:
        settings = deep_merge(settings or {}, keywords)
    source = arguments.text(source, "source")
    if not isinstance(config, (RunConfig, dict, str, os.PathLike)) and config is not None:
        raise arguments.refuse(
            "config", config, "expected a mapping of config keys, a RunConfig or the path of a YAML config file"
        )
    if isinstance(config, RunConfig) and not settings:
        return config
    if isinstance(
        config, RunConfig
    ):  # its components' arguments go with them: a component changed by `settings` starts anew
        config = {
            key: value
            for key, value in config.to_dict().items()
            if not (key.endswith("_args") and key[: -len("_args")] in (settings or {}))
        }
    defaults = RunConfig()
    if config is None or isinstance(config, dict):
        raw, where = arguments.mapping(config or {}, "config"), source
    else:
        raw, where = load_config_file(arguments.path(config, "config", "--config")), str(config)
    check_values(raw, defaults, where)
    check_values(settings or {}, defaults, source)
    return resolve(deep_merge(raw, settings or {}), where=where)


def train(
    config: RunConfig | dict | PathLike | None = None,
    *,
    data_root: PathLike | None = None,
    run_dir: PathLike | None = None,
    ks: Sequence[int] | str = tuple(DEFAULT_KS),
    force: bool = False,
    diagnostics: bool = False,
    checkpoint_every: int | None = None,
    progress=False,
    track: str | None = None,
    track_uri: str | None = None,
    **settings,
) -> Run:
    """Train one run and evaluate it; returns the Run (folder `run_dir`, default runs/<run id>). `config`: a
    RunConfig, a mapping or a YAML file; `settings` (any RunConfig key) override it. `ks`: the final evaluation's
    cut-offs (valid_metric's is added). An interrupted run goes on from its checkpoint when trained again; a
    completed one is refused unless `force`.

        run = recx.train(dataset="synthetic", model="mf", loss="bpr", sampler="uniform", epochs=5)
        run.results
    """
    resolved = run_config(config, settings or None)
    ks = arguments.cutoffs(ks)
    force, diagnostics = arguments.flag(force, "force"), arguments.flag(diagnostics, "diagnostics")
    checkpoint_every = arguments.optional_integer(checkpoint_every, "checkpoint_every", minimum=0, note="(0: never)")
    progress = _progress_argument(progress)
    track, track_uri = arguments.optional_text(track, "track"), arguments.optional_text(track_uri, "track_uri")
    root = _root(data_root)
    folder = arguments.optional_path(run_dir, "run_dir") or Path("runs") / resolved.run_id()
    check_name(folder.name, "run folder name (--run-dir)")
    tracker = tracking.choose(track, track_uri, home=folder.parent)
    dataset = load_dataset(root, resolved.dataset)
    with _progress(progress) as shown:
        train_run(
            resolved,
            dataset,
            folder,
            progress=shown,
            ks=ks,
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
    ks: Sequence[int] | str = tuple(DEFAULT_KS),
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
    also each user's top-K list in the lists format (original ids); `auc_beta`: also AUC and OPAUC(β). `ks`: the
    cut-offs, positive integers (a list, one int, or the command line's "10,20,50"), as in every function here.

        recx.evaluate("runs/3f2a9c1e0b7d", "valid", [10, 20]).results
    """
    folder = _folder_of(run)
    split, ks = arguments.split(split), arguments.cutoffs(ks)
    batch_size = arguments.integer(batch_size, "batch_size", minimum=1)
    device = arguments.device(device)
    if auc_beta is not None:
        auc_beta = arguments.fraction(auc_beta, "auc_beta", "--opauc-beta")
    diagnostics, force = arguments.flag(diagnostics, "diagnostics"), arguments.flag(force, "force")
    progress = arguments.flag(progress, "progress")
    _, found = evaluate_saved_run(
        folder,
        split,
        ks,
        batch_size,
        device,
        arguments.optional_path(data_root, "data_root"),
        arguments.optional_path(dump_topk, "dump_topk"),
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
    ks: Sequence[int] | str = tuple(DEFAULT_KS),
    *,
    data_root: PathLike | None = None,
    run_dir: PathLike | None = None,
    name: str | None = None,
    force: bool = False,
) -> Run:
    """Evaluate top-K lists written by any system (Parquet or TSV: user, item, rank or score, in the dataset's
    original ids) with recx's metrics, strata and per-user files, into a run-like folder (recx.runs.lists: `run_dir`,
    the command line's --out, default runs/<id>); `recx report` compares it with recx's runs. The file is checked
    (columns, types, ranks or scores) before the dataset is loaded; a folder that already holds evaluated lists is
    replaced only with `force` (written aside, swapped in when complete).

        lists = recx.evaluate_lists("als_top50.tsv", "gowalla", name="implicit ALS")
        lists.results
    """
    path, split, ks = arguments.path(lists, "lists", "--lists"), arguments.split(split), arguments.cutoffs(ks)
    check_name(dataset, "dataset name")
    folder, name = arguments.optional_path(run_dir, "run_dir", "--out"), arguments.optional_text(name, "name")
    root, force = _root(data_root), arguments.flag(force, "force")
    if folder is not None:
        check_name(folder.name, "lists folder name (--out)")
        check_lists_folder(folder, force)  # again under the folder's lock, when the evaluation is written
    frame = read_lists(path)
    data = load_dataset(root, dataset)
    outcome = lists_evaluation(path, data, split, ks, folder, name, force, frame)
    return Run(outcome.folder)


def diagnose_samplers(
    run: Run | PathLike,
    samplers: Sequence[str] | None = None,
    *,
    users: int = 100,
    draws: int = 100_000,
    n_codewords: int = 64,
    seed: int = 0,
    device: str = "auto",
    plot: PathLike | None = None,
) -> pd.DataFrame:
    """KL(proposal || softmax) and total variation per sampled user of a trained run, for its random initialisation
    and its trained model (FastVAE's Table 2 / Figure 2 measure; `samplers` default: the figure's, each sampler's
    `figure`). Writes sampler_diagnostics.csv into the run folder and, with `plot`, the figure as PNG.

        recx.diagnose_samplers("runs/3f2a9c1e0b7d", ["uniform", "midx_uni"], users=50)
    """
    from recx.core.device import resolve_device
    from recx.reports.sampler_divergence import diagnose_run, figure_samplers

    folder = _folder_of(run)
    names = figure_samplers() if not samplers else arguments.texts(list(samplers), "samplers", "--sampler")
    return diagnose_run(
        folder,
        names,
        arguments.integer(users, "users", minimum=1),
        arguments.integer(draws, "draws", minimum=1),
        arguments.integer(n_codewords, "n_codewords", "--n-codewords", minimum=1),
        arguments.integer(seed, "seed", minimum=0),
        resolve_device(arguments.device(device)),
        arguments.optional_path(plot, "plot"),
    )


def sweep(
    file: PathLike,
    experiment: str,
    *,
    out: PathLike | None = None,
    data_root: PathLike | None = None,
    dry_run: bool = False,
    datasets: list[str] | None = None,
    seeds: Sequence[int] | str | None = None,
    methods: Sequence[str] | str | None = None,
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
    path = arguments.path(file, "file", "EXPERIMENTS_FILE")
    check_name(experiment, "experiment name (--experiment)")
    folder = arguments.optional_path(out, "out") or Path("results") / experiment
    root, dry_run = _root(data_root), arguments.flag(dry_run, "dry_run", "--dry-run")
    overrides = SweepOverrides(
        datasets=arguments.optional_texts(datasets, "datasets", "--dataset"),
        seeds=None if seeds is None else arguments.integers(seeds, "seeds"),
        settings=arguments.optional_mapping(settings, "settings", "--set") or {},
        methods=arguments.optional_texts(methods, "methods"),
        max_runs=arguments.optional_integer(max_runs, "max_runs", minimum=1),
    )
    execution = Execution(
        arguments.choice(backend, "backend", ("local", "ray")),
        arguments.integer(jobs, "jobs", minimum=1),
        arguments.optional_text(address, "address"),
    )
    track, track_uri = arguments.optional_text(track, "track"), arguments.optional_text(track_uri, "track_uri")
    if console is not None and not isinstance(console, Console):
        raise arguments.refuse("console", console, "expected a rich Console (or None: nothing is printed)")
    shown = console if console is not None else Console(quiet=True)
    outcome = run_sweep(
        path,
        experiment,
        folder,
        root,
        dry_run,
        shown,
        overrides,
        execution,
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
    metrics: Sequence[str] | str | None = None,
    ks: Sequence[int] | str | None = None,
    stratified: Sequence[str] | str | None = None,
    split: str = "test",
    correction: str = "holm",
    resamples: int = 10_000,
    alpha: float = 0.05,
    params: Sequence[str] = (),
    pairs: str = "baseline",
    force: bool = False,
) -> Path:
    """Tables (mean ± std, best in bold), paired tests against a baseline and plots for one or more results files
    (sweeps', runs' or evaluated lists'); returns report.md's path. `metrics` and `stratified` default to the
    metrics marked for the table (ndcg, recall) and their per-stratum columns; `pairs="all"` also tests every pair
    of methods (a matrix of adjusted p-values).

        recx.report(["results/quickstart/results.parquet", "runs/als-lists/results.parquet"], "report/")
    """
    if isinstance(results, (str, os.PathLike)):
        paths = [arguments.path(results, "results", "RESULTS")]
    elif isinstance(results, (list, tuple)) and results:
        paths = [arguments.path(path, "results", "RESULTS") for path in results]
    else:
        raise arguments.refuse("results", results, "expected a results.parquet path, or a non-empty list of them")
    folder = arguments.path(out, "out")
    resamples = arguments.integer(resamples, "resamples", minimum=1)
    alpha = arguments.fraction(alpha, "alpha", closed=False)
    options = ReportOptions(
        baseline=arguments.optional_text(baseline, "baseline"),
        ks=None if ks is None else tuple(arguments.cutoffs(ks, "ks")),
        split=arguments.split(split),
        correction=arguments.choice(correction, "correction", CORRECTIONS),
        resamples=resamples,
        alpha=alpha,
        parameters=tuple(arguments.texts(params, "params", "--param", empty=True)),
        sources=list(paths),
        pairs=arguments.choice(pairs, "pairs", PAIRS),
    )
    if metrics is not None:
        options.metrics = tuple(arguments.texts(metrics, "metrics"))
    if stratified is not None:
        options.stratified = tuple(arguments.texts(stratified, "stratified", empty=True))
    force = arguments.flag(force, "force")
    frame, folders = load_results(paths, arguments.optional_path(runs, "runs"))
    write_report(frame, folders, folder, options, force)
    return folder / "report.md"
