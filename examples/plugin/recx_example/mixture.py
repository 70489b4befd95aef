"""A mixture of uniform and popularity negatives: q(j) = w / n + (1 - w) c_j / Σ_k c_k, c_j the training count of
item j and w the uniform share (`weight`). Each draw comes from the uniform part with probability w, else from the
popularity part, so the draws follow q exactly, and log q is its closed form (the same normalised law for a
query's positive and its candidates)."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from recx import Batch, Negatives, Sampler, arg, register_sampler


@dataclass
class MixtureArgs:
    weight: float = arg(0.5, at_least=0, at_most=1, help="the uniform part's share of the mixture")


@register_sampler("mixture")
class MixtureSampler(Sampler):
    """Draws [B, n] (one set per query) from q(j) = w / n + (1 - w) c_j / Σ c."""

    summary = "a mixture of uniform and popularity negatives with its exact log q (example plugin)"
    Args = MixtureArgs

    def __init__(self, dataset, n_negatives, args: MixtureArgs, generator, kernels: str = "auto"):
        super().__init__(dataset, n_negatives, args, generator, kernels)
        counts = dataset.item_popularity.to(torch.float64)
        self.popularity = counts / counts.sum()
        self.log_q = torch.log(args.weight / dataset.n_items + (1 - args.weight) * self.popularity)

    def sample(self, batch: Batch) -> Negatives:
        shape = (batch.users.numel(), self.n_negatives)
        device = batch.users.device
        uniform = torch.randint(0, self.dataset.n_items, shape, generator=self.generator, device=device)
        popular = torch.multinomial(
            self.popularity.to(device), shape[0] * shape[1], replacement=True, generator=self.generator
        ).view(shape)
        from_uniform = torch.rand(shape, generator=self.generator, device=device) < self.args.weight
        items = torch.where(from_uniform, uniform, popular)
        log_q = self.log_q.to(device)
        return Negatives(items, log_q[items].float(), log_q[batch.positives].float())

    def log_probability(self, batch: Batch, items: torch.Tensor) -> torch.Tensor:
        return self.log_q.to(items.device)[items].float()
