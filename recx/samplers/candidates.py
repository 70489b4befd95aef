"""Helpers shared by the score-aware samplers: uniform candidates (optionally without training items), their scores,
and row-wise resampling from per-query weights (returned as multiplicities over a shared candidate set)."""

from __future__ import annotations

import math

import numpy as np
import torch

from recx.core.device_paths import accelerator_branch
from recx.kernels.inverse_cdf import inverse_cdf_counts, negative_log_counts, shares_of_draws
from recx.models.scoring import per_query_scores
from recx.samplers.base import Batch, Negatives, Sampler
from recx.samplers.shared import redraw_training_items


def uniform_candidates(
    sampler: Sampler, users: torch.Tensor, n: int, exclude_train: bool, max_redraws: int
) -> torch.Tensor:
    """[B, n] items drawn uniformly; with `exclude_train`, uniformly from the items the user has not trained on."""
    n_items = sampler.dataset.n_items
    draw = lambda shape: torch.randint(0, n_items, shape, generator=sampler.generator, device=users.device)  # noqa: E731
    items = draw((users.numel(), n))
    return redraw_training_items(sampler, users, items, draw, max_redraws) if exclude_train else items


def uniform_log_q(shape: tuple[int, ...], n_items: int, device: torch.device) -> torch.Tensor:
    return torch.full(shape, -math.log(n_items), device=device)


def candidate_scores(batch: Batch, items: torch.Tensor) -> torch.Tensor:
    """[B, n] inner products of each query with its candidates (detached representations)."""
    return per_query_scores(batch.query, batch.item_table, items)


def positive_scores(batch: Batch) -> torch.Tensor:
    return (batch.query * batch.item_table[batch.positives]).sum(-1)


def draw_counts(probabilities: torch.Tensor, m: int, generator: torch.Generator) -> torch.Tensor:
    """[R, K] multiplicities of m i.i.d. draws per row from `probabilities` [R, K] by the inverse CDF: for each
    uniform, the first column whose cumulative sum exceeds it (zero-probability columns are never drawn). On the
    host branch the guide-table kernel draws and counts (recx.kernels.inverse_cdf, its own counter-based
    uniforms from a seed drawn from `generator`); on the accelerator branch torch.rand, a binary search and a
    scatter. The two branches draw from the same law, not the same draws."""
    if not accelerator_branch(probabilities):
        seed = int(torch.randint(0, 2**63 - 1, (), generator=generator, device=probabilities.device))
        return torch.from_numpy(inverse_cdf_counts(probabilities.detach().contiguous().numpy(), m, np.uint64(seed)))
    cdf = torch.cumsum(probabilities, dim=1)
    uniforms = torch.rand((cdf.shape[0], m), generator=generator, device=cdf.device, dtype=cdf.dtype) * cdf[:, -1:]
    positions = torch.searchsorted(cdf, uniforms, right=True).clamp_max(probabilities.shape[1] - 1)
    return torch.zeros_like(probabilities).scatter_add_(
        1, positions, torch.ones_like(positions, dtype=probabilities.dtype)
    )


def multiset_log_q(counts: torch.Tensor) -> torch.Tensor:
    """log_q = -log c for atoms drawn c times (+inf where c = 0): with positive_log_q = 0, the corrected softmax
    Σ_k exp(o_k - log_q_k) = Σ_k c_k exp(o_k) is the plain softmax over the drawn multiset, every draw (and the
    positive) with the same constant log-probability. On the host branch a compiled kernel (see
    recx.kernels.inverse_cdf.negative_log_counts)."""
    if not accelerator_branch(counts):
        return torch.from_numpy(negative_log_counts(counts.numpy()))
    return torch.log(counts).neg_()


def draw_shares(counts: torch.Tensor, m: int) -> torch.Tensor:
    """c / m: each atom's share of a row's m draws (pairwise losses' candidate weights); on the host branch a
    compiled kernel that divides only the drawn entries (recx.kernels.inverse_cdf.shares_of_draws)."""
    if not accelerator_branch(counts):
        return torch.from_numpy(shares_of_draws(counts.numpy(), m))
    return counts / m


def importance_resampled_negatives(
    atoms: torch.Tensor, probabilities: torch.Tensor, m: int, generator: torch.Generator
) -> Negatives:
    """m i.i.d. draws per query from `probabilities` [B, K] over the shared `atoms` [K], as multiplicities c [B, K],
    importance-weighted: log_q = log(m q / c) (+inf where c = 0).

    The sampled softmax over the drawn multiset, Σ_l exp(o(a_l) - log(m q(a_l))), equals Σ_k exp(o(a_k) - log_q[b, k]),
    so the candidates stay the shared atoms and scores are one [B, K] product instead of a [B, m, d] gather. Pairwise
    losses get weights c / m (the mean over the draws). positive_log_q is 0 (the positive enters with its plain logit).
    """
    counts = draw_counts(probabilities, m, generator)
    drawn = counts > 0
    log_q = torch.where(drawn, torch.log(m * probabilities / counts.clamp_min(1)), float("inf"))
    positive_log_q = torch.zeros(probabilities.shape[0], device=probabilities.device)
    return Negatives(atoms[None, :], log_q, positive_log_q, draw_shares(counts, m))
