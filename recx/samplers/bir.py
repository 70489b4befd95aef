"""BIR: in-batch importance resampling (the BIR paper; appendix Theorem 3.1 and the estimator of Theorem 3.2).

For query u with positive i and the batch's items B (positions, duplicates kept), draw m positions o_1..o_m i.i.d.
with replacement from
    w(j | u) = exp(s(u, j)/τ - log p(j)) / Σ_{k ∈ B} exp(s(u, k)/τ - log p(k)),   p(j) = c_j / Σ c (training counts),
which tends to the softmax over all items as |B| grows (Theorem 3.1). The loss is the softmax over the positive and the
resampled items with the importance weights of Theorem 3.2's proof:
    L = -s_i/τ + log( exp(s_i/τ) + Σ_{l ≤ m} exp(s(u, o_l)/τ) / (m w(o_l | u)) ),
which the sampled softmax (recx/losses/softmax.py, logits s/τ - log q) computes from log_q(o_l) = log m + log w(o_l | u)
and log_q(i) = 0. τ is `temperature` and must equal the loss's temperature (loss_args.temperature), and the loss must
apply logQ correction (BIR is defined through it). The draws are returned as multiplicities c over the batch's
positions (candidates: the batch's items, shared): log_q = log(m w / c), +inf for positions not drawn, weights c / m
for pairwise losses (see candidates.resampled_negatives) — the same loss without a [B, m, d] gather.
Positions holding the query's own positive get w = 0 (the loss masks that item anyway), as do the user's other training
items when `exclude_train` is on (default off: the paper resamples the whole batch). m defaults to the batch size.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from recx.errors import RecxError
from recx.samplers import SAMPLERS
from recx.samplers.base import Batch, Negatives, Sampler
from recx.samplers.candidates import resampled_negatives
from recx.samplers.in_batch import log_popularity


@dataclass
class BIRArgs:
    n_resampled: int = 0  # m; 0: the batch size
    temperature: float = 1.0
    exclude_train: bool = False


def candidate_mask(sampler: Sampler, batch: Batch, items: torch.Tensor) -> torch.Tensor:
    """[B, K] mask of the shared candidates `items` [K] each query may draw: not its own positive, nor (with
    `exclude_train`) one of its training items."""
    allowed = items[None, :] != batch.positives[:, None]
    if sampler.args.exclude_train:
        allowed &= ~sampler.is_training_item(batch.users, items[None, :].expand(allowed.shape))
    return allowed


def batch_log_weights(sampler: Sampler, batch: Batch, log_p: torch.Tensor) -> torch.Tensor:
    """[B, B] log w(j | u) over the batch's positions: log_softmax(s/τ - log p) over the allowed positions (a query
    with no allowed position keeps them all; the loss then masks its positive)."""
    scores = batch.query @ batch.item_table[batch.positives].T
    logits = scores / sampler.args.temperature - log_p[batch.positives][None, :]
    allowed = candidate_mask(sampler, batch, batch.positives)
    allowed |= ~allowed.any(dim=1, keepdim=True)
    return torch.log_softmax(logits.masked_fill(~allowed, float("-inf")), dim=1)


@SAMPLERS.register("bir")
class BatchImportanceResampler(Sampler):
    Args = BIRArgs

    def __init__(self, dataset, n_negatives, args: BIRArgs, generator, kernels: str = "auto"):
        super().__init__(dataset, n_negatives, args, generator, kernels)
        if args.n_resampled < 0 or args.temperature <= 0:
            raise RecxError("sampler_args: bir needs n_resampled >= 0 (0: batch size) and temperature > 0")
        self.log_p = log_popularity(dataset, generator.device)

    def sample(self, batch: Batch) -> Negatives:
        m = self.args.n_resampled or batch.positives.numel()
        return resampled_negatives(batch.positives, batch_log_weights(self, batch, self.log_p).exp(), m, self.generator)
