"""AUC and OPAUC(β) against a brute-force numpy reference on random scores with ties and excluded items."""

import math

import numpy as np
import pytest
import torch

from recx.eval.metrics.auc import auc_names, per_user_auc


def brute_force(scores: np.ndarray, relevant: np.ndarray, beta: float) -> tuple[list, list, list]:
    aucs, opaucs, norms = [], [], []
    for row, rel in zip(scores, relevant, strict=True):
        positives = [row[i] for i in range(len(row)) if rel[i] and np.isfinite(row[i])]
        negatives = sorted((row[j] for j in range(len(row)) if not rel[j] and np.isfinite(row[j])), reverse=True)
        m = max(1, math.ceil(beta * len(negatives) - 1e-9))

        def wrong(r, pool):
            return sum(1.0 if s > r else 0.5 if s == r else 0.0 for s in pool)

        total = sum(wrong(r, negatives) for r in positives)
        top = sum(wrong(r, negatives[:m]) for r in positives)
        aucs.append(1 - total / (len(positives) * len(negatives)))
        opaucs.append(1 - top / (len(positives) * len(negatives)))
        norms.append(1 - top / (len(positives) * m))
    return aucs, opaucs, norms


@pytest.mark.parametrize("beta", [0.05, 0.1, 0.37, 1.0])
def test_auc_and_opauc_match_brute_force(beta):
    rng = np.random.default_rng(0)
    n_users, n_items = 12, 40
    scores = np.round(rng.standard_normal((n_users, n_items)) * 2) / 2  # coarse values: many ties
    relevant = rng.random((n_users, n_items)) < 0.15
    relevant[np.arange(n_users), rng.integers(0, n_items, n_users)] = True
    excluded = (rng.random((n_users, n_items)) < 0.2) & ~relevant
    scores[excluded] = -np.inf
    got = per_user_auc(torch.from_numpy(scores).float(), torch.from_numpy(relevant), beta)
    aucs, opaucs, norms = brute_force(scores.astype(np.float32), relevant, beta)
    opauc, opauc_norm = auc_names(beta)
    assert np.allclose(got[("auc", 0, "all")].numpy(), aucs, atol=1e-12)
    assert np.allclose(got[(opauc, 0, "all")].numpy(), opaucs, atol=1e-12)
    assert np.allclose(got[(opauc_norm, 0, "all")].numpy(), norms, atol=1e-12)
    if beta == 1.0:
        assert np.allclose(opaucs, aucs)


def test_perfect_and_reversed_rankings():
    scores = torch.tensor([[3.0, 2.0, 1.0, 0.0], [0.0, 1.0, 2.0, 3.0]])
    relevant = torch.tensor([[True, False, False, False], [True, False, False, False]])
    out = per_user_auc(scores, relevant, 0.5)
    assert out[("auc", 0, "all")].tolist() == [1.0, 0.0]
    assert out[("opauc_norm(0.5)", 0, "all")].tolist() == [1.0, 0.0]
    assert out[("opauc(0.5)", 0, "all")].tolist() == [1.0, 1 - 2 / 3]


def test_evaluator_auc_matches_brute_force_and_ignores_batch_size(tiny):
    from recx.config.run_config import resolve
    from recx.eval.evaluator import evaluate
    from recx.training.build import build_model

    model = build_model(resolve({"model": "mf", "dim": 8}), tiny, torch.device("cpu"))
    small = evaluate(model, tiny, "test", [10], batch_size=7, auc_beta=0.2).values
    large = evaluate(model, tiny, "test", [10], batch_size=1000, auc_beta=0.2).values
    assert evaluate(model, tiny, "test", [10]).values.keys() == {
        k for k in small if k[0] not in ("auc", "opauc(0.2)", "opauc_norm(0.2)")
    }
    users = torch.nonzero(tiny.test.row_lengths() > 0).flatten()
    scores = (model.query(users) @ model.item_table().T).numpy().astype(np.float64)
    seen = (tiny.train.dense_rows(users) | tiny.valid.dense_rows(users)).numpy()
    scores[seen] = -np.inf
    aucs, opaucs, _ = brute_force(scores.astype(np.float32), tiny.test.dense_rows(users).numpy(), 0.2)
    for key, expected in ((("auc", 0, "all"), np.mean(aucs)), (("opauc(0.2)", 0, "all"), np.mean(opaucs))):
        assert small[key] == pytest.approx(expected, abs=1e-9) and large[key] == pytest.approx(expected, abs=1e-9)
