"""MRR@K = 1 / (rank of the first hit) within the top K, else 0."""

from collections.abc import Sequence

import torch

from recx.eval.metrics.registry import METRICS, Metric, TopK


@METRICS.register("mrr")
class MRR(Metric):
    summary = "1 / the rank of the first hit within the top K, else 0"
    heading = "MRR"

    def per_user_at(self, top: TopK, ks: Sequence[int]) -> torch.Tensor:
        first = top.first_hit
        found = first[None, None, :] < top.cutoffs(ks)[:, None, None]
        return torch.where(found, 1.0 / (first.to(torch.float64) + 1), 0.0)
