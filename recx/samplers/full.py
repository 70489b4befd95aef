"""All items as the candidate set (exact full softmax): shared [1, n_items], q uniform (log_q constant, cancels)."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from recx.samplers.base import Batch, Negatives, Sampler, constant_log_q_gap
from recx.samplers.registry import SAMPLERS


@dataclass
class FullArgs:
    pass


@SAMPLERS.register("full")
class AllItems(Sampler):
    summary = "every item as the candidate set (exact full softmax)"
    Args = FullArgs
    reference_log_q_gap = constant_log_q_gap

    def sample(self, batch: Batch) -> Negatives:
        device = batch.users.device
        items = torch.arange(self.dataset.n_items, device=device)[None, :]
        return Negatives(items, torch.zeros(items.shape, device=device), torch.zeros(batch.users.shape, device=device))
