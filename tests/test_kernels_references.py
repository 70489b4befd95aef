"""Each compiled kernel of recx.kernels against the torch reference beside it, on random inputs in float64 (and
float32 within rounding). The references elsewhere: conjugate_gradient's is recx.models.als.solve's whole-side
torch CG (tests/test_models_als.py), inverse_cdf's the searchsorted over torch's cumulative sums
(tests/test_kernels_inverse_cdf.py), alias_table's, membership's and midx_draw's torch branches beside their CuPy
kernels (tests/test_samplers_kernels.py, tests/test_gpu.py)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from recx.kernels import optimizer_rows
from recx.kernels.bpr_rows import bpr_reference, bpr_row_gradients
from recx.kernels.cluster_sums import cluster_sums, cluster_sums_reference
from recx.kernels.row_occurrences import slot_scratch

TOLERANCE = {torch.float64: 1e-12, torch.float32: 1e-5}


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_bpr_rows_equal_autograd(dtype):
    generator = torch.Generator().manual_seed(0)
    users_table = torch.randn(30, 16, generator=generator, dtype=dtype)
    items_table = torch.randn(50, 16, generator=generator, dtype=dtype)
    users = torch.randint(0, 30, (64,), generator=generator)
    ids = torch.randint(0, 50, (64, 6), generator=generator)  # repeats within and across queries
    pair_weight = 1.0 / (64 * 5)
    loss, user_grads, row_grads = bpr_row_gradients(
        users_table.numpy(), items_table.numpy(), users.numpy(), ids.numpy(), np.dtype(str(dtype)[6:]).type(pair_weight)
    )
    expected_loss, expected_users, expected_rows = bpr_reference(users_table, items_table, users, ids, pair_weight)
    tolerance = TOLERANCE[dtype]
    assert loss == pytest.approx(expected_loss, rel=tolerance)
    torch.testing.assert_close(torch.from_numpy(user_grads), expected_users, rtol=tolerance, atol=tolerance)
    torch.testing.assert_close(torch.from_numpy(row_grads), expected_rows, rtol=tolerance, atol=tolerance)


def test_cluster_sums_equal_index_add():
    generator = torch.Generator().manual_seed(1)
    points = torch.randn(70_000, 5, generator=generator, dtype=torch.float64)  # two of the kernel's chunks
    labels = torch.randint(0, 7, (70_000,), generator=generator)
    sums, counts = cluster_sums(points.numpy(), labels.numpy(), 7)
    expected_sums, expected_counts = cluster_sums_reference(points, labels, 7)
    torch.testing.assert_close(torch.from_numpy(sums), expected_sums, rtol=1e-12, atol=1e-9)
    assert torch.equal(torch.from_numpy(counts), expected_counts)


def _state(rule: str, n: int, d: int, generator) -> dict:
    if rule == "adagrad":
        return {"squares": torch.rand(n, d, generator=generator, dtype=torch.float64)}
    if rule == "rowwise_adagrad":
        return {"squares": torch.rand(n, generator=generator, dtype=torch.float64)}
    if rule == "lazy_adam":
        first = torch.randn(n, d, generator=generator, dtype=torch.float64)
        return {"first": first, "second": torch.rand(n, d, generator=generator, dtype=torch.float64)}
    return {}


def _kernel_step(rule, rows, values, param, state, h) -> None:
    args = (rows.numpy(), values.numpy(), slot_scratch(param.shape[0]), param.numpy())
    if rule == "sgd":
        optimizer_rows.sgd_step(*args, h["lr"])
    elif rule == "adagrad":
        optimizer_rows.adagrad_step(*args, state["squares"].numpy(), h["lr"], h["eps"])
    elif rule == "rowwise_adagrad":
        optimizer_rows.rowwise_adagrad_step(*args, state["squares"].numpy(), h["lr"], h["eps"], 1.0 / param.shape[1])
    else:
        b1, b2, t = h["beta1"], h["beta2"], h["t"]
        step_size, root2 = h["lr"] / (1 - b1**t), (1 - b2**t) ** 0.5
        first, second = state["first"].numpy(), state["second"].numpy()
        optimizer_rows.lazy_adam_step(*args, first, second, step_size, b1, 1 - b1, b2, 1 - b2, h["eps"], root2)


@pytest.mark.parametrize("rule", ["sgd", "adagrad", "rowwise_adagrad", "lazy_adam"])
def test_optimizer_rows_equal_the_torch_rules(rule):
    """Repeated rows summed, untouched rows and their state unchanged, every rule as its reference writes it."""
    generator = torch.Generator().manual_seed(2)
    n, d = 40, 12
    rows = torch.randint(0, 25, (90,), generator=generator)  # rows 25..39 untouched, most listed several times
    values = torch.randn(90, d, generator=generator, dtype=torch.float64)
    h = {"lr": 0.05, "eps": 1e-8, "beta1": 0.9, "beta2": 0.999, "t": 3}
    param = torch.randn(n, d, generator=generator, dtype=torch.float64)
    state = _state(rule, n, d, generator)
    before = param.clone()
    expected_param, expected_state = param.clone(), {key: value.clone() for key, value in state.items()}
    _kernel_step(rule, rows, values, param, state, h)
    optimizer_rows.reference_step(rule, rows, values, expected_param, expected_state, **h)
    torch.testing.assert_close(param, expected_param, rtol=1e-12, atol=1e-12)
    for key in state:
        torch.testing.assert_close(state[key], expected_state[key], rtol=1e-12, atol=1e-12)
    assert not torch.equal(param[rows], before[rows]) and torch.equal(param[25:], before[25:])
