"""Dot-product or cosine scoring with a temperature, folded into the representations.

The model contract (score = query · item) is kept by transforming the representations themselves:
    dot:    query / τ,           items            ->  score = (u · i) / τ
    cosine: query / (‖query‖ τ), items / ‖items‖  ->  score = cos(u, i) / τ
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

SCORINGS = ("dot", "cosine")


def apply_scoring(query: torch.Tensor, items: torch.Tensor, scoring: str,
                  temperature: float) -> tuple[torch.Tensor, torch.Tensor]:
    if scoring == "cosine":
        query, items = F.normalize(query, dim=-1), F.normalize(items, dim=-1)
    if temperature != 1.0:
        query = query / temperature
    return query, items
