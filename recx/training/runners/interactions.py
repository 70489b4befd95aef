"""Interaction batches (MF, LightGCN): shuffled training interactions, a sampler, a loss and an optimizer step per
batch; the learning rate steps down between epochs by the run's schedule (recx.training.schedule). Shuffling, batching
and sampling stay on the run's device; a step's loss is written into the device tensor `losses`, so no step waits for
the host. A checkpoint may be taken after any step (recx.training.runners.base): the sampler's per-epoch rebuild is then
not repeated and the epoch's order is drawn again from the generator's state at its start."""

from __future__ import annotations

import math

import torch

from recx.optim import optimizers as optim
from recx.training.build import build_loss, build_sampler
from recx.training.runners.base import Runner
from recx.training.runners.registry import RUNNERS
from recx.training.schedule import EpochSchedule
from recx.training.step import train_step


def run_optimizer(model, loss_fn, config) -> torch.optim.Optimizer:
    """The run's `optimizer` (recx.optim.optimizers) over the model's and the loss's parameters; in `full` weight-decay
    mode every model parameter row decays every step (dense Adam's weight_decay), and the loss's parameters too when
    the loss says so (`Loss.decays_with_model`: MAWU's `margin_decay`, as PRISM's Adam over the margins)."""
    decay = config.weight_decay if config.weight_decay_mode == "full" else 0.0
    if loss_fn.decays_with_model(loss_fn.args):
        return optim.make_optimizer(config.optimizer, [*model.parameters(), *loss_fn.parameters()], config.lr, decay)
    return optim.make_optimizer(config.optimizer, list(model.parameters()), config.lr, decay, loss_fn.parameters())


@RUNNERS.register("interactions")
class InteractionEpochs(Runner):
    def __init__(self, config, dataset, model, generator):
        super().__init__(config, dataset, model, generator)
        self.sampler = build_sampler(config, dataset, generator)
        self.loss_fn = build_loss(config, dataset, model.device)
        self.optimizer = run_optimizer(model, self.loss_fn, config)
        self.schedule = EpochSchedule(self.optimizer, config)
        self.users_of, self.items_of = dataset.train.row_ids(), dataset.train.indices
        self.n_steps = math.ceil(self.items_of.numel() / config.batch_size)

    checkpoints_within_epoch = True

    def train_epoch(self, epoch, losses, after_step) -> None:
        config, model = self.config, self.model
        if self.sampler.rebuild_every == "epoch" and self.steps_done == 0:
            self.sampler.rebuild(None, model.item_table())
        order = self.shuffled(self.items_of.numel())
        users_of, items_of = self.users_of.index_select(0, order), self.items_of.index_select(0, order)
        for step in range(self.steps_done, self.n_steps):
            batch = slice(step * config.batch_size, (step + 1) * config.batch_size)
            users, positives = users_of[batch], items_of[batch]
            losses[step] = train_step(model, self.sampler, self.loss_fn, self.optimizer, config, users, positives)
            self.steps_done = step + 1
            after_step(step + 1)
        self.steps_done = 0
        self.schedule.end_epoch()
