"""The shared base of embedding-table models: ID tables, their initialisation, and the scoring option.

Subclasses implement `encode(users) -> (query, items)`, the representations before scoring; `representations` applies
the scoring (recx.models.scoring) so that score = query · item holds for dot and cosine alike. Diagnostics read
`encode` to see the magnitudes the model learned.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch
import torch.nn.functional as F
from torch import nn

from recx.core.args import arg
from recx.core.errors import RecxError
from recx.core.gather import gather_rows
from recx.models.base import Model
from recx.models.init import INITS, init_table
from recx.models.scoring import SCORINGS, apply_scoring

PRISM_SCOPES = ("items", "both")


@dataclass
class EmbeddingArgs:
    """scoring dot|cosine with `temperature`; init xavier (default) | normal (std `init_std`) | prism (`prism_alpha`).

    PRISM scales item rows by their training popularity (the paper's Eq. 4 is stated for items); `prism_scope: both`
    also scales user rows by their training interaction count.
    """

    applies_with: ClassVar[dict] = {
        "init_std": ("init", "normal"),
        "prism_alpha": ("init", "prism"),
        "prism_scope": ("init", "prism"),
    }

    scoring: str = arg("dot", choices=SCORINGS, help="dot products, or cosine similarities")
    temperature: float = arg(1.0, above=0, help="scores are divided by it")
    init: str = arg("xavier", choices=INITS, help="initialisation of the tables")
    init_std: float = arg(0.1, above=0, help="the normal initialisation's standard deviation")
    prism_alpha: float = arg(1.0, help="PRISM's α: rows scaled by popularity^α")
    prism_scope: str = arg("both", choices=PRISM_SCOPES, help="PRISM scales item rows, or user rows too")


class EmbeddingModel(Model):
    """User and item ID tables (`user_embedding`, `item_embedding`) plus whatever `encode` does with them."""

    def __init__(self, n_users: int, n_items: int, dim: int, args: EmbeddingArgs, dataset=None):
        super().__init__()
        self.n_users, self.n_items, self.args = n_users, n_items, args
        if args.init == "prism" and dataset is None:
            raise RecxError("model_args.init 'prism' needs the training data (degrees)")
        prism = args.init == "prism"
        item_degrees = dataset.item_popularity if prism else None
        user_degrees = dataset.train.row_lengths() if prism and args.prism_scope == "both" else None
        self.user_embedding = nn.Parameter(
            init_table(n_users, dim, args.init, args.init_std, user_degrees, args.prism_alpha)
        )
        self.item_embedding = nn.Parameter(
            init_table(n_items, dim, args.init, args.init_std, item_degrees, args.prism_alpha)
        )

    def encode(self, users: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(query [len(users), d], items [n_items, d]) before scoring."""
        raise NotImplementedError

    def encode_rows(self, users: torch.Tensor, items: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(query [len(users), d], items [len(items), d]) before scoring; by default through `encode`."""
        query, table = self.encode(users)
        return query, gather_rows(table, items)

    def representations(self, users: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return apply_scoring(*self.encode(users), self.args.scoring, self.args.temperature)

    def rows(self, users: torch.Tensor, items: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Scoring is row-wise (dot, cosine), so it applies to the requested rows alone."""
        return apply_scoring(*self.encode_rows(users, items), self.args.scoring, self.args.temperature)

    def user_rows(self, users: torch.Tensor) -> torch.Tensor:
        """Rows of the user table with a row-sparse gradient (only these rows get one)."""
        return F.embedding(users, self.user_embedding, sparse=True)

    def item_rows(self, items: torch.Tensor) -> torch.Tensor:
        return F.embedding(items, self.item_embedding, sparse=True)

    def embedding_tables(self) -> list[nn.Parameter]:
        return [self.user_embedding, self.item_embedding]
