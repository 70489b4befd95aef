"""Batched closed-form row updates of alternating least squares: exact (Cholesky) or conjugate gradient.

A half-step fixes the other side's factors Y and sets every row r to the minimiser of a quadratic whose normal
equations are

    A_r x_r = b_r,   A_r = g_r G + Σ_{j ∈ pos(r)} c_rj y_j y_jᵀ + μ_r I,   b_r = h_r v + Σ_{j ∈ pos(r)} e_rj y_j,

with G a d×d Gramian shared by all rows (the Gramian trick of Hu et al. 2008 / iALS: only a row's observed
entries add a correction), so a half-step costs O(|D| d² + R d³) (exact) or O(cg_steps (|D| d + R d²)) (CG), never
O(M N). Rows are solved in padded chunks (recx.models.als.layout) on the factors' device; no per-row Python loop.

The CG form is implicit's `least_squares_cg` (Takács et al. 2011): warm start from the current rows, `cg_steps`
steps, a row whose residual norm² falls below 1e-20 stops moving.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from recx.models.als.layout import Chunk

SOLVERS = ("cg", "cholesky")
RESIDUAL_FLOOR = 1e-20


@dataclass
class RowSystem:
    """The normal equations of one half-step (see the module docstring); entry arrays are in this side's CSR
    order, `neighbours` holds the other side's id of each entry."""

    other: torch.Tensor  # Y [n_other, d]
    gram: torch.Tensor  # G [d, d]
    gram_scale: torch.Tensor  # g [R]
    ridge: torch.Tensor  # μ [R]
    shared_scale: torch.Tensor  # h [R]
    shared: torch.Tensor  # v [d]
    neighbours: torch.Tensor  # int64 [nnz]
    extra_weight: torch.Tensor  # c [nnz]
    target_weight: torch.Tensor  # e [nnz]
    zero_rows: torch.Tensor  # bool [R]: rows set to zero (no entry and nothing to fit)


class ChunkSystem:
    """The system restricted to one chunk's rows, with the chunk's observed rows of Y gathered once."""

    def __init__(self, system: RowSystem, chunk: Chunk):
        rows, positions = chunk.rows, chunk.positions
        weight_mask = chunk.mask.to(system.other.dtype)
        self.gathered = system.other[system.neighbours[positions]]  # [B, L, d]
        self.extra = (system.extra_weight[positions] * weight_mask).unsqueeze(2)  # [B, L, 1]
        target = (system.target_weight[positions] * weight_mask).unsqueeze(1)  # [B, 1, L]
        self.rhs = system.shared_scale[rows, None] * system.shared + torch.bmm(target, self.gathered).squeeze(1)
        self.gram, self.gram_scale = system.gram, system.gram_scale[rows, None]
        self.ridge = system.ridge[rows, None]

    def matrices(self) -> torch.Tensor:
        """A_r for every row of the chunk, [B, d, d]."""
        corrections = torch.bmm(self.gathered.transpose(1, 2), self.gathered * self.extra)
        eye = torch.eye(self.gram.shape[0], dtype=self.gram.dtype, device=self.gram.device)
        return self.gram_scale[:, :, None] * self.gram + corrections + self.ridge[:, :, None] * eye

    def apply(self, z: torch.Tensor) -> torch.Tensor:
        """A_r z_r for every row, [B, d], without forming A_r."""
        scores = torch.bmm(self.gathered, z.unsqueeze(2)) * self.extra
        return self.gram_scale * (z @ self.gram) + torch.bmm(self.gathered.transpose(1, 2), scores).squeeze(2) \
            + self.ridge * z


def exact_rows(part: ChunkSystem) -> torch.Tensor:
    factor, _ = torch.linalg.cholesky_ex(part.matrices())
    return torch.cholesky_solve(part.rhs.unsqueeze(2), factor).squeeze(2)


def conjugate_gradient_rows(part: ChunkSystem, start: torch.Tensor, steps: int) -> torch.Tensor:
    x = start.clone()
    residual = part.rhs - part.apply(x)
    direction = residual.clone()
    norm = (residual * residual).sum(1, keepdim=True)
    for _ in range(steps):
        active = norm > RESIDUAL_FLOOR
        product = part.apply(direction)
        step = torch.where(active, norm / (direction * product).sum(1, keepdim=True), 0.0)
        x = x + step * direction
        residual = residual - step * product
        new_norm = (residual * residual).sum(1, keepdim=True)
        direction = residual + (new_norm / norm.clamp_min(RESIDUAL_FLOOR)) * direction
        norm = torch.where(active, new_norm, norm)
    return x


@torch.no_grad()
def solve_rows(rows: torch.Tensor, system: RowSystem, chunks: list[Chunk], solver: str = "cg",
               cg_steps: int = 3) -> None:
    """Overwrite `rows` [R, d] with the half-step's solution (CG starts from the current values)."""
    for chunk in chunks:
        part = ChunkSystem(system, chunk)
        if solver == "cholesky":
            rows[chunk.rows] = exact_rows(part)
        else:
            rows[chunk.rows] = conjugate_gradient_rows(part, rows[chunk.rows], cg_steps)
    rows[system.zero_rows] = 0.0
