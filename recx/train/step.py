"""One training step: representations, negatives, scores, loss (with batched weight decay when asked)."""
from __future__ import annotations

import torch

from recx.config import RunConfig
from recx.losses.base import LossInput
from recx.models.scoring import per_query_scores
from recx.samplers.base import Batch, Negatives


def gather_scores(query: torch.Tensor, item_table: torch.Tensor, positives: torch.Tensor,
                  negatives: Negatives) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(positive scores [B], negative scores [B, n], positive representations [B, d]).

    One gather of the positive and candidate rows (one backward scatter into the item table instead of two); a
    shared candidate set is scored by one matrix product, per-query sets by a batched inner product, or, with a
    small catalogue, by `per_query_scores`.
    """
    batch = positives.numel()
    if not negatives.shared and item_table.shape[0] <= 8 * negatives.items.shape[1]:
        positive_repr = item_table[positives]
        return (query * positive_repr).sum(-1), per_query_scores(query, item_table, negatives.items), positive_repr
    rows = item_table[torch.cat([positives, negatives.items.flatten()])]
    positive_repr, candidate_repr = rows[:batch], rows[batch:]
    pos_scores = (query * positive_repr).sum(-1)
    if negatives.shared:
        neg_scores = query @ candidate_repr.T
    else:
        neg_scores = torch.einsum("bd,bnd->bn", query, candidate_repr.view(batch, -1, query.shape[1]))
    return pos_scores, neg_scores, positive_repr


def batched_decay(model, users: torch.Tensor, items: torch.Tensor) -> torch.Tensor:
    """½ Σ ‖row‖² over the distinct user and item rows the batch uses; rows outside the batch get no decay.

    Each used row gets the gradient λ·row, exactly what full-table decay (the optimizer's weight_decay) gives every
    row every step: the PRISM paper's batched weight decay (§4.1.1), P(i ∈ B) = 1 in its Theorem 3.1.
    """
    user_table, item_table = model.embedding_tables()[:2]
    return 0.5 * (user_table[torch.unique(users)].pow(2).sum() + item_table[torch.unique(items)].pow(2).sum())


def training_loss(model, sampler, loss_fn, config: RunConfig, users: torch.Tensor, positives: torch.Tensor) -> torch.Tensor:
    query, item_table = model.representations(users)
    negatives = sampler.sample(Batch(users, positives, query.detach(), item_table.detach()))
    pos_scores, neg_scores, positive_repr = gather_scores(query, item_table, positives, negatives)
    if loss_fn.mask_positive and not negatives.keeps_positive:
        neg_scores = neg_scores.masked_fill(negatives.items == positives[:, None], float("-inf"))
    loss = loss_fn(LossInput(pos_scores, neg_scores, negatives.positive_log_q, negatives.log_q, negatives.weights,
                             users, positives, query, positive_repr, negatives.segments))
    if config.weight_decay_mode == "batch" and config.weight_decay > 0:
        used = torch.cat([positives, negatives.items.flatten()]) if loss_fn.uses_negatives else positives
        loss = loss + config.weight_decay * batched_decay(model, users, used)
    return loss
