"""The `recx` command line: prepare, train, eval, sweep. Thin: parse, validate, call; user errors exit 1 cleanly."""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Optional

import typer
import yaml
from rich.console import Console
from rich.table import Table

from recx.errors import RecxError

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="Experiment runner for negative sampling, softmax approximation and losses in "
                       "implicit-feedback recommendation.")
console = Console()
DATA_ROOT_HELP = "Folder of prepared datasets (default: $RECX_DATA, else ./data)."


def _data_root(value: Optional[Path]) -> Path:
    from recx.data.store import default_data_root

    return value if value is not None else default_data_root()


def _parse_ks(text: str) -> list[int]:
    try:
        ks = sorted({int(part) for part in text.split(",") if part.strip()})
    except ValueError:
        raise RecxError(f"--k {text!r}: expected a comma-separated list of integers such as 10,20,50") from None
    if not ks or ks[0] < 1:
        raise RecxError(f"--k {text!r}: cut-offs must be positive integers")
    return ks


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
        target[leaf] = yaml.safe_load(value)
    return out


def metrics_table(values: dict, title: str) -> Table:
    """Rows metric@k (metric alone for k = 0: AUC, OPAUC), columns overall and per popularity stratum."""
    from recx.eval.strata import STRATA

    table = Table(title=title)
    table.add_column("metric")
    for column in ("all",) + STRATA:
        table.add_column(column, justify="right")
    keys = sorted({(m, k) for m, k, _ in values}, key=lambda mk: (mk[1], mk[0]))
    for metric, k in keys:
        cells = [f"{values[(metric, k, s)]:.4f}" if (metric, k, s) in values else "" for s in ("all",) + STRATA]
        table.add_row(f"{metric}@{k}" if k else metric, *cells)
    return table


@app.command()
def prepare(
    name: str = typer.Argument(..., help="Name of the prepared dataset (a folder under the data root); a known "
                                         "name (ml1m, ml10m, ml20m, ml25m, gowalla-snap, ...) is downloaded."),
    format: Optional[str] = typer.Option(None, "--format", "-f",
                                         help="Source format: lightgcn, mat, triplets, synthetic, movielens, netflix, "
                                              "amazon-ratings, amazon-reviews, yelp, gowalla-checkins."),
    source: Optional[Path] = typer.Option(None, help="Source file or folder already on disk (skips the download)."),
    data_root: Optional[Path] = typer.Option(None, help=DATA_ROOT_HELP),
    preset: Optional[str] = typer.Option(None, help="A paper's protocol: fastvae, rg, prism (options below override)."),
    rating: Optional[str] = typer.Option(None, help="Which ratings are positives: all, >=4, >3.5 ..."),
    min_rating: Optional[float] = typer.Option(None, help="Same as --rating '>=X'."),
    kcore: Optional[int] = typer.Option(None, help="Iterative k-core on users and items (0: off)."),
    split: Optional[str] = typer.Option(None, help="per-user-random, per-user-temporal, global-random, "
                                                   "leave-one-out-random or leave-one-out-latest."),
    ratios: Optional[str] = typer.Option(None, help="Split ratios, train/test or train/valid/test (default 80/20)."),
    seed: int = typer.Option(0, help="Seed of the split (and of the synthetic generator)."),
    skip_bad_lines: bool = typer.Option(False, help="Count malformed lines in the card instead of failing."),
    dataset: Optional[str] = typer.Option(None, help="Download spec to use (default: NAME)."),
):
    """Turn a source into a prepared dataset: Parquet splits, id maps and card.json."""
    from recx.data.prepare import PrepareOptions, prepare as run_prepare

    options = PrepareOptions(format=format, source=source, ratios=ratios, seed=seed, min_rating=min_rating,
                             rating=rating, kcore=kcore, split=split, preset=preset, skip_bad_lines=skip_bad_lines,
                             dataset=dataset)
    folder = run_prepare(name, options, _data_root(data_root))
    card = json.loads((folder / "card.json").read_text())
    counts = " / ".join(f"{part} {card['counts'][part]:,}" for part in ("train", "valid", "test") if part in card["counts"])
    console.print(f"prepared [bold]{name}[/] in {folder}: {card['n_users']:,} users, {card['n_items']:,} items, "
                  f"{counts} interactions")


@app.command()
def train(
    config_file: Optional[Path] = typer.Option(None, "--config", help="YAML run config; options below override it."),
    dataset: Optional[str] = typer.Option(None, help="Prepared dataset name."),
    model: Optional[str] = typer.Option(None, help="Model name, e.g. mf."),
    loss: Optional[str] = typer.Option(None, help="Loss name: bpr, softmax (sampled, logQ-corrected), full_softmax."),
    sampler: Optional[str] = typer.Option(None, help="Negative sampler: uniform, popularity, full, ..."),
    dim: Optional[int] = typer.Option(None, help="Embedding dimension."),
    epochs: Optional[int] = typer.Option(None, help="Maximum number of epochs."),
    batch_size: Optional[int] = typer.Option(None, help="Training interactions per step."),
    negatives: Optional[int] = typer.Option(None, "--negatives", help="Negatives per query (or shared per batch)."),
    lr: Optional[float] = typer.Option(None, help="Adam learning rate."),
    weight_decay: Optional[float] = typer.Option(None, help="Weight decay strength."),
    weight_decay_mode: Optional[str] = typer.Option(None, help="none, full (every row, every step) or batch."),
    seed: Optional[int] = typer.Option(None, help="Seed of initialisation, shuffling and sampling."),
    device: Optional[str] = typer.Option(None, help="auto, cpu or cuda."),
    kernels: Optional[str] = typer.Option(None, help="Sampler kernels: auto (CuPy on CUDA when installed), torch or cupy."),
    patience: Optional[int] = typer.Option(None, help="Epochs without validation improvement before stopping."),
    set_: list[str] = typer.Option([], "--set", help="Any config key, KEY=VALUE; nested: sampler_args.variant=log."),
    run_dir: Optional[Path] = typer.Option(None, help="Run folder (default: runs/<run id>)."),
    data_root: Optional[Path] = typer.Option(None, help=DATA_ROOT_HELP),
    quiet: bool = typer.Option(False, help="No progress bar."),
):
    """Train one run and evaluate it; the run folder holds config, per-epoch metrics, results and weights."""
    from recx.config import deep_merge, load_config_file, resolve
    from recx.data.dataset import load_dataset
    from recx.train.trainer import make_progress, train_run

    raw = load_config_file(config_file) if config_file else {}
    options = {"dataset": dataset, "model": model, "loss": loss, "sampler": sampler, "dim": dim, "epochs": epochs,
               "batch_size": batch_size, "n_negatives": negatives, "lr": lr, "weight_decay": weight_decay,
               "weight_decay_mode": weight_decay_mode, "seed": seed, "device": device, "kernels": kernels,
               "patience": patience}
    raw = deep_merge(deep_merge(raw, {k: v for k, v in options.items() if v is not None}), _parse_assignments(set_))
    config = resolve(raw, where=str(config_file) if config_file else "options")
    folder = run_dir or Path("runs") / config.run_id()
    data = load_dataset(_data_root(data_root), config.dataset)
    outcome = train_run(config, data, folder, progress=make_progress(quiet) if quiet else None)
    test = outcome.results[outcome.results.split == "test"]
    values = {(r.metric, r.k, r.stratum): r.value for r in test.itertuples()}
    console.print(metrics_table(values, f"{config.dataset} test (epoch {outcome.best_epoch}) — {folder}"))


@app.command("eval")
def evaluate_run(
    run_dir: Path = typer.Argument(..., help="A completed run folder."),
    split: str = typer.Option("test", help="valid or test."),
    k: str = typer.Option("10,20,50", "--k", help="Cut-offs, comma separated."),
    dump_topk: Optional[Path] = typer.Option(None, help="Write each user's top-K (user, rank, item) as Parquet."),
    batch_size: int = typer.Option(1024, help="Users per evaluation batch (results do not depend on it)."),
    device: str = typer.Option("auto", help="auto, cpu or cuda."),
    data_root: Optional[Path] = typer.Option(None, help=DATA_ROOT_HELP + " Default: where the run's data was."),
    auc: bool = typer.Option(False, "--auc", help="Also AUC and OPAUC(beta) over each user's full ranking."),
    opauc_beta: float = typer.Option(0.1, help="beta of OPAUC: positives against the top beta-fraction of negatives."),
    show_diagnostics: bool = typer.Option(False, "--diagnostics",
                                          help="Also item-norm/popularity correlation and NDCG by dot vs cosine."),
):
    """Full-ranking evaluation of a trained run: NDCG, Recall, Precision, MRR, HitRate, per popularity stratum."""
    from recx.eval.run_eval import evaluate_saved_run

    if split not in ("valid", "test"):
        raise RecxError(f"--split {split!r}: expected valid or test")
    if not 0 < opauc_beta <= 1:
        raise RecxError(f"--opauc-beta {opauc_beta}: expected a fraction in (0, 1]")
    values, found = evaluate_saved_run(run_dir, split, _parse_ks(k), batch_size, device, data_root, dump_topk,
                                       opauc_beta if auc else None, show_diagnostics)
    console.print(metrics_table(values, f"{run_dir} — {split}"))
    if found is not None:
        console.print_json(data=found, sort_keys=True)


@app.command()
def sweep(
    experiments_file: Path = typer.Argument(..., help="experiments.yaml"),
    experiment: str = typer.Option(..., "--experiment", "-e", help="Name of the experiment to run."),
    out: Optional[Path] = typer.Option(None, help="Output folder (default: results/<experiment>)."),
    data_root: Optional[Path] = typer.Option(None, help=DATA_ROOT_HELP),
    dry_run: bool = typer.Option(False, help="List the runs and exit."),
    dataset: list[str] = typer.Option([], "--dataset", help="Run on these datasets instead of the experiment's."),
    seeds: Optional[str] = typer.Option(None, help="Comma-separated seeds instead of the experiment's."),
    set_: list[str] = typer.Option([], "--set", help="Force a config key in every run, KEY=VALUE (e.g. epochs=5); "
                                                     "wins over the experiment's defaults and methods."),
    backend: str = typer.Option("local", help="local (this machine) or ray (a Ray cluster; needs the dist extra)."),
    jobs: int = typer.Option(1, help="Runs at once: local worker processes (each pinned to one GPU, else given a "
                                     "share of the CPU threads) or Ray tasks in flight."),
    address: Optional[str] = typer.Option(None, help="Address of an existing Ray cluster (default: start a local "
                                                     "one with --jobs CPUs)."),
):
    """Run every (dataset, method, grid point, seed) of an experiment, skipping completed runs; write tables."""
    from recx.sweep import SweepOverrides, run_sweep
    from recx.sweeps.backends import Execution

    try:
        seed_list = [int(s) for s in seeds.split(",")] if seeds else None
    except ValueError:
        raise RecxError(f"--seeds {seeds!r}: expected comma-separated integers such as 0,1,2") from None
    overrides = SweepOverrides(datasets=dataset or None, seeds=seed_list, settings=_parse_assignments(set_))
    run_sweep(experiments_file, experiment, out or Path("results") / experiment, _data_root(data_root), dry_run,
              console, overrides, Execution(backend, jobs, address))


@app.command()
def report(
    results: list[Path] = typer.Argument(..., help="results.parquet files of sweeps (stacked)."),
    out: Path = typer.Option(..., help="Output folder: report.md, table.md/.csv/.tex, significance.md/.csv, plots/."),
    runs: Optional[Path] = typer.Option(None, help="Folder of the run folders (default: runs/ beside each file)."),
    baseline: Optional[str] = typer.Option(None, help="Method every other is tested against (default: the first)."),
    metrics: str = typer.Option("ndcg,recall", help="Table metrics, comma separated (the first is plotted)."),
    k: Optional[str] = typer.Option(None, "--k", help="Cut-offs of the table (default: 20 when evaluated)."),
    stratified: str = typer.Option("ndcg", help="Metrics also shown per popularity stratum (empty: none)."),
    split: str = typer.Option("test", help="valid or test."),
    correction: str = typer.Option("holm", help="Multiple-comparison correction: holm or bonferroni."),
    resamples: int = typer.Option(10_000, help="Sign flips of the randomisation test."),
    alpha: float = typer.Option(0.05, help="Significance level of the † marks."),
    param: list[str] = typer.Option([], "--param", help="Config key to plot the metric against, e.g. batch_size or "
                                                        "sampler_args.m (default: every numeric key swept)."),
):
    """Tables (mean ± std, best in bold), paired significance tests against a baseline, and plots."""
    from recx.report.report import ReportOptions, write_report
    from recx.report.runs import load_results

    if resamples < 1 or not 0 < alpha < 1:
        raise RecxError(f"--resamples {resamples} / --alpha {alpha}: expected at least 1 resample and 0 < alpha < 1")
    frame, folders = load_results(results, runs)
    split_list = lambda text: tuple(part.strip() for part in text.split(",") if part.strip())  # noqa: E731
    options = ReportOptions(baseline, split_list(metrics), tuple(_parse_ks(k)) if k else None, split_list(stratified),
                            split, correction, resamples, alpha, tuple(param), sources=list(results))
    write_report(frame, folders, out, options)
    console.print((out / "table.md").read_text(), soft_wrap=True, markup=False, highlight=False)
    console.print(f"report: {out / 'report.md'}")


def main() -> None:
    try:
        app()
    except RecxError as error:
        Console(stderr=True).print(f"[bold red]error:[/] {error}", highlight=False, soft_wrap=True)
        sys.exit(1)
    except KeyboardInterrupt:
        Console(stderr=True).print("interrupted")
        sys.exit(130)
