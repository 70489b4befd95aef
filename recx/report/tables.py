"""Report tables: mean ± std over seeds per (dataset, method), the best mean of each column (per dataset) in bold,
and a dagger where a method differs from the baseline significantly (corrected randomisation-test p < alpha)."""
from __future__ import annotations

import pandas as pd


def best_flags(table: pd.DataFrame) -> pd.DataFrame:
    """True where a cell's mean is the highest of its column within its dataset (ties: all of them)."""
    means = table["mean"]
    return means.eq(means.groupby(level="dataset").transform("max")) & means.notna()


def _cells(table: pd.DataFrame, plus_minus: str, bold, marks: dict, dagger: str) -> pd.DataFrame:
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
    return cells.reset_index()


def to_markdown(table: pd.DataFrame, marks: dict | None = None) -> str:
    cells = _cells(table, " ± ", lambda text: f"**{text}**", marks or {}, "†")
    header = "| " + " | ".join(cells.columns) + " |"
    rule = "| " + " | ".join("---" if i < 2 else "---:" for i in range(len(cells.columns))) + " |"
    lines = ["| " + " | ".join(str(v) for v in row) + " |" for row in cells.itertuples(index=False)]
    return "\n".join([header, rule, *lines]) + "\n"


def to_latex(table: pd.DataFrame, marks: dict | None = None) -> str:
    cells = _cells(table, r" $\pm$ ", lambda text: rf"\textbf{{{text}}}", marks or {}, r"$^\dagger$")
    escape = lambda value: str(value).replace("_", r"\_").replace("%", r"\%")  # noqa: E731
    lines = [r"\begin{tabular}{ll" + "r" * (cells.shape[1] - 2) + "}", r"\toprule",
             " & ".join(escape(c) for c in cells.columns) + r" \\", r"\midrule"]
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
