"""Each method against a baseline (`compare`), or every pair of methods (`compare_pairs`), per dataset and table
column, by paired tests over the test users (recx.reports.stats: scipy's paired t-test and randomisation test, Holm
or Bonferroni over the comparisons made in that dataset and column: the methods against the baseline, or all pairs).
A method's per-user value is its mean over seeds, read from each run's per_user_<split>.parquet; users are those both
methods have a value for (the users with a test item; for ARP, APLT and EPC of evaluated lists, those with a list in
both: `needs_list`).

A catalogue-level metric (coverage, Gini, ...: one value of all lists, no per-user value) is compared by the paired
bootstrap over the same users instead (recx.eval.bootstrap, from each run's top-K lists: recx.reports.resampled):
`p_randomisation` is then the bootstrap's p, `t` and `p_t` are empty, and `difference_low`/`difference_high` the
bootstrap interval of the difference; `test` names the test of each row."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from recx.eval.bootstrap import interval, paired_p
from recx.eval.metrics.registry import catalogue_level
from recx.reports import stats
from recx.reports.resampled import Resampled
from recx.reports.tables import column_name
from recx.runs.per_user import file_name, topk_name

COLUMNS = [
    "dataset",
    "column",
    "method",
    "baseline",
    "users",
    "mean",
    "baseline_mean",
    "difference",
    "t",
    "p_t",
    "p_randomisation",
    "p_t_adjusted",
    "p_randomisation_adjusted",
    "significant",
    "test",
    "difference_low",
    "difference_high",
]
SIGN_FLIP, BOOTSTRAP = "sign-flip randomisation", "paired bootstrap"


def per_user_means(run_ids, folders: dict[str, Path], split: str, keys: set) -> pd.DataFrame | None:
    """Users x (metric, k, stratum) columns: the mean over the runs (seeds) of each user's value; None when a run
    has no per-user file."""
    frames = []
    for run_id in run_ids:
        path = folders[run_id] / file_name(split)
        if not path.is_file():
            return None
        rows = pd.read_parquet(path)
        wanted = pd.MultiIndex.from_arrays([rows.metric.astype(str), rows.k, rows.stratum.astype(str)]).isin(list(keys))
        rows = rows[wanted]
        frames.append(rows.pivot(index="user", columns=["metric", "k", "stratum"], values="value"))
    return pd.concat(frames).groupby(level=0).mean()


def _means(
    results: pd.DataFrame, folders: dict[str, Path], split: str, keys: list
) -> dict[str, tuple[list[str], dict[str, pd.DataFrame | None]]]:
    """dataset -> (its methods in order, each method's per-user means or None)."""
    found = {}
    for dataset, runs in results[results.split == split].groupby("dataset", sort=False):
        methods = list(dict.fromkeys(runs.method))
        found[dataset] = (
            methods,
            {
                method: per_user_means(runs[runs.method == method].run_id.unique(), folders, split, set(keys))
                for method in methods
            },
        )
    return found


def _tested(dataset, key, method, other, x_frame, y_frame, resamples: int, seed: int) -> dict:
    pair = pd.concat([x_frame[key], y_frame[key]], axis=1, join="inner").dropna().to_numpy()  # users valued in both
    x, y = pair[:, 0], pair[:, 1]
    t, p_t = stats.paired_t(x, y)
    return {
        "dataset": dataset,
        "column": column_name(*key),
        "method": method,
        "baseline": other,
        "users": len(x),
        "mean": x.mean(),
        "baseline_mean": y.mean(),
        "difference": x.mean() - y.mean(),
        "t": t,
        "p_t": p_t,
        "p_randomisation": stats.randomisation(x, y, resamples, seed),
        "test": SIGN_FLIP,
    }


def _estimates(results: pd.DataFrame, split: str) -> pd.Series:
    """(dataset, method, metric, k, stratum) -> the mean over the method's runs (seeds) of its results' value."""
    rows = results[results.split == split]
    return rows.groupby(["dataset", "method", "metric", "k", "stratum"], sort=False)["value"].mean()


def _bootstrapped(dataset, key, method, other, estimates, rows: dict) -> dict | None:
    """The paired bootstrap of a catalogue-level column: rows {method: (users, replicates)}; None when either has
    no replicates or they were evaluated on other users."""
    if rows.get(method) is None or rows.get(other) is None or not np.array_equal(rows[method][0], rows[other][0]):
        return None
    x, y = estimates[(dataset, method) + tuple(key)], estimates[(dataset, other) + tuple(key)]
    difference = x - y
    replicates = rows[method][1] - rows[other][1]
    low, high = interval(difference, replicates)
    return {
        "dataset": dataset,
        "column": column_name(*key),
        "method": method,
        "baseline": other,
        "users": len(rows[method][0]),
        "mean": x,
        "baseline_mean": y,
        "difference": difference,
        "t": math.nan,
        "p_t": math.nan,
        "p_randomisation": paired_p(difference, replicates),
        "test": BOOTSTRAP,
        "difference_low": low,
        "difference_high": high,
    }


def _catalogue_rows(results, split, keys, resampled: Resampled) -> dict:
    """dataset -> (methods, estimates, {key: {method: (users, replicates) or None}}) for the catalogue-level keys."""
    found = {}
    estimates = _estimates(results, split)
    for dataset, runs in results[results.split == split].groupby("dataset", sort=False):
        methods = list(dict.fromkeys(runs.method))
        per_key = {
            key: {
                method: resampled.row(runs[runs.method == method].run_id.unique(), key)
                for method in methods
                if (dataset, method, *key) in estimates.index
            }
            for key in keys
        }
        found[dataset] = (methods, estimates, per_key)
    return found


def _adjust(family: list[dict], correction: str, alpha: float) -> list[dict]:
    adjusted = zip(
        stats.adjust([row["p_t"] for row in family], correction),
        stats.adjust([row["p_randomisation"] for row in family], correction),
        strict=True,
    )
    for row, (adjusted_t, adjusted_r) in zip(family, adjusted, strict=True):
        row.update(p_t_adjusted=adjusted_t, p_randomisation_adjusted=adjusted_r, significant=bool(adjusted_r < alpha))
    return family


def compare(
    results: pd.DataFrame,
    folders: dict[str, Path],
    baseline: str,
    keys: list[tuple[str, int, str]],
    split: str = "test",
    correction: str = "holm",
    resamples: int = 10_000,
    alpha: float = 0.05,
    seed: int = 0,
    resampled: Resampled | None = None,
) -> tuple[pd.DataFrame, list[str]]:
    """(one row per dataset, column and method other than the baseline; notes on methods that could not be tested).
    Catalogue-level keys are compared by the paired bootstrap (`resampled`: the replicates, made once per report)."""
    resampled = resampled or Resampled(folders, split)
    whole = [key for key in keys if catalogue_level(key[0])]
    keys = [key for key in keys if key not in whole]
    rows, notes = [], []
    for dataset, (methods, estimates, per_key) in _catalogue_rows(results, split, whole, resampled).items():
        for key, lists in per_key.items():
            if baseline not in lists:
                continue
            family = [
                tested
                for method in methods
                if method != baseline and method in lists
                if (tested := _bootstrapped(dataset, key, method, baseline, estimates, lists)) is not None
            ]
            untested = [m for m in lists if lists[m] is None]
            if untested:
                notes.append(
                    f"{dataset}: {', '.join(untested)} kept no top-K lists ({topk_name(split)}) for "
                    f"{column_name(*key)}: no bootstrap interval or test"
                )
            rows.extend(_adjust(family, correction, alpha) if family else [])
    for dataset, (methods, means) in _means(results, folders, split, keys).items():
        if baseline not in methods:
            notes.append(f"{dataset}: no baseline method {baseline!r}; methods: {', '.join(methods)}")
            continue
        notes += [
            f"{dataset}: {m} has runs without {file_name(split)}; not tested" for m in methods if means[m] is None
        ]
        base = means[baseline]
        if base is None:
            continue
        others = {m: frame for m, frame in means.items() if m != baseline and frame is not None}
        for key in keys:
            family = [
                _tested(dataset, key, method, baseline, frame, base, resamples, seed)
                for method, frame in others.items()
                if key in frame.columns
            ]
            rows.extend(_adjust(family, correction, alpha) if family else [])
    return pd.DataFrame(rows, columns=COLUMNS), notes


def compare_pairs(
    results: pd.DataFrame,
    folders: dict[str, Path],
    keys: list[tuple[str, int, str]],
    split: str = "test",
    correction: str = "holm",
    resamples: int = 10_000,
    alpha: float = 0.05,
    seed: int = 0,
    resampled: Resampled | None = None,
) -> pd.DataFrame:
    """One row per dataset, column and pair of methods (each pair once, in the results' order: `method` is the
    later one, `baseline` the earlier), the correction over all pairs of that dataset and column."""
    resampled = resampled or Resampled(folders, split)
    whole = [key for key in keys if catalogue_level(key[0])]
    keys = [key for key in keys if key not in whole]
    rows = []
    for dataset, (methods, estimates, per_key) in _catalogue_rows(results, split, whole, resampled).items():
        for key, lists in per_key.items():
            order = [m for m in methods if m in lists]
            family = [
                tested
                for index, earlier in enumerate(order)
                for later in order[index + 1 :]
                if (tested := _bootstrapped(dataset, key, later, earlier, estimates, lists)) is not None
            ]
            rows.extend(_adjust(family, correction, alpha) if family else [])
    for dataset, (_, means) in _means(results, folders, split, keys).items():
        tested = {method: frame for method, frame in means.items() if frame is not None}
        order = list(tested)
        for key in keys:
            family = [
                _tested(dataset, key, later, earlier, tested[later], tested[earlier], resamples, seed)
                for index, earlier in enumerate(order)
                for later in order[index + 1 :]
                if key in tested[later].columns and key in tested[earlier].columns
            ]
            rows.extend(_adjust(family, correction, alpha) if family else [])
    return pd.DataFrame(rows, columns=COLUMNS)


def pairs_matrix_markdown(pairs: pd.DataFrame) -> str:
    """Per dataset and overall column (stratum all): a methods x methods table of the adjusted randomisation-test p
    values (the sign of the row's difference against the column shown; † significant)."""
    blocks = []
    for (dataset, column), group in pairs.groupby(["dataset", "column"], sort=False):
        if " " in column:  # a stratum's column: in significance_pairs.csv only
            continue
        methods = list(dict.fromkeys([*group.baseline, *group.method]))
        cell = {}
        for row in group.itertuples():
            mark = " †" if row.significant else ""
            cell[(row.method, row.baseline)] = (
                f"{'+' if row.difference >= 0 else '−'} {row.p_randomisation_adjusted:.2g}{mark}"
            )
            cell[(row.baseline, row.method)] = (
                f"{'−' if row.difference >= 0 else '+'} {row.p_randomisation_adjusted:.2g}{mark}"
            )
        lines = [
            f"**{dataset}, {column}**",
            "",
            "| | " + " | ".join(methods) + " |",
            "| --- |" + " ---: |" * len(methods),
        ]
        lines += [f"| {m} | " + " | ".join(cell.get((m, o), "—") for o in methods) + " |" for m in methods]
        blocks.append("\n".join(lines) + "\n")
    return "\n".join(blocks)


def signed(difference: float) -> str:
    """A difference with its sign, to 4 decimals, or in scientific notation when 4 decimals would print it as 0
    (a significant difference of 3e-6 must not read "-0.0000")."""
    if difference != 0 and abs(difference) < 5e-5:
        return f"{difference:+.2e}"
    return f"{difference + 0.0:+.4f}"


def to_markdown(table: pd.DataFrame) -> str:
    header = (
        "| dataset | column | method | vs | users | difference | t | p (t) | p (rand.) | p adj. (t) | "
        "p adj. (rand.) |\n| --- | --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n"
    )
    shown = lambda value, form: "—" if pd.isna(value) else format(value, form)  # noqa: E731
    lines = [
        f"| {r.dataset} | {r.column} | {r.method} | {r.baseline} | {r.users} | {signed(r.difference)} | "
        f"{shown(r.t, '.2f')} | {shown(r.p_t, '.2g')} | {r.p_randomisation:.2g} | {shown(r.p_t_adjusted, '.2g')} | "
        f"{r.p_randomisation_adjusted:.2g}{' †' if r.significant else ''} |"
        for r in table.itertuples()
    ]
    return header + "\n".join(lines) + ("\n" if lines else "")
