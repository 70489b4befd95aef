"""The metric registry, the metric contract and the per-user values of a top-K evaluation.

A metric is a `Metric` subclass registered by name (`@METRICS.register("ndcg")`), with a one-line `summary`, its
table `heading`, and either `per_user(top, k)` (a cut-off metric, `cutoff = True`) or `per_user_scores(scores,
relevant, beta)` (a metric of the full score row, `cutoff = False`). `additive`: the metric sums over the popularity
strata (it is reported per stratum).
"""

from __future__ import annotations

import functools
from typing import ClassVar

import torch

from recx.core.registry import Registry
from recx.eval.strata import STRATA


class TopK:
    """Each evaluated user's top-K list as hits: `hits` bool [U, K] in rank order, `n_relevant` [U] (> 0) the
    user's held-out items. Terms several metrics share are computed once, on first use."""

    def __init__(self, hits: torch.Tensor, n_relevant: torch.Tensor):
        self.hits, self.n_relevant = hits, n_relevant

    @property
    def max_k(self) -> int:
        return self.hits.shape[1]

    @functools.cached_property
    def discounts(self) -> torch.Tensor:
        """1 / log2(r + 2) for ranks r = 0..K-1, float64 [K]."""
        return 1.0 / torch.log2(torch.arange(self.max_k, device=self.hits.device, dtype=torch.float64) + 2.0)

    @functools.cached_property
    def gains(self) -> torch.Tensor:
        """hit_r / log2(r + 2), float64 [U, K]."""
        return self.hits.to(torch.float64) * self.discounts

    def ideal_dcg(self, k: int) -> torch.Tensor:
        """Σ_{r < min(k, |T_u|)} 1 / log2(r + 2), float64 [U]."""
        return torch.cumsum(self.discounts, 0)[torch.clamp(self.n_relevant, max=k) - 1]

    def n_hits(self, k: int) -> torch.Tensor:
        """Hits in the top k, float64 [U]."""
        return self.hits[:, :k].sum(1).to(torch.float64)

    @functools.cached_property
    def first_hit(self) -> torch.Tensor:
        """The rank of the first hit, K when none, int64 [U]."""
        return torch.where(self.hits.any(1), self.hits.to(torch.int8).argmax(1), self.max_k)

    def within(self, stratum: torch.Tensor) -> "TopK":
        """The same lists counting only hits on items of a stratum (`stratum` bool [U, K]), same |T_u|."""
        return TopK(self.hits & stratum, self.n_relevant)


class Metric:
    """A ranking metric. Subclasses set `summary` and `heading` and implement `per_user` (cut-off metrics) or
    `per_user_scores` (`cutoff = False`)."""

    summary: ClassVar[str] = ""
    heading: ClassVar[str] = ""  # the tables' column title (default: the name)
    cutoff: ClassVar[bool] = True  # name@k over top-K lists; False: over each user's full score row (recx eval --auc)
    additive: ClassVar[bool] = False  # strata sum to the overall value: reported per popularity stratum
    in_table: ClassVar[bool] = False  # a column of the report's table by default

    def per_user(self, top: TopK, k: int) -> torch.Tensor:
        """float64 [U]: each user's value at cut-off k (k <= top.max_k)."""
        raise NotImplementedError

    def per_user_scores(self, scores: torch.Tensor, relevant: torch.Tensor, beta: float) -> dict[str, torch.Tensor]:
        """{name: float64 [U]} from scores [U, n] (excluded items at -inf) and relevant bool [U, n]."""
        raise NotImplementedError


METRICS: Registry = Registry("metric", "recx.eval.metrics")


def cutoff_metrics() -> list[tuple[str, Metric]]:
    return [(name, METRICS.get(name)()) for name in METRICS.names() if METRICS.get(name).cutoff]


def table_metrics() -> tuple[str, ...]:
    """The report table's metrics by default (`in_table`)."""
    return tuple(name for name in METRICS.names() if METRICS.get(name).in_table)


def stratified_metrics() -> tuple[str, ...]:
    """The table metrics also shown per popularity stratum by default (the additive ones)."""
    return tuple(name for name in table_metrics() if METRICS.get(name).additive)


def heading(metric: str) -> str:
    """The tables' title of a metric (its `heading`, else the name capitalised: opauc(0.1) -> Opauc(0.1))."""
    return METRICS.get(metric).heading if metric in METRICS and METRICS.get(metric).heading else metric.capitalize()


def per_user_metrics(
    hits: torch.Tensor, n_relevant: torch.Tensor, ks: list[int], hit_strata: torch.Tensor | None = None
) -> dict[tuple[str, int, str], torch.Tensor]:
    """hits: bool [U, max(ks)] in rank order; n_relevant: [U] (> 0); hit_strata: stratum of each ranked item.

    Returns {(metric, k, stratum): float64 [U]} for every registered cut-off metric, with stratum "all" for the
    overall values and, for additive metrics, one key per popularity stratum."""
    top = TopK(hits, n_relevant)
    strata = (
        [] if hit_strata is None else [(name, top.within(hit_strata == index)) for index, name in enumerate(STRATA)]
    )
    out: dict[tuple[str, int, str], torch.Tensor] = {}
    for name, metric in cutoff_metrics():
        for k in ks:
            out[(name, k, "all")] = metric.per_user(top, k)
            if metric.additive:
                for stratum, restricted in strata:
                    out[(name, k, stratum)] = metric.per_user(restricted, k)
    return out
