"""The `recx` command line: prepare, train, eval, sweep, report, list, diagnose. Thin: parse, call the Python front
door (recx.api, which raises the same one-line errors), print.

Importing this module is cheap (no torch, pandas or registry): `--help`, `--version`, a mistyped command or option
and shell completion answer at once, the registered names and defaults they show coming from the stored catalogue
(recx.shell.catalog, with the installed plugins' names once recx has loaded them). Each command imports what it
needs when it runs, behind a spinner on a terminal.

A user error (RecxError) prints one line and exits 1; Ctrl-C prints what was interrupted and what was kept and
exits 130; an unexpected internal error prints one line and where its full traceback was saved (`--debug`
anywhere on the command line shows the traceback instead).
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import json
import os
import sys
import tempfile
import traceback
from pathlib import Path
from typing import Optional

import typer
import yaml
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from recx.core import arguments, yaml_values
from recx.core.errors import RecxError, attached_log
from recx.core.folders import write_text_atomic
from recx.core.versions import RECX_VERSION
from recx.shell import catalog, completion

# Plain (click) help, not Typer's rich panels: rich's help renderer and the Markdown parser it loads cost ~0.15 s of
# every `--help` (bench/cli_latency.py), and help text is read as often as it is piped or grepped.
app = typer.Typer(
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    help="Experiment runner for negative sampling, softmax approximation and losses in "
    "implicit-feedback recommendation. `recx list` shows every sampler, loss, model, metric, "
    "format and experiment by name.",
)
# Piped output is not wrapped at 80 columns: tables stay one row per line.
console = Console() if Console().is_terminal else Console(width=10_000)
DATA_ROOT_HELP = "Folder of prepared datasets (default: $RECX_DATA, else ./data)."
TRACK_HELP = (
    "Log each completed run to MLflow (the track extra): config, per-epoch loss and validation metric, "
    "final metrics, run files."
)
TRACK_URI_HELP = (
    "MLflow tracking URI (default: $MLFLOW_TRACKING_URI, else mlflow.db and mlartifacts/ under the output)."
)
COMPLETE_VAR = "_RECX_COMPLETE"


def _names(kind: str) -> str:
    return ", ".join(catalog.stored_names(kind))


def _default(key: str) -> str:
    return f"(default: {catalog.stored_default(key)})"


@contextlib.contextmanager
def _loading():
    """On a terminal, a spinner while torch and the registries load (seconds on a busy machine); it is erased
    before the command shows anything."""
    shown = Console(stderr=True)
    if not shown.is_terminal or "torch" in sys.modules:
        yield
        return
    with shown.status("loading torch", spinner="dots"):
        yield


def _handles_interrupts(command):
    """Ctrl-C inside a command: say what was interrupted and what was kept, exit 130."""

    @functools.wraps(command)
    def run(*args, **kwargs):
        try:
            return command(*args, **kwargs)
        except KeyboardInterrupt as interrupt:
            name = {"evaluate_run": "eval"}.get(command.__name__, command.__name__)
            what = str(interrupt) or (
                f"recx {name}; nothing half-written was kept (datasets and run folders are "
                "swapped in only when complete)"
            )
            Console(stderr=True).print(f"interrupted: {what}", highlight=False, soft_wrap=True, markup=False)
            raise typer.Exit(130) from None

    return run


def _parse_ks(text: str) -> list[int]:
    return arguments.cutoffs(text)


def _parse_assignments(pairs: list[str]) -> dict:
    """`--set key=value` (value parsed as YAML), dotted keys for nested args: sampler_args.variant=log."""
    out: dict = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise RecxError(f"--set {pair!r}: expected KEY=VALUE, e.g. sampler_args.variant=log")
        target = out
        *parents, leaf = key.split(".")
        for parent in parents:
            target = target.setdefault(parent, {})
            if not isinstance(target, dict):
                raise RecxError(f"--set {pair!r}: {parent} is set to a value, not a mapping, by another --set")
        try:
            target[leaf] = yaml_values.load(value)
        except yaml.YAMLError:
            raise RecxError(f"--set {pair!r}: the value is not valid YAML") from None
    return out


def print_metrics(values: dict, title: str) -> None:
    """The title on its own line (never wrapped), then rows metric@k (metric alone for k = 0: AUC, OPAUC) and
    columns overall and per popularity stratum."""
    from recx.eval.strata import STRATA

    console.print(title, soft_wrap=True, highlight=False, markup=False)
    table = Table()
    table.add_column("metric")
    for column in ("all",) + STRATA:
        table.add_column(column, justify="right")
    facts = ("heldout_share",)  # the split's share of held-out interactions per stratum (the same at every k): once
    keys = sorted({(m, k) for m, k, _ in values}, key=lambda mk: (mk[0] in facts, mk[1], mk[0]))
    keys = [key for key in keys if key[0] not in facts or key[1] == min(k for m, k in keys if m == key[0])]
    for metric, k in keys:
        cells = [f"{values[(metric, k, s)]:.4f}" if (metric, k, s) in values else "" for s in ("all",) + STRATA]
        table.add_row(f"{metric}@{k}" if k and metric not in facts else metric, *cells)
    console.print(table)


def _print_versions(title: str | None = None) -> None:
    from recx.core.versions import versions

    table = Table(title=title, title_justify="left", show_header=title is not None)
    for column in ("package", "version"):
        table.add_column(column, overflow="fold")
    for name, version in versions().items():
        table.add_row(name, version)
    console.print(table)


@app.callback(invoke_without_command=True)
def options(
    ctx: typer.Context,
    version: bool = typer.Option(False, "--version", help="Show recx's version and exit."),
    verbose: bool = typer.Option(False, "--verbose", help="With --version: also torch, CUDA and CuPy."),
    debug: bool = typer.Option(
        False, "--debug", help="Show the full traceback of an internal error (accepted anywhere on the command line)."
    ),
    threads: Optional[int] = typer.Option(
        None,
        "--threads",
        help="CPU threads of this process (also RECX_THREADS; accepted anywhere on the command line). Default: the "
        "usable CPUs divided among the recx processes running, chosen at start and recorded in each run's "
        "environment.json; results do not depend on it (tests/test_thread_invariance.py).",
    ),
    plugin: list[str] = typer.Option(
        [],
        "--plugin",
        help="Load a plugin: a .py file or a module name (repeatable; also RECX_PLUGINS; accepted anywhere on the "
        "command line). Installed packages with a `recx.plugins` entry point load without it.",
    ),
):
    """Experiment runner for implicit-feedback recommendation."""
    if plugin:
        from recx.core import plugins

        plugins.request(*plugin)
    if version:
        if verbose:
            with _loading():
                _print_versions()
        else:
            console.print(f"recx {RECX_VERSION}", highlight=False)
        raise typer.Exit()
    if ctx.invoked_subcommand is None:  # options but no command: as `recx` alone
        typer.echo(ctx.get_help())
        raise typer.Exit(2)


@app.command()
@_handles_interrupts
def prepare(
    name: str = typer.Argument(
        ...,
        help="Name of the prepared dataset, a folder under the data root (letters, "
        "digits, '.', '_', '-'); a known name (ml1m, ml10m, ml20m, ml25m, "
        "gowalla-snap, ...) is downloaded.",
        autocompletion=completion.downloadable,
    ),
    format: Optional[str] = typer.Option(
        None,
        "--format",
        "-f",
        help=f"Source format: {_names('formats')}.",
        autocompletion=completion.registered("formats"),
    ),
    source: Optional[Path] = typer.Option(None, help="Source file or folder already on disk (skips the download)."),
    data_root: Optional[Path] = typer.Option(None, help=DATA_ROOT_HELP),
    preset: Optional[str] = typer.Option(
        None, help="A paper's protocol: fastvae, rg, prism (options below override).", autocompletion=completion.presets
    ),
    rating: Optional[str] = typer.Option(None, help="Which ratings are positives: all, >=4, >3.5 ... (default: all)"),
    min_rating: Optional[float] = typer.Option(None, help="Same as --rating '>=X'."),
    kcore: Optional[int] = typer.Option(None, help="Iterative k-core on users and items (0: off). (default: 0)"),
    split: Optional[str] = typer.Option(
        None,
        help="per-user-random, per-user-temporal, global-random, "
        "leave-one-out-random or leave-one-out-latest. "
        "(default: per-user-random)",
    ),
    ratios: Optional[str] = typer.Option(
        None, help="Split ratios summing to 100 (or 1), train/test or train/valid/test. (default: 80/20)"
    ),
    seed: int = typer.Option(0, help="Seed of the split (and of the synthetic generator)."),
    skip_bad_lines: bool = typer.Option(False, help="Count malformed lines in the card instead of failing."),
    dataset: Optional[str] = typer.Option(None, help="Download spec to use (default: NAME)."),
    force: bool = typer.Option(
        False,
        "--force",
        help="Replace an existing dataset of that name (the new one is written aside and swapped in when complete).",
    ),
    refresh_checksums: bool = typer.Option(
        False,
        "--refresh-checksums",
        help="Instead: record in card.json the checksums of the dataset's files as they are now, once their content "
        "is checked to be the one card.json records (files saved again with other Parquet options).",
    ),
):
    """Turn a source into a prepared dataset: Parquet splits, id maps and card.json (refuses an existing name)."""
    with _loading():
        from recx import api

    if refresh_checksums:
        given: dict[str, object] = {"--format": format, "--source": source, "--preset": preset, "--rating": rating}
        given.update({"--min-rating": min_rating, "--kcore": kcore, "--split": split, "--ratios": ratios})
        given.update({"--dataset": dataset, "--force": force or None, "--skip-bad-lines": skip_bad_lines or None})
        extra = [option for option, value in given.items() if value is not None] + ["--seed"] * (seed != 0)
        if extra:
            raise RecxError(f"--refresh-checksums records the checksums of an existing dataset; not with {extra[0]}")
        folder = api.prepare(name, data_root=data_root, refresh_checksums=True)
        console.print(f"checksums of {name}: {folder / 'card.json'}", soft_wrap=True, highlight=False)
        return
    folder = api.prepare(
        name,
        format,
        source,
        data_root=data_root,
        force=force,
        ratios=ratios,
        seed=seed,
        min_rating=min_rating,
        rating=rating,
        kcore=kcore,
        split=split,
        preset=preset,
        skip_bad_lines=skip_bad_lines,
        dataset=dataset,
    )
    card = json.loads((folder / "card.json").read_text())
    counts = " / ".join(
        f"{part} {card['counts'][part]:,}" for part in ("train", "valid", "test") if part in card["counts"]
    )
    console.print(
        f"prepared [bold]{name}[/] in {folder}: {card['n_users']:,} users, {card['n_items']:,} items, "
        f"{counts} interactions; repeated (user, item) pairs dropped: {card['rows']['removed_duplicates']:,}",
        soft_wrap=True,
    )


@app.command()
@_handles_interrupts
def train(
    config_file: Optional[Path] = typer.Option(None, "--config", help="YAML run config; options below override it."),
    dataset: Optional[str] = typer.Option(
        None, help=f"Prepared dataset name. {_default('dataset')}", autocompletion=completion.datasets
    ),
    model: Optional[str] = typer.Option(
        None, help=f"Model: {_names('models')}. {_default('model')}", autocompletion=completion.registered("models")
    ),
    loss: Optional[str] = typer.Option(
        None, help=f"Loss: {_names('losses')}. {_default('loss')}", autocompletion=completion.registered("losses")
    ),
    sampler: Optional[str] = typer.Option(
        None,
        help=f"Negative sampler: {_names('samplers')}. {_default('sampler')}",
        autocompletion=completion.registered("samplers"),
    ),
    dim: Optional[int] = typer.Option(None, help=f"Embedding dimension (key dim). {_default('dim')}"),
    epochs: Optional[int] = typer.Option(None, help=f"Maximum number of epochs. {_default('epochs')}"),
    batch_size: Optional[int] = typer.Option(None, help=f"Training interactions per step. {_default('batch_size')}"),
    n_negatives: Optional[int] = typer.Option(
        None,
        "--n-negatives",
        "--negatives",
        help=f"Negatives per query (or shared per batch), key n_negatives. {_default('n_negatives')}",
    ),
    lr: Optional[float] = typer.Option(None, help=f"Learning rate, > 0. {_default('lr')}"),
    weight_decay: Optional[float] = typer.Option(None, help=f"Weight decay strength, >= 0. {_default('weight_decay')}"),
    weight_decay_mode: Optional[str] = typer.Option(
        None, help=f"none, full (every row, every step) or batch. {_default('weight_decay_mode')}"
    ),
    seed: Optional[int] = typer.Option(
        None, help=f"Seed of initialisation, shuffling and sampling. {_default('seed')}"
    ),
    device: Optional[str] = typer.Option(
        None, help=f"auto, cpu or cuda. {_default('device')}", autocompletion=completion.choices("auto", "cpu", "cuda")
    ),
    kernels: Optional[str] = typer.Option(
        None, help=f"Sampler kernels: auto (CuPy on CUDA when installed), torch or cupy. {_default('kernels')}"
    ),
    patience: Optional[int] = typer.Option(
        None, help=f"Validations without improvement before stopping, >= 1. {_default('patience')}"
    ),
    set_: list[str] = typer.Option(
        [],
        "--set",
        help="Any config key, KEY=VALUE; nested: sampler_args.variant=log "
        "(`recx list samplers` shows each one's arguments).",
    ),
    run_dir: Optional[Path] = typer.Option(None, help="Run folder (default: runs/<run id>)."),
    data_root: Optional[Path] = typer.Option(None, help=DATA_ROOT_HELP),
    force: bool = typer.Option(
        False,
        "--force",
        help="Train again over a completed run (or an unfinished run of "
        "another configuration); the old one is replaced only when "
        "the new one is complete.",
    ),
    diagnostics: bool = typer.Option(
        False,
        "--diagnostics",
        help="Also write diagnostics.json (item-norm/popularity "
        "correlation, NDCG by dot vs cosine: four more "
        "full evaluations).",
    ),
    quiet: bool = typer.Option(False, help="No progress bar and no per-epoch lines."),
    checkpoint_every: Optional[int] = typer.Option(
        None,
        min=0,
        help="Write the training state every N epochs "
        "(0: never); default: after each epoch that ends at least 60 s "
        "after the last checkpoint.",
    ),
    track: Optional[str] = typer.Option(None, help=TRACK_HELP, autocompletion=completion.choices("mlflow")),
    track_uri: Optional[str] = typer.Option(None, help=TRACK_URI_HELP),
    k: str = typer.Option(
        "10,20,50",
        "--k",
        help="Cut-offs of the final evaluation, comma separated (each at most "
        "the number of items; valid_metric's is added).",
    ),
):
    """Train one run and evaluate it; the run folder holds config, per-epoch metrics, results and weights.

    An interrupted run is kept: during training it is marked incomplete and the same command goes on from its last checkpoint (results identical to an uninterrupted run); after training it can be evaluated (`recx eval`) and the same command finishes it. A completed run is refused unless --force.
    """
    with _loading():
        from recx import api
        from recx.config.run_config import deep_merge
        from recx.core.progress import make_progress

    ks = _parse_ks(k)
    options = {
        "dataset": dataset,
        "model": model,
        "loss": loss,
        "sampler": sampler,
        "dim": dim,
        "epochs": epochs,
        "batch_size": batch_size,
        "n_negatives": n_negatives,
        "lr": lr,
        "weight_decay": weight_decay,
        "weight_decay_mode": weight_decay_mode,
        "seed": seed,
        "device": device,
        "kernels": kernels,
        "patience": patience,
    }
    given = deep_merge({k: v for k, v in options.items() if v is not None}, _parse_assignments(set_))
    config = api.run_config(config_file, given, source="command line")
    folder = run_dir or Path("runs") / config.run_id()
    with make_progress(quiet) as progress:
        run = api.train(
            config,
            data_root=data_root,
            run_dir=folder,
            ks=ks,
            force=force,
            diagnostics=diagnostics,
            checkpoint_every=checkpoint_every,
            progress=progress,
            track=track,
            track_uri=track_uri,
        )
    results = run.results
    test = results[results.split == "test"]
    values = {(r.metric, r.k, r.stratum): r.value for r in test.itertuples()}
    print_metrics(values, f"{config.dataset} test (epoch {run.best_epoch}) — {folder}")


@app.command("eval")
@_handles_interrupts
def evaluate_run(
    run_dir: Optional[Path] = typer.Argument(None, help="A trained or completed run folder (or use --lists)."),
    split: str = typer.Option("test", help="valid or test."),
    k: str = typer.Option("10,20,50", "--k", help="Cut-offs, comma separated."),
    dump_topk: Optional[Path] = typer.Option(
        None, help="Write each user's top-K list as Parquet: user, item (original ids), rank, user_index, item_index."
    ),
    lists: Optional[Path] = typer.Option(
        None,
        help="Evaluate top-K lists written by any system instead of a run: Parquet, or TSV with a header (.csv: "
        "comma-separated), columns user, item and rank (1 first) or score (highest first), in the dataset's "
        "original ids; needs --dataset.",
    ),
    dataset: Optional[str] = typer.Option(
        None, help="With --lists: the prepared dataset the lists rank.", autocompletion=completion.datasets
    ),
    name: Optional[str] = typer.Option(None, help="With --lists: the method's name in tables (default: the file's)."),
    out: Optional[Path] = typer.Option(None, help="With --lists: the folder to write (default: runs/<id>)."),
    batch_size: int = typer.Option(1024, help="Users per evaluation batch, >= 1 (results do not depend on it)."),
    device: str = typer.Option("auto", help="auto, cpu or cuda."),
    data_root: Optional[Path] = typer.Option(None, help=DATA_ROOT_HELP + " Default: where the run's data was."),
    auc: bool = typer.Option(False, "--auc", help="Also AUC and OPAUC(beta) over each user's full ranking."),
    opauc_beta: float = typer.Option(0.1, help="beta of OPAUC: positives against the top beta-fraction of negatives."),
    show_diagnostics: bool = typer.Option(
        False, "--diagnostics", help="Also item-norm/popularity correlation and NDCG by dot vs cosine."
    ),
    quiet: bool = typer.Option(False, help="No progress bar."),
    force: bool = typer.Option(
        False,
        "--force",
        help="Let --dump-topk replace a file recx did not write; with --lists, replace the lists evaluated in --out "
        "(the new ones are written aside and swapped in when complete).",
    ),
):
    """Full-ranking evaluation of a trained run, or of top-K lists from any system (--lists): NDCG, Recall,
    Precision, MRR, HitRate (and any plugin metric), per popularity stratum."""
    with _loading():
        from recx import api

    ks = _parse_ks(k)
    if lists is not None:
        if run_dir is not None or dataset is None:
            raise RecxError("--lists evaluates a lists file on --dataset NAME; give no run folder with it")
        run = api.evaluate_lists(lists, dataset, split, ks, data_root=data_root, run_dir=out, name=name, force=force)
        shown = run.results
        print_metrics({(r.metric, r.k, r.stratum): r.value for r in shown.itertuples()}, f"{lists} — {split}")
        for note in run.config["notes"]:
            console.print(f"note: {note}", soft_wrap=True, highlight=False)
        console.print(f"results: {run.path / 'results.parquet'}", soft_wrap=True, highlight=False)
        return
    if run_dir is None:
        raise RecxError("recx eval: give a run folder, or --lists FILE --dataset NAME")
    evaluated = api.evaluate(
        run_dir,
        split,
        ks,
        batch_size=batch_size,
        device=device,
        data_root=data_root,
        dump_topk=dump_topk,
        auc_beta=opauc_beta if auc else None,
        diagnostics=show_diagnostics,
        force=force,
        progress=not quiet,
    )
    frame = evaluated.results
    print_metrics({(r.metric, r.k, r.stratum): r.value for r in frame.itertuples()}, f"{run_dir} — {split}")
    console.print(f"results: {run_dir / f'eval_{split}.parquet'}", soft_wrap=True, highlight=False)
    if dump_topk is not None:
        console.print(
            f"top-{max(ks)} lists (user, item, rank) of every user with a {split} item: {dump_topk}",
            soft_wrap=True,
            highlight=False,
        )
    if evaluated.diagnostics is not None:
        console.print_json(data=evaluated.diagnostics, sort_keys=True)


@app.command()
@_handles_interrupts
def sweep(
    experiments_file: Path = typer.Argument(..., help="experiments.yaml"),
    experiment: str = typer.Option(
        ...,
        "--experiment",
        "-e",
        help="Name of the experiment to run (`recx list experiments`).",
        autocompletion=completion.experiments,
    ),
    out: Optional[Path] = typer.Option(None, help="Output folder (default: results/<experiment>)."),
    data_root: Optional[Path] = typer.Option(None, help=DATA_ROOT_HELP),
    dry_run: bool = typer.Option(False, help="List the runs and exit."),
    dataset: list[str] = typer.Option(
        [], "--dataset", help="Run on these datasets instead of the experiment's.", autocompletion=completion.datasets
    ),
    seeds: Optional[str] = typer.Option(None, help="Comma-separated seeds instead of the experiment's."),
    methods: Optional[str] = typer.Option(
        None,
        help="Comma-separated methods of the experiment to run (default: "
        "all); the tables keep the experiment's runs already complete "
        "in --out.",
    ),
    set_: list[str] = typer.Option(
        [],
        "--set",
        help="Force a config key in every run, KEY=VALUE (e.g. epochs=5); "
        "wins over the experiment's defaults and methods.",
    ),
    backend: str = typer.Option(
        "local",
        help="local (this machine) or ray (a Ray cluster; needs the dist extra).",
        autocompletion=completion.choices("local", "ray"),
    ),
    jobs: int = typer.Option(
        1,
        help="Runs at once: local worker processes (each pinned to one GPU, else given a "
        "share of the CPU threads) or Ray tasks in flight.",
    ),
    address: Optional[str] = typer.Option(
        None, help="Address of an existing Ray cluster (default: start a local one with --jobs CPUs)."
    ),
    track: Optional[str] = typer.Option(
        None,
        help=TRACK_HELP + " One MLflow experiment per sweep (default: the experiment's `track`, else none).",
        autocompletion=completion.choices("mlflow"),
    ),
    track_uri: Optional[str] = typer.Option(None, help=TRACK_URI_HELP),
    max_runs: Optional[int] = typer.Option(None, min=1, help="Most runs the experiment may plan. (default: 10,000)"),
):
    """Run every (dataset, method, grid point, seed) of an experiment, skipping completed runs; write tables.

    Every run is validated before the first one starts. An interrupted sweep loses at most the run in progress: the same command skips completed runs, finishes trained ones and restarts incomplete ones.
    """
    with _loading():
        from recx import api

    api.sweep(
        experiments_file,
        experiment,
        out=out,
        data_root=data_root,
        dry_run=dry_run,
        datasets=dataset or None,
        seeds=arguments.integers(seeds, "seeds") if seeds is not None else None,
        methods=arguments.texts(methods, "methods") if methods is not None else None,
        settings=_parse_assignments(set_),
        max_runs=max_runs,
        backend=backend,
        jobs=jobs,
        address=address,
        track=track,
        track_uri=track_uri,
        console=console,
    )


@app.command()
def report(
    results: list[Path] = typer.Argument(..., help="results.parquet files of sweeps (stacked)."),
    out: Path = typer.Option(..., help="Output folder: report.md, table.md/.csv/.tex, significance.md/.csv, plots/."),
    runs: Optional[Path] = typer.Option(None, help="Folder of the run folders (default: runs/ beside each file)."),
    baseline: Optional[str] = typer.Option(None, help="Method every other is tested against (default: the first)."),
    metrics: Optional[str] = typer.Option(
        None, help="Table metrics, comma separated (the first is plotted). (default: ndcg,recall)"
    ),
    k: Optional[str] = typer.Option(None, "--k", help="Cut-offs of the table (default: 20 when evaluated)."),
    stratified: Optional[str] = typer.Option(
        None, help="Metrics also shown per popularity stratum (empty: none). (default: ndcg,recall)"
    ),
    split: str = typer.Option("test", help="valid or test."),
    correction: str = typer.Option("holm", help="Multiple-comparison correction: holm or bonferroni."),
    resamples: int = typer.Option(10_000, help="Sign flips of the randomisation test."),
    alpha: float = typer.Option(0.05, help="Significance level of the † marks."),
    param: list[str] = typer.Option(
        [],
        "--param",
        help="Config key to plot the metric against, e.g. batch_size or "
        "sampler_args.m (default: every numeric key swept).",
    ),
    pairs: str = typer.Option(
        "baseline",
        help="baseline: each method against the baseline; all: also every pair of methods (a matrix of adjusted "
        "p-values, significance_pairs.md/.csv).",
        autocompletion=completion.choices("baseline", "all"),
    ),
    force: bool = typer.Option(False, "--force", help="Replace report files in --out that recx did not write."),
):
    """Tables (mean ± std, best in bold), paired significance tests against a baseline (or of every pair), and plots."""
    with _loading():
        from recx import api

    api.report(
        results,
        out,
        runs=runs,
        baseline=baseline,
        metrics=arguments.texts(metrics, "metrics") if metrics is not None else None,
        ks=tuple(_parse_ks(k)) if k else None,
        stratified=arguments.texts(stratified, "stratified", empty=True) if stratified is not None else None,
        split=split,
        correction=correction,
        resamples=resamples,
        alpha=alpha,
        params=tuple(param),
        pairs=pairs,
        force=force,
    )
    console.print((out / "table.md").read_text(), soft_wrap=True, markup=False, highlight=False)
    console.print(f"report: {out / 'report.md'}")


LIST_KINDS = catalog.KINDS + ("versions",)


@app.command("list")
def list_names(
    kind: Optional[str] = typer.Argument(
        None, help=f"One of {', '.join(LIST_KINDS)} (default: all).", autocompletion=completion.list_kinds
    ),
    experiments_file: Path = typer.Option(
        Path("experiments.yaml"), "--file", help="The experiments file whose experiments are listed."
    ),
):
    """Every name recx accepts, with its module, arguments (defaults) and summary, read from the registries.

    Then the versions of recx, torch, CUDA and CuPy (`recx list versions`: only those)."""
    if kind is not None and kind not in LIST_KINDS:
        raise RecxError(f"recx list {kind!r}: expected one of {', '.join(LIST_KINDS)}")
    if kind == "versions":
        return _print_versions("versions")
    for each in [kind] if kind else catalog.KINDS:
        if each == "experiments" and kind is None and not experiments_file.is_file():
            continue
        table = Table(title=each, title_justify="left")
        for column in ("name", "module", "arguments (defaults)", "summary"):
            table.add_column(column, overflow="fold")
        with _loading():
            found = catalog.entries(each, experiments_file)
        for entry in found:
            table.add_row(entry.name, entry.module, entry.args, entry.summary)
        console.print(table)
    catalog.remember_plugins()
    if kind is None:
        _print_versions("versions")


diagnose_app = typer.Typer(no_args_is_help=True, rich_markup_mode=None, help="Diagnostics of a completed run.")
app.add_typer(diagnose_app, name="diagnose")


@diagnose_app.command("sampler")
def diagnose_sampler(
    run_dir: Path = typer.Argument(..., help="A completed run folder."),
    sampler: list[str] = typer.Option(
        [],
        "--sampler",
        help="Sampler name (repeat the option for several); default: the FastVAE paper's Figure 2 set.",
        autocompletion=completion.registered("samplers"),
    ),
    users: int = typer.Option(100, help="Users sampled for the KL / TV table."),
    draws: int = typer.Option(100_000, help="Draws per user where a law is estimated (Figure 2, DNS)."),
    n_codewords: int = typer.Option(64, help="Codewords per MIDX codebook (MIDX's n_codewords; Figure 2: 64)."),
    codewords: Optional[int] = typer.Option(
        None, "--codewords", hidden=True, help="The old spelling of --n-codewords."
    ),
    seed: int = typer.Option(0, help="Seed of the user sample and of the draws."),
    plot: Optional[Path] = typer.Option(None, help="Write the paper's Figure 2 (cumulative probability) as PNG."),
    device: str = typer.Option("auto", help="auto, cpu or cuda."),
):
    """KL(proposal || softmax) and total variation per user, for the run's random initialisation and trained model."""
    if codewords is not None:
        console.print("note: --codewords is now --n-codewords (the MIDX samplers' n_codewords); the old spelling goes")
        n_codewords = codewords
    with _loading():
        from recx import api

    table = api.diagnose_samplers(
        run_dir, sampler, users=users, draws=draws, n_codewords=n_codewords, seed=seed, device=device, plot=plot
    )
    summary = (
        table.groupby(["model", "sampler"], sort=False)
        .agg(kl=("kl", "mean"), tv=("tv", "mean"), exact=("exact", "all"))
        .reset_index()
    )
    shown = Table(title=f"{run_dir}: mean over {users} users (written to sampler_diagnostics.csv)")
    for column in ("model", "sampler", "KL(Q||P)", "TV", "Q"):
        shown.add_column(column)
    for row in summary.itertuples():
        shown.add_row(row.model, row.sampler, f"{row.kl:.4f}", f"{row.tv:.4f}", "exact" if row.exact else "draws")
    console.print(shown)


def _internal_error(error: Exception) -> None:
    from recx.core import plugins

    blamed = plugins.blame(error)
    log = attached_log(error)
    if log is None:
        log = Path(tempfile.gettempdir()) / f"recx-error-{os.getpid()}.log"
        try:
            write_text_atomic(log, "".join(traceback.format_exception(error)))
        except RecxError:
            log = None
    where = f"full traceback in {log}" if log else "the traceback could not be saved"
    if blamed is not None:  # a plugin's code raised it: name the plugin and its method, not recx
        Console(stderr=True).print(
            f"[bold red]error:[/] {escape(f'{blamed} ({where}; rerun with --debug to show it)')}",
            highlight=False,
            soft_wrap=True,
        )
        return
    message = f"{type(error).__name__}: {error} ({where}; rerun with --debug to show it)"
    Console(stderr=True).print(
        f"[bold red]internal error:[/] {escape(message)}",
        highlight=False,
        soft_wrap=True,
    )


def _remember_plugins() -> None:
    """At exit, after a command that loaded the registries and plugins: cache the plugins' names for --help."""
    from recx.core import plugins

    if "torch" in sys.modules and plugins.loaded():
        catalog.remember_plugins()


def main() -> None:
    from recx.core.user_folders import matplotlib_config

    matplotlib_config()
    atexit.register(_remember_plugins)
    debug = "--debug" in sys.argv[1:] or os.environ.get("RECX_DEBUG") == "1"
    sys.argv = [sys.argv[0]] + [arg for arg in sys.argv[1:] if arg != "--debug"]
    try:
        with arguments.from_command_line():
            app(prog_name="recx", complete_var=COMPLETE_VAR)
    except RecxError as error:
        Console(stderr=True).print(f"[bold red]error:[/] {escape(str(error))}", highlight=False, soft_wrap=True)
        sys.exit(1)
    except KeyboardInterrupt:
        Console(stderr=True).print("interrupted")
        sys.exit(130)
    except Exception as error:
        if debug:
            raise
        _internal_error(error)
        sys.exit(1)
