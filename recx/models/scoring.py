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


WHOLE_TABLE_RATIO = 8  # per-query candidates: the whole table is scored when n_items <= this × candidates


def whole_table_pays_per_query(n_items: int, n_candidates: int) -> bool:
    """True when one [B, n_items] matrix product and a gather cost less than gathering B × n_candidates rows of d
    floats and scoring them by batched inner products (n_items <= WHOLE_TABLE_RATIO × n_candidates)."""
    return n_items <= WHOLE_TABLE_RATIO * n_candidates


def per_query_scores(query: torch.Tensor, items_table: torch.Tensor, items: torch.Tensor) -> torch.Tensor:
    """[B, k] scores of each query with its own candidates `items` [B, k]: from the whole table when that pays
    (`whole_table_pays_per_query`), else from the gathered rows."""
    if whole_table_pays_per_query(items_table.shape[0], items.shape[1]):
        return (query @ items_table.T).gather(1, items)
    rows = items_table.index_select(0, items.reshape(-1)).view(*items.shape, -1)  # index_select: a fast CPU gather
    return torch.einsum("bd,bkd->bk", query, rows)
