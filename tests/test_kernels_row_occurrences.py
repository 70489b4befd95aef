"""Grouping listed row ids by row (recx.kernels.row_occurrences) and the optimizer kernels' sums of listed gradient rows
(recx.kernels.optimizer_rows): each row's gradients summed in listing order (the sums torch's index_add_ forms, to the bit)
whatever the thread count."""

import numba
import numpy as np
import pytest
import torch

from recx.kernels.optimizer_rows import sgd_step
from recx.kernels.row_occurrences import occurrences, slot_scratch


def _listed(seed: int, n: int, n_rows: int) -> np.ndarray:
    """Row ids with many repeats (a few hot rows, as popular items are) and a tail of rare ones."""
    generator = np.random.default_rng(seed)
    hot = generator.integers(0, 5, n)
    return np.where(generator.random(n) < 0.4, hot, generator.integers(0, n_rows, n)).astype(np.int64)


@pytest.mark.parametrize("n", [0, 1, 7, 1000])
def test_occurrences_list_each_rows_listings_in_order(n):
    rows = _listed(n, n, 300)
    slot = np.full(300, -1, dtype=np.int64)
    distinct, starts, positions = occurrences(rows, slot)
    first_listed = np.unique(rows, return_index=True)[1]
    np.testing.assert_array_equal(distinct, rows[np.sort(first_listed)])
    assert starts[0] == 0 and starts[-1] == n and len(starts) == len(distinct) + 1
    for j, row in enumerate(distinct):
        np.testing.assert_array_equal(positions[starts[j] : starts[j + 1]], np.flatnonzero(rows == row))
    assert (slot == -1).all()


def test_slot_scratch_is_lent_per_thread_and_grows():
    small = slot_scratch(10)
    assert (small == -1).all() and small.shape[0] >= 10
    assert slot_scratch(5) is small
    assert slot_scratch(small.shape[0] + 1).shape[0] == small.shape[0] + 1


def summed(rows: np.ndarray, values: np.ndarray, n_rows: int) -> np.ndarray:
    """Each row's listed values summed by the SGD kernel: a zero table stepped with lr -1 holds the sums."""
    table = np.zeros((n_rows, values.shape[1]), values.dtype)
    slot = np.full(n_rows, -1, dtype=np.int64)
    sgd_step(rows, values, slot, table, values.dtype.type(-1.0))
    assert (slot == -1).all()
    return table


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_a_kernel_sums_the_listed_rows_as_index_add_does_to_the_bit(dtype):
    rows = _listed(3, 5000, 2000)
    values = torch.randn(5000, 24, generator=torch.Generator().manual_seed(4), dtype=dtype)
    reference = torch.zeros(2000, 24, dtype=dtype).index_add_(0, torch.from_numpy(rows), values)
    assert torch.equal(torch.from_numpy(summed(rows, values.numpy(), 2000)), reference)


def test_the_kernels_sums_do_not_depend_on_the_thread_count():
    rows = _listed(5, 6000, 4000)
    values = np.random.default_rng(6).standard_normal((6000, 64)).astype(np.float32)
    before = numba.get_num_threads()
    try:
        results = []
        for threads in sorted({1, numba.config.NUMBA_NUM_THREADS}):
            numba.set_num_threads(threads)
            results.append(summed(rows, values, 4000))
    finally:
        numba.set_num_threads(before)
    for result in results[1:]:
        np.testing.assert_array_equal(result, results[0])
