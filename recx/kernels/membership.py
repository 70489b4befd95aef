"""Whether (row, col) pairs are stored in a CSR matrix (is item j a training item of user u?).

Torch reference: `CSR.contains`, one global `searchsorted` over the sorted keys row * n_cols + col.
CuPy kernel: one thread per pair, a binary search in indices[indptr[row]:indptr[row + 1]]. Both give the same booleans.
"""

from __future__ import annotations

import torch

from recx.data.csr import CSR


def contains(csr: CSR, rows: torch.Tensor, cols: torch.Tensor, kernels: str = "torch") -> torch.Tensor:
    """Boolean tensor of cols' shape; rows broadcast to it. `kernels` is 'torch' or 'cupy' (see choice.py)."""
    rows = rows.expand_as(cols)
    if kernels == "cupy":
        from recx.kernels.cupy_kernels import csr_contains

        return csr_contains(csr.indptr, csr.indices, rows, cols)
    return csr.contains(rows, cols)
