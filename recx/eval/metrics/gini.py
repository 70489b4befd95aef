"""Gini index@K of the recommendation counts (catalogue-level): how unequally the top-K lists spread over the items,

    Gini@K = Σ_{j=1..n} (2j - n - 1) c_(j) / (n Σ_j c_j),

c_j the number of top-K lists holding item j, c_(1) <= ... <= c_(n) ascending over all n items (those never
recommended count 0). 0: every item recommended equally often; towards 1 (at most 1 - 1/n): the recommendations on
a few items. RecBole's `GiniIndex` (this formula, lower is better). Elliot's `Gini` reports 1 - Σ_j (2j - n - 1)
p_(j) / (n - 1), p = c / Σ c, a diversity score where 1 is equal exposure: recx follows RecBole (0 = equal).
"""

import torch

from recx.eval.catalogue import Exposure
from recx.eval.metrics.registry import METRICS, Metric


@METRICS.register("gini")
class GiniIndex(Metric):
    summary = "Gini index of how often each item is recommended: 0 equal, towards 1 concentrated (RecBole GiniIndex)"
    heading = "Gini"
    level = "catalogue"
    accuracy = False
    counts_only = True

    def from_exposure(self, exposure: Exposure, k: int) -> dict[str, torch.Tensor]:
        n = exposure.catalogue.n_items
        ordered = exposure.counts.sort(dim=1).values
        weights = 2 * torch.arange(1, n + 1, dtype=torch.float64, device=ordered.device) - n - 1
        total = exposure.recommendations
        return {"all": torch.where(total > 0, (ordered @ weights) / (n * total.clamp_min(1e-300)), 0.0)}
