"""Embedding diagnostics: norm/popularity Spearman, dot vs cosine NDCG, diagnostics.json, `recx eval --auc
--diagnostics`."""

import json

import pandas as pd
import pytest
import torch

from recx.config.run_config import resolve
from recx.eval.diagnostics import diagnostics
from recx.eval.evaluator import evaluate
from recx.training.build import build_model


def test_prism_norms_rank_exactly_like_popularity(tiny):
    model = build_model(
        resolve({"loss": "bpr", "model": "mf", "dim": 8, "model_args": {"init": "prism"}}), tiny, torch.device("cpu")
    )
    found = diagnostics(model, tiny, ["test"], [10])
    assert found["item_norm_popularity_spearman"] > 0.99  # 1 up to float32 ties among equal degrees
    norms = found["item_norm_by_stratum"]
    assert norms["popular"] > norms["neutral"] > norms["unpopular"]
    dot = found["ndcg"]["test"]["dot"]["10"]
    assert dot["all"] == pytest.approx(evaluate(model, tiny, "test", [10]).values[("ndcg", 10, "all")])
    assert sum(dot[s] for s in ("popular", "neutral", "unpopular")) == pytest.approx(dot["all"])


def test_cosine_view_ignores_magnitudes(tiny):
    model = build_model(resolve({"loss": "bpr", "model": "mf", "dim": 8}), tiny, torch.device("cpu"))
    before = diagnostics(model, tiny, ["test"], [10])["ndcg"]["test"]["cosine"]["10"]
    with torch.no_grad():
        model.item_embedding.mul_(torch.rand(tiny.n_items, 1) * 5 + 0.1)
    after = diagnostics(model, tiny, ["test"], [10])["ndcg"]["test"]
    assert after["cosine"]["10"] == pytest.approx(before)
    assert after["dot"]["10"] != pytest.approx(before)


def test_run_writes_diagnostics_and_eval_reports_auc(tiny_root, tmp_path, recx_cli, train_tiny):
    run = tmp_path / "run"
    result = train_tiny(
        run,
        "--dim",
        "8",
        "--epochs",
        "1",
        "--n-negatives",
        "10",
        "--quiet",
        "--device",
        "cpu",
        "--diagnostics",
    )
    assert result.code == 0, result.err
    written = json.loads((run / "diagnostics.json").read_text())
    assert set(written["ndcg"]) == {"valid", "test"} and -1 <= written["item_norm_popularity_spearman"] <= 1
    result = recx_cli("eval", run, "--ks", "10", "--auc", "--opauc-beta", "0.2", "--diagnostics")
    assert result.code == 0, result.err
    assert "opauc(0.2)" in result.out and "item_norm_popularity_spearman" in result.out
    reported = pd.read_parquet(run / "eval_test.parquet")
    assert {"auc", "opauc(0.2)", "opauc_norm(0.2)"} <= set(reported.metric)
    assert recx_cli("eval", run, "--auc", "--opauc-beta", "1.5").code == 1
