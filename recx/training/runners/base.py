"""The contract every runner keeps (see recx.training.runners)."""

from __future__ import annotations

from typing import Callable

import torch

from recx.config.run_config import RunConfig
from recx.data.dataset import Dataset


class Runner:
    """Runs the steps of one epoch. `n_steps` steps per epoch (0: nothing to train).

    `train_epoch` writes each step's detached loss into `losses[step]`, a tensor on the run's device, so that no
    step waits for the host; the training loop reads the losses at bounded intervals (non-finite check) and at the end of
    the epoch. `after_step(step)` is called with the 1-based number of steps done (progress display).

    A runner with `checkpoints_within_epoch` keeps `steps_done` (the steps of the current epoch done, set before each
    `after_step` and back to 0 when the epoch ends) and whatever else its next step needs as attributes, so that the
    trainer may checkpoint its state in `after_step` (recx.training.checkpoint, recx.training.state: tensors, numbers,
    strings, generators, optimizers and the objects holding them): `train_epoch` of a runner restored with
    `steps_done` = s runs the epoch's steps from s + 1 on, in the same order, as if it had not stopped. An epoch's
    shuffled order is drawn by `shuffled` and drawn again on such a resume.
    """

    n_steps: int = 0
    checkpoints_within_epoch: bool = False
    steps_done: int = 0
    shuffled_from: torch.Tensor | None = None  # the generator's state before the current epoch's order was drawn

    def __init__(self, config: RunConfig, dataset: Dataset, model, generator: torch.Generator):
        self.config, self.dataset, self.model, self.generator = config, dataset, model, generator

    def train_epoch(self, epoch: int, losses: torch.Tensor, after_step: Callable[[int], None]) -> None:
        raise NotImplementedError

    def shuffled(self, n: int) -> torch.Tensor:
        """A random permutation of range(n) on the run's device, drawn from the run's generator at the start of an
        epoch; within an epoch resumed from a checkpoint, the same permutation, drawn again from the state the
        generator had at the epoch's start (its state now is kept). With `fixed_order`, one permutation for every
        epoch, drawn from a generator of its own seeded with the run's seed (the run's generator is not touched)."""
        device, start = self.model.device, self.shuffled_from
        if self.config.fixed_order:
            return torch.randperm(n, generator=torch.Generator(device).manual_seed(self.config.seed), device=device)
        if self.steps_done == 0 or start is None:
            self.shuffled_from = self.generator.get_state()
            return torch.randperm(n, generator=self.generator, device=device)
        now = self.generator.get_state()
        self.generator.set_state(start)
        order = torch.randperm(n, generator=self.generator, device=device)
        self.generator.set_state(now)
        return order
