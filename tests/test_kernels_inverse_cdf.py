"""Resampled draws counted per column (recx.samplers.candidates.draw_counts): the host branch's guide-table kernel
with its counter-based uniforms and the accelerator branch's binary search draw from the row's law; the kernel's
counts depend on the seed only, not on the thread count."""

import numba
import numpy as np
import pytest
import torch

from recx.core.device_paths import forced_accelerator_branches
from recx.kernels.inverse_cdf import splitmix_uniform
from recx.samplers.candidates import draw_counts, draw_shares, multiset_log_q
from tests.sampler_helpers import assert_counts_follow


def _probabilities(dtype=torch.float32) -> torch.Tensor:
    """Four rows over 40 columns: peaked, flat, with zero columns (first, middle, last), and one column only."""
    generator = torch.Generator().manual_seed(0)
    rows = torch.softmax(
        torch.randn(4, 40, generator=generator, dtype=dtype) * torch.tensor([[3.0], [0.0], [1.0], [1.0]], dtype=dtype),
        1,
    )
    rows[2, [0, 17, 39]] = 0.0
    rows[3] = 0.0
    rows[3, 11] = 0.25
    return rows


@pytest.mark.parametrize("forced", [False, True], ids=["host kernel", "accelerator branch"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_draws_follow_each_rows_law_and_never_a_zero_column(forced, dtype):
    probabilities, m = _probabilities(dtype), 40_000
    with forced_accelerator_branches() if forced else torch.enable_grad():
        counts = draw_counts(probabilities, m, torch.Generator().manual_seed(1))
    assert counts.dtype == dtype and counts.shape == probabilities.shape
    assert (counts.sum(1) == m).all()
    for row in range(3):
        assert_counts_follow(counts[row].numpy(), probabilities[row].numpy())
    assert counts[3, 11] == m


def test_a_wrong_law_is_rejected():
    """The check above has power: draws from one row's law do not pass for another's."""
    probabilities = _probabilities()
    counts = draw_counts(probabilities, 40_000, torch.Generator().manual_seed(1))
    with pytest.raises(AssertionError):
        assert_counts_follow(counts[0].numpy(), probabilities[1].numpy())


def test_host_counts_depend_on_the_seed_and_not_on_the_thread_count():
    probabilities = torch.softmax(torch.randn(300, 500, generator=torch.Generator().manual_seed(2)), 1)
    draws = []
    for threads in (1, min(2, numba.config.NUMBA_NUM_THREADS), 1):
        numba.set_num_threads(threads)
        draws.append(draw_counts(probabilities, 500, torch.Generator().manual_seed(3)))
    numba.set_num_threads(numba.config.NUMBA_NUM_THREADS)
    assert torch.equal(draws[0], draws[1]) and torch.equal(draws[0], draws[2])
    assert not torch.equal(draws[0], draw_counts(probabilities, 500, torch.Generator().manual_seed(4)))


def test_splitmix_uniforms_are_uniform_on_24_bits():
    """SplitMix64's published first output for seed 0 (0xE220A8397B1DCDAF, Java's SplittableRandom), top 24 bits;
    and 10^5 counters spread evenly over [0, 1)."""
    assert splitmix_uniform(np.uint64(0), np.uint64(1)) == np.float32(0xE220A8 / 2**24)
    uniforms = np.array([splitmix_uniform(np.uint64(7), np.uint64(i)) for i in range(1, 100_001)])
    assert uniforms.min() >= 0 and uniforms.max() < 1
    assert_counts_follow(np.histogram(uniforms, bins=50, range=(0, 1))[0], np.full(50, 1 / 50))


@pytest.mark.parametrize("forced", [False, True], ids=["host kernel", "accelerator branch"])
def test_multiset_log_q_is_minus_log_count_and_inf_where_undrawn(forced):
    """Counts past the kernel's table of small counts (4096) are computed, not looked up."""
    counts = torch.tensor([[0.0, 1.0, 2.0, 7.0, 0.0, 4095.0, 4096.0, 90_001.0]])
    with forced_accelerator_branches() if forced else torch.enable_grad():
        log_q = multiset_log_q(counts)
    expected = torch.tensor(
        [[float("inf"), 0.0, -np.log(2.0), -np.log(7.0), float("inf"), -np.log(4095), -np.log(4096), -np.log(90_001)]],
        dtype=torch.float32,
    )
    torch.testing.assert_close(log_q, expected, rtol=1e-6, atol=0)


def test_host_draws_are_searchsorted_over_torchs_cumulative_sums_for_the_same_uniforms(monkeypatch):
    """The kernel forms each row's cumulative sums itself; with its uniforms, the columns are exactly those of
    torch.searchsorted(torch.cumsum(p), u, right=True) (the accelerator branch's rule)."""
    probabilities = torch.softmax(torch.randn(64, 3000, generator=torch.Generator().manual_seed(5)) * 4, 1)
    probabilities[:, ::7] = 0.0
    m, seed = 300, 12345
    monkeypatch.setattr(torch, "randint", lambda *args, **kwargs: torch.tensor(seed))
    counts = draw_counts(probabilities, m, torch.Generator())
    cdf = torch.cumsum(probabilities, dim=1)
    uniforms = np.array(
        [splitmix_uniform(np.uint64(seed), np.uint64(counter + 1)) for counter in range(64 * m)], np.float32
    ).reshape(64, m)
    positions = torch.searchsorted(cdf, torch.from_numpy(uniforms) * cdf[:, -1:], right=True).clamp_max(2999)
    expected = torch.zeros_like(probabilities).scatter_add_(1, positions, torch.ones(64, m))
    assert torch.equal(counts, expected)
    assert (counts[:, ::7] == 0).all()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_draw_shares_are_counts_over_draws_on_both_branches(dtype):
    probabilities = torch.softmax(torch.randn(50, 400, generator=torch.Generator().manual_seed(6), dtype=dtype), 1)
    counts = draw_counts(probabilities, 333, torch.Generator().manual_seed(7))
    for forced in (False, True):
        with forced_accelerator_branches() if forced else torch.enable_grad():
            shares = draw_shares(counts, 333)
        assert shares.dtype == dtype and torch.equal(shares, counts / 333)
    assert (shares.sum(1) - 1).abs().max() < 1e-5 and (shares == 0).any()
    large = torch.tensor([[0.0, 3.0, 4095.0, 4096.0, 70_000.0]], dtype=dtype)
    assert torch.equal(draw_shares(large, 70_000), large / 70_000)
