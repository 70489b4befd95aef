"""Dot-product or cosine scoring with a temperature, folded into the representations.

The model contract (score = query · item) is kept by transforming the representations themselves:
    dot:    query / τ,           items            ->  score = (u · i) / τ
    cosine: query / (‖query‖ τ), items / ‖items‖  ->  score = cos(u, i) / τ
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

SCORINGS = ("dot", "cosine")


def apply_scoring(
    query: torch.Tensor, items: torch.Tensor, scoring: str, temperature: float
) -> tuple[torch.Tensor, torch.Tensor]:
    if scoring == "cosine":
        query, items = F.normalize(query, dim=-1), F.normalize(items, dim=-1)
    if temperature != 1.0:
        query = query / temperature
    return query, items


def per_query_scores(query: torch.Tensor, items_table: torch.Tensor, items: torch.Tensor) -> torch.Tensor:
    """[B, k] scores of each query with its own candidates `items` [B, k].

    With a small catalogue (n_items <= 8k) one [B, n_items] matrix product and a gather cost less than gathering
    B·k rows of d floats; otherwise the rows are gathered and scored by batched inner products.
    """
    if items_table.shape[0] <= 8 * items.shape[1]:
        return (query @ items_table.T).gather(1, items)
    rows = items_table.index_select(0, items.reshape(-1)).view(*items.shape, -1)  # index_select: a fast CPU gather
    return torch.einsum("bd,bkd->bk", query, rows)
