"""ARP@K, average recommendation popularity (per user, averaged over users):

    ARP@K(u) = Σ_{i ∈ L_u@K} φ(i) / |L_u@K|,

φ(i) the item's training interactions and L_u@K the items of the user's top-K list: a short list's own items, and
a user without a list has no value (`needs_list`: left out of the average, not counted as 0). Elliot's
`ARP` and RecBole's `AveragePopularity` (the same formula; lower means less popular recommendations).
"""

from collections.abc import Sequence

import torch

from recx.eval.metrics.registry import METRICS, Metric, TopK


@METRICS.register("arp")
class AverageRecommendationPopularity(Metric):
    summary = "mean training popularity of the items in each top K (Elliot ARP, RecBole AveragePopularity)"
    heading = "ARP"
    accuracy = False
    needs_list = True

    def per_user_at(self, top: TopK, ks: Sequence[int]) -> torch.Tensor:
        sums = top.cutoff_sums(ks)
        return sums["popularity"] / sums["listed"].clamp_min(1)
