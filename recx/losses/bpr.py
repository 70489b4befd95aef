"""BPR (Rendle et al. 2009): -mean_j log σ(s_pos - s_j). Ignores log_q."""
from __future__ import annotations

from dataclasses import dataclass

import torch.nn.functional as F

from recx.losses import LOSSES
from recx.losses.base import Loss


@dataclass
class BPRArgs:
    pass


@LOSSES.register("bpr")
class BPR(Loss):
    Args = BPRArgs

    def __call__(self, pos_scores, neg_scores, pos_log_q, neg_log_q):
        return F.softplus(neg_scores - pos_scores[:, None]).mean(dim=1).mean()
