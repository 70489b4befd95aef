"""Golden results pinned as literals (iALS-reference style): a change that moves them is a change in what recx
computes, and must be explained.

- MostPop on the shared LightGCN Gowalla split: the literals come from tests/golden/mostpop_gowalla_reference.py, a
  plain per-user Python loop over the raw text files that shares no code with recx (ranking by training count, ties
  by ascending item id; train and valid items skipped; NDCG/Recall@20 overall and per popularity stratum).
- One seeded MF + BPR run on the built-in synthetic set, pinned to its metrics within 1e-6 (same seed on CPU, one
  thread: same numbers). Computed by recx itself at commit time: it guards reproducibility, not correctness.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
import torch

from recx.config.run_config import resolve
from recx.core.progress import make_progress
from recx.data.dataset import load_dataset
from recx.data.prepare import PrepareOptions, prepare
from recx.eval.evaluator import evaluate
from recx.runs.train_run import train_run
from recx.training.build import build_model

SHARED = Path(__file__).resolve().parents[1] / ".." / "shared" / "data"

MOSTPOP_GOWALLA_TEST = {  # (metric, stratum) at K = 20, from tests/golden/mostpop_gowalla_reference.py
    ("ndcg", "all"): 0.03170595746680429,
    ("ndcg", "popular"): 0.03170595746680429,
    ("ndcg", "neutral"): 0.0,
    ("ndcg", "unpopular"): 0.0,
    ("recall", "all"): 0.041629223170303556,
    ("recall", "popular"): 0.041629223170303556,
    ("recall", "neutral"): 0.0,
    ("recall", "unpopular"): 0.0,
}


@pytest.mark.slow
@pytest.mark.skipif(not (SHARED / "gowalla" / "train.txt").exists(), reason="shared Gowalla data absent")
def test_mostpop_on_gowalla_matches_the_independent_reference(tmp_path):
    prepare("gowalla", PrepareOptions(format="lightgcn", source=SHARED / "gowalla"), tmp_path)
    dataset = load_dataset(tmp_path, "gowalla")
    original = pd.read_parquet(tmp_path / "gowalla" / "items.parquet")["id"].astype(int).tolist()
    assert original == list(range(dataset.n_items))  # recx ids are the file's ids: same tie-break order
    model = build_model(resolve({"model": "popularity"}), dataset, torch.device("cpu"))
    values = evaluate(model, dataset, "test", [20], batch_size=512).values
    for (metric, stratum), expected in MOSTPOP_GOWALLA_TEST.items():
        assert values[(metric, 20, stratum)] == pytest.approx(expected, abs=1e-12), (metric, stratum)


MF_BPR_SYNTHETIC_TEST = {  # (metric, k, stratum): recx after row-sparse training landed (lazy Adam, Xavier init),
    # seed 0, CPU, 1 thread; a change here means the same seeded run now gives other numbers
    ("ndcg", 20, "all"): 0.18833973929799966,
    ("ndcg", 20, "popular"): 0.14225191838159051,
    ("ndcg", 20, "neutral"): 0.04316770764373745,
    ("ndcg", 20, "unpopular"): 0.0029201132726716945,
    ("recall", 20, "all"): 0.2862166666666667,
    ("recall", 20, "popular"): 0.19369999999999998,
    ("recall", 20, "neutral"): 0.08482777777777778,
    ("recall", 20, "unpopular"): 0.0076888888888888875,
}


def test_seeded_mf_bpr_run_on_synthetic_data_is_pinned(tmp_path):
    root = tmp_path / "data"
    prepare("synthetic", PrepareOptions(format="synthetic", ratios="80/10/10", seed=0), root)
    config = resolve(
        {
            "dataset": "synthetic",
            "model": "mf",
            "loss": "bpr",
            "sampler": "uniform",
            "n_negatives": 1,
            "dim": 16,
            "epochs": 3,
            "batch_size": 512,
            "lr": 0.01,
            "seed": 0,
            "device": "cpu",
            "eval_batch_size": 256,
        }
    )
    with make_progress(quiet=True) as progress:
        outcome = train_run(config, load_dataset(root, "synthetic"), tmp_path / "run", progress, ks=[20])
    test = outcome.results.query("split == 'test'")
    values = {(r.metric, int(r.k), r.stratum): float(r.value) for r in test.itertuples()}
    for key, expected in MF_BPR_SYNTHETIC_TEST.items():
        assert values[key] == pytest.approx(expected, abs=1e-6), key
