"""Each method against a baseline, per dataset and table column, by paired tests over the test users
(recx.reports.stats: scipy's paired t-test and randomisation test, Holm or Bonferroni over the methods compared with
the baseline in that dataset and column). A method's per-user value is its mean over seeds, read from each run's
per_user_<split>.parquet; users are those both methods were evaluated on (the users with a test item)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from recx.reports import stats
from recx.reports.tables import column_name
from recx.runs.per_user import file_name

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
]


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
) -> tuple[pd.DataFrame, list[str]]:
    """(one row per dataset, column and method other than the baseline; notes on methods that could not be tested)."""
    rows, notes = [], []
    for dataset, runs in results[results.split == split].groupby("dataset", sort=False):
        methods = list(dict.fromkeys(runs.method))
        if baseline not in methods:
            notes.append(f"{dataset}: no baseline method {baseline!r}; methods: {', '.join(methods)}")
            continue
        means = {
            method: per_user_means(runs[runs.method == method].run_id.unique(), folders, split, set(keys))
            for method in methods
        }
        for method in methods:
            if means[method] is None:
                notes.append(f"{dataset}: {method} has runs without {file_name(split)}; not tested")
        base = means[baseline]
        if base is None:
            continue
        for key in keys:
            family = []
            for method in methods:
                frame = means[method]
                if method == baseline or frame is None or key not in frame.columns:
                    continue
                pair = pd.concat([frame[key], base[key]], axis=1, join="inner").to_numpy()
                x, y = pair[:, 0], pair[:, 1]
                t, p_t = stats.paired_t(x, y)
                family.append(
                    {
                        "dataset": dataset,
                        "column": column_name(*key),
                        "method": method,
                        "baseline": baseline,
                        "users": len(x),
                        "mean": x.mean(),
                        "baseline_mean": y.mean(),
                        "difference": x.mean() - y.mean(),
                        "t": t,
                        "p_t": p_t,
                        "p_randomisation": stats.randomisation(x, y, resamples, seed),
                    }
                )
            if family:
                adjusted = zip(
                    stats.adjust([row["p_t"] for row in family], correction),
                    stats.adjust([row["p_randomisation"] for row in family], correction),
                    strict=True,
                )
                for row, (adjusted_t, adjusted_r) in zip(family, adjusted, strict=True):
                    row.update(
                        p_t_adjusted=adjusted_t,
                        p_randomisation_adjusted=adjusted_r,
                        significant=bool(adjusted_r < alpha),
                    )
                rows.extend(family)
    return pd.DataFrame(rows, columns=COLUMNS), notes


def to_markdown(table: pd.DataFrame) -> str:
    header = (
        "| dataset | column | method | vs | users | difference | t | p (t) | p (rand.) | p adj. (t) | "
        "p adj. (rand.) |\n| --- | --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n"
    )
    lines = [
        f"| {r.dataset} | {r.column} | {r.method} | {r.baseline} | {r.users} | {r.difference:+.4f} | "
        f"{r.t:.2f} | {r.p_t:.2g} | {r.p_randomisation:.2g} | {r.p_t_adjusted:.2g} | "
        f"{r.p_randomisation_adjusted:.2g}{' †' if r.significant else ''} |"
        for r in table.itertuples()
    ]
    return header + "\n".join(lines) + ("\n" if lines else "")
