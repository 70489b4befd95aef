"""Shannon entropy@K of the recommendation counts (catalogue-level), in bits:

    Entropy@K = -Σ_j p(j) log2 p(j),   p(j) = c_j / Σ_i c_i,

c_j the number of top-K lists holding item j (0 log 0 = 0). 0: every list holds the same items; log2 |I| at most:
every item recommended equally often. Elliot's `SEntropy` (Σ_j w_j (-log2 p(j)) / |U| with w_j = Σ_u [j ∈ L_u] / |L_u|:
the same value when the lists are full). RecBole's `ShannonEntropy` uses the natural logarithm and divides by the
number of distinct recommended items: recx follows Elliot (the textbook entropy, comparable across runs whatever
their coverage).
"""

import math

import torch

from recx.eval.catalogue import Exposure
from recx.eval.metrics.registry import METRICS, Metric


@METRICS.register("entropy")
class ShannonEntropy(Metric):
    summary = "Shannon entropy (bits) of how often each item is recommended: higher is more even (Elliot SEntropy)"
    heading = "Entropy"
    level = "catalogue"
    accuracy = False
    counts_only = True

    def from_exposure(self, exposure: Exposure, k: int) -> dict[str, torch.Tensor]:
        shares = exposure.shares()
        return {"all": -torch.xlogy(shares, shares).sum(1) / math.log(2)}
