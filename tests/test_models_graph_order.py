"""LightGCN's product summed row by row in a fixed order (recx.models.graph.OrderedRows, used on CUDA under
deterministic algorithms): Â X and its gradient equal torch.sparse.mm's and a float64 dense reference, in chunks of
rows (a chunk limit below one row's entries included), with users and items of no interaction (empty rows)."""

from __future__ import annotations

import pytest
import torch

from recx.data.csr import CSR
from recx.models import graph, segments


def _adjacency(n_users=50, n_items=40, pairs=300):
    generator = torch.Generator().manual_seed(0)
    users = torch.randint(0, n_users - 3, (pairs,), generator=generator)  # the last 3 users: no interaction
    items = torch.randint(0, n_items - 2, (pairs,), generator=generator)  # the last 2 items: none
    key = torch.unique(users * n_items + items)
    train = CSR.from_pairs(key // n_items, key % n_items, n_users, n_items)
    return graph.normalized_adjacency(train, n_users)


@pytest.mark.parametrize("chunk_entries", [1, 7, 64, 2**20])
def test_ordered_rows_equal_the_sparse_product_and_its_gradient(monkeypatch, chunk_entries):
    monkeypatch.setattr(segments, "CHUNK_ENTRIES", chunk_entries)
    adjacency = _adjacency()
    ordered = graph.OrderedRows(adjacency)
    assert sum(end - first for _, _, first, end in ordered.rows.chunks) == adjacency._nnz()
    assert (len(ordered.rows.chunks) == 1) == (chunk_entries == 2**20)
    x = torch.randn(adjacency.shape[0], 8, dtype=torch.float64, requires_grad=True)
    weights = torch.randn(adjacency.shape[0], 8, dtype=torch.float64)
    dense = adjacency.to_dense().to(torch.float64)
    out = ordered(x)
    torch.testing.assert_close(out, dense @ x, rtol=1e-12, atol=1e-12)
    (out * weights).sum().backward()
    torch.testing.assert_close(x.grad, dense.T @ weights, rtol=1e-12, atol=1e-12)
    x32 = x.detach().float().requires_grad_()
    torch.testing.assert_close(ordered(x32), torch.sparse.mm(adjacency, x32), rtol=1e-5, atol=1e-6)


def test_lightgcn_propagates_in_order_where_asked(tiny, monkeypatch):
    """The model's layers through OrderedRows (forced on the CPU) give sparse.mm's embeddings and gradients."""
    from recx.config.run_config import resolve
    from recx.training.build import build_model

    config = resolve({"model": "lightgcn", "loss": "bpr", "sampler": "uniform", "dim": 8})
    model = build_model(config, tiny, torch.device("cpu"))
    users, items = model.propagate()
    (users.sum() + items.square().sum()).backward()
    grads = [parameter.grad.clone() for parameter in model.parameters()]
    model.zero_grad()
    monkeypatch.setattr(type(model), "in_order", lambda self, layer: True)
    ordered_users, ordered_items = model.propagate()
    assert model._ordered is not None
    torch.testing.assert_close(ordered_users, users, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(ordered_items, items, rtol=1e-5, atol=1e-6)
    (ordered_users.sum() + ordered_items.square().sum()).backward()
    for parameter, expected in zip(model.parameters(), grads, strict=True):
        torch.testing.assert_close(parameter.grad, expected, rtol=1e-5, atol=1e-6)
