"""bench/dispatch_count.py's counter: which operator calls count as launches, which as host reads, which not at all
(views, allocations), the backward's and the optimizer's included, and a CuPy kernel's torch reference counted as
the kernel's launches."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

BENCH = Path(__file__).resolve().parents[1] / "bench"


@pytest.fixture
def dc(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCH))
    import dispatch_count

    return dispatch_count


def test_views_and_allocations_are_not_launches_and_item_is_a_host_read(dc):
    x = torch.randn(4, 3)
    with dc.DispatchCount() as counter:
        y = x.reshape(-1)[2:].view(2, -1).t().detach()  # views only
        torch.empty(5)
        z = x @ x.T  # mm (x.T a view)
        z.sum().item()
    assert y.shape == (5, 2)
    assert counter.launches == {"mm": 1, "sum": 1}
    assert counter.reads == {"_local_scalar_dense": 1}
    assert {"t", "view", "slice", "detach", "empty"} <= set(counter.others)


def test_the_backward_and_the_optimizer_are_counted(dc):
    table = torch.randn(10, 4, requires_grad=True)
    optimizer = torch.optim.Adam([table], lr=0.1, fused=True)
    ids = torch.tensor([1, 3, 3])
    with dc.DispatchCount() as counter:
        loss = table[ids].pow(2).sum()
        loss.backward()
        optimizer.step()
    assert counter.launches["index"] == 1  # the forward's gather
    assert counter.launches["index_put"] >= 1  # its backward's scatter
    assert counter.launches["_fused_adam_"] == 1


def test_a_cupy_kernels_torch_reference_counts_as_the_kernels_launches(dc):
    from recx.kernels import alias_table

    table = alias_table.AliasTable(torch.tensor([1.0, 2.0, 3.0]))
    generator = torch.Generator().manual_seed(0)
    counter = dc.DispatchCount()
    with counter, dc.cupy_stand_ins(counter):
        table.sample((8,), generator)
    assert counter.launches == {"rand": 1, "cupy alias_draw": 1}
    assert alias_table.draw_torch.__name__ == "draw_torch"  # put back


def test_counted_averages_over_the_steps_after_the_warmup(dc):
    weights = torch.randn(3, requires_grad=True)
    optimizer = torch.optim.Adam([weights], lr=0.1, fused=True)

    def step(scale):
        optimizer.zero_grad(set_to_none=True)
        (weights * scale).sum().backward()
        optimizer.step()

    count = dc.counted(step, [(1.0,), (2.0,), (3.0,)], warmup=1)
    assert count.steps == 2
    assert count.launches["_fused_adam_"] == 2
    assert count.per_step == sum(count.launches.values()) / 2
