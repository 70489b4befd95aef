"""Popularity negatives: q(j) ∝ f(c_j), c_j the training count; f = count, log(1 + count) or count^0.75."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from recx.core.args import arg
from recx.kernels.alias_table import AliasTable
from recx.samplers.base import Batch, Negatives, Sampler
from recx.samplers.registry import SAMPLERS
from recx.samplers.shared import TRANSFORMS, log_popularity64, redraw_training_items


@dataclass
class PopularityArgs:
    variant: str = arg("count", choices=tuple(TRANSFORMS), help="f: count, log(1 + count) or count^0.75")
    smoothing: float = arg(1.0, at_least=0, help="added to every count so that unseen items can be drawn")
    exclude_train: bool = arg(False, help="draw only items the user has not trained on")
    shared: bool = arg(False, help="one set of negatives for the whole batch")
    max_redraws: int = arg(20, at_least=0, at_most=1_000, help="rounds of redrawing training items before giving up")


@SAMPLERS.register("popularity")
class PopularitySampler(Sampler):
    """log_q is the exact log probability of the unconditioned proposal (exclusion of training items keeps it
    as the proposal's log-probability up to the per-user normaliser, which cancels within a query)."""

    summary = "popularity negatives, q(j) ∝ f(training count of j)"
    figure = (1, {"variant": "log"})  # pop = log(1 + count), FastVAE §7.1.4

    Args = PopularityArgs

    def reference_log_q_gap(self, batch: Batch, negatives: Negatives) -> torch.Tensor:
        """log q(j) - log q(i), q ∝ f(c + smoothing) (float64)."""
        log_q = log_popularity64(self.dataset, self.args.smoothing, TRANSFORMS[self.args.variant])
        items = negatives.items.cpu().expand(batch.positives.numel(), -1)
        return log_q[items] - log_q[batch.positives.cpu()][:, None]

    def __init__(self, dataset, n_negatives, args: PopularityArgs, generator, kernels: str = "auto"):
        super().__init__(dataset, n_negatives, args, generator, kernels)
        counts = dataset.item_popularity.to(torch.float64) + args.smoothing
        self.distribution = AliasTable(TRANSFORMS[args.variant](counts).to(generator.device), kernels)

    def _draw(self, shape) -> torch.Tensor:
        return self.distribution.sample(shape, self.generator)

    def sample(self, batch: Batch) -> Negatives:
        n_rows = 1 if self.args.shared else batch.users.numel()
        items = self._draw((n_rows, self.n_negatives))
        if self.args.exclude_train and not self.args.shared:
            items = redraw_training_items(self, batch.users, items, self._draw, self.args.max_redraws)
        log_probabilities = self.distribution.log_probabilities
        return Negatives(items, log_probabilities[items], log_probabilities[batch.positives])

    def log_probability(self, batch: Batch, items: torch.Tensor) -> torch.Tensor:
        return self.distribution.log_probabilities[items]
