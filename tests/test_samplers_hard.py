"""DNS(M, N), Softmax-v(ρ, N) and self-adversarial weights against their definitions (float64 references)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from recx.samplers.candidates import uniform_candidates
from tests.sampler_helpers import assert_follows, make_sampler, random_batch, random_dataset


def _with_candidates(sampler, batch, n: int):
    """The sampler's output and the candidates it drew (replayed from the generator's state)."""
    state = sampler.generator.get_state()
    negatives = sampler.sample(batch)
    sampler.generator.set_state(state)
    candidates = uniform_candidates(sampler, batch.users, n, sampler.args.exclude_train, sampler.args.max_redraws)
    return negatives, candidates


def _scores64(batch, items):
    return np.einsum("bd,bnd->bn", batch.query.double().numpy(), batch.item_table.double().numpy()[items.numpy()])


@pytest.mark.parametrize("m", [1, 3, 10])
def test_dns_keeps_the_m_highest_scored_candidates(m):
    dataset = random_dataset()
    batch = random_batch(dataset, batch_size=32)
    sampler = make_sampler("dns", dataset, m=m, n_candidates=20)
    negatives, candidates = _with_candidates(sampler, batch, 20)
    assert negatives.items.shape == (32, m)
    kept = np.sort(_scores64(batch, negatives.items), axis=1)
    top = np.sort(_scores64(batch, candidates), axis=1)[:, -m:]
    np.testing.assert_allclose(kept, top)
    assert bool((negatives.items[:, :, None] == candidates[:, None, :]).any(-1).all())
    assert torch.allclose(negatives.log_q, torch.tensor(-math.log(dataset.n_items)))


def test_dns_selected_item_follows_the_max_of_n_uniforms():
    """DNS(1, N) over n items with distinct scores: P(rank r is kept) = ((n - r + 1)/n)^N - ((n - r)/n)^N."""
    dataset = random_dataset(n_users=5, n_items=30)
    batch = random_batch(dataset, batch_size=1)
    n, big_n = dataset.n_items, 5
    sampler = make_sampler("dns", dataset, m=1, n_candidates=big_n, exclude_train=False)
    draws = torch.cat([sampler.sample(batch).items for _ in range(20000)]).flatten()
    order = np.argsort(-_scores64(batch, torch.arange(n)[None, :])[0])
    rank = np.empty(n, dtype=np.int64)
    rank[order] = np.arange(1, n + 1)
    expected = ((n - rank + 1) / n) ** big_n - ((n - rank) / n) ** big_n
    assert_follows(draws, expected)


def softmax_v_reference(pos: np.ndarray, neg: np.ndarray, rho: float, form: str) -> np.ndarray:
    losses = np.logaddexp(0, neg - pos[:, None]) if form == "bpr" else np.logaddexp(0, neg)
    tau = np.sqrt(losses.var(axis=1, ddof=1, keepdims=True) / (2 * rho))
    weights = np.exp((losses - losses.max(axis=1, keepdims=True)) / tau)
    return weights / weights.sum(axis=1, keepdims=True)


@pytest.mark.parametrize("rho", [0.1, 1.0, 5.0])
@pytest.mark.parametrize("form", ["bpr", "bce"])
def test_softmax_v_weights_match_the_float64_reference(rho, form):
    dataset = random_dataset()
    batch = random_batch(dataset, batch_size=16, scale=2.0)
    sampler = make_sampler("softmax_v", dataset, rho=rho, n_candidates=40, loss_form=form)
    negatives, candidates = _with_candidates(sampler, batch, 40)
    assert torch.equal(negatives.items, candidates)
    positive = (batch.query.double() * batch.item_table.double()[batch.positives]).sum(-1).numpy()
    expected = softmax_v_reference(positive, _scores64(batch, candidates), rho, form)
    np.testing.assert_allclose(negatives.weights.double().numpy(), expected, rtol=1e-4, atol=1e-7)
    torch.testing.assert_close(negatives.weights.sum(1), torch.ones(16))


def test_softmax_v_larger_rho_gives_harder_weights():
    """A smaller β = exp(-ρ) concentrates the weights on the hardest candidates: the weighted loss grows with ρ."""
    dataset = random_dataset()
    batch = random_batch(dataset, batch_size=16, scale=2.0)
    weighted = []
    for rho in (0.01, 0.1, 1.0):
        sampler = make_sampler("softmax_v", dataset, rho=rho, n_candidates=40)
        negatives, candidates = _with_candidates(sampler, batch, 40)
        positive = (batch.query.double() * batch.item_table.double()[batch.positives]).sum(-1).numpy()
        losses = np.logaddexp(0, _scores64(batch, candidates) - positive[:, None])
        weighted.append((negatives.weights.double().numpy() * losses).sum(1))
    assert (weighted[0] < weighted[1]).all() and (weighted[1] < weighted[2]).all()


@pytest.mark.parametrize("temperature", [0.2, 1.0])
def test_self_adversarial_weights_are_a_softmax_of_scores(temperature):
    dataset = random_dataset()
    batch = random_batch(dataset, batch_size=16)
    sampler = make_sampler("self_adversarial", dataset, n_negatives=25, temperature=temperature)
    negatives, candidates = _with_candidates(sampler, batch, 25)
    assert torch.equal(negatives.items, candidates)
    scores = _scores64(batch, candidates) / temperature
    expected = np.exp(scores - scores.max(1, keepdims=True))
    np.testing.assert_allclose(
        negatives.weights.double().numpy(), expected / expected.sum(1, keepdims=True), rtol=1e-4, atol=1e-7
    )
    assert not negatives.weights.requires_grad


def test_softmax_v_gives_a_row_of_equal_losses_equal_weights_and_refuses_one_candidate():
    from recx.core.errors import RecxError
    from recx.samplers.softmax_v import softmax_v_weights

    losses = torch.tensor([[5.0, 5.0, 5.0, 5.0], [0.1, 2.0, 0.3, 0.4]])
    weights = softmax_v_weights(losses, rho=1.0)
    assert torch.equal(weights[0], torch.full((4,), 0.25)) and torch.isfinite(weights).all()
    with pytest.raises(RecxError, match=r"n_candidates = 1: expected an integer in \[2, "):
        make_sampler("softmax_v", random_dataset(), rho=1.0, n_candidates=1)
