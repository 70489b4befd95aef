"""Row-sparse training steps: a step reads and updates only its rows; batched decay with sparse updates; same seed,
same numbers with each optimizer; non-finite losses found at a bounded interval with their epoch and step."""

import pytest
import torch

from recx.config.run_config import resolve
from recx.core.errors import RecxError
from recx.optim.optimizers import ROW_SPARSE
from recx.training.build import build_model
from recx.training.nonfinite import NonFiniteWatch
from recx.training.runners.interactions import InteractionEpochs
from recx.training.step import training_loss

CPU = torch.device("cpu")


def _runner(tiny, **raw):
    config = resolve({"model": "mf", "dim": 8, "loss": "bpr", "batch_size": 64, "device": "cpu", **raw})
    model = build_model(config, tiny, CPU)
    return InteractionEpochs(config, tiny, model, torch.Generator().manual_seed(config.seed)), model


@pytest.mark.parametrize("model_name", ["mf", "nonlinear_mf"])
@pytest.mark.parametrize("scoring", ["dot", "cosine"])
def test_rows_equal_the_whole_table_representations(tiny, model_name, scoring):
    config = resolve(
        {"model": model_name, "dim": 8, "loss": "bpr", "model_args": {"scoring": scoring, "temperature": 0.5}}
    )
    model = build_model(config, tiny, CPU)
    users, items = torch.tensor([3, 0, 3, 7]), torch.tensor([5, 5, 99, 0, 12])
    query, rows = model.rows(users, items)
    whole_query, table = model.representations(users)
    torch.testing.assert_close(query, whole_query)
    torch.testing.assert_close(rows, table[items])


def test_a_step_gradient_touches_only_the_batch_rows(tiny):
    runner, model = _runner(tiny, n_negatives=3, optimizer="lazy_adam")
    users, positives = tiny.train.row_ids()[:16], tiny.train.indices[:16]
    training_loss(model, runner.sampler, runner.loss_fn, runner.config, users, positives).backward()
    user_grad, item_grad = model.user_embedding.grad, model.item_embedding.grad
    assert user_grad.is_sparse and item_grad.is_sparse
    assert set(user_grad.coalesce().indices()[0].tolist()) == set(users.tolist())
    assert set(positives.tolist()) <= set(item_grad.coalesce().indices()[0].tolist())
    assert item_grad.coalesce().indices().shape[1] <= 16 * 4


@pytest.mark.parametrize("optimizer", ROW_SPARSE)
def test_batched_decay_with_sparse_updates_leaves_untouched_rows_over_several_steps(tiny, optimizer):
    runner, model = _runner(
        tiny, n_negatives=2, optimizer=optimizer, weight_decay=0.5, weight_decay_mode="batch", lr=0.05
    )
    before = [t.detach().clone() for t in model.embedding_tables()]
    touched_users, touched_items = set(), set()
    drawn = []
    sample = runner.sampler.sample
    runner.sampler.sample = lambda batch: drawn.append(sample(batch)) or drawn[-1]
    for start in (0, 40, 80):
        users, positives = tiny.train.row_ids()[start : start + 8], tiny.train.indices[start : start + 8]
        loss = training_loss(model, runner.sampler, runner.loss_fn, runner.config, users, positives)
        runner.optimizer.zero_grad()
        loss.backward()
        runner.optimizer.step()
        touched_users |= set(users.tolist())
        touched_items |= set(positives.tolist()) | set(drawn[-1].items.flatten().tolist())
    for table, old, touched in zip(model.embedding_tables(), before, (touched_users, touched_items), strict=True):
        untouched = torch.tensor([r not in touched for r in range(table.shape[0])])
        assert untouched.any() and torch.equal(table.detach()[untouched], old[untouched])
        assert not torch.equal(table.detach()[~untouched], old[~untouched])


@pytest.mark.parametrize("optimizer", ("adam",) + ROW_SPARSE)
def test_same_seed_gives_identical_parameters_with_each_optimizer(tiny, optimizer):
    results = []
    for _ in range(2):
        runner, model = _runner(tiny, n_negatives=4, optimizer=optimizer, seed=3)
        for epoch in (1, 2):
            runner.train_epoch(epoch, torch.zeros(runner.n_steps), lambda step: None)
        results.append([t.detach().clone() for t in model.embedding_tables()])
    for first, second in zip(*results, strict=True):
        assert torch.equal(first, second)


def test_full_decay_with_a_row_sparse_optimizer_is_a_config_error():
    with pytest.raises(RecxError, match="optimizer 'lazy_adam'.*weight_decay_mode 'full'"):
        resolve({"optimizer": "lazy_adam", "weight_decay": 1e-4, "weight_decay_mode": "full"})
    assert resolve({"weight_decay": 1e-4, "weight_decay_mode": "full"}).optimizer == "adam"
    assert resolve({"loss": "bpr", "weight_decay": 1e-4, "weight_decay_mode": "batch"}).optimizer == "lazy_adam"


def test_non_finite_watch_names_epoch_and_first_bad_step_within_the_interval():
    losses = torch.ones(1000)
    losses[437] = float("nan")
    watch = NonFiniteWatch(losses, epoch=4, lr=0.1, interval=100)
    for step in range(1, 500):
        watch.after_step(step)
    with pytest.raises(RecxError, match="at epoch 4, step 438"):
        watch.after_step(500)


@pytest.mark.gpu
def test_a_cuda_epoch_issues_no_host_sync(tiny):
    config = resolve({"model": "mf", "dim": 8, "loss": "bpr", "batch_size": 64, "device": "cuda"})
    dataset = tiny.to(torch.device("cuda"))
    model = build_model(config, dataset, torch.device("cuda"))
    runner = InteractionEpochs(config, dataset, model, torch.Generator(device="cuda").manual_seed(0))
    losses = torch.zeros(runner.n_steps, device="cuda")
    runner.train_epoch(1, losses, NonFiniteWatch(losses, 1, config.lr, interval=2).after_step)  # warm-up
    torch.cuda.set_sync_debug_mode("error")
    try:
        runner.train_epoch(2, losses, NonFiniteWatch(losses, 2, config.lr, interval=2).after_step)
    finally:
        torch.cuda.set_sync_debug_mode("default")
