"""Binary cross-entropy: positive label 1, candidates label 0.

    L = -log σ(s_pos) - Σ_j w_j log(1 - σ(s_j)) = softplus(-s_pos) + Σ_j w_j softplus(s_j),
w_j = 1/n (the negatives' mean, so the positive/negative balance does not move with n) unless the sampler weights the
candidates (rows of `neg_weights` sum to 1). A query's own positive drawn as a candidate is masked (not a negative).
Ignores log_q.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch.nn.functional as F

from recx.losses.base import Loss, LossInput
from recx.losses.registry import LOSSES


@dataclass
class BCEArgs:
    pass


@LOSSES.register("bce")
class BCE(Loss):
    summary = "binary cross-entropy: positive label 1, candidates label 0 (their mean)"
    Args = BCEArgs
    mask_positive = True

    def __call__(self, batch: LossInput):
        negative = F.softplus(batch.neg_scores)
        if batch.neg_weights is None:
            negative = negative.mean(dim=1)
        else:
            negative = (negative * batch.neg_weights).sum(dim=1)
        return (F.softplus(-batch.pos_scores) + negative).mean()
