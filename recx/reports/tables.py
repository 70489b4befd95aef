"""Report tables: mean ± std over seeds per (dataset, method) from long-format results, the best mean of each column
(per dataset) in bold, and a dagger where a method differs from the baseline significantly (corrected
randomisation-test p < alpha); Markdown, LaTeX and CSV."""

from __future__ import annotations

import pandas as pd

from recx.eval.metrics.registry import heading
from recx.eval.strata import STRATA


def column_name(metric: str, k: int, stratum: str) -> str:
    suffix = "" if stratum == "all" else f" {stratum}"
    return f"{heading(metric)}@{k}{suffix}"


def summary(
    results: pd.DataFrame, split: str = "test", metrics=("ndcg", "recall"), ks=(20,), stratified=("ndcg", "recall")
) -> pd.DataFrame:
    """One row per (dataset, method): mean and std over seeds of each selected (metric, k, stratum) column."""
    rows = results[(results.split == split) & results.metric.isin(metrics) & results.k.isin(ks)]
    rows = rows[(rows.stratum == "all") | rows.metric.isin(stratified)]
    rows = rows.assign(column=[column_name(m, k, s) for m, k, s in zip(rows.metric, rows.k, rows.stratum, strict=True)])
    grouped = rows.groupby(["dataset", "method", "column"], sort=False)["value"]
    stats = grouped.agg(["mean", "std", "count"]).reset_index()
    order = [column_name(m, k, s) for m in metrics for k in ks for s in ("all",) + (STRATA if m in stratified else ())]
    wide = stats.pivot_table(
        index=["dataset", "method"], columns="column", values=["mean", "std", "count"], sort=False, dropna=False
    )
    return wide.reindex(columns=[c for c in order if ("mean", c) in wide.columns], level=1)


def best_flags(table: pd.DataFrame) -> pd.DataFrame:
    """True where a cell's mean is the highest of its column within its dataset (ties: all of them)."""
    means = table["mean"]
    return means.eq(means.groupby(level="dataset").transform("max")) & means.notna()


def _cells(
    table: pd.DataFrame, plus_minus: str, bold, marks: dict, dagger: str, row_marks: dict | None = None
) -> pd.DataFrame:
    means, stds, counts = table["mean"], table["std"].fillna(0.0), table["count"]
    best = best_flags(table)
    cells = means.copy().astype(object)
    for index in means.index:
        for column in means.columns:
            mean = means.at[index, column]
            if pd.isna(mean):
                cells.at[index, column] = ""
                continue
            text = f"{mean:.4f}" + (f"{plus_minus}{stds.at[index, column]:.4f}" if counts.at[index, column] > 1 else "")
            text = bold(text) if best.at[index, column] else text
            cells.at[index, column] = text + (dagger if marks.get((*index, column)) else "")
    cells = cells.reset_index()
    if row_marks:  # a row's budget mark (recx.reports.budget): after its method's name
        cells["method"] = [
            f"{method} {row_marks[(dataset, method)]}" if row_marks.get((dataset, method)) else method
            for dataset, method in zip(cells["dataset"], cells["method"], strict=True)
        ]
    return cells


def to_markdown(table: pd.DataFrame, marks: dict | None = None, row_marks: dict | None = None) -> str:
    cells = _cells(table, " ± ", lambda text: f"**{text}**", marks or {}, "†", row_marks)
    header = "| " + " | ".join(cells.columns) + " |"
    rule = "| " + " | ".join("---" if i < 2 else "---:" for i in range(len(cells.columns))) + " |"
    lines = ["| " + " | ".join(str(v) for v in row) + " |" for row in cells.itertuples(index=False)]
    return "\n".join([header, rule, *lines]) + "\n"


def to_latex(table: pd.DataFrame, marks: dict | None = None, row_marks: dict | None = None) -> str:
    cells = _cells(table, r" $\pm$ ", lambda text: rf"\textbf{{{text}}}", marks or {}, r"$^\dagger$", row_marks)
    escape = lambda value: str(value).replace("_", r"\_").replace("%", r"\%")  # noqa: E731
    lines = [
        r"\begin{tabular}{ll" + "r" * (cells.shape[1] - 2) + "}",
        r"\toprule",
        " & ".join(escape(c) for c in cells.columns) + r" \\",
        r"\midrule",
    ]
    lines += [" & ".join(escape(v) for v in row) + r" \\" for row in cells.itertuples(index=False)]
    lines += [r"\bottomrule", r"\end{tabular}"]
    return "\n".join(lines) + "\n"


def to_csv(table: pd.DataFrame) -> str:
    """Numbers, not text: `<column> mean`, `std`, `count` and `best` (True for the column's best per dataset)."""
    best = best_flags(table)
    parts = {}
    for column in table["mean"].columns:
        for stat in ("mean", "std", "count"):
            parts[f"{column} {stat}"] = table[stat][column]
        parts[f"{column} best"] = best[column]
    return pd.DataFrame(parts).reset_index().to_csv(index=False)
