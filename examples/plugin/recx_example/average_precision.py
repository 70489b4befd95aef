"""MAP@K: a user's average precision, AP@K = Σ_{r<K} hit_r · precision@(r + 1) / min(K, |T_u|), T_u the user's
held-out items."""

from __future__ import annotations

import torch

from recx import Metric, TopK, register_metric


@register_metric("map")
class AveragePrecision(Metric):
    summary = "average precision at K over min(K, held-out items) (example plugin)"
    heading = "MAP"

    def per_user(self, top: TopK, k: int) -> torch.Tensor:
        hits = top.hits[:, :k].to(torch.float64)
        precision = torch.cumsum(hits, 1) / torch.arange(1, k + 1, dtype=torch.float64, device=hits.device)
        return (hits * precision).sum(1) / torch.clamp(top.n_relevant, max=k).to(torch.float64)
