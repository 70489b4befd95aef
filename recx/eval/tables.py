"""Side-by-side tables from long-format results: mean ± std over seeds per method (Markdown, CSV, LaTeX)."""
from __future__ import annotations

import pandas as pd

from recx.eval.strata import STRATA

ACRONYMS = {"ndcg": "NDCG", "mrr": "MRR"}


def column_name(metric: str, k: int, stratum: str) -> str:
    suffix = "" if stratum == "all" else f" {stratum}"
    return f"{ACRONYMS.get(metric, metric.capitalize())}@{k}{suffix}"


def summary(results: pd.DataFrame, split: str = "test", metrics=("ndcg", "recall"), ks=(20,),
            stratified=("ndcg",)) -> pd.DataFrame:
    """One row per (dataset, method): mean and std over seeds of each selected (metric, k, stratum) column."""
    rows = results[(results.split == split) & results.metric.isin(metrics) & results.k.isin(ks)]
    rows = rows[(rows.stratum == "all") | rows.metric.isin(stratified)]
    rows = rows.assign(column=[column_name(m, k, s) for m, k, s in zip(rows.metric, rows.k, rows.stratum)])
    grouped = rows.groupby(["dataset", "method", "column"], sort=False)["value"]
    stats = grouped.agg(["mean", "std", "count"]).reset_index()
    order = [column_name(m, k, s) for m in metrics for k in ks
             for s in ("all",) + (STRATA if m in stratified else ())]
    wide = stats.pivot_table(index=["dataset", "method"], columns="column", values=["mean", "std", "count"],
                             sort=False, dropna=False)
    return wide.reindex(columns=[c for c in order if ("mean", c) in wide.columns], level=1)


def _cells(table: pd.DataFrame, plus_minus: str) -> pd.DataFrame:
    means, stds, counts = table["mean"], table["std"], table["count"]
    text = means.map(lambda v: f"{v:.4f}")
    spread = stds.fillna(0.0).map(lambda v: f"{v:.4f}")
    out = text + plus_minus + spread
    return out.where(counts > 1, text)


def to_markdown(table: pd.DataFrame) -> str:
    cells = _cells(table, " ± ").reset_index()
    header = "| " + " | ".join(cells.columns) + " |"
    rule = "| " + " | ".join("---" for _ in cells.columns) + " |"
    lines = ["| " + " | ".join(str(v) for v in row) + " |" for row in cells.itertuples(index=False)]
    return "\n".join([header, rule, *lines]) + "\n"


def to_csv(table: pd.DataFrame) -> str:
    flat = table.copy()
    flat.columns = [f"{c} {stat}" for stat, c in flat.columns]
    return flat.reset_index().to_csv(index=False)


def to_latex(table: pd.DataFrame) -> str:
    cells = _cells(table, r" $\pm$ ").reset_index()
    lines = [r"\begin{tabular}{" + "l" * 2 + "r" * (cells.shape[1] - 2) + "}", r"\toprule",
             " & ".join(cells.columns) + r" \\", r"\midrule"]
    lines += [" & ".join(str(v).replace("_", r"\_") for v in row) + r" \\" for row in cells.itertuples(index=False)]
    lines += [r"\bottomrule", r"\end{tabular}"]
    return "\n".join(lines) + "\n"
