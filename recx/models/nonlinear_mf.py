"""Non-linear MF (the PRISM paper's backbone, its §3.1 and Appendix B.1): score(u, i) = F(p_u) · G(q_i).

F and G are two-layer MLPs with a ReLU between the layers, Linear(d, d) -> ReLU -> Linear(d, d), one per side.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from recx.core.gather import gather_rows
from recx.models.embedding import EmbeddingArgs, EmbeddingModel
from recx.models.registry import MODELS


def two_layer_mlp(dim: int) -> nn.Sequential:
    return nn.Sequential(nn.Linear(dim, dim), nn.ReLU(), nn.Linear(dim, dim))


@dataclass
class NonlinearMFArgs(EmbeddingArgs):
    pass


@MODELS.register("nonlinear_mf")
class NonlinearMF(EmbeddingModel):
    summary = "MF with a two-layer MLP on each side (the PRISM paper's non-linear MF)"
    Args = NonlinearMFArgs

    def __init__(self, n_users: int, n_items: int, dim: int, args: NonlinearMFArgs, dataset=None):
        super().__init__(n_users, n_items, dim, args, dataset)
        self.user_mlp, self.item_mlp = two_layer_mlp(dim), two_layer_mlp(dim)

    def encode(self, users: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.user_mlp(gather_rows(self.user_embedding, users)), self.item_mlp(self.item_embedding)

    def encode_rows(self, users: torch.Tensor, items: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The MLPs act row by row, so only the requested rows are read."""
        return self.user_mlp(self.user_rows(users)), self.item_mlp(self.item_rows(items))
