"""The symmetric-normalised user-item graph of LightGCN: Â = D^-1/2 A D^-1/2 over n_users + n_items nodes.

A = [[0, R], [Rᵀ, 0]] with R the training interactions; D the node degrees (isolated nodes keep a zero row).
"""

from __future__ import annotations

import torch

from recx.data.csr import CSR


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
