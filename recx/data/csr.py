"""CSR interaction matrices as torch tensors, and vectorised membership tests on them."""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class CSR:
    """Rows are users, column indices are items, sorted within each row. `indptr` has n_rows + 1 entries."""

    indptr: torch.Tensor  # int64 [n_rows + 1]
    indices: torch.Tensor  # int64 [nnz], sorted within each row
    n_cols: int

    @staticmethod
    def from_pairs(rows: torch.Tensor, cols: torch.Tensor, n_rows: int, n_cols: int) -> "CSR":
        """Build from (row, col) pairs; duplicates are kept once. Sorts by (row, col) with one stable key sort."""
        rows = torch.as_tensor(rows, dtype=torch.int64)
        cols = torch.as_tensor(cols, dtype=torch.int64)
        key = torch.unique(rows * n_cols + cols)  # sorted, deduplicated
        sorted_rows = torch.div(key, n_cols, rounding_mode="floor")
        indices = key - sorted_rows * n_cols
        counts = torch.bincount(sorted_rows, minlength=n_rows)
        indptr = torch.zeros(n_rows + 1, dtype=torch.int64, device=rows.device)
        indptr[1:] = torch.cumsum(counts, 0)
        return CSR(indptr, indices, n_cols)

    @property
    def n_rows(self) -> int:
        return self.indptr.numel() - 1

    @property
    def nnz(self) -> int:
        return self.indices.numel()

    def row_lengths(self) -> torch.Tensor:
        return self.indptr[1:] - self.indptr[:-1]

    def row_ids(self) -> torch.Tensor:
        """The row of every stored entry (the COO row vector)."""
        return torch.repeat_interleave(torch.arange(self.n_rows, device=self.indptr.device), self.row_lengths())

    def to(self, device: torch.device | str) -> "CSR":
        return CSR(self.indptr.to(device), self.indices.to(device), self.n_cols)

    def column_counts(self) -> torch.Tensor:
        return torch.bincount(self.indices, minlength=self.n_cols)

    def contains(self, rows: torch.Tensor, cols: torch.Tensor) -> torch.Tensor:
        """Whether each (rows[i...], cols[i...]) pair is stored: a binary search in each row via one global key search.

        Entries are sorted by key = row * n_cols + col, so one `searchsorted` over the key vector tests all pairs.
        """
        keys = self._keys()
        query = rows.to(torch.int64) * self.n_cols + cols.to(torch.int64)
        pos = torch.searchsorted(keys, query.reshape(-1)).clamp_max(max(keys.numel() - 1, 0))
        if keys.numel() == 0:
            return torch.zeros_like(query, dtype=torch.bool)
        return (keys[pos] == query.reshape(-1)).reshape(query.shape)

    def _keys(self) -> torch.Tensor:
        cached = getattr(self, "_key_cache", None)
        if cached is None or cached.device != self.indices.device:
            cached = self.row_ids() * self.n_cols + self.indices
            object.__setattr__(self, "_key_cache", cached)
        return cached

    def dense_rows(self, rows: torch.Tensor) -> torch.Tensor:
        """A boolean [len(rows), n_cols] mask of the given rows (for chunked evaluation)."""
        starts, ends = self.indptr[rows], self.indptr[rows + 1]
        lengths = ends - starts
        local_row = torch.repeat_interleave(torch.arange(rows.numel(), device=rows.device), lengths)
        offsets = torch.arange(int(lengths.sum()), device=rows.device) - torch.repeat_interleave(
            torch.cumsum(lengths, 0) - lengths, lengths
        )
        cols = self.indices[torch.repeat_interleave(starts, lengths) + offsets]
        mask = torch.zeros(rows.numel(), self.n_cols, dtype=torch.bool, device=rows.device)
        mask[local_row, cols] = True
        return mask
