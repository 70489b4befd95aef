"""AUC and OPAUC(β) per user from a full score row (the hard-negative-sampling slides' OPAUC estimator).

For a user with relevant (target) items T⁺ (n⁺ of them) and negatives T⁻ = the items neither relevant nor excluded
(n⁻ of them; excluded items carry score -inf), with m = ⌈β n⁻⌉ and S↓[1, m] the m highest-scored negatives:
    AUC       = 1 - 1/(n⁺ n⁻) Σ_{i∈T⁺} Σ_{j∈T⁻}       [r_j > r_i] + ½ [r_j = r_i]
    OPAUC(β)  = 1 - 1/(n⁺ n⁻) Σ_{i∈T⁺} Σ_{j∈S↓[1,m]}  [r_j > r_i] + ½ [r_j = r_i]     (the slides' estimator, in [1-β, 1])
    OPAUC_n(β) = 1 - 1/(n⁺ m) Σ_{i∈T⁺} Σ_{j∈S↓[1,m]}  ...                          (normalised to [0, 1])
Ties count one half (the slides' strict [r_i < r_j] would score a constant model as perfect). Computed for a batch of
users at once: the negatives of each row are sorted and every relevant score is located by `searchsorted`; with
G_i negatives above r_i and E_i tied, the top-m set holds min(G_i, m) above and min(G_i + E_i, m) - min(G_i, m) tied.
"""

from __future__ import annotations

import torch

from recx.eval.metrics.registry import METRICS, Metric


def auc_names(beta: float) -> tuple[str, str]:
    return f"opauc({beta:g})", f"opauc_norm({beta:g})"


def per_user_auc(scores: torch.Tensor, relevant: torch.Tensor, beta: float) -> dict[tuple[str, int, str], torch.Tensor]:
    """scores [U, n] with excluded items at -inf; relevant bool [U, n]. Returns {(metric, 0, "all"): float64 [U]}."""
    relevant = relevant & torch.isfinite(scores)
    negative = ~relevant & torch.isfinite(scores)
    ordered = scores.masked_fill(~negative, float("-inf")).sort(dim=1).values
    n_items = scores.shape[1]
    above = n_items - torch.searchsorted(ordered, scores, right=True)
    at_or_above = n_items - torch.searchsorted(ordered, scores, right=False)
    n_pos = relevant.sum(1).to(torch.float64)
    n_neg = negative.sum(1).clamp_min(1)
    top = torch.clamp(torch.ceil(beta * n_neg.to(torch.float64) - 1e-9).to(torch.int64), min=1)[:, None]
    weight = relevant.to(torch.float64)
    wrong = ((above + 0.5 * (at_or_above - above)) * weight).sum(1)
    top_above = torch.minimum(above, top)
    wrong_top = ((top_above + 0.5 * (torch.minimum(at_or_above, top) - top_above)) * weight).sum(1)
    pairs = n_pos * n_neg.to(torch.float64)
    opauc, opauc_norm = auc_names(beta)
    return {
        ("auc", 0, "all"): 1 - wrong / pairs,
        (opauc, 0, "all"): 1 - wrong_top / pairs,
        (opauc_norm, 0, "all"): 1 - wrong_top / (n_pos * top[:, 0].to(torch.float64)),
    }


@METRICS.register("auc")
class AUC(Metric):
    summary = "AUC and OPAUC(β) over each user's full ranking (recx eval --auc --opauc-beta β)"
    heading = "AUC"
    cutoff = False

    def per_user_scores(self, scores: torch.Tensor, relevant: torch.Tensor, beta: float) -> dict[str, torch.Tensor]:
        return {metric: values for (metric, _, _), values in per_user_auc(scores, relevant, beta).items()}
