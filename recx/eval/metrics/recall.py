"""Recall@K = hits in the top K / |T_u|, T_u the user's held-out items."""

from collections.abc import Sequence

import torch

from recx.eval.metrics.registry import METRICS, Metric, TopK


@METRICS.register("recall")
class Recall(Metric):
    summary = "hits in the top K over the user's held-out items"
    heading = "Recall"
    additive = True
    in_table = True

    def per_user_at(self, top: TopK, ks: Sequence[int]) -> torch.Tensor:
        return top.cutoff_sums(ks)["hits"] / top.n_relevant.to(torch.float64)
