"""BPR's compiled row gradients (recx.kernels.bpr_rows) and the step that hands them to the optimizer
(recx.training.step.row_gradient_step, the input "row_gradients"): the same loss, gradients and updates as autograd
through the generic step, against a float64 reference too, and taken exactly where they apply."""

import warnings

import pytest
import torch
import torch.nn.functional as F

from recx.config.run_config import resolve
from recx.core.device_paths import forced_accelerator_branches
from recx.optim.optimizers import ROW_SPARSE
from recx.samplers.base import Negatives
from recx.training import step
from recx.training.build import build_model
from recx.training.runners.interactions import InteractionEpochs
from recx.training.step import input_kind, loss_with, row_gradient_step

CPU = torch.device("cpu")


def _runner(tiny, **raw):
    config = resolve({"model": "mf", "dim": 16, "loss": "bpr", "batch_size": 64, "device": "cpu", **raw})
    model = build_model(config, tiny, CPU)
    return InteractionEpochs(config, tiny, model, torch.Generator().manual_seed(0)), model


def _negatives(items: torch.Tensor) -> Negatives:
    zeros = torch.zeros(items.shape)
    return Negatives(items, zeros, zeros[:, 0])


def _batches(tiny, n_negatives: int, steps: int, batch: int = 96):
    """(users, positives, negatives) per step, with repeated users and items in every batch."""
    generator = torch.Generator().manual_seed(1)
    users_of, items_of = tiny.train.row_ids(), tiny.train.indices
    for _ in range(steps):
        picked = torch.randint(0, users_of.numel(), (batch,), generator=generator)
        items = torch.randint(0, tiny.n_items, (batch, n_negatives), generator=generator)
        yield users_of[picked], items_of[picked], _negatives(items)


@pytest.mark.parametrize("optimizer", ROW_SPARSE)
@pytest.mark.parametrize("reduction", ["mean", "sum"])
@pytest.mark.parametrize("n_negatives", [1, 3])
def test_row_gradient_steps_equal_autograd_steps(tiny, optimizer, reduction, n_negatives):
    raw = {"optimizer": optimizer, "n_negatives": n_negatives, "loss_args": {"reduction": reduction}, "lr": 0.05}
    autograd_runner, autograd_model = _runner(tiny, **raw)
    row_runner, row_model = _runner(tiny, **raw)
    for users, positives, negatives in _batches(tiny, n_negatives, steps=6):
        assert users.unique().numel() < users.numel() and positives.unique().numel() < positives.numel()
        kind = input_kind(row_model, row_runner.loss_fn, row_runner.config, negatives, row_runner.optimizer)
        assert kind == "row_gradients"
        loss = loss_with(autograd_model, autograd_runner.loss_fn, autograd_runner.config, users, positives, negatives)
        autograd_runner.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        autograd_runner.optimizer.step()
        fused = row_gradient_step(row_model, row_runner.loss_fn, row_runner.optimizer, users, positives, negatives)
        torch.testing.assert_close(fused, loss.detach(), rtol=1e-6, atol=1e-7)
    start = build_model(row_runner.config, tiny, CPU).embedding_tables()
    for ours, theirs, initial in zip(
        row_model.embedding_tables(), autograd_model.embedding_tables(), start, strict=True
    ):
        assert (ours - initial).abs().max() > 1e-4
        torch.testing.assert_close(ours, theirs, rtol=1e-4, atol=1e-5)  # Adam magnifies rounding


@pytest.mark.parametrize("reduction", ["mean", "sum"])
def test_row_gradients_against_a_float64_reference(tiny, reduction):
    runner, model = _runner(tiny, n_negatives=4, loss_args={"reduction": reduction})
    user_table, item_table = (table.detach() for table in model.dot_tables())
    generator = torch.Generator().manual_seed(2)
    for table in (user_table, item_table):  # score differences beyond softplus's threshold (20) and far below it
        table.copy_(1.5 * torch.randn(table.shape, generator=generator))
    users, positives, negatives = next(_batches(tiny, 4, steps=1))
    ids = torch.cat([positives[:, None], negatives.items], dim=1)
    loss, user_grads, row_grads = runner.loss_fn.row_gradients(user_table, item_table, users, ids)

    query = user_table[users].double().requires_grad_()
    rows = item_table[ids].double().requires_grad_()
    scores = (query[:, None, :] * rows).sum(-1)
    assert (scores[:, 1:] - scores[:, :1]).abs().max() > 20
    pairwise = F.softplus(scores[:, 1:] - scores[:, :1])
    reference = pairwise.mean() if reduction == "mean" else pairwise.sum()
    reference.backward()
    torch.testing.assert_close(loss.double(), reference.detach(), rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(user_grads.double(), query.grad, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(row_grads.double(), rows.grad, rtol=1e-5, atol=1e-6)


def test_the_row_gradients_are_taken_exactly_where_they_apply(tiny):
    negatives = next(_batches(tiny, 1, steps=1))[2]

    def applies(negatives=negatives, **raw):
        runner, model = _runner(tiny, **raw)
        return input_kind(model, runner.loss_fn, runner.config, negatives, runner.optimizer) == "row_gradients"

    assert applies()
    assert applies(optimizer="lazy_adam", loss_args={"reduction": "sum"})
    assert not applies(model_args={"scoring": "cosine"})
    assert not applies(model_args={"temperature": 0.5})
    assert not applies(model="nonlinear_mf")
    assert not applies(optimizer="adam")
    assert not applies(loss="bce")
    assert not applies(weight_decay=0.01, weight_decay_mode="batch")
    assert not applies(negatives=_negatives(torch.arange(5)[None, :]))  # shared by the batch
    assert not applies(negatives=_negatives(torch.zeros(96, 9, dtype=torch.long)))  # past the row dots' range
    weighted = Negatives(negatives.items, negatives.log_q, negatives.positive_log_q, weights=torch.ones(96, 1))
    assert not applies(negatives=weighted)
    with forced_accelerator_branches():
        assert not applies()


def test_train_step_takes_the_row_gradients_without_autograd(tiny, monkeypatch):
    runner, model = _runner(tiny)

    def no_autograd(*args):
        raise AssertionError("the autograd loss was computed")

    monkeypatch.setattr(step, "loss_with", no_autograd)
    users, positives = tiny.train.row_ids()[:64], tiny.train.indices[:64]
    before = model.item_embedding.detach().clone()
    loss = step.train_step(model, runner.sampler, runner.loss_fn, runner.optimizer, runner.config, users, positives)
    assert not loss.requires_grad and torch.isfinite(loss)
    assert not torch.equal(before[positives], model.item_embedding.detach()[positives])
    runner, model = _runner(tiny, optimizer="adam")
    with pytest.raises(AssertionError, match="autograd loss"):
        step.train_step(model, runner.sampler, runner.loss_fn, runner.optimizer, runner.config, users, positives)


def test_row_gradient_steps_count_as_optimizer_steps_for_the_schedule(tiny):
    """The row path steps through `optimizer.step`, so the learning-rate schedule sees its steps (torch warns when a
    scheduler steps before its optimizer ever did) and steps the rate down by epoch."""
    runner, model = _runner(tiny, lr=0.1, lr_step_epochs=1, lr_step_gamma=0.5)
    losses = torch.zeros(runner.n_steps)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for epoch in (1, 2):
            runner.train_epoch(epoch, losses, lambda step: None)
    assert runner.optimizer.param_groups[0]["lr"] == pytest.approx(0.025)
    assert torch.isfinite(losses).all()
