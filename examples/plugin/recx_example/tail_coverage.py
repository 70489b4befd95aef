"""Tail coverage@K, a catalogue-level metric: the share of the long-tail items that some user's top K holds,

    TailCoverage@K = |∪_u L_u@K ∩ Γ| / |Γ|,

Γ the long tail (recx's "unpopular" stratum: the items outside the top 20% by training popularity). A function of
how often each item is recommended (`Exposure.counts`, one row per weighting of the users), so recx reports it with
a bootstrap interval over users and compares methods by a paired bootstrap."""

from __future__ import annotations

import torch

from recx import Exposure, Metric, register_metric


@register_metric("tail_coverage")
class TailCoverage(Metric):
    summary = "share of the long-tail items that some user's top K holds (example plugin)"
    heading = "TailCoverage"
    level = "catalogue"  # one value from all users' lists, not a mean of per-user values
    accuracy = False  # does not reward hits: never a validation metric

    def from_exposure(self, exposure: Exposure, k: int) -> dict[str, torch.Tensor]:
        tail = exposure.catalogue.tail  # bool [n_items]
        reached = (exposure.counts[:, tail] > 0).sum(1).to(torch.float64)  # [R]: one value per weighting
        return {"all": reached / tail.sum().clamp_min(1).to(torch.float64)}
