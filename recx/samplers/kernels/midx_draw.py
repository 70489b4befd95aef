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


def draw_torch(log_joint: torch.Tensor, cumulative: torch.Tensor, cell_ptr: torch.Tensor, order: torch.Tensor,
               uniforms: torch.Tensor) -> torch.Tensor:
    """Items [B, n] for `uniforms` [B, n, 3] (float64); `cumulative` is [M + 1] (shared) or [B, M + 1]."""
    batch, n, _ = uniforms.shape
    k = log_joint.shape[1]
    flat = log_joint.to(torch.float64).flatten(1)
    joint = torch.exp(flat - flat.max(dim=1, keepdim=True).values).view(batch, k, k)
    first = inverse_cdf(joint.sum(-1)[:, None, :].expand(batch, n, k), uniforms[..., 0])
    rows = joint.gather(1, first[..., None].expand(batch, n, k))
    second = inverse_cdf(rows, uniforms[..., 1])
    cell = first * k + second
    start, end = cell_ptr[cell], cell_ptr[cell + 1]
    if cumulative.ndim == 1:
        low, high = cumulative[start], cumulative[end]
        target = low + uniforms[..., 2] * (high - low)
        position = torch.searchsorted(cumulative[1:], target, right=True)
    else:
        low, high = cumulative.gather(1, start), cumulative.gather(1, end)
        target = low + uniforms[..., 2] * (high - low)
        position = torch.searchsorted(cumulative[:, 1:].contiguous(), target, right=True)
    return order[torch.minimum(torch.maximum(position, start), end - 1)]


def draw_cells_and_items(log_joint: torch.Tensor, cumulative: torch.Tensor, cell_ptr: torch.Tensor,
                         order: torch.Tensor, uniforms: torch.Tensor, backend: str) -> torch.Tensor:
    if backend == "cupy":
        from recx.samplers.kernels.cupy_kernels import midx_draw

        return midx_draw(log_joint, cumulative, cell_ptr, order, uniforms)
    return draw_torch(log_joint, cumulative, cell_ptr, order, uniforms)
