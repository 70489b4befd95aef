"""BIR with the importance-weighted estimator written in the BIR appendix's proof of Theorem 3.2 (`bir_iw`).

Draws m positions o_l i.i.d. from w(j | u) ∝ exp(s(u, j)/τ - log p(j)) over the batch's positions other than the
query's own positive (and, with `exclude_train`, its other training items), and weights them by 1 / (m w):
    L = -s_i/τ + log( exp(s_i/τ) + Σ_{l ≤ m} exp(s(u, o_l)/τ) / (m w(o_l | u)) ),
i.e. log_q(o_l) = log m + log w(o_l | u), log_q(i) = 0 (multiplicities c over the positions: log_q = log(m w / c)).
Its expectation: E[Σ_l exp(s(u, o_l)/τ) / (m w(o_l | u))] = Σ_{k ∈ B, k ≠ i} exp(s(u, k)/τ) — the -log p inside w
cancels, so in expectation this is the in-batch softmax WITHOUT popularity correction (SSL), not the softmax over all
items; measured on ML-100K it lands next to SSL, far below SSL-Pop and the official BIR (`bir`, recx/samplers/bir.py).
Kept to study the estimator, not as BIR.
"""

from __future__ import annotations

import math

import torch

from recx.samplers.base import Batch, Negatives
from recx.samplers.bir import BatchImportanceResampler
from recx.samplers.candidates import importance_resampled_negatives
from recx.samplers.registry import SAMPLERS
from recx.samplers.shared import log_popularity64, resampling_weights, training_item_mask


@SAMPLERS.register("bir_iw")
class ImportanceWeightedBatchResampler(BatchImportanceResampler):
    """BIR's draws (same arguments and weights), returned with the appendix's importance weights."""

    summary = "BIR's draws with the importance weights of the BIR appendix's proof (an estimator study, not BIR)"
    unchecked_law = "BIR's resampled multiset with importance weights: log q carries log(m w / c), not a proposal"

    def reference_log_q_gap(self, batch: Batch, negatives: Negatives) -> torch.Tensor:
        """log_q - positive_log_q = log(m w / c): w ∝ exp(s/τ - log p) over the allowed positions (the query's own
        positive and, with exclude_train, its training items excluded), c each draw's multiplicity (float64)."""
        m = self.args.n_resampled or batch.positives.numel()
        items = batch.positives.cpu()
        query, table = batch.query.detach().double().cpu(), batch.item_table.detach().double().cpu()
        logits = query @ table[items].T / self.args.temperature - log_popularity64(self.dataset)[items][None, :]
        excluded = items[None, :] == items[:, None]
        if self.args.exclude_train:
            excluded |= self.is_training_item(batch.users, batch.positives[None, :].expand(excluded.shape)).cpu()
        w = torch.softmax(logits.masked_fill(excluded, -math.inf), dim=1)
        drawn = negatives.candidate_weights()
        if drawn is None:
            raise ValueError("bir_iw's draws carry their multiplicities as candidate weights; these have none")
        return torch.log(m * w / (drawn.double().cpu() * m).round())

    def sample(self, batch: Batch) -> Negatives:
        m = self.args.n_resampled or batch.positives.numel()
        items = batch.positives
        excluded = items[None, :] == batch.positives[:, None]
        training = training_item_mask(self, batch.users, items)
        excluded = excluded if training is None else excluded | training
        weights = resampling_weights(self, batch, items, self.log_p, excluded)
        return importance_resampled_negatives(items, weights, m, self.generator)
