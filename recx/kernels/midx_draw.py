"""The three-stage MIDX draw (recx.samplers.midx), given each query's cell log-weights and the stage-3 cumulative
weights; a torch reference and a CuPy kernel that read the same uniforms (u1, u2, u3) per draw.

For query b with joint cell weights J[k1, k2] = exp(log_joint[b, k1, k2]):
    k1 = the first k with Σ_{k' ≤ k} Σ_j J[k', j] > t1,   t1 = u1 · Σ J                            (stage 1)
    k2 = the first k with Σ_{k' ≤ k} J[k1, k'] > t2,      t2 = u2 · Σ_j J[k1, j]                   (stage 2)
    cell c = k1 K + k2, positions [s, e) = cell_ptr[c], cell_ptr[c + 1] in `order`;
    position = the first p in [s, e) with C[p + 1] > t3,  t3 = C[s] + u3 (C[e] - C[s])             (stage 3)
with C the cumulative stage-3 weights and every target t kept below the total it is compared with (at most the
largest double under it), so that a target rounded onto the total never selects past the last positive weight.
Zero-weight cells and items are never drawn (strict inequalities).
"""

from __future__ import annotations

import torch


def inverse_cdf(weights: torch.Tensor, uniforms: torch.Tensor) -> torch.Tensor:
    """Index drawn from each row of `weights` [..., K] by `uniforms` [...] in [0, 1)."""
    cdf = torch.cumsum(weights, dim=-1)
    target = (uniforms * cdf[..., -1])[..., None]
    return torch.searchsorted(cdf, target, right=True)[..., 0].clamp_max(weights.shape[-1] - 1)


def below(fraction: torch.Tensor, low: torch.Tensor, high: torch.Tensor) -> torch.Tensor:
    """low + fraction · (high - low), kept under `high` (high > low ≥ 0)."""
    return torch.minimum(low + fraction * (high - low), torch.nextafter(high, torch.zeros_like(high)))


def count_at_most(values: torch.Tensor, origin, targets: torch.Tensor, largest: int) -> torch.Tensor:
    """origin + #{j : C_j ≤ target} for the nondecreasing window C_j = values[..., origin + j] (values [L] or
    [B, L], read at every index below origin + 2 · largest), when C_{largest - 1} > target: binary lifting,
    ⌈log2 largest⌉ gathers and comparisons per target (torch.searchsorted(right=True) over each target's own window,
    several times faster than it on a CPU)."""
    read = values.take if values.ndim == 1 else lambda index: values.gather(1, index)
    pointer = torch.zeros(targets.shape, dtype=torch.int64, device=targets.device) + origin
    step = 1 << (largest - 1).bit_length() - 1 if largest > 1 else 0
    while step:
        pointer += (read(pointer + (step - 1)) <= targets) * step
        step >>= 1
    return pointer


def padded(values: torch.Tensor, width: int) -> torch.Tensor:
    """`values` with `width` entries of +inf after its last dimension (count_at_most reads past a window's end)."""
    return torch.nn.functional.pad(values, (0, width), value=float("inf"))


def draw_torch(
    log_joint: torch.Tensor,
    cumulative: torch.Tensor | None,
    cell_ptr: torch.Tensor,
    order: torch.Tensor,
    uniforms: torch.Tensor,
    largest_cell: int,
) -> torch.Tensor:
    """Items [B, n] for `uniforms` [B, n, 3] (float64); `cumulative` is [M + 1] (shared), [B, M + 1], or None
    for equal stage-3 weights (the uniform draw start + floor(u3 · |cell|), the same law as an arange cumulative);
    `largest_cell` bounds the cells' sizes (stage 3's search length).

    Stages 1 and 2 search each query's cumulative joint weights over the K² cells (k1-major, a 0 in front): its
    values at row ends are stage 1's CDF, and within row k1 it is stage 2's CDF shifted by the rows before."""
    batch, n, _ = uniforms.shape
    k = log_joint.shape[1]
    flat = log_joint.to(torch.float64).flatten(1)
    cells_cdf = torch.full((batch, k * k + 1 + 2 * k), float("inf"), dtype=torch.float64, device=flat.device)
    cells_cdf[:, 0] = 0.0
    torch.cumsum(torch.exp(flat - flat.max(dim=1, keepdim=True).values), dim=1, out=cells_cdf[:, 1 : k * k + 1])
    row_end = padded(cells_cdf[:, k : k * k + 1 : k], 2 * k)  # [B, 3K]: stage 1's CDF
    total = row_end[:, k - 1 : k]
    first = count_at_most(row_end, 0, below(uniforms[..., 0], torch.zeros_like(total), total), k)
    base = first * k
    low, high = cells_cdf.gather(1, base), cells_cdf.gather(1, base + k)
    cell = count_at_most(cells_cdf, base + 1, below(uniforms[..., 1], low, high), k) - 1
    start, end = cell_ptr.take(cell), cell_ptr.take(cell + 1)
    if cumulative is None:  # uniform within the cell: O(1) per draw
        return order.take(start + (uniforms[..., 2] * (end - start)).long().clamp_max(end - start - 1))
    if cumulative.ndim == 1:
        low, high = cumulative.take(start), cumulative.take(end)
    else:
        low, high = cumulative.gather(1, start), cumulative.gather(1, end)
    position = (
        count_at_most(padded(cumulative, 2 * largest_cell), start + 1, below(uniforms[..., 2], low, high), largest_cell)
        - 1
    )
    return order.take(position)


def draw_cells_and_items(
    log_joint: torch.Tensor,
    cumulative: torch.Tensor | None,
    cell_ptr: torch.Tensor,
    order: torch.Tensor,
    uniforms: torch.Tensor,
    largest_cell: int,
    kernels: str,
) -> torch.Tensor:
    if kernels == "cupy":
        from recx.kernels.cupy_kernels import midx_draw

        return midx_draw(log_joint, cumulative, cell_ptr, order, uniforms)
    return draw_torch(log_joint, cumulative, cell_ptr, order, uniforms, largest_cell)
