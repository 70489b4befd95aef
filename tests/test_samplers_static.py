"""Uniform and popularity samplers: draws follow q, log_q is log q exactly, exclude_train removes training items."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from recx.core.device_paths import forced_accelerator_branches
from recx.samplers.base import Batch
from recx.samplers.registry import new_sampler
from tests.sampler_helpers import assert_follows, make_sampler, random_batch, random_dataset


def test_uniform_draws_and_log_q():
    dataset = random_dataset()
    negatives = make_sampler("uniform", dataset, n_negatives=2000).sample(random_batch(dataset, batch_size=50))
    assert_follows(negatives.items, np.ones(dataset.n_items))
    assert torch.allclose(negatives.log_q, torch.tensor(-math.log(dataset.n_items)))


def test_uniform_without_training_items_is_uniform_on_the_rest():
    dataset = random_dataset()
    batch = random_batch(dataset, batch_size=1)
    negatives = make_sampler("uniform", dataset, n_negatives=20000, exclude_train=True).sample(batch)
    allowed = ~dataset.train.dense_rows(batch.users)[0]
    assert_follows(negatives.items, allowed.double().numpy())
    assert torch.allclose(negatives.log_q, -torch.log(allowed.sum().float()))


@pytest.mark.parametrize("device", ["forced", pytest.param("cuda", marks=pytest.mark.gpu)])
@pytest.mark.parametrize("name", ["uniform", "popularity"])
def test_redraws_of_the_accelerator_branch_draw_from_q_on_the_allowed_items(name, device):
    """The accelerator branch's redraws of training items (every round, drawn in blocks: forced on the CPU, and on
    CUDA with its own generator and kernels) leave q restricted to the user's other items: chi-square on 20,000
    draws of one dense user (density 0.5: half the first draws are training items)."""
    dataset = random_dataset(n_items=40, density=0.5)
    batch = random_batch(dataset, batch_size=1)
    on = torch.device("cuda" if device == "cuda" else "cpu")
    generator = torch.Generator(device=on).manual_seed(0)
    sampler = new_sampler(name, dataset.to(on), 20000, {"exclude_train": True}, generator, "auto")
    with forced_accelerator_branches():
        items = sampler.sample(Batch(*(t.to(on) for t in (batch.users, batch.positives)), None, None)).items.cpu()
    allowed = ~dataset.train.dense_rows(batch.users)[0]
    q = np.ones(dataset.n_items) if name == "uniform" else dataset.item_popularity.double().numpy() + 1.0
    assert_follows(items, q * allowed.double().numpy())


@pytest.mark.parametrize(
    "variant, transform", [("count", lambda c: c), ("log", np.log1p), ("pow0.75", lambda c: c**0.75)]
)
@pytest.mark.parametrize("smoothing", [0.0, 1.0])
def test_popularity_draws_and_log_q(variant, transform, smoothing):
    dataset = random_dataset(n_items=40, density=0.15)
    counts = dataset.item_popularity.double().numpy() + smoothing
    expected = transform(counts) / transform(counts).sum()
    batch = random_batch(dataset, batch_size=40)
    negatives = make_sampler("popularity", dataset, n_negatives=5000, variant=variant, smoothing=smoothing).sample(
        batch
    )
    assert_follows(negatives.items, expected)
    q = torch.from_numpy(expected)
    torch.testing.assert_close(negatives.log_q, torch.log(q[negatives.items]).float())
    torch.testing.assert_close(negatives.positive_log_q, torch.log(q[batch.positives]).float())


@pytest.mark.parametrize(
    "name, args",
    [
        ("uniform", {}),
        ("popularity", {}),
        ("dns", {"m": 3, "n_candidates": 30}),
        ("softmax_v", {"n_candidates": 30}),
        ("self_adversarial", {}),
        ("bir", {}),
        ("xir", {"cache_size": 8}),
    ],
)
def test_exclude_train_removes_training_items_and_can_be_turned_off(name, args):
    dataset = random_dataset(n_users=20, n_items=30, density=0.3)
    batch = random_batch(dataset, batch_size=64)

    def hits(exclude: bool) -> int:
        sampler = make_sampler(name, dataset, n_negatives=30, exclude_train=exclude, **args)
        found = 0
        for _ in range(3):  # xir: the cache fills after the first step
            negatives = sampler.sample(batch)
            items = negatives.items.expand(batch.users.numel(), -1)
            drawn = (
                torch.ones_like(items, dtype=torch.bool)
                if negatives.weights is None
                else negatives.candidate_weights() > 0
            )
            found += int((dataset.train.contains(batch.users[:, None].expand_as(items), items) & drawn).sum())
        return found

    assert hits(True) == 0
    assert hits(False) > 0
