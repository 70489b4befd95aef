"""The compiled row dots (recx.kernels.row_dots): scores and gradients against a float64 reference, in float32 and
float64, and numbers that do not depend on the thread count."""

import numba
import pytest
import torch

from recx.kernels.row_dots import row_dots


@pytest.mark.parametrize("dtype, tolerance", [(torch.float64, 1e-12), (torch.float32, 1e-5)])
def test_scores_and_gradients_equal_a_float64_reference(dtype, tolerance):
    generator = torch.Generator().manual_seed(0)
    query = torch.randn(300, 24, generator=generator, dtype=torch.float64)
    rows = torch.randn(300, 3, 24, generator=generator, dtype=torch.float64)
    upstream = torch.randn(300, 3, generator=generator, dtype=torch.float64)
    leaves = [query.to(dtype).clone().requires_grad_(), rows.to(dtype).clone().requires_grad_()]
    scores = row_dots(*leaves)
    scores.backward(upstream.to(dtype))
    reference = [query.clone().requires_grad_(), rows.clone().requires_grad_()]
    expected = (reference[0][:, None, :] * reference[1]).sum(-1)
    expected.backward(upstream)
    assert scores.dtype == dtype and scores.shape == (300, 3)
    torch.testing.assert_close(scores.double(), expected.detach(), rtol=tolerance, atol=tolerance)
    for leaf, exact in zip(leaves, reference, strict=True):
        torch.testing.assert_close(leaf.grad.double(), exact.grad, rtol=tolerance, atol=tolerance)


def test_a_non_contiguous_input_and_one_without_gradient():
    generator = torch.Generator().manual_seed(1)
    query = torch.randn(24, 50, generator=generator).T  # not contiguous
    rows = torch.randn(50, 2, 24, generator=generator, requires_grad=True)
    row_dots(query, rows).sum().backward()
    torch.testing.assert_close(rows.grad, query[:, None, :].expand(50, 2, 24), rtol=0, atol=0)


def test_the_numbers_do_not_depend_on_the_thread_count():
    generator = torch.Generator().manual_seed(2)
    query, rows = torch.randn(4096, 64, generator=generator), torch.randn(4096, 2, 64, generator=generator)
    results = []
    for threads in (1, min(2, numba.config.NUMBA_NUM_THREADS)):
        numba.set_num_threads(threads)
        leaf = query.clone().requires_grad_()
        scores = row_dots(leaf, rows)
        scores.sum().backward()
        results.append((scores, leaf.grad))
    numba.set_num_threads(numba.config.NUMBA_NUM_THREADS)
    assert torch.equal(results[0][0], results[1][0]) and torch.equal(results[0][1], results[1][1])
