"""The three-stage MIDX draw (recx.samplers.midx), given each query's cell log-weights and the stage-3 cumulative
weights; a torch reference and a CuPy kernel that read the same uniforms (u1, u2, u3) per draw.

For query b with joint cell weights J[k1, k2] = exp(log_joint[b, k1, k2]):
    k1 = the first k with Σ_{k' ≤ k} Σ_j J[k', j] > u1 · Σ J          (stage 1)
    k2 = the first k with Σ_{k' ≤ k} J[k1, k'] > u2 · Σ_j J[k1, j]     (stage 2)
    cell c = k1 K + k2, positions [s, e) = cell_ptr[c], cell_ptr[c + 1] in `order`;
    position = the first p in [s, e) with C[p + 1] > C[s] + u3 (C[e] - C[s])  (stage 3, C the cumulative weights)
Zero-weight cells and items are never drawn (strict inequalities).
"""
from __future__ import annotations

import torch


def inverse_cdf(weights: torch.Tensor, uniforms: torch.Tensor) -> torch.Tensor:
    """Index drawn from each row of `weights` [..., K] by `uniforms` [...] in [0, 1)."""
    cdf = torch.cumsum(weights, dim=-1)
    target = (uniforms * cdf[..., -1])[..., None]
    return torch.searchsorted(cdf, target, right=True)[..., 0].clamp_max(weights.shape[-1] - 1)


def count_at_most(sorted_rows: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """For rows [..., K] sorted ascending and targets [...]: how many entries are ≤ the target, i.e.
    searchsorted(right=True), as K comparisons summed (several times faster than a batched binary search for
    K = 16 on a CPU)."""
    return (sorted_rows <= targets[..., None]).sum(-1)


def draw_torch(log_joint: torch.Tensor, cumulative: torch.Tensor, cell_ptr: torch.Tensor, order: torch.Tensor,
               uniforms: torch.Tensor) -> torch.Tensor:
    """Items [B, n] for `uniforms` [B, n, 3] (float64); `cumulative` is [M + 1] (shared), [B, M + 1], or None
    for equal stage-3 weights (the uniform draw start + floor(u3 · |cell|), the same law as an arange cumulative).

    Stages 1 and 2 search each query's cumulative joint weights over the K² cells (k1-major): its values at row
    ends are stage 1's CDF, and within row k1 it is stage 2's CDF shifted by the rows before, so stage 2 compares
    its target with row k1's K values only (the rows before are all ≤ it)."""
    batch, n, _ = uniforms.shape
    k = log_joint.shape[1]
    flat = log_joint.to(torch.float64).flatten(1)
    cells_cdf = torch.cumsum(torch.exp(flat - flat.max(dim=1, keepdim=True).values), dim=1)  # [B, K²]
    row_end = cells_cdf[:, k - 1::k]  # [B, K]
    first = count_at_most(row_end[:, None, :], uniforms[..., 0] * row_end[:, -1:]).clamp_max_(k - 1)
    high = row_end.gather(1, first)
    low = torch.where(first > 0, row_end.gather(1, (first - 1).clamp_min(0)), torch.zeros_like(high))
    row_cdf = cells_cdf.view(batch, k, k).gather(1, first[..., None].expand(batch, n, k))  # [B, n, K]: row k1
    cell = first * k + count_at_most(row_cdf, low + uniforms[..., 1] * (high - low)).clamp_max_(k - 1)
    start, end = cell_ptr[cell], cell_ptr[cell + 1]
    if cumulative is None:  # uniform within the cell: O(1) per draw
        return order[start + (uniforms[..., 2] * (end - start)).long().clamp_max(end - start - 1)]
    if cumulative.ndim == 1:
        low, high = cumulative[start], cumulative[end]
        position = torch.searchsorted(cumulative[1:], low + uniforms[..., 2] * (high - low), right=True)
    else:
        low, high = cumulative.gather(1, start), cumulative.gather(1, end)
        position = torch.searchsorted(cumulative[:, 1:].contiguous(), low + uniforms[..., 2] * (high - low), right=True)
    return order[torch.minimum(torch.maximum(position, start), end - 1)]


def draw_cells_and_items(log_joint: torch.Tensor, cumulative: torch.Tensor, cell_ptr: torch.Tensor,
                         order: torch.Tensor, uniforms: torch.Tensor, backend: str) -> torch.Tensor:
    if backend == "cupy":
        from recx.samplers.kernels.cupy_kernels import midx_draw

        return midx_draw(log_joint, cumulative, cell_ptr, order, uniforms)
    return draw_torch(log_joint, cumulative, cell_ptr, order, uniforms)
