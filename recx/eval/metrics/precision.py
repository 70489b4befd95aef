"""Precision@K = hits in the top K / K."""

from collections.abc import Sequence

import torch

from recx.eval.metrics.registry import METRICS, Metric, TopK


@METRICS.register("precision")
class Precision(Metric):
    summary = "hits in the top K over K"
    heading = "Precision"

    def per_user_at(self, top: TopK, ks: Sequence[int]) -> torch.Tensor:
        return top.cutoff_sums(ks)["hits"][:, :1] / top.cutoffs(ks)[:, None, None]
