"""Per-user results: one row per evaluated user and per-user (metric, k, stratum), averaging exactly to the run's
results; catalogue-level metrics (coverage, Gini, exposure shares) and the held-out share have no per-user rows."""

import pandas as pd
import torch

from recx.config.run_config import resolve
from recx.eval.metrics.registry import catalogue_level
from recx.runs.train_run import train_run


def test_per_user_files_average_to_the_results(tiny, tmp_path):
    config = resolve(
        {"dataset": "tiny", "dim": 8, "epochs": 1, "batch_size": 256, "loss": "bpr", "n_negatives": 2, "device": "cpu"}
    )
    folder = tmp_path / "run"
    outcome = train_run(config, tiny, folder, ks=[5, 20])
    for split in ("valid", "test"):
        rows = pd.read_parquet(folder / f"per_user_{split}.parquet")
        assert list(rows.columns) == ["user", "metric", "k", "stratum", "value"]
        users = torch.nonzero(tiny.split(split).row_lengths() > 0).flatten().numpy()
        for (metric, k, stratum), group in rows.groupby(["metric", "k", "stratum"], observed=True):  # noqa: B007 (read by query's @)
            assert (group.user.to_numpy() == users).all()
            expected = outcome.results.query(
                "split == @split and metric == @metric and k == @k and stratum == @stratum"
            ).value.item()
            assert abs(group.value.mean() - expected) < 1e-12
        results = outcome.results.query("split == @split")
        per_user = results[~results.metric.map(catalogue_level) & (results.metric != "heldout_share")]
        assert set(per_user.metric) >= {"ndcg", "recall", "arp", "aplt", "epc"}
        assert len(rows) == len(users) * len(per_user)
        # a user's strata sum to the user's overall value
        ndcg = rows[(rows.metric == "ndcg") & (rows.k == 20)].pivot(index="user", columns="stratum", values="value")
        assert ((ndcg.popular + ndcg.neutral + ndcg.unpopular - ndcg["all"]).abs() < 1e-12).all()
