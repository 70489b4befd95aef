"""bench/graph_safety.py's recorder: two steps that a CUDA graph would replay alike are found the same; a step that
swaps a held tensor for a new one, passes a Python scalar that changes, or changes a shape is found different; and
XIR's step, whose cache was a new tensor each step, now reads its cache from the same storage every step."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

BENCH = Path(__file__).resolve().parents[1] / "bench"


@pytest.fixture
def gs(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCH))
    import graph_safety

    return graph_safety


def two_steps(gs, step, batches):
    return gs.differences(gs.recorded(step, batches[0]), gs.recorded(step, batches[1]), show=5)


def batches(size=8, n=2):
    return [(torch.randint(0, 10, (size,)),) for _ in range(n)]


def test_state_updated_in_place_and_a_python_constant_replay_alike(gs):
    table, counter = torch.randn(10, 4), torch.zeros(())

    def step(ids):
        rows = table[ids] * 2.0
        table.index_add_(0, ids, -0.1 * rows)
        counter.add_(1)  # a device step count: its value changes, its storage does not
        mask = torch.ones(ids.shape, dtype=torch.bool)
        mask[-1] = True  # a Python scalar torch wraps anew each step, always True

    assert two_steps(gs, step, batches()) == []


def test_a_held_tensor_swapped_for_a_new_one_is_found(gs):
    class Cache:
        items = torch.arange(8)

    def step(ids):
        torch.cat([ids, Cache.items])
        Cache.items = ids + 1  # replaced, not written into: a graph would keep reading the first cache

    found = two_steps(gs, step, batches())
    assert len(found) == 1 and "aten.cat" in found[0] and "held" in found[0]


def test_a_python_scalar_that_changes_is_found(gs):
    state = {"t": 0}
    table = torch.randn(10, 4)

    def step(ids):
        state["t"] += 1
        table.mul_(1 - 0.9 ** state["t"])  # a bias correction computed on the host: frozen in a graph

    found = two_steps(gs, step, batches())
    assert found and "aten.mul_" in found[0]


def test_a_shape_that_changes_is_found(gs):
    table = torch.randn(10, 4)
    found = two_steps(gs, lambda ids: table[ids].sum(), [batches(8, 1)[0], batches(9, 1)[0]])
    assert found and "(8,)" in found[0] and "(9,)" in found[0]


def test_the_xir_step_reads_its_cache_from_one_storage(gs):
    from recx.core.device_paths import forced_accelerator_branches
    from recx.samplers.base import Batch
    from tests.sampler_helpers import make_sampler, random_batch, random_dataset

    dataset = random_dataset(n_items=40)
    sampler = make_sampler("xir", dataset, n_resampled=64, cache_size=6)
    users_table, items_table = torch.randn(dataset.n_users, 4), torch.randn(dataset.n_items, 4)  # the model's

    def step(users, positives):
        sampler.sample(Batch(users, positives, lambda: users_table[users], lambda: items_table))

    batches = [random_batch(dataset, batch_size=8, scale=0.3) for _ in range(3)]
    steps = [(b.users.clone(), b.positives.clone()) for b in batches]  # the batch's tensors: the graph's inputs
    with forced_accelerator_branches():
        step(*steps[0])  # the first step makes the cache
        cache = sampler.cache
        assert two_steps(gs, step, steps[1:]) == []
    assert sampler.cache is cache
