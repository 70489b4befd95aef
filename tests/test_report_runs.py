"""A report checks its runs: a run of the results whose folder is missing, incomplete (no COMPLETE marker) or
changed since recx wrote it is named and left out of the means, counts and tests; seeds count the runs read."""

from __future__ import annotations

import pandas as pd
import pytest
import yaml

from recx import RecxError, api
from recx.runs import store
from tests.safety_helpers import assert_user_error

EXPERIMENTS = {
    "experiments": {
        "checked": {
            "datasets": ["tiny"],
            "seeds": [0, 1],
            "ks": [10],
            "defaults": {"dim": 8, "epochs": 1, "batch_size": 256, "device": "cpu", "loss": "bpr"},
            "methods": {"uniform": {"sampler": "uniform"}, "pop": {"sampler": "popularity"}},
        }
    }
}


@pytest.fixture
def swept(tiny_root, tmp_path):
    path = tmp_path / "experiments.yaml"
    path.write_text(yaml.safe_dump(EXPERIMENTS))
    api.sweep(path, "checked", out=tmp_path / "out", data_root=tiny_root)
    return tmp_path / "out"


def runs_of(results: pd.DataFrame, method: str) -> list[str]:
    rows = results[results.method == method].drop_duplicates("run_id").sort_values("seed")
    return list(rows.run_id)


def test_a_deleted_and_an_incomplete_run_are_named_and_left_out(swept, tmp_path, recx_cli):
    """`pop` loses one run folder and the other's COMPLETE marker: 0 of 2 runs read, not in the table, both named;
    `uniform`'s second run has a changed per-user file: 1 of 2, its mean is its first run's value (no ± std), and
    its tests rest on that run."""
    results = pd.read_parquet(swept / "results.parquet")
    deleted, incomplete = runs_of(results, "pop")
    kept, damaged = runs_of(results, "uniform")
    store.clear_run(swept / "runs" / deleted)
    (swept / "runs" / deleted).rmdir()
    (swept / "runs" / incomplete / store.COMPLETE).unlink()
    per_user = swept / "runs" / damaged / "per_user_test.parquet"
    pd.read_parquet(per_user).assign(value=0.5).to_parquet(per_user)
    out = tmp_path / "report"
    result = recx_cli("report", swept / "results.parquet", "--out", out, "--baseline", "uniform")
    assert result.code == 0, result.err
    report = (out / "report.md").read_text().replace("\n", " ")
    budget = pd.read_csv(out / "budget.csv", keep_default_na=False).set_index("method")
    assert budget.loc["pop", "seeds"] == "0 of 2" and budget.loc["uniform", "seeds"] == "1 of 2"
    assert "¶" in budget.loc["pop", "mark"] and "¶" in budget.loc["uniform", "mark"]
    assert f"run {deleted} (seed 0): missing (no folder {swept / 'runs' / deleted})" in budget.loc["pop", "left out"]
    assert f"run {incomplete} (seed 1): incomplete ({swept / 'runs' / incomplete} is " in budget.loc["pop", "left out"]
    assert f"no {store.COMPLETE} marker" in budget.loc["pop", "left out"]
    assert f"run {damaged} (seed 1): damaged (" in budget.loc["uniform", "left out"]
    assert "per_user_test.parquet: changed or damaged since recx wrote it" in budget.loc["uniform", "left out"]
    assert budget.loc["pop", "epochs"] == "" and budget.loc["pop", "device"] == ""
    for run in (deleted, incomplete, damaged):
        assert f"run {run}" in report
    assert "tiny pop: 0 of 2 runs read; left out of its means, counts and tests" in report
    assert "mean ± std over 1 run (seed) per method" in report
    table = (out / "table.md").read_text()
    assert "| pop" not in table and "±" not in table
    first = results[(results.run_id == kept) & (results.split == "test") & (results.stratum == "all")]
    ndcg = float(first[(first.metric == "ndcg") & (first.k == 20)].value.iloc[0])  # the table's K
    assert f"{ndcg:.4f}" in table.split("| uniform")[1].split("\n")[0]
    assert "has runs without per_user_test.parquet" not in report  # no blame on a file of a run left out


def test_a_report_of_no_readable_run_is_one_error(swept, tmp_path, recx_cli):
    for run in pd.read_parquet(swept / "results.parquet").run_id.unique():
        (swept / "runs" / run / store.COMPLETE).unlink()
    result = recx_cli("report", swept / "results.parquet", "--out", tmp_path / "report")
    assert_user_error(result, "none of the 4 runs of the results could be read", "incomplete", "--runs FOLDER")
    assert not (tmp_path / "report").exists()
    with pytest.raises(RecxError, match="none of the 4 runs"):
        api.report(swept / "results.parquet", tmp_path / "report", runs=tmp_path / "elsewhere")


def test_a_runs_own_results_without_its_marker_is_named_incomplete(swept, tmp_path):
    results = pd.read_parquet(swept / "results.parquet")
    run = swept / "runs" / runs_of(results, "pop")[0]
    (run / store.COMPLETE).unlink()
    with pytest.raises(RecxError, match=f"run .*: incomplete \\({run} is"):
        api.report(run / "results.parquet", tmp_path / "report")
