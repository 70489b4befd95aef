"""Ranking metrics from the hit matrix of each user's top-K list (docs/design.md "Evaluation conventions").

- NDCG@K: binary relevance, DCG = Σ_{r<K} hit_r / log2(r + 2), IDCG over min(K, |T_u|) ideal hits.
- Recall@K = hits in the top K / |T_u|;  Precision@K = hits / K;  HitRate@K = 1[any hit];
  MRR@K = 1 / (rank of the first hit) within the top K, else 0.
- Stratified NDCG/Recall count only hits on items of the stratum and keep the user's overall IDCG / |T_u|, so the
  strata sum exactly to the overall value.
Every function returns per-user values; averages are taken over users with at least one test item.
"""

from __future__ import annotations

import torch

from recx.eval.strata import STRATA

METRICS = ("ndcg", "recall", "precision", "mrr", "hitrate")
STRATIFIED = ("ndcg", "recall")


def discounts(k: int, device) -> torch.Tensor:
    return 1.0 / torch.log2(torch.arange(k, device=device, dtype=torch.float64) + 2.0)


def per_user_metrics(
    hits: torch.Tensor, n_relevant: torch.Tensor, ks: list[int], hit_strata: torch.Tensor | None = None
) -> dict[tuple[str, int, str], torch.Tensor]:
    """hits: bool [U, max(ks)] in rank order; n_relevant: [U] (> 0); hit_strata: stratum of each ranked item.

    Returns {(metric, k, stratum): float64 [U]} with stratum "all" for the overall values.
    """
    device = hits.device
    max_k = max(ks)
    gains = hits.to(torch.float64) * discounts(max_k, device)
    ideal = torch.cumsum(discounts(max_k, device), 0)
    n_rel = n_relevant.to(torch.float64)
    first_hit = torch.where(hits.any(1), hits.to(torch.int8).argmax(1), max_k)
    out: dict[tuple[str, int, str], torch.Tensor] = {}
    for k in ks:
        idcg = ideal[torch.clamp(n_relevant, max=k) - 1]
        n_hits = hits[:, :k].sum(1).to(torch.float64)
        out[("ndcg", k, "all")] = gains[:, :k].sum(1) / idcg
        out[("recall", k, "all")] = n_hits / n_rel
        out[("precision", k, "all")] = n_hits / k
        out[("hitrate", k, "all")] = (n_hits > 0).to(torch.float64)
        out[("mrr", k, "all")] = torch.where(first_hit < k, 1.0 / (first_hit.to(torch.float64) + 1), 0.0)
        if hit_strata is not None:
            for index, stratum in enumerate(STRATA):
                in_stratum = (hit_strata[:, :k] == index).to(torch.float64)
                out[("ndcg", k, stratum)] = (gains[:, :k] * in_stratum).sum(1) / idcg
                out[("recall", k, stratum)] = (hits[:, :k] * in_stratum).sum(1) / n_rel
    return out
