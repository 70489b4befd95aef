"""Cosine and dot scoring with a temperature keep the contract score = query · item."""

import torch

from recx.config.run_config import resolve
from recx.training.build import build_model


def _model(tiny, model, **model_args):
    return build_model(
        resolve({"loss": "bpr", "model": model, "dim": 8, "model_args": model_args}), tiny, torch.device("cpu")
    )


def test_cosine_scoring_equals_cosine_over_temperature(tiny):
    for name in ("mf", "nonlinear_mf", "lightgcn"):
        model = _model(tiny, name, scoring="cosine", temperature=0.2)
        users = torch.arange(0, tiny.n_users, 7)
        query, items = model.representations(users)
        raw_query, raw_items = model.encode(users)
        expected = torch.nn.functional.cosine_similarity(raw_query[:, None, :], raw_items[None, :, :], dim=-1) / 0.2
        assert torch.allclose(query @ items.T, expected, atol=1e-5), name


def test_dot_scoring_with_temperature_divides_the_inner_product(tiny):
    model = _model(tiny, "mf", temperature=0.5)
    users = torch.tensor([0, 3, 5])
    query, items = model.representations(users)
    expected = model.user_embedding[users] @ model.item_embedding.T / 0.5
    assert torch.allclose(query @ items.T, expected, atol=1e-6)
    plain = _model(tiny, "mf")
    q, i = plain.representations(users)
    assert torch.equal(q, plain.user_embedding[users]) and torch.equal(i, plain.item_embedding)


def test_per_query_scores_agree_on_both_paths_with_a_reference():
    from recx.models.scoring import per_query_scores

    generator = torch.Generator().manual_seed(0)
    query = torch.randn(6, 4, dtype=torch.float64, generator=generator)
    table = torch.randn(40, 4, dtype=torch.float64, generator=generator)
    for k in (2, 5):  # 40 > 8*2: gather path; 40 <= 8*5: matrix-product path
        items = torch.randint(0, 40, (6, k), generator=generator)
        reference = torch.tensor(
            [[float(query[b] @ table[i]) for i in items[b]] for b in range(6)], dtype=torch.float64
        )
        assert torch.allclose(per_query_scores(query, table, items), reference)
