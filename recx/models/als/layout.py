"""Rows of a sparse matrix in padded chunks, for batched per-row solves with bounded memory.

Rows are sorted by length so that a chunk pads little; a chunk holds at most `max_slots` padded (row, position)
slots and `max_rows` rows. Built once per matrix and budget (the structure does not change across ALS iterations);
the only Python loop is over chunks. The budget (`chunk_budget`) depends on the branch: on the host a chunk's
gathered rows stay near the cache; on the accelerator each chunk costs ~26 kernel launches whatever its size, so its
chunks are as large as a fixed memory bound allows (ML-10M's RG iteration: 113 chunks on the host's budget).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from recx.core.device_paths import accelerator_branch

HOST_BUDGET = (1 << 15, 4096)  # (slots, rows) a chunk on the host branch
ACCELERATOR_GATHERED = 1 << 27  # elements of a chunk's gathered rows [B, L, d] (512 MiB in float32)
ACCELERATOR_SYSTEMS = 1 << 26  # elements of a chunk's systems [B, d, d] (256 MiB in float32)


@dataclass(frozen=True)
class Chunk:
    rows: torch.Tensor  # int64 [B]: row ids
    positions: torch.Tensor  # int64 [B, L]: positions in the CSR's entry arrays (0 where padded)
    mask: torch.Tensor  # bool [B, L]: real entries


def chunk_bounds(sorted_lengths: np.ndarray, max_slots: int, max_rows: int) -> list[tuple[int, int]]:
    """[start, end) ranges over rows sorted by ascending length, each with (end - start) * longest <= max_slots
    (or a single row) and at most max_rows rows."""
    bounds, start, n = [], 0, sorted_lengths.size
    while start < n:
        ends = np.arange(start + 1, min(n, start + max_rows) + 1)
        cost = (ends - start) * np.maximum(sorted_lengths[ends - 1], 1)
        end = start + max(1, int(np.searchsorted(cost, max_slots, side="right")))
        bounds.append((start, end))
        start = end
    return bounds


def padded_chunks(indptr: torch.Tensor, max_slots: int = HOST_BUDGET[0], max_rows: int = HOST_BUDGET[1]) -> list[Chunk]:
    """The rows of a CSR (its `indptr`) as padded chunks on the indptr's device."""
    lengths = indptr[1:] - indptr[:-1]
    order = torch.argsort(lengths, stable=True)
    sorted_lengths = lengths[order].cpu().numpy()
    chunks = []
    for start, end in chunk_bounds(sorted_lengths, max_slots, max_rows):
        rows = order[start:end]
        width = int(sorted_lengths[end - 1])
        offsets = torch.arange(width, device=indptr.device)
        mask = offsets[None, :] < lengths[rows][:, None]
        positions = torch.where(mask, indptr[rows][:, None] + offsets[None, :], 0)
        chunks.append(Chunk(rows, positions, mask))
    return chunks


def chunk_budget(rows: torch.Tensor) -> tuple[int, int]:
    """(max_slots, max_rows) of the chunks that solve the factors `rows` [R, d]: HOST_BUDGET on the host branch; on
    the accelerator branch as many slots and rows as keep the chunk's gathered rows within ACCELERATOR_GATHERED
    elements and its systems within ACCELERATOR_SYSTEMS (a few GiB at the peak in float64 at d = 64)."""
    if not accelerator_branch(rows):
        return HOST_BUDGET
    dim = rows.shape[1]
    return max(1, ACCELERATOR_GATHERED // dim), max(1, ACCELERATOR_SYSTEMS // (dim * dim))
