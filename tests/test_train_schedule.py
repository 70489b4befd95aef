"""The run's learning-rate schedule (recx.training.schedule): epoch e (from 0) of every gradient-trained kind trains at
lr · γ^floor(e / lr_step_epochs); without a schedule the learning rate, the losses and the run id are as before."""

from __future__ import annotations

import pytest
import torch

from recx.config.run_config import resolve
from recx.core.errors import RecxError
from recx.training.build import build_model
from recx.training.runners.registry import RUNNERS

KINDS = {
    "mf": {"model": "mf", "loss": "bpr"},
    "lightgcn": {"model": "lightgcn", "loss": "bpr", "model_args": {"n_layers": 1}},
    "mf-rowwise-adagrad": {"model": "mf", "loss": "bpr", "optimizer": "rowwise_adagrad"},
    "mf-softmax-adam": {"model": "mf", "loss": "softmax", "optimizer": "adam", "n_negatives": 20},
    "multvae": {"model": "multvae", "loss": "full_softmax", "model_args": {"hidden": 4}},
    "fastvae": {
        "model": "fastvae",
        "loss": "softmax",
        "sampler": "uniform",
        "n_negatives": 10,
        "model_args": {"hidden": 4},
    },
}


def runner_for(dataset, **settings):
    config = resolve({"dim": 4, "batch_size": 512, "lr": 0.01, **settings})
    model = build_model(config, dataset, torch.device("cpu"))
    return RUNNERS.get(model.runner)(config, dataset, model, torch.Generator().manual_seed(0))


def epoch_rates_and_losses(runner, n_epochs: int) -> tuple[list[float], list[torch.Tensor]]:
    rates, losses = [], []
    for epoch in range(1, n_epochs + 1):
        rates.append([group["lr"] for group in runner.optimizer.param_groups])
        epoch_losses = torch.zeros(runner.n_steps)
        runner.train_epoch(epoch, epoch_losses, lambda step: None)
        losses.append(epoch_losses)
    return rates, losses


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_every_gradient_kind_steps_its_rate_down_every_lr_step_epochs(tiny, kind):
    runner = runner_for(tiny, **KINDS[kind], lr_step_epochs=2, lr_step_gamma=0.5)
    rates, _ = epoch_rates_and_losses(runner, 7)
    for epoch, epoch_rates in enumerate(rates):
        assert epoch_rates == pytest.approx([0.01 * 0.5 ** (epoch // 2)] * len(epoch_rates), rel=1e-12)


@pytest.mark.parametrize("kind", ["mf", "multvae"])
def test_without_a_schedule_the_rate_and_losses_are_unchanged(tiny, kind):
    """No schedule = a schedule that never fires within the run: same constant rate, bit-identical losses."""
    plain_rates, plain = epoch_rates_and_losses(runner_for(tiny, **KINDS[kind]), 3)
    _, late = epoch_rates_and_losses(runner_for(tiny, **KINDS[kind], lr_step_epochs=10), 3)
    _, early = epoch_rates_and_losses(runner_for(tiny, **KINDS[kind], lr_step_epochs=1, lr_step_gamma=0.1), 3)
    assert plain_rates == [[0.01] * len(plain_rates[0])] * 3
    assert all(torch.equal(a, b) for a, b in zip(plain, late, strict=True))
    assert not torch.equal(plain[2], early[2])


def test_a_run_without_a_schedule_keeps_its_run_id():
    """The ids of runs from before the schedule keys existed (recorded at commit fd072be)."""
    assert resolve({}).run_id() == "c1d411450088"
    assert resolve({"model": "mf", "loss": "bpr", "epochs": 3}).run_id() == "acce53a0caf5"
    assert resolve({"model": "lightgcn", "loss": "bpr", "dim": 8}).run_id() == "b2001ee93193"
    assert resolve({"lr_step_epochs": 5}).run_id() != resolve({}).run_id()
    assert resolve({"lr_step_epochs": 5, "lr_step_gamma": 0.5}).run_id() != resolve({"lr_step_epochs": 5}).run_id()


@pytest.mark.parametrize(
    "settings, message",
    [
        ({"lr_step_epochs": -1}, r"lr_step_epochs = -1: expected an integer in \[0, 100,000\]"),
        ({"lr_step_epochs": 2.5}, "lr_step_epochs = 2.5: expected an integer"),
        ({"lr_step_epochs": 5, "lr_step_gamma": 0.0}, r"lr_step_gamma = 0.0: expected a finite number in \(0, 1\]"),
        ({"lr_step_epochs": 5, "lr_step_gamma": 1.5}, r"lr_step_gamma = 1.5: expected a finite number in \(0, 1\]"),
        ({"lr_step_gamma": 0.5}, r"lr_step_gamma = 0.5 applies only with a schedule \(lr_step_epochs > 0"),
        ({"model": "wrmf", "lr_step_epochs": 5}, "model 'wrmf' is not trained by gradient steps"),
        ({"model": "popularity", "lr_step_epochs": 5}, "model 'popularity' is not trained by gradient steps"),
    ],
)
def test_invalid_schedules_are_refused_with_one_message(settings, message):
    with pytest.raises(RecxError, match=message):
        resolve(settings)


def test_multvae_no_longer_takes_a_schedule_of_its_own():
    with pytest.raises(RecxError, match="unknown key 'lr_step_epochs' for model 'multvae'"):
        resolve({"model": "multvae", "loss": "full_softmax", "model_args": {"lr_step_epochs": 5}})


def test_fixed_order_takes_one_order_drawn_from_the_seed_every_epoch(tiny):
    """`fixed_order` (PRISM's loader: shuffle=False over its randomly split edges): every epoch the same permutation,
    torch.randperm from a generator seeded with the run's seed, the run's own generator untouched; without it, a new
    order each epoch. A run without the key keeps its id; a model that takes no batches refuses it."""
    from recx.training.runners.interactions import InteractionEpochs

    def orders(fixed: bool):
        config = resolve({"model": "mf", "loss": "bpr", "epochs": 2, "seed": 3, "device": "cpu", "fixed_order": fixed})
        runner = InteractionEpochs(config, tiny, build_model(config, tiny, torch.device("cpu")), torch.Generator())
        state = runner.generator.get_state()
        first, second = runner.shuffled(50), runner.shuffled(50)
        return first, second, torch.equal(state, runner.generator.get_state())

    first, second, untouched = orders(True)
    assert torch.equal(first, second) and untouched
    assert torch.equal(first, torch.randperm(50, generator=torch.Generator().manual_seed(3)))
    first, second, untouched = orders(False)
    assert not torch.equal(first, second) and not untouched
    plain = {"model": "mf", "loss": "bpr"}
    assert resolve(plain).run_id() == resolve({**plain, "fixed_order": False}).run_id()
    assert resolve(plain).run_id() != resolve({**plain, "fixed_order": True}).run_id()
    with pytest.raises(RecxError, match="fixed_order = true: model 'wrmf'"):
        resolve({"model": "wrmf", "fixed_order": True})
