"""Removing each query's own positive from its candidates (score -inf), for the losses that ask (`mask_positive`).

Per-query candidates [B, n] are compared elementwise. Shared candidates [1, n] on the CPU hold a query's positive in
a few of the B·n entries at most, so the hits are found by sorting the n candidates and searching the B positives,
and only they are written; a [B, n] mask and its pass (forward and backward) are avoided. On CUDA, where sizing the
hit list would be a host sync, the elementwise mask is used for both.
"""

from __future__ import annotations

import torch

from recx.core.device_paths import accelerator_branch


def shared_hits(candidates: torch.Tensor, positives: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(rows, cols) with candidates[cols] == positives[rows]: every column of every repeat."""
    ordered, order = candidates.sort()
    first = torch.searchsorted(ordered, positives)
    counts = torch.searchsorted(ordered, positives, right=True) - first
    rows = torch.repeat_interleave(torch.arange(positives.numel(), device=positives.device), counts)
    starts = torch.repeat_interleave(first, counts)
    within = torch.arange(rows.numel(), device=rows.device) - torch.repeat_interleave(counts.cumsum(0) - counts, counts)
    return rows, order[starts + within]


class MaskEntries(torch.autograd.Function):
    """scores[rows, cols] = -inf in place; their gradient is zero. The incoming gradient is passed on as it is when
    it is already zero there (a softmax or pairwise loss gives exactly zero at -inf), else a copy is zeroed."""

    @staticmethod
    def forward(ctx, scores, rows, cols):
        scores.index_put_((rows, cols), torch.tensor(float("-inf"), dtype=scores.dtype, device=scores.device))
        ctx.mark_dirty(scores)
        ctx.save_for_backward(rows, cols)
        return scores

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad):
        rows, cols = ctx.saved_tensors
        if bool(grad[rows, cols].any()):
            grad = grad.index_put((rows, cols), grad.new_zeros(()))
        return grad, None, None


def positive_mask(candidates: torch.Tensor, positives: torch.Tensor):
    """Where each query's candidate is its own positive: (rows, cols) for shared candidates on the CPU, else a
    [B, n] bool tensor."""
    if candidates.shape[0] == 1 and not accelerator_branch(candidates):
        return shared_hits(candidates[0], positives)
    return candidates == positives[:, None]


def mask_positives(neg_scores: torch.Tensor, candidates: torch.Tensor, positives: torch.Tensor) -> torch.Tensor:
    """neg_scores [B, n] with -inf where a query's candidate is its own positive (in place)."""
    if candidates.shape[0] == 1 and not accelerator_branch(neg_scores) and neg_scores.shape[0] == positives.shape[0]:
        return MaskEntries.apply(neg_scores, *shared_hits(candidates[0], positives))
    return neg_scores.masked_fill_(candidates == positives[:, None], float("-inf"))
