"""The epoch-runner contract shared by every training kind (see recx.training.runners)."""

from __future__ import annotations

from typing import Callable

import torch

from recx.config.run_config import RunConfig
from recx.data.dataset import Dataset


class EpochRunner:
    """Runs the steps of one epoch. `n_steps` steps per epoch (0: nothing to train).

    `train_epoch` writes each step's detached loss into `losses[step]`, a tensor on the run's device, so that no
    step waits for the host; the trainer reads the losses at bounded intervals (non-finite check) and at the end of
    the epoch. `after_step(step)` is called with the 1-based number of steps done (progress display).
    """

    n_steps: int = 0

    def __init__(self, config: RunConfig, dataset: Dataset, model, generator: torch.Generator):
        self.config, self.dataset, self.model, self.generator = config, dataset, model, generator

    def train_epoch(self, epoch: int, losses: torch.Tensor, after_step: Callable[[int], None]) -> None:
        raise NotImplementedError
