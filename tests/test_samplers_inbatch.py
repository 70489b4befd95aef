"""In-batch samplers (SSL, SSL-Pop), BIR (official and importance-weighted): resampling law and log_q, XIR: draws,
loss groups and the official cache rule."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from recx.data.csr import CSR
from recx.data.dataset import Dataset
from recx.losses.base import LossInput
from recx.losses.softmax import SampledSoftmax, SoftmaxArgs
from recx.samplers.base import Batch
from tests.sampler_helpers import assert_counts_follow, item_counts, make_sampler, random_batch, random_dataset


def _log_p64(dataset) -> np.ndarray:
    counts = dataset.item_popularity.double().numpy()
    with np.errstate(divide="ignore"):
        return np.log(counts / counts.sum())


def _bir_weights64(
    batch: Batch, log_p: np.ndarray, temperature: float, own_positive: bool = False, items: np.ndarray | None = None
) -> np.ndarray:
    """[B, K] w(j | u) ∝ exp(s(u, j)/τ - log p(j)) over `items` (default: the batch's positions); 0 at the query's
    own positive unless `own_positive`."""
    items = batch.positives.numpy() if items is None else items
    logits = batch.query.double().numpy() @ batch.item_table.double().numpy()[items].T / temperature - log_p[items]
    if not own_positive:
        logits[items[None, :] == batch.positives.numpy()[:, None]] = -np.inf
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
def test_bir_resamples_the_whole_batch_from_exp_score_minus_log_popularity(temperature):
    """The official BIR: draws over all positions, own positive included; log_q = -log c, positive_log_q = 0."""
    dataset = random_dataset(n_items=30)
    batch = _batch_with_duplicates(dataset)
    m = 20000
    negatives = make_sampler("bir", dataset, n_resampled=m, temperature=temperature).sample(batch)
    assert negatives.shared and torch.equal(negatives.items[0], batch.positives) and negatives.keeps_positive
    weights = _bir_weights64(batch, _log_p64(dataset), temperature, own_positive=True)
    items = batch.positives.numpy()
    for row in range(len(items)):
        assert_counts_follow(
            item_counts(negatives, row, dataset.n_items, m),
            np.bincount(items, weights=weights[row], minlength=dataset.n_items),
        )
    counts = (negatives.candidate_weights().double() * m).round().numpy()
    assert (counts.sum(1) == m).all()
    drawn = counts > 0
    np.testing.assert_allclose(negatives.log_q.double().numpy()[drawn], -np.log(counts[drawn]), atol=1e-6)
    assert np.isposinf(negatives.log_q.numpy()[~drawn]).all()
    assert (negatives.positive_log_q == 0).all()


def test_bir_loss_is_the_plain_softmax_over_the_positive_and_the_draws():
    """Through the sampled softmax: -s_i + log(e^{s_i} + Σ_l e^{s(o_l)}), a float64 loop over the drawn multiset
    (the query's own positive, when drawn, stays in the denominator)."""
    dataset = random_dataset(n_items=30)
    batch = _batch_with_duplicates(dataset)
    negatives = make_sampler("bir", dataset, n_resampled=7).sample(batch)
    scores = batch.query.double() @ batch.item_table.double()[batch.positives].T
    positive = scores.diagonal()
    loss = SampledSoftmax(SoftmaxArgs())(
        LossInput(positive, scores, negatives.positive_log_q.double(), negatives.log_q.double())
    )
    counts = (negatives.candidate_weights().double() * 7).round().long()
    reference = []
    for row in range(len(positive)):
        draws = [float(scores[row, k]) for k in range(counts.shape[1]) for _ in range(int(counts[row, k]))]
        assert len(draws) == 7
        reference.append(-float(positive[row]) + np.log(np.exp(float(positive[row])) + np.exp(draws).sum()))
    assert abs(float(loss) - np.mean(reference)) < 1e-6  # log_q is float32


@pytest.mark.parametrize("temperature", [1.0, 0.5])
def test_bir_iw_resamples_other_positions_with_importance_weights(temperature):
    dataset = random_dataset(n_items=30)
    batch = _batch_with_duplicates(dataset)
    m = 20000
    negatives = make_sampler("bir_iw", dataset, n_resampled=m, temperature=temperature).sample(batch)
    assert not negatives.keeps_positive
    weights = _bir_weights64(batch, _log_p64(dataset), temperature)
    items = batch.positives.numpy()
    for row in range(len(items)):
        assert_counts_follow(
            item_counts(negatives, row, dataset.n_items, m),
            np.bincount(items, weights=weights[row], minlength=dataset.n_items),
        )
    counts = (negatives.candidate_weights().double() * m).round().numpy()
    drawn = counts > 0
    expected_log_q = np.log(m * weights[drawn] / counts[drawn])
    np.testing.assert_allclose(negatives.log_q.double().numpy()[drawn], expected_log_q, rtol=1e-5, atol=1e-5)
    assert np.isposinf(negatives.log_q.numpy()[~drawn]).all()
    assert (negatives.positive_log_q == 0).all()


def test_bir_iw_denominator_is_in_expectation_the_uncorrected_in_batch_sum():
    """Σ_k exp(s(u, k)/τ - log_q[u, k]) = Σ_l e^{s(u, o_l)/τ} / (m w(o_l | u)) estimates Σ_{j ∈ B, j ≠ i} e^{s(u, j)/τ}:
    the -log p in w cancels (the reason `bir` is not this estimator)."""
    dataset = random_dataset(n_items=30)
    batch = _batch_with_duplicates(dataset)
    negatives = make_sampler("bir_iw", dataset, n_resampled=50000, temperature=0.5).sample(batch)
    all_scores = batch.query.double() @ batch.item_table.double()[batch.positives].T / 0.5
    estimate = torch.exp(all_scores - negatives.log_q.double()).sum(1)
    others = batch.positives[None, :] != batch.positives[:, None]
    torch.testing.assert_close(estimate, (all_scores.exp() * others).sum(1), rtol=0.05, atol=0)


def test_bir_resamples_the_softmax_when_the_batch_holds_items_in_proportion_to_popularity():
    """Theorem 3.1: P(j ∈ B) · w(j | u) ∝ p(j) · exp(s(u, j) - log p(j)) = exp(s(u, j)): with item j filling a share
    p(j) of the batch's positions, the resampled items follow the softmax over all items."""
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
    drawn = sum(item_counts(negatives, row, n_items, 1000) for row in range(50))
    softmax = torch.softmax(item_table.double() @ query[0].double(), 0)
    assert_counts_follow(drawn, softmax.numpy())


def test_xir_draws_half_from_the_batch_and_half_from_the_cache():
    dataset = random_dataset(n_items=40)
    batch = random_batch(dataset, batch_size=8, scale=0.3)
    m = 40000
    sampler = make_sampler("xir", dataset, n_resampled=m, cache_size=6, cache_weight=0.3, temperature=0.7)
    trained = torch.nonzero(dataset.item_popularity > 0).flatten()
    cache = trained[torch.tensor([0, 0, 3, 5, 8, 13])]  # a duplicate slot, as the official cache can hold
    sampler.cache = cache.clone()
    negatives = sampler.sample(batch)
    assert torch.equal(negatives.items[0], torch.cat([batch.positives, cache]))
    assert negatives.segments == ((8, 0.7), (6, 0.3)) and negatives.keeps_positive
    log_p = _log_p64(dataset)
    batch_w = _bir_weights64(batch, log_p, 0.7, own_positive=True)
    cache_w = _bir_weights64(batch, log_p, 0.7, own_positive=True, items=cache.numpy())
    counts = negatives.candidate_weights().double().clone()
    counts[:, :8] *= (m // 2) / 0.7
    counts[:, 8:] *= (m // 2) / 0.3
    counts = counts.round()
    assert (counts[:, :8].sum(1) == m // 2).all() and (counts[:, 8:].sum(1) == m // 2).all()
    torch.testing.assert_close(negatives.candidate_weights().sum(1), torch.ones(8))
    for row in range(8):
        assert_counts_follow(counts[row, :8].numpy(), batch_w[row])
        assert_counts_follow(counts[row, 8:].numpy(), cache_w[row])
    drawn = counts > 0
    torch.testing.assert_close(negatives.log_q.double()[drawn], -torch.log(counts[drawn]))


def test_xir_official_cache_rule():
    """Occurrence counts start at 1, never decay and count every draw (batch and cache); the next cache is drawn
    from this step's drawn items in proportion to their counts."""
    dataset = random_dataset(n_items=40)
    batch = random_batch(dataset, batch_size=16)
    sampler = make_sampler("xir", dataset, n_resampled=10, cache_size=5)
    first = sampler.sample(batch)
    assert sampler.cache.numel() == 5
    occurrence = sampler.occurrence.clone()
    cache_before = sampler.cache.clone()
    negatives = sampler.sample(batch)
    counts = negatives.candidate_weights().double() * 5 * 2  # cache_weight 0.5 on both halves of 5 draws
    expected = occurrence.clone().index_add_(0, negatives.items[0], counts.round().sum(0))
    torch.testing.assert_close(sampler.occurrence, expected)
    assert torch.equal(negatives.items[0][16:], cache_before)
    drawn_items = negatives.items[0][(counts.round() > 0).any(0)]
    assert torch.isin(sampler.cache, drawn_items).all()
    assert first.segments == ((16, 0.5), (5, 0.5))


def test_xir_next_cache_follows_occurrence():
    from recx.samplers.xir import next_cache

    occurrence = torch.tensor([1.0, 5.0, 2.0, 9.0, 1.0], dtype=torch.float64)
    drawn = torch.tensor([False, True, True, True, False])
    cache = next_cache(occurrence, drawn, 20000, torch.Generator().manual_seed(0))
    assert_counts_follow(np.bincount(cache.numpy(), minlength=5), (occurrence * drawn).numpy())


def test_segmented_softmax_is_the_weighted_sum_of_group_losses():
    g = torch.Generator().manual_seed(3)
    pos, neg = torch.randn(5, generator=g, dtype=torch.float64), torch.randn(5, 7, generator=g, dtype=torch.float64)
    zeros = torch.zeros(5, dtype=torch.float64)
    loss = SampledSoftmax(SoftmaxArgs())(
        LossInput(pos, neg, zeros, torch.zeros(1, 7, dtype=torch.float64), neg_segments=((4, 0.25), (3, 0.75)))
    )

    def ce(columns):
        return np.mean(
            [
                np.log(np.exp(pos[r].item()) + sum(np.exp(neg[r, c].item()) for c in columns)) - pos[r].item()
                for r in range(5)
            ]
        )

    assert abs(float(loss) - (0.25 * ce(range(4)) + 0.75 * ce(range(4, 7)))) < 1e-12


def test_ssl_pop_keep_positive_is_the_official_xir_codes_loss():
    """HERECJ/XIR `--debias 2`: logsumexp([s_i - log p_i, s_{u,j} - log p_j for every batch position j]) - (s_i - log p_i):
    the own positive (and its duplicates) stay in the denominator; the default masks them."""
    from types import SimpleNamespace

    from recx.training.step import training_loss

    dataset = random_dataset(n_items=30)
    batch = _batch_with_duplicates(dataset)
    log_p = torch.from_numpy(_log_p64(dataset))[batch.positives]
    scores = batch.query.double() @ batch.item_table.double()[batch.positives].T
    corrected = scores - log_p[None, :]
    positive = corrected.diagonal()
    official = (torch.logsumexp(torch.cat([positive[:, None], corrected], 1), 1) - positive).mean()
    query, table = batch.query.double(), batch.item_table.double()
    model = SimpleNamespace(
        n_items=dataset.n_items,
        representations=lambda users: (query, table),
        rows=lambda users, items: (query, table[items]),
        query=lambda users: query,
        item_table=lambda: table,
    )
    config = SimpleNamespace(weight_decay_mode="none", weight_decay=0.0)
    kept = training_loss(
        model,
        make_sampler("in_batch_pop", dataset, keep_positive=True),
        SampledSoftmax(SoftmaxArgs()),
        config,
        batch.users,
        batch.positives,
    )
    assert abs(float(kept) - float(official)) < 1e-5
    masked = training_loss(
        model,
        make_sampler("in_batch_pop", dataset),
        SampledSoftmax(SoftmaxArgs()),
        config,
        batch.users,
        batch.positives,
    )
    assert float(masked) < float(kept)  # the masked loss leaves the positive (and duplicates) out of the denominator
