"""`recx report` on a tiny sweep: every plot type drawn with the expected axes, tables with the best in bold, and
significance rows equal to scipy's tests on the runs' per-user files."""

import io
import json

import numpy as np
import pandas as pd
import pytest
import yaml
from rich.console import Console
from scipy import stats as scipy_stats
from sweep_helpers import tiny_experiment

from recx.reports.report import ReportOptions, figures
from recx.runs.collection import load_results

NEGATIVES = tiny_experiment(
    "negatives",
    {"dim": 8, "epochs": 3, "batch_size": 256, "lr": 0.01, "loss": "softmax", "sampler": "uniform"},
    {
        "bpr": {"loss": "bpr", "n_negatives": 1},
        "ssm-n4": {"n_negatives": 4},
        "ssm-n16": {"n_negatives": 16},
        "ssm-n64": {"n_negatives": 64},
    },
    grid={"weight_decay": [0.0, 1.0e-4]},
)


@pytest.fixture(scope="module")
def swept(tmp_path_factory):
    from recx.reports.report import report_sweep
    from recx.sweeps.sweep import run_sweep

    folder = tmp_path_factory.mktemp("report")
    path = folder / "experiments.yaml"
    path.write_text(yaml.safe_dump(NEGATIVES))
    console = Console(file=io.StringIO(), width=200)
    report_sweep(run_sweep(path, "negatives", folder / "out", folder / "data", False, console), console)
    return folder / "out"


def test_every_plot_type_with_its_axes(swept):
    results, folders = load_results([swept / "results.parquet"])
    drawn = {name: figure for name, _, figure in figures(results, folders, ReportOptions().resolve(results))}
    labels = {name: (figure.axes[0].get_xlabel(), figure.axes[0].get_ylabel()) for name, figure in drawn.items()}
    assert labels == {
        "convergence_epoch_tiny.png": ("epoch", "valid ndcg@20"),
        "convergence_time_tiny.png": ("training time (wall-clock seconds)", "valid ndcg@20"),
        "strata_tiny.png": ("item popularity stratum", "NDCG@20 (stratum share)"),
        "swept_n_negatives_tiny.png": ("n_negatives", "NDCG@20"),
    }  # weight_decay is the grid: not swept
    assert len(drawn["convergence_epoch_tiny.png"].axes[0].get_lines()) == 8  # one line per run
    ticks = drawn["convergence_epoch_tiny.png"].axes[0].get_xticks()
    assert all(float(tick).is_integer() for tick in ticks)  # whole epochs
    lines = drawn["swept_n_negatives_tiny.png"].axes[0].get_legend().get_texts()
    # one line per family (bpr: one point); the label lists every other key that differs, the loss first (a loss's
    # default bundle, e.g. softmax's cosine scoring, differs too)
    assert [text.get_text().split(",")[0] for text in lines] == ["loss=bpr", "loss=softmax"]
    assert [tick.get_text() for tick in drawn["strata_tiny.png"].axes[0].get_xticklabels()] == [
        "popular",
        "neutral",
        "unpopular",
    ]


def test_sweep_writes_the_report(swept):
    for name in (
        "report.md",
        "table.md",
        "table.csv",
        "table.tex",
        "significance.md",
        "significance.csv",
        "plots/convergence_epoch_tiny.png",
        "plots/convergence_time_tiny.png",
        "plots/strata_tiny.png",
        "plots/swept_n_negatives_tiny.png",
    ):
        assert (swept / name).stat().st_size > 0, name
    assert (swept / "plots/strata_tiny.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    table = pd.read_csv(swept / "table.csv")
    best = table.loc[table["NDCG@20 mean"].idxmax(), "method"]
    row = next(line for line in (swept / "table.md").read_text().splitlines() if f"| {best} |" in line)
    assert row.split(" | ")[2].startswith("**")
    assert table["NDCG@20 best"].sum() == 1


def test_the_report_holds_every_runs_curve_as_its_epochs_file_has_it(swept):
    results = pd.read_parquet(swept / "results.parquet")
    curves = pd.read_csv(swept / "convergence.csv")
    test_runs = results[results.split == "test"]
    assert set(curves.run_id) == set(test_runs.run_id) and len(set(curves.run_id)) == 8
    for run_id, curve in curves.groupby("run_id"):
        lines = [json.loads(line) for line in (swept / "runs" / run_id / "epochs.jsonl").read_text().splitlines()]
        assert curve.epoch.tolist() == [line["epoch"] for line in lines]
        assert np.allclose(curve.valid_value, [line["valid_ndcg@20"] for line in lines], rtol=1e-12, atol=0)
        assert np.allclose(curve.cumulative_seconds, np.cumsum([line["seconds"] for line in lines]))
        assert set(curve.valid_metric) == {"ndcg@20"}
        assert curve.method.iloc[0] == test_runs[test_runs.run_id == run_id].method.iloc[0]
    assert "`convergence.csv`" in (swept / "report.md").read_text()


def test_every_grid_point_tried_is_in_the_report_with_the_reported_one_marked(swept):
    """16 runs (4 methods x 2 weight decays x 2 seeds): grid.csv holds each run's validation NDCG@20 as its own
    results.parquet has it, and each method's reported point is its best mean over seeds, the one results.parquet
    (the table's rows) holds."""
    grid = pd.read_csv(swept / "grid.csv")
    assert len(grid) == 16 and set(grid.metric) == {"ndcg@20"}
    for row in grid.itertuples():
        own = pd.read_parquet(swept / "runs" / row.run_id / "results.parquet")
        value = own[(own.split == "valid") & (own.metric == "ndcg") & (own.k == 20) & (own.stratum == "all")].value
        assert value.item() == pytest.approx(row.value, rel=1e-12)
    results = pd.read_parquet(swept / "results.parquet")
    for method, runs in grid.groupby("method"):
        means = runs.groupby("grid_point").value.mean()
        assert set(runs[runs.reported].grid_point) == {means.idxmax()}
        assert set(results[results.method == method].run_id) == set(runs[runs.reported].run_id)
    text = (swept / "report.md").read_text()
    assert "## Grid points" in text and "**tiny, ssm-n4**: 2 of 2 grid points" in text
    assert "| weight_decay=0.0 | 2 |" in text or "| weight_decay=0.0001 | 2 |" in text


def test_significance_rows_are_scipy_tests_of_the_per_user_means(swept):
    results = pd.read_parquet(swept / "results.parquet")
    tested = pd.read_csv(swept / "significance.csv")
    assert set(tested.method) == {"ssm-n4", "ssm-n16", "ssm-n64"} and set(tested.baseline) == {"bpr"}

    def user_means(method):
        runs = results[(results.method == method) & (results.split == "test")].run_id.unique()
        assert len(runs) == 2
        frames = [pd.read_parquet(swept / "runs" / run / "per_user_test.parquet") for run in runs]
        rows = pd.concat(frames).query("metric == 'ndcg' and k == 20 and stratum == 'all'")
        return rows.groupby("user").value.mean()

    base = user_means("bpr")
    family = tested[tested.column == "NDCG@20"].set_index("method")
    p_values = {}
    for method in family.index:
        x = user_means(method)
        t = scipy_stats.ttest_rel(x.to_numpy(), base.to_numpy())
        assert family.at[method, "t"] == pytest.approx(t.statistic, rel=1e-9)
        assert family.at[method, "p_t"] == pytest.approx(t.pvalue, rel=1e-9)
        assert family.at[method, "users"] == len(base)
        p_values[method] = family.at[method, "p_randomisation"]
    ordered = sorted(p_values.values())
    holm = np.maximum.accumulate([min(1.0, (3 - i) * p) for i, p in enumerate(ordered)])
    assert sorted(family.p_randomisation_adjusted) == pytest.approx(list(holm))


def test_report_command_and_its_errors(swept, tmp_path, recx_cli):
    result = recx_cli(
        "report",
        swept / "results.parquet",
        "--out",
        tmp_path / "r",
        "--baseline",
        "ssm-n4",
        "--correction",
        "bonferroni",
        "--resamples",
        "500",
        "--ks",
        "5",
        "--param",
        "n_negatives",
    )
    assert result.code == 0, result.err
    assert "NDCG@5" in (tmp_path / "r" / "table.md").read_text()
    assert "Bonferroni" in (tmp_path / "r" / "report.md").read_text()
    assert (tmp_path / "r" / "plots" / "swept_n_negatives_tiny.png").is_file()
    for args, message in [
        (["--baseline", "nope"], "--baseline 'nope' is not a method"),
        (["--ks", "7"], "cut-off 7 is not in the results"),
        (["--correction", "sidak"], "--correction 'sidak'"),
        (["--param", "nope"], "--param 'nope' is not a config key"),
    ]:
        result = recx_cli("report", swept / "results.parquet", "--out", tmp_path / "bad", *args)
        assert result.code == 1 and message in result.err and "Traceback" not in result.err, (args, result.err)
    missing = recx_cli("report", tmp_path / "none.parquet", "--out", tmp_path / "bad")
    assert missing.code == 1 and "no such results file" in missing.err


def test_the_report_states_the_strata_and_shows_stratified_recall_by_default(swept):
    report = (swept / "report.md").read_text()
    assert "**popular** are the first 5% (round(0.05 n)" in report and "remaining 80%" in report
    assert "Recall@20 popular" in (swept / "table.md").read_text()


def test_every_pair_of_methods_is_tested_with_the_correction_over_all_pairs(swept, tmp_path):
    from recx import api

    api.report(swept / "results.parquet", tmp_path / "r", pairs="all", resamples=500)
    pairs = pd.read_csv(tmp_path / "r" / "significance_pairs.csv")
    overall = pairs[pairs.column == "NDCG@20"]
    assert len(overall) == 6 and len(set(zip(overall.method, overall.baseline, strict=True))) == 6  # C(4, 2)
    results = pd.read_parquet(swept / "results.parquet")

    def user_means(method):
        runs = results[(results.method == method) & (results.split == "test")].run_id.unique()
        frames = [pd.read_parquet(swept / "runs" / run / "per_user_test.parquet") for run in runs]
        return pd.concat(frames).query("metric == 'ndcg' and k == 20 and stratum == 'all'").groupby("user").value.mean()

    row = overall[(overall.method == "ssm-n64") & (overall.baseline == "ssm-n4")].iloc[0]
    t = scipy_stats.ttest_rel(user_means("ssm-n64").to_numpy(), user_means("ssm-n4").to_numpy())
    assert row.t == pytest.approx(t.statistic, rel=1e-9) and row.p_t == pytest.approx(t.pvalue, rel=1e-9)
    ordered = sorted(overall.p_randomisation)
    holm = np.maximum.accumulate([min(1.0, (6 - i) * p) for i, p in enumerate(ordered)])
    assert sorted(overall.p_randomisation_adjusted) == pytest.approx(list(holm))
    report = (tmp_path / "r" / "report.md").read_text()
    header = next(line for line in report.splitlines() if line.startswith("| | "))
    assert "## Every pair of methods" in report and sorted(header.strip("| ").split(" | ")) == [
        "bpr",
        "ssm-n16",
        "ssm-n4",
        "ssm-n64",
    ]


def test_one_seed_draws_no_error_bars():
    from recx.eval.strata import STRATA
    from recx.reports import plots

    means = pd.DataFrame([[0.1, 0.05, 0.01], [0.2, 0.1, 0.02]], index=["a", "b"], columns=list(STRATA))
    from matplotlib.container import ErrorbarContainer

    drawn = lambda stds: plots.strata(means, stds, "NDCG@20", "t").axes[0].containers  # noqa: E731
    assert not any(isinstance(container, ErrorbarContainer) for container in drawn(means * np.nan))
    assert sum(isinstance(container, ErrorbarContainer) for container in drawn(means / 10)) == 2


def test_a_report_of_one_method_says_there_is_nothing_to_compare(swept, tmp_path):
    from recx import api

    results = pd.read_parquet(swept / "results.parquet")
    one = tmp_path / "one.parquet"
    results[results.method == "bpr"].to_parquet(one, index=False)
    api.report(one, tmp_path / "r", runs=swept / "runs", resamples=200)
    report = (tmp_path / "r" / "report.md").read_text()
    assert "(no test: one method per dataset, nothing to compare)" in report
    assert "per-user results missing" not in report
