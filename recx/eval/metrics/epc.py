"""EPC@K, expected popularity complement (novelty; Vargas & Castells, RecSys 2011), per user, averaged over users:

    EPC@K(u) = Σ_{r < K} hit_r · disc(r) · (1 - φ(i_r) / |U|) / Σ_{r < |L_u@K|} disc(r),   disc(r) = 1 / log2(r + 2),

hit_r whether the item at place r (rank r + 1) is held out for the user, φ(i) the users who trained on item i (its
training interactions: recx's interactions are distinct pairs) and |U| the users with a training interaction. The
relevance-aware, rank-discounted form of Elliot's `EPC` (binary relevance, the logarithmic discount, the
normaliser over the list's places: a short list over its own places); higher: relevant items that fewer users
have seen. A user without a list has no value (`needs_list`: left out of the average, not counted as 0).
"""

from collections.abc import Sequence

import torch

from recx.eval.metrics.registry import METRICS, Metric, TopK


@METRICS.register("epc")
class ExpectedPopularityComplement(Metric):
    summary = "rank-discounted novelty 1 - φ(i)/|U| of the hits in each top K (Elliot EPC)"
    heading = "EPC"
    accuracy = False
    needs_list = True

    def per_user_at(self, top: TopK, ks: Sequence[int]) -> torch.Tensor:
        sums = top.cutoff_sums(ks)  # Σ hit_r · disc(r) · (1 - φ(i_r)/|U|) and Σ listed_r · disc(r) over r < k
        return sums["novelty_gains"] / sums["list_discounts"].clamp_min(1e-300)
