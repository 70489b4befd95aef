"""MostPop: every user gets the items ranked by their training interaction count (the first baseline of every paper).

Items are ranked by their training count c_i, ties broken by ascending item id (the popularity strata's order):
score(u, i) = n c_i + (n - 1 - i), n the number of items, exact in float64 (d = 1: query = [1] for every user,
item = [score]; the run's `dim` is not used), so the ranking does not depend on how top-k orders ties. Nothing is
trained (runner `none`).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from recx.core.errors import RecxError
from recx.models.base import Model
from recx.models.registry import MODELS


@dataclass
class MostPopularArgs:
    pass


@MODELS.register("popularity")
class MostPopular(Model):
    summary = "MostPop: every user gets the items by training popularity (nothing to train)"
    label = "mostpop"
    Args = MostPopularArgs
    runner = "none"
    losses = ()
    optimizers = ()
    runner_note = "nothing to train"
    ordered_examples = False
    row_queries = True  # [1] for every user
    scores: torch.Tensor  # a buffer [n_items, 1]

    def __init__(self, n_users: int, n_items: int, dim: int, args: MostPopularArgs, dataset=None):
        super().__init__()
        if dataset is None:
            raise RecxError("model 'popularity' needs the training data (item counts)")
        self.n_users, self.n_items, self.args = n_users, n_items, args
        counts = dataset.item_popularity.to(torch.float64).cpu()
        tie_break = torch.arange(n_items - 1, -1, -1, dtype=torch.float64)
        self.register_buffer("scores", (counts * n_items + tie_break)[:, None])

    def representations(self, users: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return torch.ones(users.numel(), 1, dtype=torch.float64, device=self.scores.device), self.scores

    def embedding_tables(self) -> list[nn.Parameter]:
        return []

    @property
    def device(self) -> torch.device:
        return self.scores.device
