"""The report's "popularity and coverage" section: per dataset, every method's accuracy beside the
beyond-accuracy metrics its runs recorded (the registered metrics that are not accuracy metrics: ARP, APLT, EPC,
coverage, Gini, entropy, exposure share per stratum, and any plugin's), and a plot of the accuracy against ARP and
coverage (one point per method: the trade-off popularity-bias papers discuss).

Per-user metrics (ARP, APLT, EPC): mean ± std over seeds, tested against the baseline by the paired sign-flip test
over users like the accuracy columns. Catalogue-level metrics: the mean over seeds with its bootstrap interval over
users (recx.eval.bootstrap, from the runs' top-K lists), tested by the paired bootstrap. † marks a difference from
the baseline (Holm or Bonferroni over the methods of the dataset and column, p < alpha). The last row gives the
held-out interactions' share per stratum beside the exposure shares.

A metric of the results that is not registered now (its plugin is not loaded) cannot be placed or resampled: the
report says so, naming the plugin the runs recorded.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from recx.core.words import counted
from recx.eval.bootstrap import interval
from recx.eval.catalogue import HELD_OUT_SHARE
from recx.eval.metrics.registry import METRICS, heading, needs_list
from recx.eval.strata import STRATA
from recx.reports import plots, significance
from recx.reports.resampled import Resampled
from recx.reports.tables import column_name
from recx.runs import lists

BUILT_IN_ROWS = {HELD_OUT_SHARE}  # results' rows that are facts of the split, not metrics
CSV_COLUMNS = ["dataset", "method", "column", "metric", "k", "stratum", "mean", "std", "count", "ci_low", "ci_high"]


def popularity_metrics(results: pd.DataFrame) -> list[str]:
    """The registered non-accuracy cut-off metrics the results hold: per-user ones first, then catalogue-level."""
    found = [m for m in dict.fromkeys(results.metric) if m in METRICS]
    chosen = [m for m in found if METRICS.get(m).cutoff and not METRICS.get(m).accuracy]
    return sorted(chosen, key=lambda m: (METRICS.get(m).level != "user", m))


def columns(results: pd.DataFrame, k: int) -> list[tuple[str, int, str]]:
    """The section's (metric, k, stratum) keys at cut-off k: each metric's overall value, else its strata."""
    keys = []
    for metric in popularity_metrics(results):
        present = set(results[(results.metric == metric) & (results.k == k)].stratum)
        keys += [(metric, k, stratum) for stratum in ("all", *STRATA) if stratum in present]
    return keys


def unregistered(results: pd.DataFrame, folders: dict[str, Path]) -> list[str]:
    """One note per metric of the results that no loaded code registers, naming the plugin its runs recorded."""
    notes = []
    for metric in dict.fromkeys(results.metric):
        if metric in METRICS or metric in BUILT_IN_ROWS:
            continue
        run_ids = results[results.metric == metric].run_id.unique()
        owners = sorted({owner for run_id in run_ids for owner in _recorded_owner(folders.get(run_id), metric)})
        source = f"recorded by {'; '.join(owners)}" if owners else "no run recorded which plugin registered it"
        notes.append(
            f"metric {metric!r} is in the results but not registered now ({source}): its values stay in the "
            "results files, but the report cannot tell whether it is an accuracy, per-user or catalogue-level "
            f"metric, so it is left out of the popularity table and has no interval; load its plugin (--plugin or "
            f"install it) to place it, or name it in --metrics to show its values"
        )
    return notes


def missing(rows: pd.DataFrame, keys: list[tuple[str, int, str]]) -> list[str]:
    """A note naming the methods whose results hold none of the popularity and coverage metrics (runs evaluated
    before recx computed them), so that a short table is never read as their values."""
    names = {key[0] for key in keys}
    without = [
        f"{dataset} {method}"
        for (dataset, method), group in rows.groupby(["dataset", "method"], sort=False)
        if not names & set(group.metric)
    ]
    if not without:
        return []
    return [
        f"no popularity or coverage metric in the results of {', '.join(without)}: their runs were evaluated before "
        "recx computed them (ARP, APLT, EPC, coverage, Gini, entropy, exposure); `recx eval RUN` prints them for a "
        "trained run"
    ]


def listed(rows: pd.DataFrame, folders: dict[str, Path]) -> list[str]:
    """A note per row of evaluated lists that leave some evaluated users without a list: over how many users its
    per-user metrics of a list's items, and over how many lists its catalogue-level metrics, ran."""
    per_list = ", ".join(heading(m) for m in dict.fromkeys(rows.metric) if needs_list(m)) or "their per-list metrics"
    notes = []
    for (dataset, method), group in rows.groupby(["dataset", "method"], sort=False):
        counts = [lists.listed_users(folders[run_id]) for run_id in group.run_id.unique() if run_id in folders]
        partial = [count for count in counts if count is not None and count[0] < count[1]]
        for with_list, evaluated in dict.fromkeys(partial):
            notes.append(
                f"{dataset} {method}: {with_list:,} of its {counted(evaluated, 'evaluated user')} "
                f"{'has' if with_list == 1 else 'have'} a list; {per_list} average over {'it' if with_list == 1 else 'those'}"
                f" and the catalogue-level metrics count {counted(with_list, 'list')} (a user without a list is a miss "
                "for the accuracy metrics)"
            )
    return notes


def _recorded_owner(folder: Path | None, metric: str) -> list[str]:
    """The plugins environment.json records as registering `metric` (all its plugins when it names none)."""
    if folder is None or not (folder / "environment.json").is_file():
        return []
    try:
        recorded = json.loads((folder / "environment.json").read_text()).get("plugins") or []
    except (OSError, ValueError):
        return []
    described = [
        f"plugin {p.get('name')}" + (f" {p['version']}" if p.get("version") else "") + f" ({p.get('source')})"
        for p in recorded
        if f"metric {metric}" in (p.get("names") or [])
    ]
    return described or [f"plugin {p.get('name')} ({p.get('source')}; names not recorded)" for p in recorded]


def section(
    results: pd.DataFrame,
    folders: dict[str, Path],
    reference: tuple[str, int],
    split: str,
    baseline: str,
    correction: str,
    resamples: int,
    alpha: float,
    resampled: Resampled,
) -> tuple[pd.DataFrame, pd.DataFrame, list[str]]:
    """(the table's cells as numbers (CSV_COLUMNS), the tests against the baseline, notes)."""
    metric, k = reference
    rows = results[results.split == split]
    keys = columns(rows, k)
    tested, notes = significance.compare(
        rows, folders, baseline, keys, split, correction, resamples, alpha, resampled=resampled
    )
    notes += missing(rows, keys) + listed(rows, folders)
    cells = []
    for dataset, runs in rows.groupby("dataset", sort=False):
        for method, group in runs.groupby("method", sort=False):
            for key in [(metric, k, "all"), *keys]:
                values = group[(group.metric == key[0]) & (group.k == key[1]) & (group.stratum == key[2])]["value"]
                if values.empty:
                    continue
                low = high = float("nan")
                if key != (metric, k, "all") and METRICS.get(key[0]).level == "catalogue":
                    found = resampled.row(group.run_id.unique(), key)
                    if found is not None:
                        low, high = interval(float(values.mean()), found[1])
                cells.append(
                    {
                        "dataset": dataset,
                        "method": method,
                        "column": column_name(*key),
                        "metric": key[0],
                        "k": key[1],
                        "stratum": key[2],
                        "mean": float(values.mean()),
                        "std": float(values.std()) if len(values) > 1 else float("nan"),
                        "count": len(values),
                        "ci_low": low,
                        "ci_high": high,
                    }
                )
    return pd.DataFrame(cells, columns=CSV_COLUMNS), tested, notes


def held_out(results: pd.DataFrame, split: str) -> dict[tuple[str, str], float]:
    """(dataset, stratum) -> the held-out interactions' share (the first run's: it is the split's, at every k)."""
    rows = results[(results.split == split) & (results.metric == HELD_OUT_SHARE)]
    return {(r.dataset, r.stratum): r.value for r in rows.drop_duplicates(["dataset", "stratum"]).itertuples()}


def to_markdown(cells: pd.DataFrame, tested: pd.DataFrame, shares: dict, k: int) -> str:
    """One table per dataset: methods x columns, the held-out share row under the exposure columns."""
    if cells.empty:
        return ""
    marks = {(r.dataset, r.method, r.column) for r in tested.itertuples() if r.significant}
    blocks = []
    for dataset, group in cells.groupby("dataset", sort=False):
        order = list(dict.fromkeys(group.column))
        lines = [
            f"**{dataset}**",
            "",
            "| method | " + " | ".join(order) + " |",
            "| --- |" + " ---: |" * len(order),
        ]
        for method, own in group.groupby("method", sort=False):
            by_column = {row.column: row for row in own.itertuples()}
            texts = []
            for column in order:
                row = by_column.get(column)
                if row is None:
                    texts.append("")
                    continue
                text = f"{row.mean:.4f}"
                if not pd.isna(row.ci_low):
                    text += f" [{row.ci_low:.4f}, {row.ci_high:.4f}]"
                elif row.count > 1:
                    text += f" ± {row.std:.4f}"
                texts.append(text + (" †" if (dataset, method, column) in marks else ""))
            lines.append(f"| {method} | " + " | ".join(texts) + " |")
        exposure = {column_name("exposure", k, stratum): stratum for stratum in STRATA}
        if any(column in exposure and (dataset, exposure[column]) in shares for column in order):
            held = [f"{shares[(dataset, exposure[column])]:.4f}" if column in exposure else "" for column in order]
            lines.append("| *held-out interactions* | " + " | ".join(held) + " |")
        blocks.append("\n".join(lines) + "\n")
    return "\n".join(blocks)


def figures(cells: pd.DataFrame, reference: tuple[str, int]):
    """Per dataset: the reference metric against ARP and against coverage (the panels whose metric is there)."""
    metric, k = reference
    label = column_name(metric, k, "all")
    for dataset, group in cells.groupby("dataset", sort=False):
        panels = []
        for other in ("arp", "coverage"):
            x = group[(group.metric == other) & (group.stratum == "all")].set_index("method")
            y = group[group.column == label].set_index("method")
            methods = [m for m in x.index if m in y.index]
            if methods:
                panels.append((column_name(other, k, "all"), x.loc[methods], y.loc[methods]))
        if panels:
            yield (
                f"popularity_{dataset}.png",
                f"{label} against {' and '.join(name for name, _, _ in panels)}, one point per method "
                "(± std over seeds; coverage: its bootstrap interval)",
                plots.tradeoff(panels, label, f"{dataset}: {label} against popularity and coverage"),
            )


def intro(k: int, resamples: int, correction: str, alpha: float) -> str:
    return (
        f"Beyond accuracy at K={k}. ARP: mean training popularity of the recommended items; APLT: share of each list "
        "on long-tail (unpopular-stratum) items; EPC: rank-discounted novelty of the hits (per user, mean ± std over "
        "seeds). Coverage (share of the items recommended to someone), Gini (0: every item recommended equally "
        "often), Entropy (bits) and Exposure (share of all recommendations per stratum) are catalogue-level: mean "
        f"over seeds [95% bootstrap interval over users, {resamples:,} resamples]. †: differs from the baseline "
        f"({correction.capitalize()}-corrected p < {alpha}; per-user metrics: sign-flip test, catalogue-level: "
        "paired bootstrap; the tests follow the table). The figures: `popularity.csv`."
    )
