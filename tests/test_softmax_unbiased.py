"""Sampled softmax with logQ correction: with the softmax itself as proposal, its expected gradient is the full one."""

import torch

from recx.losses.base import LossInput
from recx.losses.softmax import FullSoftmax, SampledSoftmax, SoftmaxArgs


def _gradient(loss_fn, scores, positive, negatives, log_q):
    scores = scores.clone().requires_grad_(True)
    repeats = negatives.shape[0]
    batch = LossInput(
        scores[positive].expand(repeats), scores[negatives], log_q[positive].expand(repeats), log_q[negatives]
    )
    loss_fn(batch).backward()
    return scores.grad


def test_expected_sampled_gradient_equals_full_softmax_gradient():
    generator = torch.Generator().manual_seed(0)
    n_items, positive, n_samples, repeats = 60, 3, 2000, 100
    scores = torch.randn(n_items, dtype=torch.float64, generator=generator) * 2
    probabilities = torch.softmax(scores, 0)
    exact = probabilities.clone()
    exact[positive] -= 1.0
    negatives = torch.multinomial(probabilities, repeats * n_samples, replacement=True, generator=generator)
    negatives = negatives.reshape(repeats, n_samples)
    log_q = torch.log(probabilities)
    corrected = _gradient(SampledSoftmax(SoftmaxArgs()), scores, positive, negatives, log_q)
    assert torch.allclose(corrected, exact, atol=2e-3), (corrected - exact).abs().max()
    uncorrected = _gradient(SampledSoftmax(SoftmaxArgs(logq_correction=False)), scores, positive, negatives, log_q)
    assert (uncorrected - exact).abs().max() > 0.02


def test_full_softmax_is_exact_cross_entropy_over_all_items():
    generator = torch.Generator().manual_seed(1)
    scores = torch.randn(4, 30, dtype=torch.float64, generator=generator)
    positives = torch.tensor([0, 5, 7, 29])
    pos_scores = scores[torch.arange(4), positives]
    zeros = torch.zeros(4, dtype=torch.float64)
    value = FullSoftmax(SoftmaxArgs(temperature=0.5))(
        LossInput(pos_scores, scores, zeros, torch.zeros(1, 30, dtype=torch.float64))
    )
    reference = torch.nn.functional.cross_entropy(scores / 0.5, positives)
    assert torch.allclose(value, reference)
