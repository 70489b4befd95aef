"""Small in-memory datasets and batches for component checks."""

from __future__ import annotations

from pathlib import Path

import torch

from recx.core.args import check_args
from recx.data.csr import CSR
from recx.data.dataset import Dataset
from recx.samplers.base import Batch
from recx.samplers.registry import SAMPLERS, new_sampler


def random_dataset(n_users: int = 30, n_items: int = 50, density: float = 0.2, seed: int = 0) -> Dataset:
    """A random binary training matrix (every user with at least one item), also used as the test split."""
    generator = torch.Generator().manual_seed(seed)
    dense = torch.rand(n_users, n_items, generator=generator) < density
    dense[torch.arange(n_users), torch.randint(0, n_items, (n_users,), generator=generator)] = True
    rows, cols = dense.nonzero(as_tuple=True)
    train = CSR.from_pairs(rows, cols, n_users, n_items)
    return Dataset("random", n_users, n_items, train, None, train, {}, "hash", Path("."))


def random_batch(dataset: Dataset, batch_size: int = 16, dim: int = 4, seed: int = 1, scale: float = 1.0) -> Batch:
    """Users and positives drawn from the training interactions, random representations."""
    generator = torch.Generator().manual_seed(seed)
    index = torch.randint(0, dataset.train.nnz, (batch_size,), generator=generator)
    users, items = dataset.train.row_ids()[index], dataset.train.indices[index]
    query = scale * torch.randn(batch_size, dim, generator=generator)
    item_table = torch.randn(dataset.n_items, dim, generator=generator)
    return Batch(users, items, query, item_table)


def make_sampler(name: str, dataset: Dataset, n_negatives: int = 8, seed: int = 0, **args):
    """The sampler with `args` checked as `resolve` checks them (types, ranges, choices), then built."""
    sampler_class = SAMPLERS.get(name)
    check_args(sampler_class.Args, args, "sampler_args")
    return new_sampler(name, dataset, n_negatives, args, torch.Generator().manual_seed(seed), "torch")
