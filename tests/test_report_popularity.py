"""The report's popularity and coverage section (issue 45, section 1): per method the accuracy beside ARP, APLT, EPC
and the catalogue-level metrics (built-in and a plugin's) with bootstrap intervals over users, the held-out share
beside the exposure shares, paired bootstrap tests equal to an independent numpy computation from the runs' lists,
and the trade-off plot."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import yaml

from recx import api
from recx.eval.bootstrap import interval, paired_p, resample_weights
from tests.conftest import EXAMPLE_PLUGIN

EXPERIMENTS = {
    "experiments": {
        "beyond": {
            "datasets": ["tiny"],
            "seeds": [0, 1],
            "ks": [10, 20],
            "table": {"ks": [20]},
            "defaults": {"dim": 8, "epochs": 2, "batch_size": 256, "device": "cpu", "loss": "bpr"},
            "methods": {
                "mostpop": {"model": "popularity"},
                "bpr": {"sampler": "uniform"},
                "bpr-pop": {"sampler": "popularity"},
            },
        }
    }
}


@pytest.fixture
def swept(tiny_root, tmp_path, isolated_plugins):
    path = tmp_path / "experiments.yaml"
    path.write_text(yaml.safe_dump(EXPERIMENTS))
    api.use_plugins(str(EXAMPLE_PLUGIN))
    api.sweep(path, "beyond", out=tmp_path / "out", data_root=tiny_root)
    return tmp_path / "out"


def lists_of(folder, split="test"):
    frame = pd.read_parquet(folder / f"topk_{split}.parquet")
    users = np.unique(frame.user)
    items = np.full((users.size, 20), -1)
    listed = frame[frame["rank"] > 0]
    items[np.searchsorted(users, listed.user), listed["rank"] - 1] = listed.item
    return users, items


def np_coverage(items, weights, n_items, k):
    """Coverage of the lists each drawn user contributes (weights: how often each was drawn)."""
    return np.unique(items[weights > 0, :k][items[weights > 0, :k] >= 0]).size / n_items


def test_the_section_the_plugin_metric_and_the_paired_bootstrap(swept):
    report = (swept / "report.md").read_text()
    assert "## Popularity and coverage" in report and "plots/popularity_tiny.png" in report
    assert (swept / "plots" / "popularity_tiny.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    table = (swept / "popularity.md").read_text()
    header = next(line for line in table.splitlines() if line.startswith("| method |"))
    for column in ("NDCG@20", "APLT@20", "ARP@20", "EPC@20", "Coverage@20", "Entropy@20", "Gini@20"):
        assert f" {column} |" in header, column
    assert " TailCoverage@20 |" in header  # the plugin's catalogue-level metric, placed by its level
    assert " Exposure@20 popular | Exposure@20 neutral | Exposure@20 unpopular |" in header
    assert "| *held-out interactions* |" in table
    cells = pd.read_csv(swept / "popularity.csv")
    results = pd.read_parquet(swept / "results.parquet")
    test = results[results.split == "test"]
    for (method, column), cell in cells.set_index(["method", "column"]).iterrows():
        values = test[(test.method == method) & (test.metric == cell.metric) & (test.k == 20)]
        assert cell["mean"] == pytest.approx(values[values.stratum == cell.stratum].value.mean(), abs=1e-12)
        if cell.metric in ("coverage", "gini", "entropy", "exposure", "tail_coverage"):
            assert cell.ci_low - 1e-12 <= cell["mean"] <= cell.ci_high + 1e-12, (method, column)
        else:
            assert np.isnan(cell.ci_low)

    # The coverage interval and the paired bootstrap against the baseline, recomputed with numpy from the lists.
    n_items = 100
    runs = {m: test[test.method == m].run_id.unique() for m in ("mostpop", "bpr", "bpr-pop")}
    lists = {m: [lists_of(swept / "runs" / run) for run in ids] for m, ids in runs.items()}
    users = lists["bpr"][0][0]
    assert all(np.array_equal(u, users) for found in lists.values() for u, _ in found)
    weights = resample_weights(users.size, 0, 1000, seed=0)
    replicates = {
        m: np.mean([[np_coverage(items, w, n_items, 20) for w in weights] for _, items in found], axis=0)
        for m, found in lists.items()
    }
    estimate = {
        m: np.mean([np_coverage(items, np.ones(users.size), n_items, 20) for _, items in f]) for m, f in lists.items()
    }
    cell = cells.set_index(["method", "column"]).loc[("bpr", "Coverage@20")]
    assert cell["mean"] == pytest.approx(estimate["bpr"], abs=1e-12)
    assert (cell.ci_low, cell.ci_high) == pytest.approx(interval(estimate["bpr"], replicates["bpr"]), abs=1e-12)
    tested = pd.read_csv(swept / "significance.csv")
    assert tested[tested.column == "NDCG@20"].test.eq("sign-flip randomisation").all()
    row = tested[(tested.column == "Coverage@20") & (tested.method == "bpr")]
    assert len(row) == 0  # the main table's columns are ndcg and recall: the section's tests are in report.md
    rows = [line for line in report.splitlines() if "| Coverage@20 | mostpop | bpr |" in line]  # bpr: the baseline
    assert len(rows) == 1
    difference = estimate["mostpop"] - estimate["bpr"]
    p = paired_p(difference, replicates["mostpop"] - replicates["bpr"])
    assert f"| {difference:+.4f} |" in rows[0] and f"| {p:.2g} |" in rows[0]
    assert difference < -0.5 and p < 0.01  # MostPop recommends the same items to everyone

    # A catalogue-level metric asked for the main table is tested there by the paired bootstrap too.
    api.report(swept / "results.parquet", swept.parent / "r", metrics=("ndcg", "coverage"), stratified=())
    tested = pd.read_csv(swept.parent / "r" / "significance.csv")
    coverage = tested[tested.column == "Coverage@20"]
    assert set(coverage.method) == {"mostpop", "bpr-pop"} and coverage.test.eq("paired bootstrap").all()
    assert coverage.t.isna().all() and (coverage.difference_low <= coverage.difference_high + 1e-12).all()
    assert "Coverage@20" in (swept.parent / "r" / "table.md").read_text()


def test_valid_metric_must_be_a_per_user_accuracy_metric():
    from recx.core.errors import RecxError

    for metric, kind in (("coverage@20", "catalogue-level"), ("arp@20", "per-user")):
        with pytest.raises(RecxError, match=f"valid_metric '{metric}' .* is a {kind} metric that does not reward hits"):
            api.run_config({"valid_metric": metric})
    assert api.run_config({"valid_metric": "recall@10"}).valid_metric == "recall@10"


def test_a_method_without_the_metrics_is_named_not_shown_short(swept, tmp_path):
    """Results of runs evaluated before the popularity metrics existed: the section names the method that has none
    of them, rather than a table that silently lacks its values."""
    results = pd.read_parquet(swept / "results.parquet")
    accuracy = {"ndcg", "recall", "precision", "mrr", "hit", "hitrate"}
    older = results[(results.method != "bpr") | results.metric.isin(accuracy)]
    older.to_parquet(tmp_path / "older.parquet")
    api.report([tmp_path / "older.parquet"], out=tmp_path / "report", runs=swept / "runs")
    report = (tmp_path / "report" / "report.md").read_text()
    assert "no popularity or coverage metric in the results of tiny bpr:" in report
    assert "results of tiny bpr-pop" not in report and "tiny mostpop" not in report.split("no popularity")[1]
