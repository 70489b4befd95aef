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

from recx.core.errors import RecxError
from recx.samplers import SAMPLERS
from recx.samplers.base import Batch, Negatives, Sampler
from recx.samplers.candidates import candidate_scores, positive_scores, uniform_candidates, uniform_log_q

LOSS_FORMS = {
    "bpr": lambda negative, positive: F.softplus(negative - positive[:, None]),
    "bce": lambda negative, positive: F.softplus(negative),
}


@dataclass
class SoftmaxVArgs:
    rho: float = 1.0
    n_candidates: int = 200
    loss_form: str = "bpr"
    exclude_train: bool = True
    max_redraws: int = 20

    def __post_init__(self):
        if self.loss_form not in LOSS_FORMS:
            raise RecxError(f"sampler_args.loss_form {self.loss_form!r}; valid: {', '.join(LOSS_FORMS)}")
        if self.rho <= 0 or self.n_candidates < 2:
            raise RecxError(
                "sampler_args: softmax_v needs rho > 0 and n_candidates >= 2 (its temperature is a "
                "variance over the candidates)"
            )


def softmax_v_weights(pairwise_losses: torch.Tensor, rho: float) -> torch.Tensor:
    """Rows of softmax(L / τ), τ = sqrt(Var(L) / (2ρ)) per row; a row of equal losses (τ = 0) gets equal weights.
    Var is the sample variance (divisor N - 1), as the official code's torch.var; the slides do not say which."""
    tau = torch.sqrt(pairwise_losses.var(dim=1, keepdim=True) / (2 * rho))
    return torch.softmax(torch.where(tau > 0, pairwise_losses / tau, 0.0), dim=1)


@SAMPLERS.register("softmax_v")
class SoftmaxVSampler(Sampler):
    Args = SoftmaxVArgs

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
