"""Matrix factorisation: score(u, i) = p_u · q_i (or cos(p_u, q_i) / τ with cosine scoring)."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from recx.core.gather import gather_rows
from recx.models.embedding import EmbeddingArgs, EmbeddingModel
from recx.models.registry import MODELS


@dataclass
class MFArgs(EmbeddingArgs):
    pass


@MODELS.register("mf", default=True)
class MatrixFactorization(EmbeddingModel):
    summary = "matrix factorisation: a user and an item table, score = u · i (or cosine / τ)"
    Args = MFArgs
    row_queries = True  # the user's row, normalised and scaled on its own (recx.models.scoring)

    def encode(self, users: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return gather_rows(self.user_embedding, users), self.item_embedding

    def encode_rows(self, users: torch.Tensor, items: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.user_rows(users), self.item_rows(items)

    def dot_tables(self) -> tuple[torch.nn.Parameter, torch.nn.Parameter] | None:
        if self.args.scoring != "dot" or self.args.temperature != 1.0:
            return None
        return self.user_embedding, self.item_embedding
