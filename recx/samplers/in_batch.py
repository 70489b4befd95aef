"""In-batch negatives: the batch's positives are every query's candidates (shared [1, B]).

SSL (`in_batch`): log_q = 0 for all, i.e. no correction. SSL-Pop (`in_batch_pop`, Yi et al. 2019): an item appears in a
batch with probability ∝ its training count c_j, so log_q(j) = log(c_j / Σ c) for the candidates and for the positive
alike, and a logQ-corrected softmax uses s(u, j) - log p(j).

A query's own positive is among the candidates; softmax losses mask it (`mask_positive` compares item ids, so other
occurrences of the same item in the batch are masked too: a duplicate is the same item, not a negative). Pairwise
losses see it with score difference 0 (a constant, no gradient). `config.n_negatives` is not used (n = batch size).
SSL-Pop's `keep_positive: true` follows the official XIR code's SSL-Pop (HERECJ/XIR `--debias 2`) instead: the whole
batch row, the query's own positive and its duplicates included, joins the positive in the softmax's denominator (so
the positive appears there at least twice).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from recx.core.args import arg
from recx.samplers.base import Batch, Negatives, Sampler, constant_log_q_gap
from recx.samplers.registry import SAMPLERS
from recx.samplers.shared import log_popularity, log_popularity64


@dataclass
class InBatchArgs:
    pass


@dataclass
class InBatchPopArgs:
    keep_positive: bool = arg(False, help="the official XIR code's SSL-Pop: the query's positive stays a candidate")


@SAMPLERS.register("in_batch")
class InBatchSampler(Sampler):
    summary = "SSL: the batch's positives are every query's candidates, no logQ correction"
    unchecked_law = "SSL: log q is 0 (no correction, on purpose) while a batch's positives follow the items' popularity"
    Args = InBatchArgs
    reference_log_q_gap = constant_log_q_gap

    def sample(self, batch: Batch) -> Negatives:
        items = batch.positives[None, :]
        return Negatives(
            items,
            torch.zeros(items.shape, device=items.device),
            torch.zeros(batch.positives.shape, device=items.device),
        )


@SAMPLERS.register("in_batch_pop")
class InBatchPopularitySampler(Sampler):
    summary = "SSL-Pop: the batch's positives as candidates, logQ-corrected by their training popularity"
    Args = InBatchPopArgs

    def reference_log_q_gap(self, batch: Batch, negatives: Negatives) -> torch.Tensor:
        """log p(j) - log p(i), p the training counts' share (float64)."""
        log_p = log_popularity64(self.dataset)
        items = negatives.items.cpu().expand(batch.positives.numel(), -1)
        return log_p[items] - log_p[batch.positives.cpu()][:, None]

    def __init__(self, dataset, n_negatives, args: InBatchPopArgs, generator, kernels: str = "auto"):
        super().__init__(dataset, n_negatives, args, generator, kernels)
        self.log_p = log_popularity(dataset, generator.device)

    def sample(self, batch: Batch) -> Negatives:
        log_q = self.log_p[batch.positives]
        return Negatives(batch.positives[None, :], log_q[None, :], log_q, keeps_positive=self.args.keep_positive)
