"""LightGCN propagation against a dense float64 reference; non-linear MF shape and gradients."""

import torch

from recx.config.run_config import resolve
from recx.training.build import build_model


def _dense_reference(tiny, user_table, item_table, n_layers):
    n_users, n_items = tiny.n_users, tiny.n_items
    r = torch.zeros(n_users, n_items, dtype=torch.float64)
    r[tiny.train.row_ids(), tiny.train.indices] = 1.0
    a = torch.zeros(n_users + n_items, n_users + n_items, dtype=torch.float64)
    a[:n_users, n_users:], a[n_users:, :n_users] = r, r.T
    degree = a.sum(1)
    inv_sqrt = torch.where(degree > 0, degree.pow(-0.5), torch.zeros_like(degree))
    norm = inv_sqrt[:, None] * a * inv_sqrt[None, :]
    layer = torch.cat([user_table, item_table]).to(torch.float64)
    layers = [layer]
    for _ in range(n_layers):
        layer = norm @ layer
        layers.append(layer)
    final = torch.stack(layers).mean(0)
    return final[:n_users], final[n_users:]


def test_lightgcn_propagation_equals_dense_reference(tiny):
    for n_layers in (0, 1, 3):
        config = resolve(
            {"loss": "bpr", "model": "lightgcn", "dim": 8, "model_args": {"n_layers": n_layers, "init": "xavier"}}
        )
        model = build_model(config, tiny, torch.device("cpu"))
        users = torch.arange(tiny.n_users)
        query, items = model.representations(users)
        want_users, want_items = _dense_reference(
            tiny, model.user_embedding.detach(), model.item_embedding.detach(), n_layers
        )
        assert torch.allclose(query.detach().to(torch.float64), want_users, atol=1e-6)
        assert torch.allclose(items.detach().to(torch.float64), want_items, atol=1e-6)


def test_lightgcn_gradients_reach_the_tables_and_the_eval_cache_follows_updates(tiny):
    model = build_model(resolve({"loss": "bpr", "model": "lightgcn", "dim": 8}), tiny, torch.device("cpu"))
    query, items = model.representations(torch.tensor([0, 1]))
    (query @ items.T).sum().backward()
    assert model.user_embedding.grad.abs().sum() > 0 and model.item_embedding.grad.abs().sum() > 0
    before = model.item_table()
    assert torch.equal(before, model.item_table())
    with torch.no_grad():
        model.item_embedding.mul_(2.0)
        model.user_embedding.mul_(2.0)  # propagation is linear: both tables doubled double every output
    assert torch.allclose(model.item_table(), 2 * before)


def test_nonlinear_mf_applies_an_mlp_on_each_side(tiny):
    model = build_model(resolve({"loss": "bpr", "model": "nonlinear_mf", "dim": 8}), tiny, torch.device("cpu"))
    users = torch.tensor([2, 4])
    query, items = model.representations(users)
    expected = model.user_mlp(model.user_embedding[users])
    assert torch.allclose(query, expected) and items.shape == (tiny.n_items, 8)
    (query @ items.T).sum().backward()
    assert all(p.grad is not None for p in model.user_mlp.parameters())
    assert len(model.embedding_tables()) == 2
