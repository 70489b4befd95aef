"""Softmax-v(ρ, N) (the hard-negative-sampling slides, Theorem 2 with β = exp(-ρ)).

N candidates j drawn uniformly (P_0, from the user's non-interacted items unless `exclude_train` is off) are weighted by
    w_j = exp(L_j / τ) / Σ_k exp(L_k / τ),   τ = sqrt(Var_j(L) / (2ρ)),
where L_j = ℓ(r(u, i) - r(u, j)) is the pairwise loss of the positive i against j and Var_j is the sample variance
over the N ≥ 2 candidates (the official code's torch.var); τ is computed per positive, without gradient. This is the KL-DRO worst case around P_0 (a larger
ρ, a smaller β = exp(-ρ), gives harder weights). The weights must use the trained loss's form: `loss_form` bpr,
L_j = softplus(s_j - s_i), or bce, L_j = softplus(s_j); the loss applies them as Σ_j w_j L_j (BPR, BCE `neg_weights`).

log_q: uniform's constant -log n_items for candidates and positive (the weights, not log_q, carry the hardness).
`config.n_negatives` is not used (N is `n_candidates`).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from recx.core.args import arg
from recx.samplers.base import Batch, Negatives, Sampler, constant_log_q_gap
from recx.samplers.candidates import candidate_scores, positive_scores, uniform_candidates, uniform_log_q
from recx.samplers.registry import SAMPLERS

LOSS_FORMS = {
    "bpr": lambda negative, positive: F.softplus(negative - positive[:, None]),
    "bce": lambda negative, positive: F.softplus(negative),
}


@dataclass
class SoftmaxVArgs:
    rho: float = arg(1.0, above=0, help="ρ: the KL radius (β = exp(-ρ)); larger: harder weights")
    n_candidates: int = arg(
        200, at_least=2, at_most=10_000_000, help="N uniform candidates (>= 2: the temperature is their variance)"
    )
    loss_form: str = arg("bpr", choices=tuple(LOSS_FORMS), help="the trained loss's pairwise form")
    exclude_train: bool = arg(True, help="draw only items the user has not trained on")
    max_redraws: int = arg(20, at_least=0, at_most=1_000, help="rounds of redrawing training items before giving up")


def softmax_v_weights(pairwise_losses: torch.Tensor, rho: float) -> torch.Tensor:
    """Rows of softmax(L / τ), τ = sqrt(Var(L) / (2ρ)) per row; a row of equal losses (τ = 0) gets equal weights.
    Var is the sample variance (divisor N - 1), as the official code's torch.var; the slides do not say which."""
    tau = torch.sqrt(pairwise_losses.var(dim=1, keepdim=True) / (2 * rho))
    return torch.softmax(torch.where(tau > 0, pairwise_losses / tau, 0.0), dim=1)


@SAMPLERS.register("softmax_v")
class SoftmaxVSampler(Sampler):
    summary = "Softmax-v(ρ, N): N uniform candidates weighted by a softmax of their losses (KL-DRO)"
    adaptive = True  # the weights come from the model's scores (the candidates are uniform: their law is checked)
    Args = SoftmaxVArgs
    reference_log_q_gap = constant_log_q_gap

    def __init__(self, dataset, n_negatives, args: SoftmaxVArgs, generator, kernels: str = "auto"):
        super().__init__(dataset, n_negatives, args, generator, kernels)

    def sample(self, batch: Batch) -> Negatives:
        items = uniform_candidates(
            self, batch.users, self.args.n_candidates, self.args.exclude_train, self.args.max_redraws
        )
        losses = LOSS_FORMS[self.args.loss_form](candidate_scores(batch, items), positive_scores(batch))
        n_items = self.dataset.n_items
        weights = softmax_v_weights(losses, self.args.rho)
        return Negatives(
            items,
            uniform_log_q(items.shape, n_items, items.device),
            uniform_log_q(batch.users.shape, n_items, items.device),
            weights,
        )
