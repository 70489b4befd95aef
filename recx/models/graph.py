"""The symmetric-normalised user-item graph of LightGCN: Â = D^-1/2 A D^-1/2 over n_users + n_items nodes.

A = [[0, R], [Rᵀ, 0]] with R the training interactions; D the node degrees (isolated nodes keep a zero row).
`OrderedRows` is Â X summed row by row in a fixed order (no atomic adds), the product LightGCN uses on CUDA under
deterministic algorithms, where cuSPARSE's does not repeat bit for bit.
"""

from __future__ import annotations

import torch

from recx.data.csr import CSR
from recx.models.segments import RowSegments


def normalized_adjacency(train: CSR, n_users: int) -> torch.Tensor:
    """Â as a coalesced sparse COO tensor (float32) on the device of `train`."""
    users, items = train.row_ids(), train.indices + n_users
    n_nodes = n_users + train.n_cols
    rows, cols = torch.cat([users, items]), torch.cat([items, users])
    degree = torch.bincount(rows, minlength=n_nodes).to(torch.float32)
    inv_sqrt = torch.where(degree > 0, degree.clamp_min(1).rsqrt(), torch.zeros_like(degree))
    values = inv_sqrt[rows] * inv_sqrt[cols]
    return torch.sparse_coo_tensor(
        torch.stack([rows, cols]), values, (n_nodes, n_nodes), check_invariants=True
    ).coalesce()


class OrderedRows:
    """Â X for the symmetric Â (coalesced COO, so row-major): out_r = Σ_{e in row r} v_e X_{c_e}, each row's sum by
    torch.segment_reduce in chunks of rows (recx.models.segments: a row's entries summed in sequence, no atomic
    adds). Its gradient Âᵀ G = Â G is the same product, so forward and backward repeat bit for bit.
    Shapes: X [n, d] -> [n, d]."""

    def __init__(self, adjacency: torch.Tensor):
        rows, self.columns = adjacency.indices()
        self.values = adjacency.values()
        self.rows = RowSegments(torch.bincount(rows, minlength=adjacency.shape[0]))

    def product(self, x: torch.Tensor) -> torch.Tensor:
        """Â x, [n, d], without autograd."""
        return self.rows.sums(lambda first, end: self.values[first:end, None] * x[self.columns[first:end]])

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        """Â x with its gradient Â g (autograd)."""
        return _OrderedProduct.apply(x, self)


class _OrderedProduct(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: torch.Tensor, rows: OrderedRows) -> torch.Tensor:
        ctx.rows = rows
        return rows.product(x)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        return ctx.rows.product(grad), None
