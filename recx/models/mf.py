"""Matrix factorisation: score(u, i) = p_u · q_i."""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from recx.models import MODELS
from recx.models.base import Model


@dataclass
class MFArgs:
    init_std: float = 0.1


@MODELS.register("mf")
class MatrixFactorization(Model):
    Args = MFArgs

    def __init__(self, n_users: int, n_items: int, dim: int, args: MFArgs, dataset=None):
        super().__init__()
        self.n_users, self.n_items = n_users, n_items
        self.user_embedding = nn.Parameter(torch.randn(n_users, dim) * args.init_std)
        self.item_embedding = nn.Parameter(torch.randn(n_items, dim) * args.init_std)

    def representations(self, users: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.user_embedding[users], self.item_embedding

    def embedding_tables(self) -> list[nn.Parameter]:
        return [self.user_embedding, self.item_embedding]
