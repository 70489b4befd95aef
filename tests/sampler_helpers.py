"""Small in-memory datasets and batches for sampler tests, and a chi-square check of draws."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from scipy import stats

from recx.core.args import check_args
from recx.data.csr import CSR
from recx.data.dataset import Dataset
from recx.samplers.base import Batch
from recx.samplers.registry import SAMPLERS


def random_dataset(n_users: int = 30, n_items: int = 50, density: float = 0.2, seed: int = 0) -> Dataset:
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
    return sampler_class(dataset, n_negatives, sampler_class.Args(**args), torch.Generator().manual_seed(seed), "torch")


def assert_follows(draws: torch.Tensor, probabilities, min_p_value: float = 1e-3) -> None:
    """Chi-square goodness of fit of integer draws to `probabilities` (cells with zero probability must stay empty;
    cells expecting fewer than 5 draws are pooled into one, as the test's approximation needs)."""
    probabilities = np.asarray(probabilities, dtype=np.float64)
    assert_counts_follow(
        np.bincount(np.asarray(draws).ravel(), minlength=probabilities.size), probabilities, min_p_value
    )


def item_counts(negatives, row: int, n_items: int, m: int) -> np.ndarray:
    """How many times query `row` drew each item, from a resampler's multiplicities (weights c / m over atoms)."""
    counts = torch.zeros(n_items, dtype=torch.float64)
    counts.index_add_(0, negatives.items[0], (negatives.candidate_weights()[row].double() * m).round())
    return counts.numpy()


def assert_counts_follow(observed, probabilities, min_p_value: float = 1e-3) -> None:
    """Chi-square goodness of fit of per-cell counts to `probabilities` (see assert_follows)."""
    observed = np.asarray(observed, dtype=np.float64)
    probabilities = np.asarray(probabilities, dtype=np.float64)
    assert observed[probabilities == 0].sum() == 0, "drew an item of probability 0"
    keep = probabilities > 0
    observed, expected = observed[keep], probabilities[keep] / probabilities[keep].sum() * observed.sum()
    order = np.argsort(expected)
    bins = np.minimum(np.searchsorted(np.cumsum(expected[order]), 5.0, side="right"), order.size - 1)
    small = order[: bins + 1]
    if small.size > 1:
        rest = np.setdiff1d(np.arange(expected.size), small)
        observed = np.append(observed[rest], observed[small].sum())
        expected = np.append(expected[rest], expected[small].sum())
    p_value = stats.chisquare(observed, expected).pvalue
    assert p_value > min_p_value, f"chi-square p = {p_value:.2e}"
