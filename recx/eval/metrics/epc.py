"""EPC@K, expected popularity complement (novelty; Vargas & Castells, RecSys 2011), per user, averaged over users:

    EPC@K(u) = Σ_{r < K} hit_r · disc(r) · (1 - φ(i_r) / |U|) / Σ_{r < |L_u@K|} disc(r),   disc(r) = 1 / log2(r + 2),

hit_r whether the item at place r (rank r + 1) is held out for the user, φ(i) the users who trained on item i (its
training interactions: recx's interactions are distinct pairs) and |U| the users with a training interaction. The
relevance-aware, rank-discounted form of Elliot's `EPC` (binary relevance, the logarithmic discount, the
normaliser over the list's places: a short list over its own places); higher: relevant items that fewer users
have seen. A user without a list has no value (`needs_list`: left out of the average, not counted as 0).
"""

import torch

from recx.eval.metrics.registry import METRICS, Metric, TopK


@METRICS.register("epc")
class ExpectedPopularityComplement(Metric):
    summary = "rank-discounted novelty 1 - φ(i)/|U| of the hits in each top K (Elliot EPC)"
    heading = "EPC"
    accuracy = False
    needs_list = True

    def per_user(self, top: TopK, k: int) -> torch.Tensor:
        catalogue = top.catalogue
        novelty = 1.0 - catalogue.popularity / max(catalogue.n_users, 1)
        discounts = top.discounts[:k]
        found = (top.hits[:, :k].to(torch.float64) * top.per_place(novelty, k) * discounts).sum(1)
        norm = (top.listed(k).to(torch.float64) * discounts).sum(1)
        return found / norm.clamp_min(1e-300)
