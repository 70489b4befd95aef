"""All items as the candidate set (exact full softmax): shared [1, n_items], q uniform (log_q constant, cancels)."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from recx.samplers.base import Batch, Negatives, Sampler
from recx.samplers.registry import SAMPLERS


@dataclass
class FullArgs:
    pass


@SAMPLERS.register("full")
class AllItems(Sampler):
    summary = "every item as the candidate set (exact full softmax)"
    Args = FullArgs

    def sample(self, batch: Batch) -> Negatives:
        device = batch.users.device
        items = torch.arange(self.dataset.n_items, device=device)[None, :]
        return Negatives(items, torch.zeros(items.shape, device=device), torch.zeros(batch.users.shape, device=device))
