"""What several samplers use, in one place that method files import (a method file never imports another's):
popularity transforms, log p from the training counts, the rejection redraw of training items, and BIR's / XIR's
importance-resampling weights over shared candidates."""

from __future__ import annotations

import torch

from recx.core.device_paths import accelerator_branch
from recx.samplers.base import Batch, Negatives, Sampler

TRANSFORMS = {
    "count": lambda c: c,
    "log": torch.log1p,
    "pow0.75": lambda c: c.pow(0.75),
}


def log_popularity(dataset, device: torch.device) -> torch.Tensor:
    """log p(j) = log(c_j / Σ c), c the training counts (-inf for items never trained on, which no batch holds)."""
    counts = dataset.item_popularity.to(device=device, dtype=torch.float64)
    return torch.log(counts / counts.sum()).to(torch.float32)


def log_popularity64(dataset, smoothing: float = 0.0, transform=lambda c: c) -> torch.Tensor:
    """The references' log p(j) = log(f(c_j + smoothing) / Σ f(c + smoothing)) in float64, on the CPU."""
    counts = transform(dataset.item_popularity.double().cpu() + smoothing)
    return torch.log(counts / counts.sum())


def multiset_log_q_gap(sampler: Sampler, batch: Batch, negatives: Negatives) -> torch.Tensor:
    """The reference of the official BIR / XIR: every draw and the positive share one constant, so log_q -
    positive_log_q = -log c, c a candidate's multiplicity among the m draws, recovered from its weight c / m (XIR:
    from each group's weight and its half of m) (float64)."""
    m = sampler.args.n_resampled or batch.positives.numel()
    drawn = negatives.candidate_weights()
    if drawn is None:
        raise ValueError("resampled draws carry their multiplicities as candidate weights; these have none")
    weights = drawn.double().cpu()
    counts = weights * m
    if negatives.segments is not None:
        counts, start = weights.clone(), 0
        for size, weight in negatives.segments:
            counts[:, start : start + size] *= (m // 2) / weight
            start += size
    return -torch.log(counts.round())


REDRAWN_AT_ONCE = 1 << 24  # candidates of the accelerator branch's redraws drawn and tested in one block of rounds


def redraw_training_items(
    sampler: Sampler, users: torch.Tensor, items: torch.Tensor, draw, max_redraws: int
) -> torch.Tensor:
    """Rejection: a candidate items[b, k] that is a training item of users[b] is replaced by the first of fresh
    draws d_1, d_2, ... that is not, after at most `max_redraws` redraws (d_max_redraws is kept whatever it is). The
    host branch redraws round by round and stops at the first round with no training item; the accelerator branch
    draws the rounds in blocks (`draw((rounds, B, K))`) and picks each candidate's first acceptable draw with no host
    sync and a few launches a block. The same law; on a generator that fills a tensor in order (the CPU's) the same
    items as round by round."""
    if not accelerator_branch(items):
        for _ in range(max_redraws):
            hit = sampler.is_training_item(users, items)
            if not hit.any():
                break
            items = torch.where(hit, draw(items.shape), items)
        return items
    settled = ~sampler.is_training_item(users, items)
    block = max(1, REDRAWN_AT_ONCE // max(items.numel(), 1))
    for start in range(0, max_redraws, block):
        rounds = min(block, max_redraws - start)
        fresh = draw((rounds, *items.shape))
        acceptable = ~sampler.is_training_item(users, fresh)
        if start + rounds == max_redraws:
            acceptable[-1] = True
        first = fresh.gather(0, acceptable.to(torch.uint8).argmax(0, keepdim=True))[0]
        items = torch.where(settled, items, first)
        settled = settled | acceptable.any(0)
    return items


def training_item_mask(sampler: Sampler, users: torch.Tensor, items: torch.Tensor) -> torch.Tensor | None:
    """[B, K] True where the shared candidate items[k] is a training item of users[b]; None (nothing excluded)
    unless the sampler's `exclude_train` is on."""
    if not sampler.args.exclude_train:
        return None
    return sampler.is_training_item(users, items[None, :].expand(users.numel(), -1))


def resampling_weights(
    sampler: Sampler, batch: Batch, items: torch.Tensor, log_p: torch.Tensor, excluded: torch.Tensor | None
) -> torch.Tensor:
    """[B, K] softmax(s(u, j)/τ - log p(j)) over the shared candidates `items` [K], zero where `excluded` (None:
    nothing; a query with every candidate excluded keeps them all)."""
    shift = -log_p[items][None, :].expand(batch.query.shape[0], -1)
    logits = torch.addmm(shift, batch.query, batch.item_table[items].T, alpha=1 / sampler.args.temperature)
    if excluded is not None:
        logits = logits.masked_fill(excluded & ~excluded.all(dim=1, keepdim=True), float("-inf"))
    return torch.softmax(logits, dim=1)
