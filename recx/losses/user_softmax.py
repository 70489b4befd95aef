"""Softmax likelihood of users' training histories (Mult-VAE, Liang et al. 2018; FastVAE, the FastVAE paper's §6).

Each user u has one query and scores every item of its history y_u; with logits o (recx.losses.softmax scales them
by its temperature):
- full softmax (Mult-VAE): nll = Σ_{(u,i)} logsumexp_j(o_uj) - o_ui over all items j;
- sampled softmax (FastVAE): Φ_u = the run sampler's negatives for user u (one draw per user, shared by all of u's
  positives), o' = o - log q (logQ correction), and
      nll = Σ_{(u,i)} log(exp(o'_ui) + Σ_{j ∈ Φ_u} exp(o'_uj)) - o'_ui.
Both sum over the (user, positive) pairs: the official FastVAE code's reduction, the scale at which Adam's weight
decay of 0.01 was tuned.
"""

from __future__ import annotations

import torch

from recx.core.gather import gather_rows

# Per-user negatives are scored by one [B, M] product and a gather when M <= this x negatives per user: gathering
# B·T rows of the item table (and scattering their gradients back) is memory-bound; on one CPU core, B = 256,
# T = 1,000, M = 41K, D = 200, the product and gather took 0.6 s forward + backward, the row gather 2.1 s.
DENSE_SCORES_RATIO = 64


def full_softmax_nll(
    query: torch.Tensor,
    item_table: torch.Tensor,
    rows: torch.Tensor,
    positives: torch.Tensor,
    item_bias: torch.Tensor | None = None,
) -> torch.Tensor:
    """Σ over (row, positive) pairs of -log softmax(query[row] · item_table + item_bias)[positive]."""
    logits = query @ item_table.T
    positive_scores = (gather_rows(query, rows) * gather_rows(item_table, positives)).sum(-1)
    if item_bias is not None:
        logits = logits + item_bias
        positive_scores = positive_scores + item_bias[positives]
    return (gather_rows(torch.logsumexp(logits, dim=1), rows) - positive_scores).sum()


def sampled_softmax_nll(
    query: torch.Tensor,
    item_table: torch.Tensor,
    rows: torch.Tensor,
    positives: torch.Tensor,
    positive_log_q: torch.Tensor,
    negatives,
    row_sparse: bool = False,
) -> torch.Tensor:
    """Σ over (row, positive) pairs of the logQ-corrected sampled softmax over {positive} ∪ Φ_row (`negatives`: items
    [B or 1, n] and log_q [B, n]); `row_sparse`: the gathered item rows send a row-sparse gradient
    (recx.core.gather)."""
    if negatives.shared:
        negative_scores = query @ gather_rows(item_table, negatives.items[0], sparse=row_sparse).T
    elif item_table.shape[0] <= DENSE_SCORES_RATIO * negatives.items.shape[1]:
        negative_scores = (query @ item_table.T).gather(1, negatives.items)
    else:
        negative_scores = torch.einsum("bd,bnd->bn", query, gather_rows(item_table, negatives.items, sparse=row_sparse))
    negative_lse = torch.logsumexp(negative_scores - negatives.log_q, dim=1)
    positive_rows = gather_rows(item_table, positives, sparse=row_sparse)
    positive = (gather_rows(query, rows) * positive_rows).sum(-1) - positive_log_q
    return (torch.logaddexp(positive, gather_rows(negative_lse, rows)) - positive).sum()
