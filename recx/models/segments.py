"""Sums over the rows of a sparse matrix in a fixed order, for CUDA under deterministic algorithms.

cuSPARSE's products (sparse-dense, SDDMM) and atomic adds sum a row's entries in an order that depends on thread
scheduling, so their float sums do not repeat bit for bit. `RowSegments` sums row r's terms,
out_r = Σ_{e in row r} t_e, by torch.segment_reduce: a row's entries are added in sequence (on CUDA one thread a row
and column, no atomic adds), over chunks of consecutive rows of at most CHUNK_ENTRIES entries so that the terms made
for a chunk ([entries, d]: gathered rows) stay bounded. Its users: LightGCN's graph product (recx.models.graph) and
the ALS models' conjugate-gradient products (recx.models.als.solve).
"""

from __future__ import annotations

from collections.abc import Callable

import torch

CHUNK_ENTRIES = 2**20  # entries per chunk of rows: [entries, d] terms at a time


class RowSegments:
    """The rows of a CSR structure (row lengths [R], entries in row order) in chunks of consecutive rows, each of
    at most CHUNK_ENTRIES entries (a longer row alone); the chunk bounds are read once on the host."""

    def __init__(self, lengths: torch.Tensor):
        self.lengths = lengths
        self.n_rows = lengths.numel()
        ends = torch.cumsum(lengths, 0).cpu()
        self.chunks = []  # (first row, end row, first entry, end entry)
        start_row, start_entry = 0, 0
        while start_row < self.n_rows:
            limit = start_entry + CHUNK_ENTRIES
            end_row = max(int(torch.searchsorted(ends, limit, right=True)), start_row + 1)
            end_entry = int(ends[end_row - 1])
            self.chunks.append((start_row, end_row, start_entry, end_entry))
            start_row, start_entry = end_row, end_entry

    def sums(self, terms: Callable[[int, int], torch.Tensor]) -> torch.Tensor:
        """out_r = Σ_{e in row r} t_e for every row, [R, ...]: `terms(first, end)` gives t_e for the entries
        first..end - 1 of one chunk ([end - first, ...]); each row's terms are summed in sequence (0 for an empty
        row)."""
        parts = []
        for first_row, end_row, first, end in self.chunks:
            parts.append(
                torch.segment_reduce(terms(first, end), "sum", lengths=self.lengths[first_row:end_row], axis=0)
            )
        return torch.cat(parts)
