"""NDCG@K, binary relevance: DCG = Σ_{r<K} hit_r / log2(r + 2) over IDCG, the DCG of min(K, |T_u|) hits."""

from recx.eval.metrics.registry import METRICS, Metric, TopK


@METRICS.register("ndcg")
class NDCG(Metric):
    summary = "normalised discounted cumulative gain: Σ_r hit_r / log2(r + 2) over the ideal list's"
    heading = "NDCG"
    additive = True
    in_table = True

    def per_user(self, top: TopK, k: int):
        return top.gains[:, :k].sum(1) / top.ideal_dcg(k)
