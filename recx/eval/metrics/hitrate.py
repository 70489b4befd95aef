"""HitRate@K = 1 when the top K holds a held-out item, else 0."""

from collections.abc import Sequence

import torch

from recx.eval.metrics.registry import METRICS, Metric, TopK


@METRICS.register("hitrate")
class HitRate(Metric):
    summary = "1 when the top K holds a held-out item, else 0"
    heading = "HitRate"

    def per_user_at(self, top: TopK, ks: Sequence[int]) -> torch.Tensor:
        return (top.cutoff_sums(ks)["hits"][:, :1] > 0).to(torch.float64)
