"""BPR on dot-product scores, forward and backward in one compiled pass over the rows a step reads (numba, CPU).

For each query b with user row u = U[users[b]] and candidate rows r_j = I[ids[b, j]] (j = 0 its positive, j ≥ 1 its
k negatives), s_j = u · r_j, x_j = s_j - s_0 and (Rendle et al. 2009)

    ℓ[b, j-1] = softplus(x_j),          ∂ℓ/∂x_j = σ(x_j),
    ∂s_j = c σ(x_j),  ∂s_0 = -Σ_j ∂s_j, ∂u = Σ_j ∂s_j r_j (j from 0),  ∂r_j = ∂s_j u,

where c is the loss's weight of one pair (1/(B k) for the mean over queries of the mean over candidates, 1 for the
sum). This is the gradient autograd forms through the row gathers, the row dots (recx.kernels.row_dots), softplus
and the reduction, with the same float32 operations in the same order (softplus with torch's threshold 20, its
derivative as z / (z + 1), z = e^x), except the dot products, summed in eight interleaved partial sums (recx.kernels.lanes)
where the row dots sum in order, and e^x, from another library: results agree to rounding. The loss,
c Σ_b Σ_j ℓ[b, j], is summed in float64 in query order after the parallel pass (torch's mean sums in float32).
Queries run in parallel, each on its own, so the numbers do not depend on the thread count.

Shapes: user_table [N_u, d], item_table [N_i, d], users [B], ids [B, 1 + k] -> the loss (a float), user row
gradients [B, d], candidate row gradients [B, 1 + k, d] in the tables' dtype. `bpr_reference`: the same through
torch autograd (tests/test_kernels_references.py).
"""

from __future__ import annotations

import numba
import numpy as np
import torch
import torch.nn.functional as F

from recx.kernels.jit import compiled
from recx.kernels.lanes import dot_rows
from recx.kernels.prefetch import prefetch_whole_row

SOFTPLUS_THRESHOLD = 20.0  # torch's softplus: x itself above it
PREFETCH_QUERIES = 4  # the rows of the query this many ahead are asked for (recx.kernels.prefetch)


@compiled(parallel=True)
def bpr_row_gradients(user_table, item_table, users, ids, pair_weight):
    n_queries, n_rows = ids.shape
    d = user_table.shape[1]
    dtype = user_table.dtype
    query_losses = np.empty(n_queries, np.float64)
    user_grads = np.empty((n_queries, d), dtype)
    row_grads = np.empty((n_queries, n_rows, d), dtype)
    weights = np.empty((n_queries, n_rows), dtype)
    threshold = dtype.type(SOFTPLUS_THRESHOLD)
    one = dtype.type(1.0)
    for b in numba.prange(n_queries):
        if b + PREFETCH_QUERIES < n_queries:
            prefetch_whole_row(user_table, users[b + PREFETCH_QUERIES])
            for j in range(n_rows):
                prefetch_whole_row(item_table, ids[b + PREFETCH_QUERIES, j])
        user = users[b]
        positive_score = dot_rows(user_table, user, item_table, ids[b, 0])
        positive_weight = dtype.type(0.0)
        query_loss = 0.0
        for j in range(1, n_rows):
            x = dot_rows(user_table, user, item_table, ids[b, j]) - positive_score
            z = np.exp(x)
            query_loss += x if x > threshold else np.log1p(z)
            weight = pair_weight if x > threshold else pair_weight * z / (z + one)
            weights[b, j] = weight
            positive_weight -= weight
        weights[b, 0] = positive_weight
        query_losses[b] = query_loss
        positive = ids[b, 0]
        for c in range(d):
            user_grads[b, c] = positive_weight * item_table[positive, c]
            row_grads[b, 0, c] = positive_weight * user_table[user, c]
        for j in range(1, n_rows):
            item = ids[b, j]
            weight = weights[b, j]
            for c in range(d):
                user_grads[b, c] += weight * item_table[item, c]
                row_grads[b, j, c] = weight * user_table[user, c]
    total = 0.0
    for b in range(n_queries):
        total += query_losses[b]
    return total * pair_weight, user_grads, row_grads


def bpr_reference(user_table: torch.Tensor, item_table: torch.Tensor, users, ids, pair_weight: float):
    """c Σ_b Σ_j softplus(s_bj - s_b0) and its gradients in the rows read, by torch autograd (the kernel's reference)."""
    user = user_table[users].detach().requires_grad_(True)
    rows = item_table[ids].detach().requires_grad_(True)
    scores = (user[:, None, :] * rows).sum(-1)
    loss = F.softplus(scores[:, 1:] - scores[:, :1]).sum() * pair_weight
    loss.backward()
    return float(loss.detach()), user.grad, rows.grad
