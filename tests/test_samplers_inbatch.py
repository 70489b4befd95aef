"""In-batch samplers (SSL, SSL-Pop), BIR's resampling law and log_q, and XIR's proposal and cache rule."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from recx.data.csr import CSR
from recx.data.dataset import Dataset
from recx.samplers.base import Batch
from recx.samplers.xir import cache_of
from tests.sampler_helpers import assert_counts_follow, item_counts, make_sampler, random_batch, random_dataset


def _log_p64(dataset) -> np.ndarray:
    counts = dataset.item_popularity.double().numpy()
    with np.errstate(divide="ignore"):
        return np.log(counts / counts.sum())


def _bir_weights64(batch: Batch, log_p: np.ndarray, temperature: float) -> np.ndarray:
    """[B, B] w(j | u) ∝ exp(s(u, j)/τ - log p(j)) over the batch's positions, 0 at the query's own positive."""
    items = batch.positives.numpy()
    logits = batch.query.double().numpy() @ batch.item_table.double().numpy()[items].T / temperature - log_p[items]
    logits[items[None, :] == items[:, None]] = -np.inf
    weights = np.exp(logits - logits.max(1, keepdims=True))
    return weights / weights.sum(1, keepdims=True)


def test_in_batch_candidates_are_the_batch_positives():
    dataset = random_dataset()
    batch = random_batch(dataset)
    negatives = make_sampler("in_batch", dataset).sample(batch)
    assert negatives.shared and torch.equal(negatives.items[0], batch.positives)
    assert (negatives.log_q == 0).all() and (negatives.positive_log_q == 0).all()


def test_in_batch_pop_log_q_is_log_popularity():
    dataset = random_dataset()
    batch = random_batch(dataset)
    negatives = make_sampler("in_batch_pop", dataset).sample(batch)
    expected = torch.from_numpy(_log_p64(dataset)[batch.positives.numpy()]).float()
    torch.testing.assert_close(negatives.log_q[0], expected)
    torch.testing.assert_close(negatives.positive_log_q, expected)


def _batch_with_duplicates(dataset, size: int = 12) -> Batch:
    batch = random_batch(dataset, batch_size=size, scale=1.5)
    positives = batch.positives.clone()
    positives[1] = positives[0]
    positives[5] = positives[3]
    return Batch(batch.users, positives, batch.query, batch.item_table)


@pytest.mark.parametrize("temperature", [1.0, 0.5])
def test_bir_resamples_from_exp_score_minus_log_popularity(temperature):
    dataset = random_dataset(n_items=30)
    batch = _batch_with_duplicates(dataset)
    m = 20000
    negatives = make_sampler("bir", dataset, n_resampled=m, temperature=temperature).sample(batch)
    assert negatives.shared and torch.equal(negatives.items[0], batch.positives)
    weights = _bir_weights64(batch, _log_p64(dataset), temperature)
    items = batch.positives.numpy()
    for row in range(len(items)):
        assert_counts_follow(item_counts(negatives, row, dataset.n_items, m),
                             np.bincount(items, weights=weights[row], minlength=dataset.n_items))
    counts = (negatives.weights.double() * m).round().numpy()
    assert (counts.sum(1) == m).all()
    drawn = counts > 0
    expected_log_q = np.log(m * weights[drawn] / counts[drawn])
    np.testing.assert_allclose(negatives.log_q.double().numpy()[drawn], expected_log_q, rtol=1e-5, atol=1e-5)
    assert np.isposinf(negatives.log_q.numpy()[~drawn]).all()
    assert (negatives.positive_log_q == 0).all()


def test_bir_log_q_gives_the_importance_weighted_denominator():
    """Σ_k exp(s(u, k)/τ - log_q[u, k]) = Σ_l e^{s(u, o_l)/τ} / (m w(o_l | u)) over the m draws estimates
    Σ_{j ∈ B, j ≠ i} e^{s(u, j)/τ}: the denominator of Theorem 3.2's estimator."""
    dataset = random_dataset(n_items=30)
    batch = _batch_with_duplicates(dataset)
    negatives = make_sampler("bir", dataset, n_resampled=50000, temperature=0.5).sample(batch)
    all_scores = batch.query.double() @ batch.item_table.double()[batch.positives].T / 0.5
    estimate = torch.exp(all_scores - negatives.log_q.double()).sum(1)
    others = batch.positives[None, :] != batch.positives[:, None]
    torch.testing.assert_close(estimate, (all_scores.exp() * others).sum(1), rtol=0.05, atol=0)


def test_bir_resamples_the_softmax_when_the_batch_holds_items_in_proportion_to_popularity():
    """Theorem 3.1: P(j ∈ B) · w(j | u) ∝ p(j) · exp(s(u, j) - log p(j)) = exp(s(u, j)): with item j filling a share
    p(j) of the batch's positions, the resampled items follow the softmax over all items (but the query's positive)."""
    n_items = 25
    counts = (1 + 150 * torch.arange(1.0, n_items + 1) ** -1.2).round().long()  # item j: users 0 .. c_j - 1
    users = torch.cat([torch.arange(int(c)) for c in counts])
    items = torch.repeat_interleave(torch.arange(n_items), counts)
    train = CSR.from_pairs(users, items, 200, n_items)
    dataset = Dataset("skewed", 200, n_items, train, None, train, {}, "hash", Path("."))
    generator = torch.Generator().manual_seed(5)
    positives = torch.repeat_interleave(torch.arange(n_items), 4 * counts)
    item_table = torch.randn(n_items, 4, generator=generator)
    query = torch.randn(1, 4, generator=generator).expand(positives.numel(), -1)
    batch = Batch(torch.zeros_like(positives), positives, query, item_table)
    negatives = make_sampler("bir", dataset, n_resampled=1000).sample(batch)
    drawn = sum(item_counts(negatives, row, n_items, 1000) for row in range(50))  # rows whose positive is item 0
    softmax = torch.softmax(item_table.double() @ query[0].double(), 0)
    softmax[0] = 0.0
    assert_counts_follow(drawn, softmax.numpy())


def test_xir_cache_rule():
    """h ← decay · h + counts of the items drawn from the batch; the cache is the top `cache_size` items by h."""
    dataset = random_dataset(n_items=40)
    batch = random_batch(dataset, batch_size=16)
    sampler = make_sampler("xir", dataset, n_resampled=10, cache_size=5, cache_weight=0.0, cache_decay=0.5)
    assert sampler.cache.numel() == 0

    def drawn(negatives) -> torch.Tensor:
        return torch.from_numpy(sum(item_counts(negatives, row, 40, 10) for row in range(16)))

    hits = drawn(sampler.sample(batch))
    torch.testing.assert_close(sampler.hits, hits)
    hits = 0.5 * hits + drawn(sampler.sample(batch))
    torch.testing.assert_close(sampler.hits, hits)
    assert sampler.cache.numel() == min(5, int((hits > 0).sum()))
    assert hits[sampler.cache].min() >= hits[~torch.isin(torch.arange(40), sampler.cache)].max()
    assert (hits[sampler.cache] > 0).all()


def test_cache_of_keeps_only_counted_items():
    assert torch.equal(cache_of(torch.tensor([0.0, 3.0, 0.0, 1.0]), 3).sort().values, torch.tensor([1, 3]))


def test_xir_draws_follow_the_mixed_proposal_and_cache_draws_do_not_count():
    dataset = random_dataset(n_items=40)
    batch = random_batch(dataset, batch_size=8, scale=1.5)
    sampler = make_sampler("xir", dataset, n_resampled=20000, cache_size=6, cache_weight=0.3, cache_decay=1.0,
                           temperature=0.7)
    outside = torch.tensor([i for i in range(40) if i not in set(batch.positives.tolist())][:6])
    sampler.hits[outside] = 100.0
    sampler.cache = cache_of(sampler.hits, 6)
    q = sampler.proposal(batch)
    torch.testing.assert_close(q.sum(1), torch.ones(8))
    torch.testing.assert_close(q[:, 8:].sum(1), torch.full((8,), 0.3))
    logits = batch.query.double() @ batch.item_table.double()[sampler.cache].T / 0.7
    torch.testing.assert_close(q[:, 8:].double(), 0.3 * torch.softmax(logits, 1), rtol=1e-4, atol=1e-7)
    weights = _bir_weights64(batch, _log_p64(dataset), 0.7)
    torch.testing.assert_close(q[:, :8].double(), torch.from_numpy(0.7 * weights), rtol=1e-4, atol=1e-7)
    cache = sampler.cache.clone()
    negatives = sampler.sample(batch)
    assert torch.equal(negatives.items[0], torch.cat([batch.positives, cache]))
    for row in range(8):
        per_item = torch.zeros(40, dtype=torch.float64).index_add_(0, negatives.items[0], q[row].double())
        assert_counts_follow(item_counts(negatives, row, 40, 20000), per_item.numpy())
    counts = (negatives.weights * 20000).round()
    drawn = counts > 0
    torch.testing.assert_close(negatives.log_q[drawn], torch.log(20000 * q / counts.clamp_min(1))[drawn])
    expected = torch.zeros(40, dtype=torch.float64).index_add_(0, batch.positives, counts[:, :8].sum(0).double())
    expected[outside] += 100.0  # decay 1; the cache's own draws are not counted
    torch.testing.assert_close(sampler.hits, expected)
