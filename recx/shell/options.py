"""The command line's options other than the run settings (those are generated: recx.shell.run_options): each one's
flag, help and completion, as a type the commands of recx.cli annotate their parameters with. Where two commands
share an option's meaning they share its type.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from recx.shell import catalog, completion

LIST_KINDS = catalog.KINDS + ("versions",)
TRACK_HELP = (
    "Log each completed run to MLflow (the track extra): config, per-epoch loss and validation metric, final "
    "metrics, run files."
)
ANYWHERE = "accepted anywhere on the command line"

# recx (before any command)
Version = Annotated[bool, typer.Option("--version", help="Show recx's version and exit.")]
Verbose = Annotated[bool, typer.Option("--verbose", help="With --version: also torch, CUDA and CuPy.")]
Debug = Annotated[bool, typer.Option("--debug", help=f"Show the full traceback of an internal error ({ANYWHERE}).")]
Threads = Annotated[
    Optional[int],
    typer.Option(
        "--threads",
        help=f"CPU threads of this process (also RECX_THREADS; {ANYWHERE}). Default: the usable CPUs divided among "
        "the recx processes running, chosen at start and recorded in each run's environment.json; results do not "
        "depend on it (tests/test_thread_invariance.py).",
    ),
]
Plugin = Annotated[
    Optional[list[str]],
    typer.Option(
        "--plugin",
        help=f"Load a plugin: a .py file or a module name (repeatable; also RECX_PLUGINS; {ANYWHERE}). Installed "
        "packages with a `recx.plugins` entry point load without it.",
    ),
]

# shared
DataRoot = Annotated[
    Optional[Path], typer.Option(help="Folder of prepared datasets (default: $RECX_DATA, else ./data).")
]
Device = Annotated[
    str, typer.Option(help="auto, cpu or cuda.", autocompletion=completion.choices("auto", "cpu", "cuda"))
]
Split = Annotated[str, typer.Option(help="valid or test.")]
Ks = Annotated[str, typer.Option(help="Cut-offs K, comma separated (each at most the number of items).")]
Track = Annotated[Optional[str], typer.Option(help=TRACK_HELP, autocompletion=completion.choices("mlflow"))]
TrackUri = Annotated[
    Optional[str],
    typer.Option(
        help="MLflow tracking URI (default: $MLFLOW_TRACKING_URI, else mlflow.db and mlartifacts/ under the output)."
    ),
]

# recx prepare
DatasetName = Annotated[
    str,
    typer.Argument(
        help="Name of the prepared dataset, a folder under the data root (letters, digits, '.', '_', '-'); a known "
        "name (ml1m, ml10m, ml20m, ml25m, gowalla-snap, ...) is downloaded.",
        autocompletion=completion.downloadable,
    ),
]
Format = Annotated[
    Optional[str],
    typer.Option(
        "--format",
        "-f",
        help=f"Source format: {', '.join(catalog.stored_names('formats'))}.",
        autocompletion=completion.registered("formats"),
    ),
]
Source = Annotated[Optional[Path], typer.Option(help="Source file or folder already on disk (skips the download).")]
Preset = Annotated[
    Optional[str],
    typer.Option(
        help="A paper's protocol: fastvae, rg, prism (options below override).", autocompletion=completion.presets
    ),
]
Rating = Annotated[Optional[str], typer.Option(help="Which ratings are positives: all, >=4, >3.5 ... (default: all)")]
Kcore = Annotated[Optional[int], typer.Option(help="Iterative k-core on users and items (0: off). (default: 0)")]
SplitKind = Annotated[
    Optional[str],
    typer.Option(
        help="per-user-random, per-user-temporal, global-random, leave-one-out-random or leave-one-out-latest. "
        "(default: per-user-random)"
    ),
]
Ratios = Annotated[
    Optional[str],
    typer.Option(help="Split ratios summing to 100 (or 1), train/test or train/valid/test. (default: 80/20)"),
]
SplitSeed = Annotated[int, typer.Option(help="Seed of the split (and of the synthetic generator).")]
SkipBadLines = Annotated[bool, typer.Option(help="Count malformed lines in the card instead of failing.")]
DownloadSpec = Annotated[Optional[str], typer.Option(help="Download spec to use (default: NAME).")]
ReplaceDataset = Annotated[
    bool,
    typer.Option(
        "--force",
        help="Replace an existing dataset of that name (the new one is written aside and swapped in when complete).",
    ),
]
RefreshChecksums = Annotated[
    bool,
    typer.Option(
        "--refresh-checksums",
        help="Instead: record in card.json the checksums of the dataset's files as they are now, once their content "
        "is checked to be the one card.json records (files saved again with other Parquet options).",
    ),
]

# recx train
ConfigFile = Annotated[Optional[Path], typer.Option("--config", help="YAML run config; the other options override it.")]
RunDir = Annotated[Optional[Path], typer.Option(help="Run folder (default: runs/<run id>).")]
Retrain = Annotated[
    bool,
    typer.Option(
        "--force",
        help="Train again over a completed run (or an unfinished run of another configuration); the old one is "
        "replaced only when the new one is complete.",
    ),
]
Diagnostics = Annotated[
    bool,
    typer.Option(
        "--diagnostics",
        help="Also write diagnostics.json (item-norm/popularity correlation, NDCG by dot vs cosine: four more full "
        "evaluations).",
    ),
]
Quiet = Annotated[bool, typer.Option(help="No progress bar and no per-epoch lines.")]
CheckpointEvery = Annotated[
    Optional[int],
    typer.Option(
        min=0,
        help="Write the training state every N epochs (0: never); default: after each epoch that ends at least 60 s "
        "after the last checkpoint.",
    ),
]

# recx eval
RunToEvaluate = Annotated[Optional[Path], typer.Argument(help="A trained or completed run folder (or use --lists).")]
DumpTopk = Annotated[
    Optional[Path],
    typer.Option(
        help="Write each user's top-K list as Parquet: user, item (original ids), rank, user_index, item_index."
    ),
]
Lists = Annotated[
    Optional[Path],
    typer.Option(
        help="Evaluate top-K lists written by any system instead of a run: Parquet, or TSV with a header (.csv: "
        "comma-separated), columns user, item and rank (1 first) or score (highest first), in the dataset's "
        "original ids; needs --dataset."
    ),
]
ListsDataset = Annotated[
    Optional[str],
    typer.Option(help="With --lists: the prepared dataset the lists rank.", autocompletion=completion.datasets),
]
ListsName = Annotated[
    Optional[str], typer.Option(help="With --lists: the method's name in tables (default: the file's).")
]
ListsOut = Annotated[Optional[Path], typer.Option(help="With --lists: the folder to write (default: runs/<id>).")]
EvalBatchSize = Annotated[int, typer.Option(help="Users per evaluation batch, >= 1 (results do not depend on it).")]
RunDataRoot = Annotated[
    Optional[Path],
    typer.Option(help="Folder of prepared datasets (default: where the run's data was, else $RECX_DATA, else ./data)."),
]
Auc = Annotated[bool, typer.Option("--auc", help="Also AUC and OPAUC(beta) over each user's full ranking.")]
OpaucBeta = Annotated[float, typer.Option(help="beta of OPAUC: positives against the top beta-fraction of negatives.")]
EvalDiagnostics = Annotated[
    bool, typer.Option("--diagnostics", help="Also item-norm/popularity correlation and NDCG by dot vs cosine.")
]
NoProgress = Annotated[bool, typer.Option(help="No progress bar.")]
ReplaceEvaluation = Annotated[
    bool,
    typer.Option(
        "--force",
        help="Let --dump-topk replace a file recx did not write; with --lists, replace the lists evaluated in --out "
        "(the new ones are written aside and swapped in when complete).",
    ),
]

# recx sweep
ExperimentsFile = Annotated[Path, typer.Argument(help="experiments.yaml")]
Experiment = Annotated[
    str,
    typer.Option(
        "--experiment",
        "-e",
        help="Name of the experiment to run (`recx list experiments`).",
        autocompletion=completion.experiments,
    ),
]
SweepOut = Annotated[Optional[Path], typer.Option(help="Output folder (default: results/<experiment>).")]
DryRun = Annotated[bool, typer.Option(help="List the runs and exit.")]
Datasets = Annotated[
    Optional[list[str]],
    typer.Option(
        "--dataset", help="Run on these datasets instead of the experiment's.", autocompletion=completion.datasets
    ),
]
Seeds = Annotated[Optional[str], typer.Option(help="Comma-separated seeds instead of the experiment's.")]
Methods = Annotated[
    Optional[str],
    typer.Option(
        help="Comma-separated methods of the experiment to run (default: all); the tables keep the experiment's runs "
        "already complete in --out."
    ),
]
Backend = Annotated[
    str,
    typer.Option(
        help="local (this machine) or ray (a Ray cluster; needs the dist extra).",
        autocompletion=completion.choices("local", "ray"),
    ),
]
Jobs = Annotated[
    int,
    typer.Option(
        help="Runs at once: local worker processes (each pinned to one GPU, else given a share of the CPU threads) or "
        "Ray tasks in flight."
    ),
]
Address = Annotated[
    Optional[str],
    typer.Option(help="Address of an existing Ray cluster (default: start a local one with --jobs CPUs)."),
]
SweepTrack = Annotated[
    Optional[str],
    typer.Option(
        help=TRACK_HELP + " One MLflow experiment per sweep (default: the experiment's `track`, else none).",
        autocompletion=completion.choices("mlflow"),
    ),
]
MaxRuns = Annotated[Optional[int], typer.Option(min=1, help="Most runs the experiment may plan. (default: 10,000)")]
SWEEP_SET_HELP = (
    "Force a config key in every run, KEY=VALUE (e.g. sampler_args.variant=log); wins over the experiment's defaults "
    "and methods, as the options above do."
)

# recx report
Results = Annotated[list[Path], typer.Argument(help="results.parquet files of sweeps (stacked).")]
ReportOut = Annotated[
    Path,
    typer.Option(
        help="Output folder: report.md, table.md/.csv/.tex, significance.md/.csv, popularity.md/.csv, grid.csv, convergence.csv, plots/."
    ),
]
RunsFolder = Annotated[
    Optional[Path], typer.Option(help="Folder of the run folders (default: runs/ beside each file).")
]
Baseline = Annotated[Optional[str], typer.Option(help="Method every other is tested against (default: the first).")]
Metrics = Annotated[
    Optional[str], typer.Option(help="Table metrics, comma separated (the first is plotted). (default: ndcg,recall)")
]
TableKs = Annotated[
    Optional[str], typer.Option(help="Cut-offs of the table, comma separated (default: 20 when evaluated).")
]
Stratified = Annotated[
    Optional[str],
    typer.Option(help="Metrics also shown per popularity stratum (empty: none). (default: ndcg,recall)"),
]
Correction = Annotated[str, typer.Option(help="Multiple-comparison correction: holm or bonferroni.")]
Resamples = Annotated[int, typer.Option(help="Sign flips of the randomisation test.")]
Alpha = Annotated[float, typer.Option(help="Significance level of the † marks.")]
Param = Annotated[
    Optional[list[str]],
    typer.Option(
        "--param",
        help="Config key to plot the metric against, e.g. batch_size or sampler_args.m (default: every numeric key "
        "swept).",
    ),
]
Pairs = Annotated[
    str,
    typer.Option(
        help="baseline: each method against the baseline; all: also every pair of methods (a matrix of adjusted "
        "p-values, significance_pairs.md/.csv).",
        autocompletion=completion.choices("baseline", "all"),
    ),
]
ReplaceReport = Annotated[bool, typer.Option("--force", help="Replace report files in --out that recx did not write.")]

# recx list
ListKind = Annotated[
    Optional[str],
    typer.Argument(help=f"One of {', '.join(LIST_KINDS)} (default: all).", autocompletion=completion.list_kinds),
]
ExperimentsToList = Annotated[Path, typer.Option("--file", help="The experiments file whose experiments are listed.")]

# recx diagnose sampler
CompletedRun = Annotated[Path, typer.Argument(help="A completed run folder.")]
Samplers = Annotated[
    Optional[list[str]],
    typer.Option(
        "--sampler",
        help="Sampler name (repeat the option for several); default: the FastVAE paper's Figure 2 set.",
        autocompletion=completion.registered("samplers"),
    ),
]
Users = Annotated[int, typer.Option(help="Users sampled for the KL / TV table.")]
Draws = Annotated[int, typer.Option(help="Draws per user where a law is estimated (Figure 2, DNS).")]
NCodewords = Annotated[int, typer.Option(help="Codewords per MIDX codebook (MIDX's n_codewords; Figure 2: 64).")]
DrawSeed = Annotated[int, typer.Option(help="Seed of the user sample and of the draws.")]
Plot = Annotated[Optional[Path], typer.Option(help="Write the paper's Figure 2 (cumulative probability) as PNG.")]
