"""BIR: in-batch importance resampling (the BIR paper, "Cache-Augmented Inbatch Importance Resampling", NeurIPS 2022),
as its official code (HERECJ/XIR, `--debias 3`) runs it.

For query u and the batch's items B (positions, duplicates kept, the query's own positive included), draw m positions
o_1..o_m i.i.d. with replacement from
    w(j | u) = exp(s(u, j)/τ - log p(j)) / Σ_{k ∈ B} exp(s(u, k)/τ - log p(k)),   p(j) = c_j / Σ c (training counts),
which tends to the softmax over all items as |B| grows (Theorem 3.1); then apply a plain softmax over the positive
and the draws, all with one constant log-probability:
    L = -s_i/τ + log( exp(s_i/τ) + Σ_{l ≤ m} exp(s(u, o_l)/τ) ).
A draw of the query's own positive stays in the denominator, as in the official code (`keeps_positive`). The draws
come back as multiplicities c over the batch's positions (candidates: the batch's items, shared) with log_q = -log c
(+inf where c = 0) and positive_log_q = 0, so the logQ-corrected softmax (recx/losses/softmax.py) computes exactly
this loss without a [B, m, d] gather; pairwise losses get weights c / m. τ is `temperature` (the official code: 1)
and should equal the loss's temperature. m defaults to the batch size (the official code). `exclude_train` (default
off, as in the official code) removes the user's training items, its own positive among them, from the draws.

This departs from the design's logQ contract on purpose: the importance-weighted estimator written in the appendix's
proof of Theorem 3.2 is the sampler `bir_iw` (recx/samplers/bir_importance.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

import torch

from recx.core.args import arg
from recx.samplers.base import Batch, Negatives, Sampler
from recx.samplers.candidates import draw_counts, draw_shares, multiset_log_q
from recx.samplers.registry import SAMPLERS
from recx.samplers.shared import log_popularity, multiset_log_q_gap, resampling_weights, training_item_mask


@dataclass
class BIRArgs:
    n_resampled: int = arg(0, at_least=0, at_most=10_000_000, help="m draws per query; 0: the batch size")
    temperature: float = arg(1.0, above=0, help="τ: scores are divided by it")
    exclude_train: bool = arg(False, help="draw only items the user has not trained on")


@SAMPLERS.register("bir")
class BatchImportanceResampler(Sampler):
    summary = "BIR: in-batch importance resampling of the batch's items by softmax(s/τ - log p), as the official code"
    adaptive = True
    unchecked_law = "the official BIR: a multiset resampled from the batch, log q = -log of each draw's multiplicity"
    Args = BIRArgs
    reference_log_q_gap = multiset_log_q_gap

    def __init__(self, dataset, n_negatives, args: BIRArgs, generator, kernels: str = "auto"):
        super().__init__(dataset, n_negatives, args, generator, kernels)
        self.log_p = log_popularity(dataset, generator.device)

    def sample(self, batch: Batch) -> Negatives:
        m = self.args.n_resampled or batch.positives.numel()
        items = batch.positives
        weights = resampling_weights(self, batch, items, self.log_p, training_item_mask(self, batch.users, items))
        counts = draw_counts(weights, m, self.generator)
        positive_log_q = torch.zeros(items.numel(), device=items.device)
        shares = partial(draw_shares, counts, m)  # computed when a pairwise loss reads them
        return Negatives(items[None, :], multiset_log_q(counts), positive_log_q, shares, keeps_positive=True)
