"""Uniform negatives: q(j) = 1 / n_items, optionally excluding the user's training items (then q(j) = 1/(n - |I_u|)).

log_q uses one normaliser for a query's candidates and its positive: -log n, or -log(n - |I_u|) with `exclude_train`
(the positive, a training item, cannot be drawn then, but a per-user margin between it and its candidates would be
a bias no paper has). `log_probability` gives the same per-user normaliser, so that FastVAE's positives (read
through `pair_log_probability`) share it with the negatives `sample` draws. `shared` negatives ignore
`exclude_train` (one set for the whole batch).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from recx.core.args import arg
from recx.samplers.base import Batch, Negatives, Sampler, constant_log_q_gap
from recx.samplers.registry import SAMPLERS
from recx.samplers.shared import redraw_training_items


@dataclass
class UniformArgs:
    exclude_train: bool = arg(False, help="draw only items the user has not trained on")
    shared: bool = arg(False, help="one set of negatives for the whole batch (cheap sampled softmax)")
    max_redraws: int = arg(20, at_least=0, at_most=1_000, help="rounds of redrawing training items before giving up")


@SAMPLERS.register("uniform", default=True)
class UniformSampler(Sampler):
    summary = "uniform negatives, q(j) = 1 / n_items (optionally excluding the user's training items)"
    figure = (0, {})
    Args = UniformArgs
    reference_log_q_gap = constant_log_q_gap

    def _draw(self, shape) -> torch.Tensor:
        return torch.randint(0, self.dataset.n_items, shape, generator=self.generator, device=self.generator.device)

    @property
    def excludes_train(self) -> bool:
        return self.args.exclude_train and not self.args.shared

    def user_log_q(self, users: torch.Tensor) -> torch.Tensor:
        """[B] the log probability of each allowed item: -log n, or -log(n - |I_u|) with `exclude_train`."""
        if not self.excludes_train:
            return torch.full(users.shape, -math.log(self.dataset.n_items), device=users.device)
        n_allowed = self.dataset.n_items - self.dataset.train.row_lengths()[users]
        return -torch.log(n_allowed.to(torch.float32))

    def sample(self, batch: Batch) -> Negatives:
        n_rows = 1 if self.args.shared else batch.users.numel()
        items = self._draw((n_rows, self.n_negatives))
        if self.excludes_train:
            items = redraw_training_items(self, batch.users, items, self._draw, self.args.max_redraws)
        positive_log_q = self.user_log_q(batch.users).to(items.device)
        log_q = positive_log_q[:n_rows, None].expand(items.shape)  # shared: one constant for every query
        return Negatives(items, log_q, positive_log_q)

    def log_probability(self, batch: Batch, items: torch.Tensor) -> torch.Tensor:
        """The normaliser `sample` gives query b's candidates and positive, for every item of row b."""
        return self.user_log_q(batch.users).to(items.device)[:, None].expand(items.shape)
