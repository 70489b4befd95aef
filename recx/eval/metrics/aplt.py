"""APLT@K, average percentage of long-tail items (per user, averaged over users; Abdollahpouri et al., RecSys 2017):

    APLT@K(u) = |L_u@K ∩ Γ| / |L_u@K|,

L_u@K the items of the user's top-K list (a short list's own items; a user without a list has no value and is left
out of the average: `needs_list`) and Γ the long tail: recx's "unpopular" stratum, the
items outside the top 20% by training popularity (the paper's short head is the top 20% too; recx.eval.strata).
Elliot's `APLT` (its long tail from its own popularity split) and RecBole's `TailPercentage` (its `tail_ratio`) define
Γ by their settings; recx uses the strata its tables already report, so APLT is the list's share of the "unpopular"
stratum.
"""

from collections.abc import Sequence

import torch

from recx.eval.metrics.registry import METRICS, Metric, TopK


@METRICS.register("aplt")
class AveragePercentageLongTail(Metric):
    summary = "share of each top K on long-tail items (the unpopular stratum; Elliot APLT, RecBole TailPercentage)"
    heading = "APLT"
    accuracy = False
    needs_list = True

    def per_user_at(self, top: TopK, ks: Sequence[int]) -> torch.Tensor:
        sums = top.cutoff_sums(ks)
        return sums["tail"] / sums["listed"].clamp_min(1)
