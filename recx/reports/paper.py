"""The paper beside recx: each published figure of the experiment's `paper:` block with recx's
value of the same dataset, method, metric and cut-off on the report's split (mean ± std over seeds, or the single
value), Δ = (recx − paper) / paper, and whether |Δ| lies within the experiment's stated tolerance."""

from __future__ import annotations

import pandas as pd

from recx.eval.metrics.registry import heading


def paper_rows(results: pd.DataFrame, split: str, paper: dict, marks: dict[tuple[str, str], str]) -> pd.DataFrame:
    """One row per figure of `paper` (recx.sweeps.experiments.paper_figures); `marks`: (dataset, method) -> the
    budget's mark of the row (recx.reports.budget)."""
    overall = results[(results.split == split) & (results.stratum == "all")]
    rows = []
    for figure in paper["values"]:
        values = overall[
            (overall.dataset == figure["dataset"])
            & (overall.method == figure["method"])
            & (overall.metric == figure["metric"])
            & (overall.k == figure["k"])
        ].value
        mean = float(values.mean()) if len(values) else float("nan")
        delta = (mean - figure["value"]) / figure["value"] if len(values) else float("nan")
        rows.append(
            {
                "dataset": figure["dataset"],
                "method": figure["method"],
                "mark": marks.get((figure["dataset"], figure["method"]), ""),
                "figure": f"{heading(figure['metric'])}@{figure['k']}",
                "paper": figure["value"],
                "recx": mean,
                "std": float(values.std()) if len(values) > 1 else float("nan"),
                "seeds": len(values),
                "delta": delta,
                "within": bool(abs(delta) <= paper["tolerance"]) if len(values) else None,
                "source": figure["source"],
            }
        )
    return pd.DataFrame(rows)


def to_markdown(rows: pd.DataFrame, tolerance: float) -> str:
    lines = [
        f"| dataset | method | figure | paper | recx | Δ | within ±{tolerance:.0%} | source |",
        "| --- | --- | --- | ---: | ---: | ---: | --- | --- |",
    ]
    for row in rows.itertuples():
        method = row.method + (f" {row.mark}" if row.mark else "")
        if row.seeds == 0:
            lines.append(f"| {row.dataset} | {method} | {row.figure} | {row.paper:.4f} | not run | | | {row.source} |")
            continue
        spread = f" ± {row.std:.4f}" if row.seeds > 1 else ""
        within = "yes" if row.within else "**no**"
        lines.append(
            f"| {row.dataset} | {method} | {row.figure} | {row.paper:.4f} | {row.recx:.4f}{spread} | "
            f"{row.delta:+.1%} | {within} | {row.source} |"
        )
    return "\n".join(lines) + "\n"
