"""HitRate@K = 1 when the top K holds a held-out item, else 0."""

import torch

from recx.eval.metrics.registry import METRICS, Metric, TopK


@METRICS.register("hitrate")
class HitRate(Metric):
    summary = "1 when the top K holds a held-out item, else 0"
    heading = "HitRate"

    def per_user(self, top: TopK, k: int):
        return (top.n_hits(k) > 0).to(torch.float64)
