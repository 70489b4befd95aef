"""Item coverage@K (catalogue-level): the share of the catalogue that some user's top K holds,

    Coverage@K = |∪_u L_u@K| / |I|,

L_u@K the user's top-K list and I the items. RecBole's `ItemCoverage` (this ratio); Elliot's `ItemCoverage` reports
the count |∪_u L_u@K| instead: recx follows RecBole (a share in [0, 1] compares across catalogues).
"""

import torch

from recx.eval.catalogue import Exposure
from recx.eval.metrics.registry import METRICS, Metric


@METRICS.register("coverage")
class ItemCoverage(Metric):
    summary = "share of the items that some user's top K holds (RecBole ItemCoverage)"
    heading = "Coverage"
    level = "catalogue"
    accuracy = False
    counts_only = True

    def from_exposure(self, exposure: Exposure, k: int) -> dict[str, torch.Tensor]:
        return {"all": (exposure.counts > 0).sum(1).to(torch.float64) / exposure.catalogue.n_items}
