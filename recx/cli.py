"""The `recx` command line: prepare, train, eval, sweep, report, list, diagnose. Thin: parse, call the Python front
door (recx.api, which checks every value and raises the same one-line errors), print (recx.shell.terminal).

Importing this module is cheap (no torch, pandas or registry): `--help`, `--version`, a mistyped command or option
and shell completion answer at once, the registered names and defaults they show coming from the stored catalogue
(recx.shell.catalog, with the installed plugins' names once recx has loaded them). The run settings' options are
generated from the configuration's declarations (recx.shell.run_options: flag = config key); the others are declared
in recx.shell.options. Each command imports recx.api when it runs, behind a spinner on a terminal.
"""

from __future__ import annotations

from pathlib import Path

import typer

from recx.shell import catalog, run_options, terminal
from recx.shell import options as o
from recx.shell.terminal import console, handles_interrupts, loading, say

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
COMPLETE_VAR = "_RECX_COMPLETE"


@app.callback(invoke_without_command=True)
def options(
    ctx: typer.Context,
    version: o.Version = False,
    verbose: o.Verbose = False,
    debug: o.Debug = False,
    threads: o.Threads = None,
    plugin: o.Plugin = None,
):
    """Experiment runner for implicit-feedback recommendation."""
    if plugin:
        terminal.request_plugins(plugin)
    if version:
        if verbose:
            with loading():
                terminal.print_versions()
        else:
            say(terminal.version_line())
        raise typer.Exit()
    if ctx.invoked_subcommand is None:  # options but no command: as `recx` alone
        typer.echo(ctx.get_help())
        raise typer.Exit(2)


@app.command()
@handles_interrupts
def prepare(
    name: o.DatasetName,
    format: o.Format = None,
    source: o.Source = None,
    data_root: o.DataRoot = None,
    preset: o.Preset = None,
    rating: o.Rating = None,
    kcore: o.Kcore = None,
    split: o.SplitKind = None,
    ratios: o.Ratios = None,
    seed: o.SplitSeed = 0,
    skip_bad_lines: o.SkipBadLines = False,
    dataset: o.DownloadSpec = None,
    force: o.ReplaceDataset = False,
    refresh_checksums: o.RefreshChecksums = False,
):
    """Turn a source into a prepared dataset: Parquet splits, id maps and card.json (refuses an existing name)."""
    with loading():
        from recx import api

    given = dict(ratios=ratios, seed=seed, rating=rating, kcore=kcore, split=split)
    given.update(preset=preset, skip_bad_lines=skip_bad_lines, dataset=dataset)
    folder = api.prepare(
        name, format, source, data_root=data_root, force=force, refresh_checksums=refresh_checksums, **given
    )
    if refresh_checksums:
        say(f"checksums of {name}: {folder / 'card.json'}")
    else:
        say(terminal.prepared_line(name, folder))


@app.command()
@handles_interrupts
@run_options.with_settings()
def train(
    config_file: o.ConfigFile = None,
    run_dir: o.RunDir = None,
    data_root: o.DataRoot = None,
    force: o.Retrain = False,
    diagnostics: o.Diagnostics = False,
    quiet: o.Quiet = False,
    checkpoint_every: o.CheckpointEvery = None,
    track: o.Track = None,
    track_uri: o.TrackUri = None,
    ks: o.Ks = "10,20,50",
    *,
    settings: dict,
):
    """Train one run and evaluate it (cut-offs --ks, valid_metric's added); the run folder holds config, per-epoch
    metrics, results and weights.

    An interrupted run is kept: during training it is marked incomplete and the same command goes on from its last checkpoint (results identical to an uninterrupted run); after training it can be evaluated (`recx eval`) and the same command finishes it. A completed run is refused unless --force.
    """
    with loading():
        from recx import api

    config = api.run_config(config_file, settings, source="command line")
    folder = run_dir or Path("runs") / config.run_id()
    with terminal.progress(quiet) as progress:
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
    test = run.results[run.results.split == "test"]
    terminal.print_metrics(test, f"{config.dataset} test (epoch {run.best_epoch}) — {folder}")


@app.command("eval")
@handles_interrupts
def evaluate_run(
    run_dir: o.RunToEvaluate = None,
    split: o.Split = "test",
    ks: o.Ks = "10,20,50",
    dump_topk: o.DumpTopk = None,
    lists: o.Lists = None,
    dataset: o.ListsDataset = None,
    name: o.ListsName = None,
    out: o.ListsOut = None,
    batch_size: o.EvalBatchSize = 1024,
    device: o.Device = "auto",
    data_root: o.RunDataRoot = None,
    auc: o.Auc = False,
    opauc_beta: o.OpaucBeta = 0.1,
    show_diagnostics: o.EvalDiagnostics = False,
    quiet: o.NoProgress = False,
    force: o.ReplaceEvaluation = False,
):
    """Full-ranking evaluation of a trained run, or of top-K lists from any system (--lists): NDCG, Recall,
    Precision, MRR, HitRate (and any plugin metric), per popularity stratum."""
    with loading():
        from recx import api

    if lists is not None:
        dataset = terminal.required(
            dataset if run_dir is None else None,
            "--lists evaluates a lists file on --dataset NAME; give no run folder with it",
        )
        run = api.evaluate_lists(lists, dataset, split, ks, data_root=data_root, run_dir=out, name=name, force=force)
        terminal.print_metrics(run.results, f"{lists} — {split}")
        for note in run.config["notes"]:
            say(f"note: {note}")
        say(f"results: {run.path / 'results.parquet'}")
        return
    run_dir = terminal.required(run_dir, "recx eval: give a run folder, or --lists FILE --dataset NAME")
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
    terminal.print_metrics(evaluated.results, f"{run_dir} — {split}")
    say(f"results: {run_dir / f'eval_{split}.parquet'}")
    if dump_topk is not None:
        say(f"top-{max(evaluated.results.k)} lists (user, item, rank) of every user with a {split} item: {dump_topk}")
    if evaluated.diagnostics is not None:
        console().print_json(data=evaluated.diagnostics, sort_keys=True)


@app.command()
@handles_interrupts
@run_options.with_settings(skip=("dataset", "seed"), forced=True, set_help=o.SWEEP_SET_HELP)
def sweep(
    experiments_file: o.ExperimentsFile,
    experiment: o.Experiment,
    out: o.SweepOut = None,
    data_root: o.DataRoot = None,
    dry_run: o.DryRun = False,
    dataset: o.Datasets = None,
    seeds: o.Seeds = None,
    methods: o.Methods = None,
    backend: o.Backend = "local",
    jobs: o.Jobs = 1,
    address: o.Address = None,
    track: o.SweepTrack = None,
    track_uri: o.TrackUri = None,
    max_runs: o.MaxRuns = None,
    *,
    settings: dict,
):
    """Run every (dataset, method, grid point, seed) of an experiment, skipping completed runs; write tables.

    Every run is validated before the first one starts. An interrupted sweep loses at most the run in progress: the same command skips completed runs, finishes trained ones and restarts incomplete ones.
    """
    with loading():
        from recx import api

    api.sweep(
        experiments_file,
        experiment,
        out=out,
        data_root=data_root,
        dry_run=dry_run,
        datasets=dataset or None,
        seeds=seeds,
        methods=methods,
        settings=settings,
        max_runs=max_runs,
        backend=backend,
        jobs=jobs,
        address=address,
        track=track,
        track_uri=track_uri,
        console=console(),
    )


@app.command()
def report(
    results: o.Results,
    out: o.ReportOut,
    runs: o.RunsFolder = None,
    baseline: o.Baseline = None,
    metrics: o.Metrics = None,
    ks: o.TableKs = None,
    stratified: o.Stratified = None,
    split: o.Split = "test",
    correction: o.Correction = "holm",
    resamples: o.Resamples = 10_000,
    alpha: o.Alpha = 0.05,
    param: o.Param = None,
    pairs: o.Pairs = "baseline",
    force: o.ReplaceReport = False,
):
    """Tables (mean ± std, best in bold), paired significance tests against a baseline (or of every pair), and plots."""
    with loading():
        from recx import api

    api.report(
        results,
        out,
        runs=runs,
        baseline=baseline,
        metrics=metrics,
        ks=ks,
        stratified=stratified,
        split=split,
        correction=correction,
        resamples=resamples,
        alpha=alpha,
        params=tuple(param or ()),
        pairs=pairs,
        force=force,
    )
    say((out / "table.md").read_text())
    console().print(f"report: {out / 'report.md'}")


@app.command("list")
def list_names(kind: o.ListKind = None, experiments_file: o.ExperimentsToList = Path("experiments.yaml")):
    """Every name recx accepts, with its module, arguments (defaults) and summary, read from the registries.

    Then the versions of recx, torch, CUDA and CuPy (`recx list versions`: only those)."""
    terminal.refuse_unless(
        kind is None or kind in o.LIST_KINDS, f"recx list {kind!r}: expected one of {', '.join(o.LIST_KINDS)}"
    )
    if kind == "versions":
        return terminal.print_versions("versions")
    for each in [kind] if kind else catalog.KINDS:
        if each == "experiments" and kind is None and not experiments_file.is_file():
            continue
        with loading():
            found = catalog.entries(each, experiments_file)
        terminal.print_entries(each, found)
    catalog.remember_plugins()
    if kind is None:
        terminal.print_versions("versions")


diagnose_app = typer.Typer(no_args_is_help=True, rich_markup_mode=None, help="Diagnostics of a completed run.")
app.add_typer(diagnose_app, name="diagnose")


@diagnose_app.command("sampler")
def diagnose_sampler(
    run_dir: o.CompletedRun,
    sampler: o.Samplers = None,
    users: o.Users = 100,
    draws: o.Draws = 100_000,
    n_codewords: o.NCodewords = 64,
    seed: o.DrawSeed = 0,
    plot: o.Plot = None,
    device: o.Device = "auto",
):
    """KL(proposal || softmax) and total variation per user, for the run's random initialisation and trained model."""
    with loading():
        from recx import api

    table = api.diagnose_samplers(
        run_dir, sampler, users=users, draws=draws, n_codewords=n_codewords, seed=seed, device=device, plot=plot
    )
    terminal.print_divergence(table, f"{run_dir}: mean over {users} users (written to sampler_diagnostics.csv)")


def main() -> None:
    terminal.run(app, COMPLETE_VAR)
