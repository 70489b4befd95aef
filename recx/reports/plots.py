"""Report figures (matplotlib, no display needed): each function returns a Figure; `save` writes it as PNG.

- convergence: the validation metric per epoch (whole epochs on the axis) and per second of training time
  (epochs.jsonl's `seconds`: wall-clock, cumulated; evaluation time is not counted), one line per run, one colour
  per method;
- strata: bars of a metric per item-popularity stratum, one bar per method, ± std over seeds (no error bar from
  one seed);
- swept parameter: a metric versus the parameter a set of methods varies (batch size, M, rho, negatives...), one
  line per family of methods, ± std over seeds;
- trade-off: an accuracy metric against beyond-accuracy metrics (ARP, coverage), one point per method, one panel
  per metric.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from recx.core.folders import atomic_file
from recx.eval.strata import STRATA


def _figure() -> tuple[Figure, Axes]:
    figure = Figure(figsize=(6.4, 4.2), layout="constrained")
    return figure, figure.add_subplot()


def convergence(curves: dict[str, list[pd.DataFrame]], metric: str, x: str, title: str) -> Figure:
    """curves: method -> one epochs frame per run (columns epoch, time, and `metric`); x: "epoch" or "time"."""
    figure, axes = _figure()
    colours = {method: f"C{index % 10}" for index, method in enumerate(curves)}
    for method, runs in curves.items():
        for index, run in enumerate(runs):
            if metric in run.columns:
                points = run.dropna(subset=[metric])
                axes.plot(
                    points[x],
                    points[metric],
                    color=colours[method],
                    marker=".",
                    alpha=0.8,
                    label=method if index == 0 else None,
                )
    axes.set_xlabel("epoch" if x == "epoch" else "training time (wall-clock seconds)")
    if x == "epoch":
        axes.xaxis.set_major_locator(MaxNLocator(integer=True))
    axes.set_ylabel(metric.replace("_", " "))
    axes.set_title(title)
    axes.legend(fontsize="small")
    return figure


def strata(means: pd.DataFrame, stds: pd.DataFrame, ylabel: str, title: str) -> Figure:
    """means/stds: methods x strata."""
    figure, axes = _figure()
    width = 0.8 / max(1, len(means.index))
    for index, method in enumerate(means.index):
        positions = [position + index * width for position in range(len(STRATA))]
        axes.bar(
            positions,
            means.loc[method, list(STRATA)],
            width,
            yerr=None if stds.loc[method].isna().all() else stds.loc[method, list(STRATA)].fillna(0.0),
            label=method,
            capsize=2,
        )
    axes.set_xticks([position + 0.4 - width / 2 for position in range(len(STRATA))], list(STRATA))
    axes.set_xlabel("item popularity stratum")
    axes.set_ylabel(ylabel)
    axes.set_title(title)
    axes.legend(fontsize="small")
    return figure


def swept(points: pd.DataFrame, parameter: str, ylabel: str, title: str) -> Figure:
    """points: columns line, value (of the parameter), mean, std."""
    figure, axes = _figure()
    for line, group in points.groupby("line", sort=False):
        group = group.sort_values("value")
        axes.errorbar(group.value, group["mean"], yerr=group["std"].fillna(0.0), marker="o", capsize=2, label=line)
    values = sorted(set(points.value.astype(float)))
    if values[0] > 0 and values[-1] / values[0] >= 10:
        axes.set_xscale("log")
        axes.minorticks_off()
    axes.set_xticks(values, [f"{value:g}" for value in values])
    axes.set_xlabel(parameter)
    axes.set_ylabel(ylabel)
    axes.set_title(title)
    axes.legend(fontsize="small")
    return figure


def tradeoff(panels: list[tuple[str, pd.DataFrame, pd.DataFrame]], ylabel: str, title: str) -> Figure:
    """panels: (x label, x cells, y cells), cells indexed by method with columns mean, std, ci_low, ci_high (an
    interval where given, else ± std)."""
    figure = Figure(figsize=(6.4 * len(panels), 4.6), layout="constrained")
    for index, (xlabel, x, y) in enumerate(panels):
        axes = figure.add_subplot(1, len(panels), index + 1)
        for position, method in enumerate(x.index):
            axes.errorbar(
                x.at[method, "mean"],
                y.at[method, "mean"],
                xerr=_error(x.loc[method]),
                yerr=_error(y.loc[method]),
                marker="o",
                capsize=2,
                color=f"C{position % 10}",
                label=method,
            )
        axes.set_xlabel(xlabel)
        axes.set_ylabel(ylabel)
        axes.legend(fontsize="small")
    figure.suptitle(title)
    return figure


def _error(cell: pd.Series) -> list[list[float]] | None:
    """[[below], [above]] for one point: its interval when given, else ± its std (none when neither)."""
    if pd.notna(cell.get("ci_low")):
        return [[max(0.0, cell["mean"] - cell["ci_low"])], [max(0.0, cell["ci_high"] - cell["mean"])]]
    if pd.notna(cell.get("std")):
        return [[cell["std"]], [cell["std"]]]
    return None


def save(figure: Figure, path: Path) -> None:
    """PNG at 120 dpi, written whole (recx.core.folders.atomic_file: concurrent reports never mix their bytes)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_file(path, "the previous plot, if any, is unchanged") as partial:
        figure.savefig(partial, dpi=120, format="png")
