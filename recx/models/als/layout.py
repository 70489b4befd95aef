"""Rows of a sparse matrix in padded chunks, for batched per-row solves with bounded memory.

Rows are sorted by length so that a chunk pads little; a chunk holds at most `max_slots` padded (row, position)
slots and `max_rows` rows. Built once per matrix (the structure does not change across ALS iterations); the only
Python loop is over chunks.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch


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


def padded_chunks(indptr: torch.Tensor, max_slots: int = 1 << 15, max_rows: int = 4096) -> list[Chunk]:
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
