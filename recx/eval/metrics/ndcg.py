"""NDCG@K, binary relevance: DCG = Σ_{r<K} hit_r / log2(r + 2) over IDCG, the DCG of min(K, |T_u|) hits."""

from collections.abc import Sequence

import torch

from recx.eval.metrics.registry import METRICS, Metric, TopK


@METRICS.register("ndcg")
class NDCG(Metric):
    summary = "normalised discounted cumulative gain: Σ_r hit_r / log2(r + 2) over the ideal list's"
    heading = "NDCG"
    additive = True
    in_table = True

    def per_user_at(self, top: TopK, ks: Sequence[int]) -> torch.Tensor:
        return top.cutoff_sums(ks)["gains"] / top.ideal_dcgs(ks)[:, None, :]
