"""XIR: BIR plus a cache of items resampled often (the BIR paper's cache-augmented variant), as its official code
(HERECJ/XIR, `--debias 8`, framework/trainer_cache.py) runs it.

Per query u, with m = `n_resampled` (0: the run's batch size, the first batch's: the official `Cache.update_pool`
draws int(batch_size / 2) per group for every batch, an epoch's last, partial one too), draw m/2 positions from the
batch and m/2 slots from the cache C, both i.i.d. from softmax(s(u, j)/τ - log p(j)) over their own set (batch
positions as in bir.py, own positive included; cache slots, duplicates kept), and mix two plain softmax losses:
    L = λ · CE(positive; cache draws) + (1 - λ) · CE(positive; batch draws),
CE(i; o_1..o_k) = -s_i/τ + log(exp(s_i/τ) + Σ_l exp(s(u, o_l)/τ)); λ is `cache_weight`. Candidates are the batch's
positions then the cache's slots (shared), with log_q = -log c (+inf where c = 0), positive_log_q = 0, and
`segments` ((|B|, 1 - λ), (|C|, λ)) so the softmax loss averages the two groups' losses; pairwise losses get weights
(1 - λ) c / (m/2) on the batch part and λ c / (m/2) on the cache part.

Cache rule (official): occurrence counts h start at 1 for every item and never decay; after each step's draws,
    h[j] += number of draws of item j in this step (batch and cache draws, over all queries),
and the next cache is `cache_size` (0: the batch size) draws with replacement from the items drawn in this step,
∝ h. The first cache is `cache_size` items drawn uniformly (the official code: from all items; here from items with a
training interaction, whose log p is finite). The cache a step samples from is the one built by the previous step.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

import torch

from recx.core.args import arg
from recx.samplers.base import Batch, Negatives, Sampler
from recx.samplers.candidates import draw_counts, multiset_log_q
from recx.samplers.registry import SAMPLERS
from recx.samplers.shared import log_popularity, multiset_log_q_gap, resampling_weights, training_item_mask


@dataclass
class XIRArgs:
    n_resampled: int = arg(
        0, at_least=0, at_most=10_000_000, help="m draws per query, half batch, half cache; 0: the run's batch size"
    )
    temperature: float = arg(1.0, above=0, help="τ: scores are divided by it")
    cache_size: int = arg(0, at_least=0, at_most=10_000_000, help="slots of the cache; 0: the batch size (official)")
    cache_weight: float = arg(0.5, at_least=0, at_most=1, help="λ: the cache group's share of the loss")
    exclude_train: bool = arg(False, help="draw only items the user has not trained on")


def next_cache(occurrence: torch.Tensor, drawn: torch.Tensor, size: int, generator: torch.Generator) -> torch.Tensor:
    """`size` items drawn with replacement from the items with `drawn` [n_items] True, ∝ `occurrence`."""
    return torch.multinomial(occurrence * drawn, size, replacement=True, generator=generator)


def group_shares(counts: list[torch.Tensor], weights: tuple[float, float], half: int) -> torch.Tensor:
    """[B, |B| + |C|]: w_g c / (m/2) for each group's counts c [B, n_g] and weight w_g, side by side."""
    return torch.cat([weight * part for weight, part in zip(weights, counts, strict=True)], dim=1) / half


@SAMPLERS.register("xir")
class CachedImportanceResampler(Sampler):
    summary = "XIR: BIR plus a cache of often-resampled items, two softmax losses mixed by λ, as the official code"
    adaptive = True
    unchecked_law = "the official XIR: multisets resampled from the cache and the batch, log q = -log multiplicity"
    Args = XIRArgs
    reference_log_q_gap = multiset_log_q_gap

    def __init__(self, dataset, n_negatives, args: XIRArgs, generator, kernels: str = "auto"):
        super().__init__(dataset, n_negatives, args, generator, kernels)
        self.log_p = log_popularity(dataset, generator.device)
        self.occurrence = torch.ones(dataset.n_items, dtype=torch.float64, device=generator.device)
        self.cache: torch.Tensor | None = None
        self.run_batch_size: int | None = None  # the first batch's size, the run's batch size (m's default)

    def first_cache(self, size: int) -> torch.Tensor:
        trained = (self.dataset.item_popularity > 0).to(device=self.occurrence.device, dtype=torch.float64)
        return torch.multinomial(trained, size, replacement=True, generator=self.generator)

    def sample(self, batch: Batch) -> Negatives:
        items, size = batch.positives, batch.positives.numel()
        if self.cache is None:
            self.run_batch_size = size
            self.cache = self.first_cache(self.args.cache_size or size)
        half = max(1, (self.args.n_resampled or self.run_batch_size or size) // 2)
        counts = [
            draw_counts(
                resampling_weights(self, batch, part, self.log_p, training_item_mask(self, batch.users, part)),
                half,
                self.generator,
            )
            for part in (items, self.cache)
        ]
        atoms = torch.cat([items, self.cache])
        per_atom = torch.cat([part.sum(0) for part in counts])  # the columns of the two groups side by side
        drawn = torch.zeros_like(self.occurrence).index_add_(0, atoms, per_atom.double())
        self.occurrence += drawn
        # written into the cache's own storage, not a new tensor: a captured step (a CUDA graph) reads it there
        self.cache.copy_(next_cache(self.occurrence, drawn > 0, self.cache.numel(), self.generator))
        share = self.args.cache_weight
        positive_log_q = torch.zeros(size, device=items.device)
        return Negatives(
            atoms[None, :],
            multiset_log_q(torch.cat(counts, dim=1)),
            positive_log_q,
            partial(group_shares, counts, (1 - share, share), half),  # computed when a pairwise loss reads them
            keeps_positive=True,
            segments=((size, 1 - share), (atoms.numel() - size, share)),
        )
