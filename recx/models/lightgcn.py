"""LightGCN (He et al., SIGIR 2020): E_{k+1} = Â E_k over the normalised training graph, final = mean(E_0..E_K).

E_0 stacks the user and item ID tables; Â = D^-1/2 A D^-1/2 (recx.models.graph) is a sparse matrix on the device,
multiplied by torch.sparse.mm, or on CUDA under deterministic algorithms (`deterministic: true`) row by row in a fixed
order (recx.models.graph.OrderedRows), since cuSPARSE's product does not repeat bit for bit. `encode` propagates once
per call. Without autograd (evaluation) the result is cached until a table changes.
"""

from __future__ import annotations

import typing
from dataclasses import dataclass

import torch

from recx.core.args import arg
from recx.core.errors import RecxError
from recx.core.gather import gather_rows
from recx.models.embedding import EmbeddingArgs, EmbeddingModel
from recx.models.graph import OrderedRows, normalized_adjacency
from recx.models.registry import MODELS


@dataclass
class LightGCNArgs(EmbeddingArgs):
    n_layers: int = arg(3, at_least=0, at_most=100, help="propagation layers over the user-item graph")


@MODELS.register("lightgcn")
class LightGCN(EmbeddingModel):
    summary = "LightGCN: embeddings averaged over the layers of a normalised user-item graph propagation"
    Args = LightGCNArgs
    row_queries = True  # the user's row of the propagated table (computed once, cached), scored on its own
    args: LightGCNArgs

    def __init__(self, n_users: int, n_items: int, dim: int, args: LightGCNArgs, dataset=None):
        super().__init__(n_users, n_items, dim, args, dataset)
        if dataset is None:
            raise RecxError("model 'lightgcn' needs the training data (its graph)")
        self.register_buffer("adjacency", normalized_adjacency(dataset.train, n_users), persistent=False)
        self._cache: tuple | None = None
        self._ordered: OrderedRows | None = None

    def in_order(self, layer: torch.Tensor) -> bool:
        """Whether the product is summed row by row in a fixed order: on CUDA under deterministic algorithms."""
        return layer.is_cuda and torch.are_deterministic_algorithms_enabled()

    def product(self, layer: torch.Tensor) -> torch.Tensor:
        """Â layer."""
        adjacency = typing.cast(torch.Tensor, self.adjacency)
        if not self.in_order(layer):
            return torch.sparse.mm(adjacency, layer)
        if self._ordered is None:
            self._ordered = OrderedRows(adjacency)
        return self._ordered(layer)

    def propagate(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(all users [n_users, d], all items [n_items, d]) after K layers and the layer mean."""
        layer = torch.cat([self.user_embedding, self.item_embedding])
        total = layer
        for _ in range(self.args.n_layers):
            layer = self.product(layer)
            total = total + layer
        final = total / (self.args.n_layers + 1)
        return final[: self.n_users], final[self.n_users :]

    def _propagated(self) -> tuple[torch.Tensor, torch.Tensor]:
        if torch.is_grad_enabled():
            return self.propagate()
        key = (
            self.user_embedding._version,
            self.item_embedding._version,
            self.user_embedding.data_ptr(),
            self.item_embedding.data_ptr(),
        )
        if self._cache is None or self._cache[0] != key:
            self._cache = (key, self.propagate())
        return self._cache[1]

    def encode(self, users: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        all_users, all_items = self._propagated()
        return gather_rows(all_users, users), all_items
