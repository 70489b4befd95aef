"""Embedding diagnostics of a trained model (the PRISM paper's angle-versus-magnitude view, its §3.1.2 and App. C.1).

- Spearman correlation of item-representation norm with training popularity (and of user norm with user degree):
  weight decay encodes popularity into the magnitudes (the paper's Figures 2 and 3).
- NDCG with dot-product scores next to NDCG with cosine scores of the same representations, overall and per
  popularity stratum: cosine sees only the angles, dot product angles and magnitudes (the paper's Figure 6).
Representations are the model's `encode` output (before its own scoring option) when it has one.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from scipy.stats import spearmanr

from recx.data.dataset import Dataset
from recx.eval.evaluator import evaluate
from recx.eval.strata import STRATA, popularity_strata


class ScoringView:
    """What the evaluator needs of a model (eval, query, item_table), scoring the raw representations by dot
    product or cosine."""

    def __init__(self, model, cosine: bool):
        self.model, self.cosine = model, cosine

    def eval(self) -> None:
        self.model.eval()

    def _encoded(self, users: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        query, items = getattr(self.model, "encode", self.model.representations)(users)
        if self.cosine:
            return F.normalize(query, dim=-1), F.normalize(items, dim=-1)
        return query, items

    @torch.no_grad()
    def query(self, users: torch.Tensor) -> torch.Tensor:
        return self._encoded(users)[0]

    @torch.no_grad()
    def item_table(self) -> torch.Tensor:
        return self._encoded(torch.zeros(1, dtype=torch.long, device=self.model.device))[1]


def _spearman(x: torch.Tensor, y: torch.Tensor) -> float | None:
    a, b = x.double().cpu().numpy(), y.double().cpu().numpy()
    if a.std() == 0 or b.std() == 0:
        return None
    return float(spearmanr(a, b).statistic)


@torch.no_grad()
def diagnostics(model, dataset: Dataset, splits: list[str], ks: list[int], batch_size: int = 1024) -> dict:
    """Norm/popularity correlations, mean item norm per stratum, and NDCG@k by dot and cosine per split."""
    model.eval()
    users = torch.arange(dataset.n_users, device=model.device)
    query, items = getattr(model, "encode", model.representations)(users)
    user_norms, item_norms = query.norm(dim=1), items.norm(dim=1)
    stratum = popularity_strata(dataset.item_popularity)
    out: dict = {
        "item_norm_popularity_spearman": _spearman(item_norms, dataset.item_popularity),
        "user_norm_degree_spearman": _spearman(user_norms, dataset.train.row_lengths()),
        "item_norm_by_stratum": {
            name: float(item_norms[stratum == index].mean())
            for index, name in enumerate(STRATA)
            if (stratum == index).any()
        },
        "ndcg": {},
    }
    for split in splits:
        for scoring in ("dot", "cosine"):
            values = evaluate(ScoringView(model, scoring == "cosine"), dataset, split, ks, batch_size).values
            out["ndcg"].setdefault(split, {})[scoring] = {
                str(k): {s: values[("ndcg", k, s)] for s in ("all",) + STRATA} for k in ks
            }
    return out
