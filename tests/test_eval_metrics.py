"""Metrics against hand-worked examples and an independent per-user implementation."""

import math

import numpy as np
import pytest
import torch

from recx.config.run_config import resolve
from recx.data.csr import CSR
from recx.eval.evaluator import evaluate
from recx.eval.metrics.registry import per_user_metrics
from recx.eval.strata import popularity_strata
from recx.training.build import build_model


def test_hand_worked_ndcg_recall_mrr():
    # ranked list: hit, miss, hit, miss; user has 3 relevant items.
    hits = torch.tensor([[True, False, True, False]])
    out = per_user_metrics(hits, torch.tensor([3]), [2, 4])
    dcg4 = 1 + 1 / math.log2(4)
    idcg3 = 1 + 1 / math.log2(3) + 1 / math.log2(4)
    assert out[("ndcg", 4, "all")].item() == pytest.approx(dcg4 / idcg3)
    assert out[("ndcg", 2, "all")].item() == pytest.approx(1 / (1 + 1 / math.log2(3)))
    assert out[("recall", 4, "all")].item() == pytest.approx(2 / 3)
    assert out[("recall", 2, "all")].item() == pytest.approx(1 / 3)
    assert out[("precision", 4, "all")].item() == pytest.approx(0.5)
    assert out[("mrr", 4, "all")].item() == 1.0
    late = per_user_metrics(torch.tensor([[False, False, True]]), torch.tensor([1]), [2, 3])
    assert late[("mrr", 2, "all")].item() == 0.0 and late[("hitrate", 2, "all")].item() == 0.0
    assert late[("mrr", 3, "all")].item() == pytest.approx(1 / 3)
    assert late[("ndcg", 3, "all")].item() == pytest.approx(1 / math.log2(4))


def test_strata_follow_the_cutoffs_and_tie_rule():
    popularity = torch.tensor([5, 9, 9, 0, 1, 1, 3, 2, 2, 7] * 4)  # n = 40 -> 2 popular, 6 neutral
    stratum = popularity_strata(popularity)
    order = sorted(range(40), key=lambda i: (-int(popularity[i]), i))
    assert [int(stratum[i]) for i in order] == [0] * 2 + [1] * 6 + [2] * 32
    assert int(stratum[1]) == 0 and int(stratum[2]) == 0  # the two 9s with the lowest ids


def reference_metrics(scores, train_sets, test_sets, ks, stratum):
    """Plain per-user Python/numpy implementation of the conventions in docs/design.md."""
    rows = {}
    for user, relevant in test_sets.items():
        s = scores[user].copy()
        s[list(train_sets.get(user, ()))] = -np.inf
        ranked = np.argsort(-s, kind="stable")
        for k in ks:
            top = ranked[:k]
            gains = [1 / math.log2(r + 2) if item in relevant else 0.0 for r, item in enumerate(top)]
            idcg = sum(1 / math.log2(r + 2) for r in range(min(k, len(relevant))))
            rows.setdefault(("ndcg", k, "all"), []).append(sum(gains) / idcg)
            rows.setdefault(("recall", k, "all"), []).append(sum(item in relevant for item in top) / len(relevant))
            for index, name in enumerate(("popular", "neutral", "unpopular")):
                g = sum(gain for gain, item in zip(gains, top, strict=True) if stratum[item] == index)
                rows.setdefault(("ndcg", k, name), []).append(g / idcg)
    return {key: float(np.mean(values)) for key, values in rows.items()}


def test_evaluator_matches_independent_implementation(tiny):
    config = resolve({"dataset": "tiny", "dim": 8, "device": "cpu"})
    model = build_model(config, tiny, torch.device("cpu"))
    result = evaluate(model, tiny, "valid", [5, 10], batch_size=37)
    scores = (model.query(torch.arange(tiny.n_users)) @ model.item_table().T).double().numpy()
    train = {
        u: set(tiny.train.indices[tiny.train.indptr[u] : tiny.train.indptr[u + 1]].tolist())
        for u in range(tiny.n_users)
    }
    valid = {
        u: set(tiny.valid.indices[tiny.valid.indptr[u] : tiny.valid.indptr[u + 1]].tolist())
        for u in range(tiny.n_users)
    }
    valid = {u: items for u, items in valid.items() if items}
    reference = reference_metrics(scores, train, valid, [5, 10], popularity_strata(tiny.item_popularity).numpy())
    for key, value in reference.items():
        assert result.values[key] == pytest.approx(value, abs=1e-9), key


def test_strata_sum_to_overall_and_batch_size_does_not_matter(tiny):
    config = resolve({"dataset": "tiny", "dim": 8, "device": "cpu"})
    model = build_model(config, tiny, torch.device("cpu"))
    small = evaluate(model, tiny, "test", [10, 20], batch_size=7).values
    large = evaluate(model, tiny, "test", [10, 20], batch_size=1000).values
    assert small == large
    for metric in ("ndcg", "recall"):
        for k in (10, 20):
            parts = sum(small[(metric, k, s)] for s in ("popular", "neutral", "unpopular"))
            assert parts == pytest.approx(small[(metric, k, "all")], abs=1e-12)


def test_the_metrics_group_of_users_does_not_matter(tiny, monkeypatch):
    """The top-K lists are scored in groups of at least METRIC_ROWS users (fewer launches on a GPU): groups of one
    batch, of several, or of every user give the same per-user values, in user order."""
    from recx.eval import evaluator

    config = resolve({"dataset": "tiny", "dim": 8, "device": "cpu"})
    model = build_model(config, tiny, torch.device("cpu"))
    results = []
    for rows in (1, 20, 1 << 16):
        monkeypatch.setattr(evaluator, "METRIC_ROWS", rows)
        results.append(evaluate(model, tiny, "test", [10, 20], batch_size=7, keep_per_user=True))
    for other in results[1:]:
        assert other.values == results[0].values
        assert all(torch.equal(other.per_user[key], results[0].per_user[key]) for key in results[0].per_user)


def test_test_ranking_excludes_train_and_valid_items(tiny):
    config = resolve({"dataset": "tiny", "dim": 8, "device": "cpu"})
    model = build_model(config, tiny, torch.device("cpu"))
    result = evaluate(model, tiny, "test", [20], keep_topk=True)
    users = result.users[:, None].expand_as(result.topk)
    assert not tiny.train.contains(users, result.topk).any()
    assert not tiny.valid.contains(users, result.topk).any()


def test_csr_contains_matches_python_sets():
    rng = np.random.default_rng(0)
    rows, cols = rng.integers(0, 50, 2000), rng.integers(0, 80, 2000)
    csr = CSR.from_pairs(torch.from_numpy(rows), torch.from_numpy(cols), 50, 80)
    pairs = set(zip(rows.tolist(), cols.tolist(), strict=True))
    qr, qc = rng.integers(0, 50, 5000), rng.integers(0, 80, 5000)
    got = csr.contains(torch.from_numpy(qr), torch.from_numpy(qc)).numpy()
    assert got.tolist() == [(r, c) in pairs for r, c in zip(qr.tolist(), qc.tolist(), strict=True)]
    assert csr.nnz == len(pairs)
