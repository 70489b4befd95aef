"""MRR@K = 1 / (rank of the first hit) within the top K, else 0."""

import torch

from recx.eval.metrics.registry import METRICS, Metric, TopK


@METRICS.register("mrr")
class MRR(Metric):
    summary = "1 / the rank of the first hit within the top K, else 0"
    heading = "MRR"

    def per_user(self, top: TopK, k: int):
        return torch.where(top.first_hit < k, 1.0 / (top.first_hit.to(torch.float64) + 1), 0.0)
