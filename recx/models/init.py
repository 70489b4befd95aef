"""Embedding-table initialisation: normal, Xavier (uniform), and PRISM.

PRISM (Loveland et al., "On the Role of Weight Decay in Collaborative Filtering: A Popularity Perspective", Eq. 4):
rows drawn by Xavier-uniform (the paper's base initialiser, its Appendix B.1), normalised to unit length, then
scaled by the node's training degree d:
    row = (α log(d + 2) + (1 - α)) · row_init / ‖row_init‖.
"""

from __future__ import annotations

import torch
from torch import nn

INITS = ("normal", "xavier", "prism")


def prism_norms(degrees: torch.Tensor, alpha: float) -> torch.Tensor:
    """α log(d + 2) + (1 - α) per row, float32."""
    return alpha * torch.log(degrees.to(torch.float64) + 2.0) + (1.0 - alpha)


def init_table(
    n_rows: int, dim: int, method: str, std: float, degrees: torch.Tensor | None = None, alpha: float = 1.0
) -> torch.Tensor:
    """A fresh [n_rows, dim] table. `degrees` given: PRISM scaling of Xavier rows (only for method `prism`)."""
    if method == "normal":
        return torch.randn(n_rows, dim) * std
    table = nn.init.xavier_uniform_(torch.empty(n_rows, dim))
    if method == "xavier" or degrees is None:
        return table
    unit = table.to(torch.float64) / table.to(torch.float64).norm(dim=1, keepdim=True)
    return (unit * prism_norms(degrees.cpu(), alpha)[:, None]).to(torch.float32)
