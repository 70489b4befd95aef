"""WRMF / iALS (Hu, Koren & Volinsky, ICDM 2008): Σ_{x,y} c_xy (p_xy − P_x·Q_y)² + λ (‖P‖² + ‖Q‖²).

p_xy = 1 on observed pairs, 0 elsewhere; confidence c_xy = 1 + α on observed pairs (`confidence: linear`, Hu et
al.'s 1 + α r with binary r) or α (`confidence: scaled`, what implicit ≥ 0.5 does with its `alpha`), 1 elsewhere.
`alpha` and `regularization` are implicit's names; with `confidence: scaled` they also mean what implicit means.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from recx.core.args import arg
from recx.models.als.base import AlternatingArgs, AlternatingModel
from recx.models.als.problem import WeightedSquares
from recx.models.registry import MODELS

CONFIDENCES = ("linear", "scaled")


@dataclass
class WRMFArgs(AlternatingArgs):
    alpha: float = arg(40.0, at_least=0, help="confidence weight of the observed entries")
    confidence: str = arg("linear", choices=CONFIDENCES, help="c = 1 + α (linear) or α (scaled, implicit's)")


@MODELS.register("wrmf")
class WRMF(AlternatingModel):
    summary = "WRMF / iALS: weighted matrix factorisation of all entries, fitted by alternating least squares"
    Args = WRMFArgs

    def weighted_squares(self, train):
        dtype, device = self.user_factors.dtype, self.user_factors.device
        extra = self.args.alpha - (1.0 if self.args.confidence == "scaled" else 0.0)
        ridge = self.args.regularization
        return WeightedSquares.build(
            train,
            base_weight=torch.ones(train.n_rows, dtype=dtype, device=device),
            extra_weight=torch.full((train.nnz,), extra, dtype=dtype, device=device),
            negative_target=0.0,
            positive_target=torch.ones(train.nnz, dtype=dtype, device=device),
            interaction=torch.zeros(train.n_rows, dtype=dtype, device=device),
            user_ridge=torch.full((train.n_rows,), ridge, dtype=dtype, device=device),
            item_ridge=torch.full((train.n_cols,), ridge, dtype=dtype, device=device),
        )
