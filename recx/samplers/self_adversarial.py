"""Self-adversarial negatives (Sun et al. 2019, RotatE): uniform candidates weighted by a detached softmax of their
scores, w_j = exp(s_j / T) / Σ_k exp(s_k / T), T the temperature (candidates from the user's non-interacted items
unless `exclude_train` is off). The loss applies the weights (BPR, BCE `neg_weights`).

log_q: the uniform proposal's constant -log n_items for the candidates and the positive.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from recx.core.errors import RecxError
from recx.samplers import SAMPLERS
from recx.samplers.base import Batch, Negatives, Sampler
from recx.samplers.candidates import candidate_scores, uniform_candidates, uniform_log_q


@dataclass
class SelfAdversarialArgs:
    temperature: float = 1.0
    exclude_train: bool = True
    max_redraws: int = 20

    def __post_init__(self):
        if self.temperature <= 0:
            raise RecxError(f"sampler_args.temperature = {self.temperature}: expected > 0")


@SAMPLERS.register("self_adversarial")
class SelfAdversarialSampler(Sampler):
    Args = SelfAdversarialArgs

    def __init__(self, dataset, n_negatives, args: SelfAdversarialArgs, generator, kernels: str = "auto"):
        super().__init__(dataset, n_negatives, args, generator, kernels)

    def sample(self, batch: Batch) -> Negatives:
        items = uniform_candidates(self, batch.users, self.n_negatives, self.args.exclude_train, self.args.max_redraws)
        weights = torch.softmax(candidate_scores(batch, items) / self.args.temperature, dim=1)
        n_items = self.dataset.n_items
        return Negatives(
            items,
            uniform_log_q(items.shape, n_items, items.device),
            uniform_log_q(batch.users.shape, n_items, items.device),
            weights,
        )
