"""Precision@K = hits in the top K / K."""

from recx.eval.metrics.registry import METRICS, Metric, TopK


@METRICS.register("precision")
class Precision(Metric):
    summary = "hits in the top K over K"
    heading = "Precision"

    def per_user(self, top: TopK, k: int):
        return top.n_hits(k) / k
