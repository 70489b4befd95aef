"""Self-adversarial negatives (Sun et al. 2019, RotatE): uniform candidates weighted by a detached softmax of their
scores, w_j = exp(s_j / T) / Σ_k exp(s_k / T), T the temperature (candidates from the user's non-interacted items
unless `exclude_train` is off). The loss applies the weights (BPR, BCE `neg_weights`).

log_q: the uniform proposal's constant -log n_items for the candidates and the positive.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from recx.core.args import arg
from recx.samplers.base import Batch, Negatives, Sampler, constant_log_q_gap
from recx.samplers.candidates import candidate_scores, uniform_candidates, uniform_log_q
from recx.samplers.registry import SAMPLERS


@dataclass
class SelfAdversarialArgs:
    temperature: float = arg(1.0, above=0, help="T of the weights' softmax over the candidates' scores")
    exclude_train: bool = arg(True, help="draw only items the user has not trained on")
    max_redraws: int = arg(20, at_least=0, at_most=1_000, help="rounds of redrawing training items before giving up")


@SAMPLERS.register("self_adversarial")
class SelfAdversarialSampler(Sampler):
    summary = "self-adversarial: uniform candidates weighted by a detached softmax of their scores (RotatE)"
    adaptive = True  # the weights come from the model's scores (the candidates are uniform: their law is checked)
    Args = SelfAdversarialArgs
    reference_log_q_gap = constant_log_q_gap

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
