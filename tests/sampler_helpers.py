"""Small in-memory datasets and batches for sampler tests and a chi-square check of draws (recx.testing's, the kit
plugins use too), and the multiplicities of a resampler's draws."""

from __future__ import annotations

import numpy as np
import torch

from recx.testing import assert_counts_follow, assert_follows, make_sampler, random_batch, random_dataset

__all__ = ["assert_counts_follow", "assert_follows", "item_counts", "make_sampler", "random_batch", "random_dataset"]


def item_counts(negatives, row: int, n_items: int, m: int) -> np.ndarray:
    """How many times query `row` drew each item, from a resampler's multiplicities (weights c / m over atoms)."""
    counts = torch.zeros(n_items, dtype=torch.float64)
    counts.index_add_(0, negatives.items[0], (negatives.candidate_weights()[row].double() * m).round())
    return counts.numpy()
