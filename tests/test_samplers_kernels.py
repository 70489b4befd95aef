"""Alias tables and CSR membership: torch references exact; CuPy kernels agree with them (GPU only)."""

from __future__ import annotations

import pytest
import torch

from recx.core.errors import RecxError
from recx.kernels.alias_table import AliasTable, build_alias, draw_torch, implied_probabilities
from recx.kernels.choice import resolve_kernels
from recx.kernels.membership import contains
from tests.sampler_helpers import assert_follows, random_dataset

WEIGHTS = {
    "random": torch.rand(500, generator=torch.Generator().manual_seed(0)),
    "skewed": torch.rand(2000, generator=torch.Generator().manual_seed(1)) ** 8,
    "zeros": torch.tensor([0.0, 3.0, 0.0, 1.0, 1.0, 0.0, 5.0]),
    "one_zero": torch.cat([torch.zeros(1), torch.ones(999)]),
    "geometric": 2.0 ** -torch.arange(50.0),
    "equal": torch.ones(10),
    "single": torch.tensor([2.0]),
}


@pytest.mark.parametrize("name", list(WEIGHTS))
def test_alias_table_encodes_the_distribution_exactly(name):
    weights = WEIGHTS[name].double()
    prob, alias = build_alias(weights)
    assert ((prob >= 0) & (prob <= 1)).all()
    torch.testing.assert_close(implied_probabilities(prob, alias), weights / weights.sum(), atol=1e-13, rtol=0)


def test_alias_draws_follow_the_distribution():
    weights = torch.tensor([0.0, 3.0, 0.0, 1.0, 1.0, 0.5, 5.0, 2.5])
    table = AliasTable(weights, "torch")
    assert_follows(table.sample((200_000,), torch.Generator().manual_seed(3)), weights)
    torch.testing.assert_close(table.log_probabilities.exp(), (weights / weights.sum()).float())


def test_membership_matches_the_dense_matrix():
    dataset = random_dataset(n_users=40, n_items=60, density=0.3)
    generator = torch.Generator().manual_seed(4)
    users = torch.randint(0, 40, (500, 1), generator=generator)
    items = torch.randint(0, 60, (500, 7), generator=generator)
    dense = dataset.train.dense_rows(torch.arange(40))
    assert torch.equal(contains(dataset.train, users, items), dense[users.expand_as(items), items])


def test_kernels_choice():
    assert resolve_kernels("torch", "cpu") == "torch"
    assert resolve_kernels("auto", "cpu") == "torch"
    with pytest.raises(RecxError, match="cupy"):
        resolve_kernels("cupy", "cpu")
    with pytest.raises(RecxError, match="valid"):
        resolve_kernels("fast", "cpu")


def _cuda_cupy():
    pytest.importorskip("cupy")
    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")


@pytest.mark.gpu
def test_cupy_alias_draws_equal_the_reference():
    _cuda_cupy()
    from recx.kernels.cupy_kernels import alias_draw

    weights = WEIGHTS["skewed"].cuda()
    prob, alias = build_alias(weights)
    uniforms = torch.rand(1_000_000, device="cuda", dtype=torch.float64)
    drawn = alias_draw(prob, alias, uniforms)
    assert torch.equal(drawn, draw_torch(prob, alias, uniforms))
    assert_follows(drawn.cpu(), WEIGHTS["skewed"])


@pytest.mark.gpu
def test_cupy_membership_equals_the_reference():
    _cuda_cupy()
    from recx.kernels.cupy_kernels import csr_contains

    train = random_dataset(n_users=300, n_items=500, density=0.1).train.to("cuda")
    users = torch.randint(0, 300, (4096, 1), device="cuda")
    items = torch.randint(0, 500, (4096, 64), device="cuda")
    assert torch.equal(
        csr_contains(train.indptr, train.indices, users.expand_as(items), items),
        train.contains(users.expand_as(items), items),
    )
