"""PRISM initial norms equal α log(d + 2) + (1 - α); the other initialisers and option checks."""

import math

import pytest
import torch

from recx.config.run_config import resolve
from recx.core.errors import RecxError
from recx.training.build import build_model


def _model(tiny, **model_args):
    config = resolve({"model": model_args.pop("model", "mf"), "dim": 16, "model_args": model_args})
    return build_model(config, tiny, torch.device("cpu"))


@pytest.mark.parametrize("model", ["mf", "nonlinear_mf", "lightgcn"])
@pytest.mark.parametrize("alpha", [1.0, 0.4, 0.0])
def test_prism_item_norms_are_exact(tiny, model, alpha):
    m = _model(tiny, model=model, init="prism", prism_alpha=alpha, prism_scope="items")
    degrees = tiny.item_popularity.to(torch.float64)
    expected = alpha * torch.log(degrees + 2) + (1 - alpha)
    norms = m.item_embedding.detach().to(torch.float64).norm(dim=1)
    assert torch.allclose(norms, expected, rtol=1e-6, atol=0)
    assert norms.std() > 0 or alpha == 0.0
    user_norms = m.user_embedding.detach().norm(dim=1)
    assert not torch.allclose(user_norms, user_norms[0].expand_as(user_norms))  # users: plain Xavier rows


def test_prism_scope_both_is_the_default_and_scales_users_by_their_training_degree(tiny):
    m = _model(tiny, init="prism", prism_alpha=0.7)  # the official PRISM code scales both tables
    expected = 0.7 * torch.log(tiny.train.row_lengths().to(torch.float64) + 2) + 0.3
    assert torch.allclose(m.user_embedding.detach().to(torch.float64).norm(dim=1), expected, rtol=1e-6, atol=0)


def test_xavier_and_normal_initialisers(tiny):
    xavier = _model(tiny, init="xavier").item_embedding.detach()
    bound = math.sqrt(6 / (tiny.n_items + 16))
    assert xavier.abs().max() <= bound and xavier.abs().max() > 0.9 * bound
    normal = _model(tiny, init="normal", init_std=0.05).item_embedding.detach()
    assert abs(normal.std().item() - 0.05) < 0.005


@pytest.mark.parametrize(
    "key,value", [("init", "zeros"), ("scoring", "euclid"), ("prism_scope", "users"), ("temperature", 0.0)]
)
def test_bad_model_options_name_the_key(key, value):
    with pytest.raises(RecxError, match=key):
        resolve({"model": "mf", "model_args": {key: value}})
