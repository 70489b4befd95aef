"""Optimizers (recx.optim.optimizers): row-sparse steps against dense SGD and float64 references of their formulas."""

import pytest
import torch
import torch.nn.functional as F

from recx.optim.optimizers import DenseAdam, LazyAdam, RowSparseAdagrad, RowSparseSGD, RowwiseAdagrad

N_ROWS, DIM = 30, 4


def _sparse_step(optimizer, table, rows, upstream):
    """Backward of sum(upstream * table[rows]) through a row-sparse read, then a step."""
    optimizer.zero_grad()
    (F.embedding(rows, table, sparse=True) * upstream).sum().backward()
    optimizer.step()


def _batches(steps: int, seed: int = 0):
    generator = torch.Generator().manual_seed(seed)
    for _ in range(steps):
        rows = torch.randint(0, N_ROWS // 2, (12,), generator=generator)  # repeats; rows >= N_ROWS/2 never touched
        yield rows, torch.randn(12, DIM, generator=generator, dtype=torch.float64)


def _summed(rows, upstream):
    """float64 dense gradient: each row's upstream rows summed."""
    return torch.zeros(N_ROWS, DIM, dtype=torch.float64).index_add_(0, rows, upstream)


@pytest.mark.parametrize("sync_free", [False, True])
def test_row_sparse_sgd_equals_dense_sgd_on_touched_rows_and_leaves_the_others(sync_free):
    start = torch.randn(N_ROWS, DIM, dtype=torch.float64)
    sparse_table, dense_table = torch.nn.Parameter(start.clone()), torch.nn.Parameter(start.clone())
    sparse = RowSparseSGD([sparse_table], lr=0.25)
    sparse.sync_free = sync_free
    dense = torch.optim.SGD([dense_table], lr=0.25)
    for rows, upstream in _batches(5):
        _sparse_step(sparse, sparse_table, rows, upstream)
        dense.zero_grad()
        (dense_table[rows] * upstream).sum().backward()
        dense.step()
        assert torch.equal(sparse_table.detach(), dense_table.detach())
    assert torch.equal(sparse_table.detach()[N_ROWS // 2 :], start[N_ROWS // 2 :])


@pytest.mark.parametrize("sync_free", [False, True])
def test_lazy_adam_touched_rows_equal_a_float64_reference_and_others_stay(sync_free):
    start = torch.randn(N_ROWS, DIM, dtype=torch.float64)
    table = torch.nn.Parameter(start.clone())
    optimizer = LazyAdam([table], lr=0.1, betas=(0.8, 0.9), eps=1e-6)
    optimizer.sync_free = sync_free
    theta, m, v = start.clone(), torch.zeros_like(start), torch.zeros_like(start)
    for t, (rows, upstream) in enumerate(_batches(6), start=1):
        _sparse_step(optimizer, table, rows, upstream)
        grad, touched = _summed(rows, upstream), torch.unique(rows)
        for r in touched.tolist():
            m[r] = 0.8 * m[r] + 0.2 * grad[r]
            v[r] = 0.9 * v[r] + 0.1 * grad[r] ** 2
            theta[r] = theta[r] - 0.1 * (m[r] / (1 - 0.8**t)) / (torch.sqrt(v[r] / (1 - 0.9**t)) + 1e-6)
        torch.testing.assert_close(table.detach(), theta, rtol=0, atol=1e-12)
    state = optimizer.state[table]
    assert torch.equal(state["exp_avg"][N_ROWS // 2 :], torch.zeros(N_ROWS - N_ROWS // 2, DIM, dtype=torch.float64))
    assert torch.equal(table.detach()[N_ROWS // 2 :], start[N_ROWS // 2 :])


def _adagrad_squares(grad_row):
    return grad_row**2


def _rowwise_squares(grad_row):
    return (grad_row**2).mean()


@pytest.mark.parametrize("sync_free", [False, True])
@pytest.mark.parametrize(
    "optimizer_class, row_squares, state_shape",
    [
        (RowSparseAdagrad, _adagrad_squares, (N_ROWS, DIM)),  # s_r += g_r^2 elementwise
        (RowwiseAdagrad, _rowwise_squares, (N_ROWS,)),  # one accumulator per row: s_r += mean_j g_rj^2
    ],
)
def test_adagrads_touched_rows_equal_a_float64_reference(sync_free, optimizer_class, row_squares, state_shape):
    """theta_r -= lr g_r / (sqrt(s_r) + eps) on touched rows; the others stay."""
    start = torch.randn(N_ROWS, DIM, dtype=torch.float64)
    table = torch.nn.Parameter(start.clone())
    optimizer = optimizer_class([table], lr=0.3)
    optimizer.sync_free = sync_free
    theta, squares = start.clone(), torch.zeros(state_shape, dtype=torch.float64)
    for rows, upstream in _batches(4, seed=1):
        _sparse_step(optimizer, table, rows, upstream)
        grad = _summed(rows, upstream)
        for r in torch.unique(rows).tolist():
            squares[r] += row_squares(grad[r])
            theta[r] -= 0.3 * grad[r] / (squares[r].sqrt() + 1e-10)
        torch.testing.assert_close(table.detach(), theta, rtol=0, atol=1e-12)
    assert optimizer.state[table]["sum"].shape == state_shape
    assert torch.equal(table.detach()[N_ROWS // 2 :], start[N_ROWS // 2 :])


def test_rowwise_adagrad_treats_each_element_of_a_vector_as_a_row():
    """A 1-D parameter (MAWU's margins) under a dense gradient: per-element Adagrad."""
    margins = torch.nn.Parameter(torch.zeros(5, dtype=torch.float64))
    optimizer = RowwiseAdagrad([margins], lr=0.5)
    weights = torch.tensor([1.0, -2.0, 0.5, 0.0, 3.0], dtype=torch.float64)
    for _ in range(2):
        optimizer.zero_grad()
        (margins * weights).sum().backward()
        optimizer.step()
    expected = -0.5 * weights / (weights.abs() + 1e-10) * (1 + 1 / 2**0.5)
    torch.testing.assert_close(margins.detach(), expected, rtol=0, atol=1e-9)
    scalar = torch.nn.Parameter(torch.tensor(1.0, dtype=torch.float64))  # a 0-dim parameter is one row
    optimizer = RowwiseAdagrad([scalar], lr=0.5)
    (scalar * 3.0).backward()
    optimizer.step()
    assert scalar.shape == () and torch.isclose(scalar.detach(), torch.tensor(0.5, dtype=torch.float64))


def test_dense_gradients_move_every_row_as_the_dense_rule():
    """A dense gradient (an MLP weight, LightGCN's tables) touches every row: lazy Adam is then plain Adam."""
    start = torch.randn(N_ROWS, DIM, dtype=torch.float64)
    lazy_table, adam_table = torch.nn.Parameter(start.clone()), torch.nn.Parameter(start.clone())
    lazy, adam = LazyAdam([lazy_table], lr=0.05), torch.optim.Adam([adam_table], lr=0.05)
    for rows, upstream in _batches(3):
        for optimizer, table in ((lazy, lazy_table), (adam, adam_table)):
            optimizer.zero_grad()
            (table[rows] * upstream).sum().backward()
            optimizer.step()
    torch.testing.assert_close(lazy_table.detach(), adam_table.detach(), rtol=0, atol=1e-12)


def test_dense_adam_takes_row_sparse_gradients_as_dense_ones():
    start = torch.randn(N_ROWS, DIM, dtype=torch.float64)
    sparse_table, dense_table = torch.nn.Parameter(start.clone()), torch.nn.Parameter(start.clone())
    sparse, dense = DenseAdam([sparse_table], lr=0.05), torch.optim.Adam([dense_table], lr=0.05)
    for rows, upstream in _batches(3):
        _sparse_step(sparse, sparse_table, rows, upstream)
        dense.zero_grad()
        (dense_table[rows] * upstream).sum().backward()
        dense.step()
    torch.testing.assert_close(sparse_table.detach(), dense_table.detach(), rtol=0, atol=1e-12)
