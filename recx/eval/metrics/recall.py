"""Recall@K = hits in the top K / |T_u|, T_u the user's held-out items."""

import torch

from recx.eval.metrics.registry import METRICS, Metric, TopK


@METRICS.register("recall")
class Recall(Metric):
    summary = "hits in the top K over the user's held-out items"
    heading = "Recall"
    additive = True
    in_table = True

    def per_user(self, top: TopK, k: int):
        return top.n_hits(k) / top.n_relevant.to(torch.float64)
