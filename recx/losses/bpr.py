"""BPR (Rendle et al. 2009): -Σ_j w_j log σ(s_pos - s_j), w_j = 1/n unless the sampler weights candidates. Ignores log_q."""
from __future__ import annotations

from dataclasses import dataclass

import torch.nn.functional as F

from recx.losses import LOSSES
from recx.losses.base import Loss, LossInput


@dataclass
class BPRArgs:
    pass


@LOSSES.register("bpr")
class BPR(Loss):
    Args = BPRArgs

    def __call__(self, batch: LossInput):
        pairwise = F.softplus(batch.neg_scores - batch.pos_scores[:, None])
        if batch.neg_weights is None:
            return pairwise.mean(dim=1).mean()
        return (pairwise * batch.neg_weights).sum(dim=1).mean()
