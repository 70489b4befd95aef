"""Alignment and uniformity on the unit hypersphere (Wang & Isola 2020; DirectAU, Wang et al. KDD 2022).

With f(x) = x / ‖x‖:
    alignment(U, I)  = E_(u,i) ‖f(u) - f(i)‖²                     (over the batch's positive pairs)
    uniformity(X)    = log E_{a<b} exp(-t ‖f(x_a) - f(x_b)‖²)      (over distinct pairs of the batch's rows, t = 2)
Squared distances of unit vectors are computed as 2 - 2 f(x_a)·f(x_b), which has a gradient where rows coincide.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F


def alignment(users: torch.Tensor, items: torch.Tensor) -> torch.Tensor:
    return (F.normalize(users, dim=-1) - F.normalize(items, dim=-1)).pow(2).sum(-1).mean()


def uniformity(rows: torch.Tensor, t: float = 2.0) -> torch.Tensor:
    """0 for fewer than two rows (no pair)."""
    n = rows.shape[0]
    if n < 2:
        return rows.sum() * 0.0
    unit = F.normalize(rows, dim=-1)
    squared = (2.0 - 2.0 * (unit @ unit.T)).clamp_min(0.0)
    above = torch.ones(n, n, dtype=torch.bool, device=rows.device).triu(diagonal=1)
    logits = (-t * squared).masked_fill(~above, float("-inf"))
    return torch.logsumexp(logits.flatten(), dim=0) - math.log(n * (n - 1) / 2)
