"""Softmax cross-entropy over the positive and the candidates, with logQ correction.

Sampled softmax (Bengio & Senécal 2008; the FastVAE and RG² papers): with logits o = s / τ,
    L = -(o_pos - log q_pos) + log( exp(o_pos - log q_pos) + Σ_j exp(o_j - log q_j) ).
Subtracting log q makes the gradient, in expectation over j ~ q, that of the full softmax when q is the softmax
itself (all corrected logits then equal log Z). Full softmax is the same loss over all items (sampler `full`).
When the sampler splits its candidates into segments with weights w_g (XIR), the loss is Σ_g w_g L_g, L_g the loss
above over the positive and segment g's candidates.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from recx.losses import LOSSES
from recx.losses.base import Loss, LossInput


@dataclass
class SoftmaxArgs:
    temperature: float = 1.0
    logq_correction: bool = True


def corrected_logits(pos_scores, neg_scores, pos_log_q, neg_log_q, temperature: float, correct: bool) -> torch.Tensor:
    pos = pos_scores[:, None] / temperature
    neg = neg_scores / temperature
    if correct:
        pos = pos - pos_log_q[:, None]
        neg = neg - neg_log_q
    return torch.cat([pos, neg.expand(pos.shape[0], -1)], dim=1)


@LOSSES.register("softmax")
class SampledSoftmax(Loss):
    Args = SoftmaxArgs
    mask_positive = True

    def __call__(self, batch: LossInput):
        logits = corrected_logits(batch.pos_scores, batch.neg_scores, batch.pos_log_q, batch.neg_log_q,
                                  self.args.temperature, self.args.logq_correction)
        if batch.neg_segments is None:
            return (torch.logsumexp(logits, dim=1) - logits[:, 0]).mean()
        return segmented_cross_entropy(logits, batch.neg_segments)


def segmented_cross_entropy(logits: torch.Tensor, segments: tuple[tuple[int, float], ...]) -> torch.Tensor:
    """Σ_g w_g mean(logsumexp([o_pos, o_g]) - o_pos) over the column groups of logits [B, 1 + n]."""
    positive, total, start = logits[:, :1], logits.new_zeros(()), 1
    for size, weight in segments:
        group = torch.cat([positive, logits[:, start:start + size]], dim=1)
        total = total + weight * (torch.logsumexp(group, dim=1) - logits[:, 0]).mean()
        start += size
    return total


@LOSSES.register("full_softmax")
class FullSoftmax(SampledSoftmax):
    """-o_pos + log Σ_{all items} exp(o_i), o = s / τ. The `full` sampler's candidates are every item, the
    positive included once, so no masking or concatenation is needed (and log_q, constant, cancels)."""

    required_sampler = "full"
    mask_positive = False

    def __call__(self, batch: LossInput):
        temperature = self.args.temperature
        return (torch.logsumexp(batch.neg_scores / temperature, dim=1) - batch.pos_scores / temperature).mean()
