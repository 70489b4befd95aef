"""A pairwise hinge loss: L = mean_j max(0, margin - (s_pos - s_j)) per query, averaged over the batch (candidates
weighted by the sampler's weights when it gives them). Ignores log q."""

from __future__ import annotations

from dataclasses import dataclass

from recx import Loss, LossInput, arg, register_loss


@dataclass
class HingeArgs:
    margin: float = arg(1.0, above=0, help="the score gap the positive must keep over each candidate")


@register_loss("hinge")
class Hinge(Loss):
    summary = "pairwise hinge: max(0, margin - (s_pos - s_neg)), averaged over the candidates (example plugin)"
    Args = HingeArgs

    def __call__(self, batch: LossInput):
        pairwise = (self.args.margin - (batch.pos_scores[:, None] - batch.neg_scores)).clamp_min(0)
        if batch.neg_weights is not None:
            return (pairwise * batch.neg_weights).sum(1).mean()
        return pairwise.mean(1).mean()
