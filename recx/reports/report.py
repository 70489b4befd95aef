"""A report from sweep results: tables (Markdown, CSV, LaTeX) with the best per column in bold, paired significance
tests of every method against a baseline (or of every pair, `pairs="all"`), and PNG plots; `report.md` ties them
together and states the popularity strata.

Files written to the output folder: table.md/.csv/.tex, significance.md/.csv (significance_pairs.md/.csv with
`pairs="all"`), popularity.md/.csv (the popularity and coverage section: recx.reports.popularity), grid.csv (every
grid point the sweeps tried and its validation value: recx.reports.grid_points), convergence.csv (every run's
per-epoch loss and validation metric, the values the convergence plots draw), plots/*.png, report.md.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

import pandas as pd
import scipy

from recx.core.errors import RecxError
from recx.core.folders import write_failed, write_text_atomic
from recx.eval.metrics.registry import stratified_metrics, table_metrics
from recx.eval.strata import STRATA
from recx.reports import budget, grid_points, paper, plots, popularity, significance, stats, tables
from recx.reports.resampled import DEFAULT_RESAMPLES, Resampled
from recx.reports.tables import column_name, summary
from recx.runs.collection import LeftOut, checked_runs, epochs, flat_config
from recx.runs.convergence import FILE as CONVERGENCE
from recx.runs.convergence import run_curves
from recx.sweeps.record import read_record
from recx.sweeps.sweep import SweepOutcome


@dataclass
class ReportOptions:
    baseline: str | None = None  # default: the first method of the results
    metrics: tuple = field(default_factory=table_metrics)  # default: the metrics marked `in_table`
    ks: tuple | None = None  # default: 20 when evaluated, else the smallest cut-off
    stratified: tuple = field(default_factory=stratified_metrics)  # default: the table's additive metrics
    split: str = "test"
    correction: str = "holm"
    resamples: int = 10_000
    alpha: float = 0.05
    parameters: tuple = ()  # swept parameters to plot against; default: every one found
    title: str = "recx report"
    sources: list = field(default_factory=list)
    pairs: str = "baseline"  # "all": also every pair of methods (significance_pairs.md/.csv)
    bootstrap: int = DEFAULT_RESAMPLES  # resamples of the catalogue-level metrics' bootstrap over users

    @property
    def cutoffs(self) -> tuple:
        """The cut-offs of resolved options (`resolve` fills them)."""
        if self.ks is None:
            raise ValueError("report options used before resolve()")
        return self.ks

    @property
    def baseline_method(self) -> str:
        """The baseline of resolved options (`resolve` fills it)."""
        if self.baseline is None:
            raise ValueError("report options used before resolve()")
        return self.baseline

    def resolve(self, results: pd.DataFrame) -> "ReportOptions":
        if self.correction not in stats.CORRECTIONS:
            raise RecxError(f"--correction {self.correction!r}; valid: {', '.join(stats.CORRECTIONS)}")
        if self.pairs not in PAIRS:
            raise RecxError(f"--pairs {self.pairs!r}; valid: {', '.join(PAIRS)}")
        rows = results[results.split == self.split]
        if rows.empty:
            raise RecxError(f"the results have no {self.split!r} rows; splits: {', '.join(results.split.unique())}")
        evaluated = sorted(int(k) for k in rows.k.unique() if k > 0)
        ks = self.ks or ((20,) if 20 in evaluated else tuple(evaluated[:1]))
        missing = [k for k in ks if k not in evaluated]
        if missing:
            raise RecxError(f"cut-off {missing[0]} is not in the results; evaluated: {', '.join(map(str, evaluated))}")
        methods = list(dict.fromkeys(rows.method))
        baseline = self.baseline or methods[0]
        if baseline not in methods:
            raise RecxError(f"--baseline {baseline!r} is not a method of the results; methods: {', '.join(methods)}")
        return ReportOptions(
            baseline,
            tuple(self.metrics),
            tuple(ks),
            tuple(self.stratified),
            self.split,
            self.correction,
            self.resamples,
            self.alpha,
            tuple(self.parameters),
            self.title,
            list(self.sources),
            self.pairs,
            self.bootstrap,
        )


def tested_keys(table: pd.DataFrame, options: ReportOptions) -> list[tuple[str, int, str]]:
    present = set(table["mean"].columns)
    return [
        (metric, k, stratum)
        for metric in options.metrics
        for k in options.cutoffs
        for stratum in ("all",) + (STRATA if metric in options.stratified else ())
        if column_name(metric, k, stratum) in present
    ]


def convergence_curves(runs: pd.DataFrame, folders: dict[str, Path]) -> tuple[dict, str]:
    """method -> epochs frames of its runs, and the column to plot (the validation metric, else the loss)."""
    curves = {
        method: [epochs(folders[run_id]) for run_id in group.run_id.unique() if run_id in folders]
        for method, group in runs.groupby("method", sort=False)
    }
    names = [c for frames in curves.values() for frame in frames for c in frame.columns if c.startswith("valid_")]
    return curves, (max(set(names), key=names.count) if names else "loss")


def swept_points(
    runs: pd.DataFrame, folders: dict[str, Path], key: tuple[str, int, str], excluded: set[str], wanted: tuple
) -> dict[str, pd.DataFrame]:
    """parameter -> (line, value, mean, std) for each numeric config key that varies within a family of methods
    (a line: methods equal in every other varying key); grid keys are excluded (tuned per method)."""
    metric, k, stratum = key
    chosen = runs[(runs.metric == metric) & (runs.k == k) & (runs.stratum == stratum)]
    scores = chosen.groupby("method", sort=False)["value"].agg(["mean", "std"])
    configs = pd.DataFrame(
        [flat_config(folders[chosen[chosen.method == method].run_id.iloc[0]]) for method in scores.index],
        index=scores.index,
    )
    varying = [c for c in configs.columns if c not in excluded and configs[c].astype(str).nunique() > 1]
    is_number = lambda value: isinstance(value, (int, float)) and not isinstance(value, bool)  # noqa: E731
    numeric = [c for c in varying if configs[c].map(is_number).all()]
    found = {}
    for parameter in wanted or numeric:
        if parameter not in configs.columns:
            raise RecxError(
                f"--param {parameter!r} is not a config key of these runs; keys that vary: "
                f"{', '.join(varying) or '(none)'}"
            )
        others = [c for c in varying if c != parameter]
        line = (
            configs[others].apply(
                lambda row: ", ".join(f"{c}={v}" for c, v in row.items() if pd.notna(v)) or "all", axis=1
            )
            if others
            else pd.Series("all", index=configs.index)
        )
        points = pd.DataFrame({"line": line, "value": configs[parameter], "mean": scores["mean"], "std": scores["std"]})
        if wanted or points.groupby("line").value.nunique().max() > 1:
            found[parameter] = points
    return found


def figures(results: pd.DataFrame, folders: dict[str, Path], options: ReportOptions) -> Iterator[tuple]:
    """Every plot the results allow, as (file name, one-line description, matplotlib Figure)."""
    metric, k = options.metrics[0], options.cutoffs[0]
    label = column_name(metric, k, "all")
    rows = results[results.split == options.split]
    for dataset, runs in rows.groupby("dataset", sort=False):
        curves, column = convergence_curves(runs, folders)
        for x in ("epoch", "time") if any(not frame.empty for frames in curves.values() for frame in frames) else ():
            yield (
                f"convergence_{x}_{dataset}.png",
                f"{column} of every run versus {'epoch' if x == 'epoch' else 'wall-clock training seconds'}",
                plots.convergence(curves, column, x, f"{dataset}: {column.replace('_', ' ')} during training"),
            )
        stratified = runs[(runs.metric == metric) & (runs.k == k) & runs.stratum.isin(STRATA)]
        if not stratified.empty:
            grouped = stratified.groupby(["method", "stratum"], sort=False)["value"]
            order = list(dict.fromkeys(stratified.method))
            means, stds = (grouped.agg(stat).unstack().reindex(order) for stat in ("mean", "std"))
            yield (
                f"strata_{dataset}.png",
                f"{label} per popularity stratum (bars: methods, error bars: std over seeds)",
                plots.strata(means, stds, f"{label} (stratum share)", f"{dataset}: {label} by popularity stratum"),
            )
        for parameter, points in swept_points(
            runs, folders, (metric, k, "all"), grid_keys(results), options.parameters
        ).items():
            yield (
                f"swept_{parameter.replace('.', '-')}_{dataset}.png",
                f"{label} versus {parameter} (one line per family of methods, ± std over seeds)",
                plots.swept(points, parameter, label, f"{dataset}: {label} versus {parameter}"),
            )


PAIRS = ("baseline", "all")
REPORT_FILES = (
    "report.md",
    "table.md",
    "table.csv",
    "table.tex",
    "significance.md",
    "significance.csv",
    "significance_pairs.md",
    "significance_pairs.csv",
    "budget.csv",
    "grid.csv",
    "convergence.csv",
    "paper.csv",
    "popularity.md",
    "popularity.csv",
    "plots",
)
STRATA_DEFINITION = (
    "Popularity strata: the items ranked by their training interactions (ties by item id); **popular** are the "
    "first 5% (round(0.05 n) of the n items), **neutral** the next 15% (up to round(0.20 n)), **unpopular** the "
    "remaining 80% (the PRISM paper's cut-offs). A stratum's NDCG and Recall count only the hits on its items and "
    "keep the user's overall normaliser, so the three strata sum to the overall value."
)
REPORT_MARKER = ".recx-report"  # written into a report folder: recx may replace the report files of a folder holding it


def check_report_folder(out: Path, force: bool) -> None:
    """`out` is new, or holds no report file, or holds recx's marker; else (a report.md recx did not write, ...)
    it is refused unless `force`."""
    if out.exists() and not out.is_dir():
        raise RecxError(f"--out {out}: a file, not a folder")
    if force or not out.is_dir() or (out / REPORT_MARKER).is_file():
        return
    theirs = [name for name in REPORT_FILES if (out / name).exists()]
    if theirs:
        raise RecxError(
            f"--out {out}: holds {', '.join(theirs)} that recx did not write (no {REPORT_MARKER} marker); recx "
            "does not replace them (pass --force to replace them, or choose another folder)"
        )


def write_report(
    results: pd.DataFrame, folders: dict[str, Path], out: Path, options: ReportOptions, force: bool = False
) -> str:
    """Write every file of the report to `out` (see check_report_folder); returns report.md's text. Only runs whose
    folder is there, complete and intact are read (recx.runs.collection.checked_runs): the others are named, and
    left out of the means, counts and tests."""
    check_report_folder(out, force)
    results, left = _readable(results, folders, options.split)
    options = options.resolve(results)
    try:
        out.mkdir(parents=True, exist_ok=True)
        write_text_atomic(out / REPORT_MARKER, "report files written by recx report (recx may replace them)\n")
    except OSError as exc:
        raise write_failed(out / REPORT_MARKER, exc, "nothing was written") from None
    table = summary(results, options.split, options.metrics, options.cutoffs, options.stratified)
    resampled = Resampled(folders, options.split, options.bootstrap)
    tested, notes = significance.compare(
        results,
        folders,
        options.baseline_method,
        tested_keys(table, options),
        options.split,
        options.correction,
        options.resamples,
        options.alpha,
        resampled=resampled,
    )
    marks = {(r.dataset, r.method, r.column): True for r in tested.itertuples() if r.significant}
    record = experiment_record(options.sources)
    ran = budget.budget_rows(results[results.split == options.split], folders, record, left)
    row_marks = {(row.dataset, row.method): row.mark for row in ran.itertuples() if row.mark}
    markdown = _written_tables(table, marks, row_marks, out)
    write_atomic(out / "budget.csv", ran.to_csv(index=False))
    write_atomic(
        out / "convergence.csv", run_curves(results[results.split == options.split], folders).to_csv(index=False)
    )
    paper_text = _paper_section(results, options, record, row_marks, out)
    write_atomic(out / "significance.csv", tested.to_csv(index=False))
    write_atomic(out / "significance.md", significance.to_markdown(tested))
    pairs_text = _pairs_section(results, folders, tested_keys(table, options), options, resampled, out)
    popular_text, drawn = _popularity_section(results, folders, options, resampled, out)
    text = [
        *_header(results, options),
        markdown,
        budget.legend(ran),
        *_listed(budget.left_out_notes(ran)),
        STRATA_DEFINITION if options.stratified else "",
        "",
        *paper_text,
        *_runs_and_tests(ran, tested, notes, options),
        *_grid_section(results, options, record, out),
        *pairs_text,
        *popular_text,
        *_plots_section(drawn),
    ]
    report = "\n".join(text) + "\n"
    write_atomic(out / "report.md", report)
    return report


def _written_tables(table: pd.DataFrame, marks: dict, row_marks: dict, out: Path) -> str:
    """table.md, table.csv and table.tex; returns the Markdown table."""
    markdown = tables.to_markdown(table, marks, row_marks)
    write_atomic(out / "table.md", markdown)
    write_atomic(out / "table.csv", tables.to_csv(table))
    write_atomic(out / "table.tex", tables.to_latex(table, marks, row_marks))
    return markdown


def _grid_section(results: pd.DataFrame, options: ReportOptions, record: dict | None, out: Path) -> list[str]:
    """Every grid point the sweeps tried for the report's rows (grid.csv, when a sweep recorded them) and its
    report.md section."""
    points = grid_points.tried(options.sources, results)
    if points.empty:
        return []
    write_atomic(out / "grid.csv", points.to_csv(index=False))
    return grid_points.section(points, (record or {}).get("planned", {}))


def _plots_section(drawn: list[tuple[str, str]]) -> list[str]:
    """The plots drawn (file name, description), each shown, after where their values are."""
    return [
        "## Plots",
        "",
        "The values the convergence plots draw, each run's loss and validation metric per epoch with its training "
        "seconds: `convergence.csv`.",
        "",
        *[f"- `plots/{name}`: {description}\n\n  ![{name}](plots/{name})" for name, description in drawn],
    ]


def _readable(results: pd.DataFrame, folders: dict[str, Path], split: str) -> tuple[pd.DataFrame, list[LeftOut]]:
    """The results of the runs a report may read, and the runs left out (recx.runs.collection.checked_runs); none
    readable is one error naming them."""
    results, left = checked_runs(results, folders, split)
    if left and results[results.split == split].empty:
        shown = "; ".join(f"run {run.run_id}: {run.why}" for run in left[:3])
        raise RecxError(
            f"none of the {len(left)} runs of the results could be read ({shown}{'; ...' if len(left) > 3 else ''}); "
            "a report reads each run's folder (runs/<run id> beside the results file, or --runs FOLDER), complete "
            "and unchanged"
        )
    return results, left


def _listed(notes: list[str]) -> list[str]:
    """Notes as a Markdown list set apart from the paragraph before it (nothing when there are none)."""
    return ["", *[f"- {note}" for note in notes], ""] if notes else []


def _untested(rows: pd.DataFrame) -> str:
    """Why a tests section is empty: each dataset has one method (nothing to compare), or per-user files are
    missing."""
    if rows.empty or rows.groupby("dataset")["method"].nunique().max() < 2:
        return "(no test: one method per dataset, nothing to compare)\n"
    return "(no test: per-user results missing)\n"


def _runs_and_tests(ran: pd.DataFrame, tested: pd.DataFrame, notes: list[str], options: ReportOptions) -> list[str]:
    """What each row ran (budget.csv's table), then the paired tests against the baseline."""
    return [
        "## What each row ran",
        "",
        "Per method: the runs (seeds) and grid points it covers against its experiment's plan, the epochs its runs "
        "ran and why they stopped, their device and mean training seconds (validation excluded); `budget.csv`.",
        "",
        budget.to_markdown(ran),
        f"## Paired tests against {options.baseline}",
        "",
        "Per-user values averaged over seeds; difference = method − baseline; p (t): paired t-test "
        "(scipy.stats.ttest_rel); p (rand.): sign-flip randomisation test (recx.reports.stats, checked against "
        "scipy.stats.permutation_test); "
        f"adjusted: {options.correction.capitalize()} over the methods compared in each dataset and column.",
        "",
        significance.to_markdown(tested) if not tested.empty else _untested(ran),
        *[f"- {note}" for note in notes],
        "",
    ]


def _header(results: pd.DataFrame, options: ReportOptions) -> list[str]:
    """The title and what the table's cells are: the sources, split, seeds per method, bold and † marks."""
    seeds = results.groupby(["dataset", "method"])["run_id"].nunique()
    counts = f"{seeds.min()}" if seeds.min() == seeds.max() else f"{seeds.min()}–{seeds.max()}"
    return [
        f"# {options.title}",
        "",
        f"Results: {', '.join(map(str, options.sources)) or 'in memory'}; split {options.split}; mean ± std over "
        f"{counts} {'run (seed)' if seeds.max() == 1 else 'runs (seeds)'} per method. **Bold**: best mean of its "
        "column in its dataset. "
        f"†: differs from the baseline **{options.baseline}** by a paired randomisation test over the "
        f"{options.split} users, {options.correction.capitalize()}-corrected p < {options.alpha} "
        f"({options.resamples} resamples, so no p below {1 / (options.resamples + 1):.1g}; t-tests by "
        f"scipy {scipy.__version__}).",
        "",
    ]


def _paper_section(results, options: ReportOptions, record: dict | None, row_marks: dict, out: Path) -> list[str]:
    """The paper's printed figures beside recx's (paper.csv), when the experiment records them."""
    if not (record and record.get("paper") and record["paper"]["values"]):
        return []
    published = paper.paper_rows(results, options.split, record["paper"], row_marks)
    write_atomic(out / "paper.csv", published.to_csv(index=False))
    reproduced = int(published.within.eq(True).sum())
    return [
        "## The paper beside recx",
        "",
        f"{record['paper']['source']}. recx: mean ± std over seeds on the {options.split} split; Δ = (recx − "
        f"paper) / paper; {reproduced} of {len(published)} figures within ±{record['paper']['tolerance']:.0%}.",
        "",
        paper.to_markdown(published, record["paper"]["tolerance"]),
    ]


def _pairs_section(results, folders, keys, options: ReportOptions, resampled, out: Path) -> list[str]:
    """With pairs = all: every pair of methods tested (significance_pairs.md/.csv) and its matrix of adjusted p."""
    if options.pairs != "all":
        return []
    pairs = significance.compare_pairs(
        results, folders, keys, options.split, options.correction, options.resamples, options.alpha, resampled=resampled
    )
    write_atomic(out / "significance_pairs.csv", pairs.to_csv(index=False))
    write_atomic(out / "significance_pairs.md", significance.to_markdown(pairs))
    return [
        "## Every pair of methods",
        "",
        f"Adjusted p of the paired randomisation test ({options.correction.capitalize()} over all pairs in each "
        "dataset and column; the sign: the row's method against the column's; † p < "
        f"{options.alpha}); every column's tests: `significance_pairs.md`.",
        "",
        significance.pairs_matrix_markdown(pairs) if not pairs.empty else _untested(results),
    ]


def _popularity_section(results, folders, options: ReportOptions, resampled, out: Path) -> tuple[list[str], list]:
    """Popularity and coverage (popularity.md/.csv) and every plot drawn, as (section lines, [(file, description)])."""
    reference = (options.metrics[0], options.cutoffs[0])
    popular_cells, popular_tests, popular_notes = popularity.section(
        results,
        folders,
        reference,
        options.split,
        options.baseline_method,
        options.correction,
        options.resamples,
        options.alpha,
        resampled,
    )
    popular_notes = popularity.unregistered(results, folders) + popular_notes
    popular_table = popularity.to_markdown(
        popular_cells, popular_tests, popularity.held_out(results, options.split), options.cutoffs[0]
    )
    write_atomic(out / "popularity.md", popular_table)
    write_atomic(out / "popularity.csv", popular_cells.to_csv(index=False))
    drawn = []
    for name, description, figure in [
        *figures(results, folders, options),
        *popularity.figures(popular_cells, reference),
    ]:
        plots.save(figure, out / "plots" / name)
        drawn.append((name, description))
    return [
        "## Popularity and coverage",
        "",
        popularity.intro(options.cutoffs[0], options.bootstrap, options.correction, options.alpha),
        "",
        popular_table or "(no beyond-accuracy metric in the results)\n",
        *([significance.to_markdown(popular_tests), ""] if not popular_tests.empty else []),
        *[f"- {note}" for note in popular_notes],
        "",
    ], drawn


def experiment_record(sources: list) -> dict | None:
    """The experiment.json beside the results files (recx.sweeps.record), merged: one report may read several
    sweeps' results. None when no results file has one (a run's own results)."""
    records = [record for source in sources if (record := read_record(Path(source).parent))]
    if not records:
        return None
    merged: dict = {"planned": {}, "run": {}, "paper": None}
    for record in records:
        for part in ("planned", "run"):
            for dataset, methods in record[part].items():
                merged[part].setdefault(dataset, {}).update(methods)
        if record.get("paper"):
            if merged["paper"] is None:
                merged["paper"] = {**record["paper"], "values": list(record["paper"]["values"])}
            else:
                merged["paper"]["values"] += record["paper"]["values"]
    return merged


def write_atomic(path: Path, text: str) -> None:
    """Write under a temporary name, then rename: two sweeps finishing at once never leave a mixed file."""
    write_text_atomic(path, text, "the report's other files are as written so far")


def report_sweep(outcome: SweepOutcome | None, console) -> None:
    """A finished sweep's report in its output folder, its table printed (nothing for a dry run)."""
    if outcome is None:
        return
    out, layout = outcome.out, outcome.layout
    write_report(
        outcome.results,
        outcome.folders,
        out,
        ReportOptions(
            metrics=layout["metrics"],
            ks=layout["ks"],
            stratified=layout["stratified"],
            title=f"experiment {outcome.name}",
            sources=[out / "results.parquet"],
        ),
        force=True,
    )
    console.print((out / "table.md").read_text(), soft_wrap=True, markup=False, highlight=False)
    beyond = (out / "popularity.md").read_text()
    if beyond:
        console.print("popularity and coverage:", soft_wrap=True, highlight=False)
        console.print(beyond, soft_wrap=True, markup=False, highlight=False)
    console.print(
        f"results: {out / 'results.parquet'}; report: {out / 'report.md'} (tables table.md/.csv/.tex, "
        f"significance.md/.csv, popularity.md/.csv{', grid.csv' if (out / 'grid.csv').is_file() else ''}, plots/); "
        f"per-epoch curves: {out / CONVERGENCE}"
    )


def grid_keys(results: pd.DataFrame) -> set[str]:
    """Keys of the sweep's grid (tuned per method, so never the parameter a plot sweeps)."""
    if "grid_point" not in results.columns:
        return set()
    return {key for point in results.grid_point.dropna().unique() for key, _ in ast.literal_eval(point)}
