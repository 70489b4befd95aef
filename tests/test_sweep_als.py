"""A sweep mixing ALS and SGD methods: MRR in the table, per-epoch convergence curves with cumulative seconds."""

import json

import pandas as pd
import yaml

from recx.reports.tables import column_name

EXPERIMENT = {
    "datasets": {
        "tiny": {
            "format": "synthetic",
            "ratios": "80/10/10",
            "synthetic": {"n_users": 120, "n_items": 60, "mean_length": 10},
        }
    },
    "experiments": {
        "mixed": {
            "datasets": ["tiny"],
            "seeds": [0],
            "ks": [10],
            "table": {"metrics": ["mrr", "ndcg"], "ks": [10], "stratified": []},
            "defaults": {
                "dim": 8,
                "epochs": 3,
                "patience": 10,
                "batch_size": 256,
                "device": "cpu",
                "valid_metric": "ndcg@10",
            },
            "methods": {
                "bpr": {"loss": "bpr", "n_negatives": 2},
                "wrmf": {"model": "wrmf"},
                "rgx": {"model": "rgx", "model_args": {"solver": "cholesky"}},
            },
        }
    },
}


def test_mrr_column_name():
    assert column_name("mrr", 10, "all") == "MRR@10" and column_name("ndcg", 10, "all") == "NDCG@10"


def test_sweep_with_als_methods_writes_table_and_convergence(tmp_path, recx_cli):
    path = tmp_path / "experiments.yaml"
    path.write_text(yaml.safe_dump(EXPERIMENT))
    out = tmp_path / "out"
    result = recx_cli("sweep", path, "--experiment", "mixed", "--out", out, "--data-root", tmp_path / "data")
    assert result.code == 0, result.err
    table = (out / "table.md").read_text()
    assert "MRR@10" in table and "NDCG@10" in table and "rgx" in table and "wrmf" in table
    curves = pd.read_parquet(out / "convergence.parquet")
    assert sorted(curves.method.unique()) == ["bpr", "rgx", "wrmf"]
    for _, run in curves.groupby("run_id"):
        assert list(run.epoch) == [1, 2, 3]
        assert (run.cumulative_seconds.diff().dropna() > 0).all()
        assert abs(run.cumulative_seconds.iloc[-1] - run.seconds.sum()) < 1e-9
        assert run.valid_value.notna().all() and (run.valid_metric == "ndcg@10").all()
    wrmf_run = curves[curves.method == "wrmf"].run_id.iloc[0]
    logged = [json.loads(line) for line in (out / "runs" / wrmf_run / "epochs.jsonl").read_text().splitlines()]
    assert [r["valid_ndcg@10"] for r in logged] == list(curves[curves.run_id == wrmf_run].valid_value)
