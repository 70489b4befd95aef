"""XIR: BIR plus a cache of items that have been resampled often (the BIR paper's cache-augmented variant).

Proposal per query u, over the batch's positions B and the cache's items C (each cache item one atom):
    q(j | u) = (1 - λ) w_B(j | u) + λ w_C(j | u),
w_B the BIR weights (exp(s/τ - log p) over B, see bir.py) and w_C = softmax(s/τ) over the cache (cache items are
held, not drawn by popularity, so they get no popularity correction); λ is `cache_weight` (0 for a query with no
allowed cache item, e.g. while the cache is empty). m atoms are drawn i.i.d. from q, and the sampled softmax over them
uses log_q = log m + log q(j | u), log_q(positive) = 0: the importance-weighted softmax over the positive, the batch and
the cache. As in bir.py the draws come back as multiplicities c over the shared atoms (batch positions, then cache):
log_q = log(m q / c), +inf where c = 0, pairwise weights c / m.

Cache rule (state updated every step, at the end of `sample`, kept across epochs): per-item counts h start at 0;
    h ← decay · h + (number of times each item was drawn from the batch part in this step, over all queries),
and the cache for the next step is the `cache_size` items with the largest h (only items with h > 0). Draws from the
cache itself do not count, so the cache does not feed itself.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from recx.errors import RecxError
from recx.samplers import SAMPLERS
from recx.samplers.base import Batch, Negatives, Sampler
from recx.samplers.bir import batch_log_weights, candidate_mask
from recx.samplers.candidates import resampled_negatives
from recx.samplers.in_batch import log_popularity


@dataclass
class XIRArgs:
    n_resampled: int = 0  # m; 0: the batch size
    temperature: float = 1.0
    cache_size: int = 1024
    cache_weight: float = 0.5  # λ, the share of the proposal given to the cache
    cache_decay: float = 0.9
    exclude_train: bool = False


def update_hits(hits: torch.Tensor, items: torch.Tensor, counts: torch.Tensor, decay: float) -> torch.Tensor:
    """h ← decay · h + the number of draws of each item: `counts` [B, K] are draws of the batch positions `items` [K]."""
    return (hits * decay).index_add_(0, items, counts.sum(dim=0).to(hits.dtype))


def cache_of(hits: torch.Tensor, size: int) -> torch.Tensor:
    """The (at most) `size` items with the largest counts, among items with a positive count."""
    top = torch.topk(hits, min(size, hits.numel()))
    return top.indices[top.values > 0]


@SAMPLERS.register("xir")
class CachedImportanceResampler(Sampler):
    Args = XIRArgs

    def __init__(self, dataset, n_negatives, args: XIRArgs, generator, kernels: str = "auto"):
        super().__init__(dataset, n_negatives, args, generator, kernels)
        if args.n_resampled < 0 or args.temperature <= 0 or args.cache_size < 1:
            raise RecxError("sampler_args: xir needs n_resampled >= 0, temperature > 0 and cache_size >= 1")
        if not 0 <= args.cache_weight < 1 or not 0 <= args.cache_decay <= 1:
            raise RecxError("sampler_args: xir needs 0 <= cache_weight < 1 and 0 <= cache_decay <= 1")
        self.log_p = log_popularity(dataset, generator.device)
        self.hits = torch.zeros(dataset.n_items, dtype=torch.float64, device=generator.device)
        self.cache = cache_of(self.hits, args.cache_size)

    def proposal(self, batch: Batch) -> torch.Tensor:
        """[B, B + C] q(j | u) over the batch's positions then the cache's items."""
        batch_part = batch_log_weights(self, batch, self.log_p).exp()
        if self.cache.numel() == 0:
            return batch_part
        logits = batch.query @ batch.item_table[self.cache].T / self.args.temperature
        allowed = candidate_mask(self, batch, self.cache)
        cache_part = torch.softmax(logits.masked_fill(~allowed, float("-inf")), dim=1).nan_to_num(0.0)
        share = self.args.cache_weight * allowed.any(dim=1, keepdim=True)
        return torch.cat([(1 - share) * batch_part, share * cache_part], dim=1)

    def sample(self, batch: Batch) -> Negatives:
        m = self.args.n_resampled or batch.positives.numel()
        atoms = torch.cat([batch.positives, self.cache])
        negatives = resampled_negatives(atoms, self.proposal(batch), m, self.generator)
        batch_draws = (negatives.weights[:, :batch.positives.numel()] * m).round()
        self.hits = update_hits(self.hits, batch.positives, batch_draws, self.args.cache_decay)
        self.cache = cache_of(self.hits, self.args.cache_size)
        return negatives
