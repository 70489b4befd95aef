"""Exposure share@K per popularity stratum (catalogue-level): the fraction of all recommendations that go to the
stratum's items,

    Exposure@K(s) = Σ_{j ∈ s} c_j / Σ_j c_j,

c_j the number of top-K lists holding item j, s one of recx's strata (popular: the top 5% of items by training
popularity, neutral: the next 15%, unpopular: the remaining 80%; recx.eval.strata). Reported per stratum (the three
sum to 1), beside the stratum's share of the held-out interactions (results' `heldout_share` rows): a model that
recommends the popular stratum more than the users' held-out interactions do has a popularity bias there. It is the
stratum-level "exposure" of the popularity-bias literature (Abdollahpouri et al.; Elliot's PopRSP/PopREO compare
per-group rates of recommended relevant items instead).
"""

import torch

from recx.eval.catalogue import Exposure
from recx.eval.metrics.registry import METRICS, Metric
from recx.eval.strata import STRATA


@METRICS.register("exposure")
class ExposureShare(Metric):
    summary = "share of all recommendations on each popularity stratum's items (beside the held-out share)"
    heading = "Exposure"
    level = "catalogue"
    accuracy = False
    counts_only = True

    def from_exposure(self, exposure: Exposure, k: int) -> dict[str, torch.Tensor]:
        strata = exposure.catalogue.strata
        stratum_ids = torch.arange(len(STRATA), device=strata.device)
        membership = (strata[:, None] == stratum_ids).to(torch.float64)  # [n_items, 3] (one_hot reads its maximum)
        per_stratum = exposure.counts @ membership
        total = exposure.recommendations.clamp_min(1e-300)[:, None]
        return {name: per_stratum[:, index] / total[:, 0] for index, name in enumerate(STRATA)}
