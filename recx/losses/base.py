"""The loss contract (DESIGN.md "Samplers and losses")."""
from __future__ import annotations

import torch


class Loss:
    """`__call__(pos_scores [B], neg_scores [B, n], pos_log_q [B], neg_log_q [B or 1, n]) -> scalar mean over B`.

    `required_sampler` names the only sampler the loss is defined with (None: any). `mask_positive` asks the
    trainer to remove a query's own positive from its negatives (score -inf), as softmax losses need.
    """

    required_sampler: str | None = None
    mask_positive: bool = False

    def __init__(self, args):
        self.args = args

    def __call__(self, pos_scores, neg_scores, pos_log_q, neg_log_q) -> torch.Tensor:
        raise NotImplementedError
