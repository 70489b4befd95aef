"""Training kind `none` (MostPop): no steps, no optimizer; the trainer runs no epoch and evaluates the model as built."""

from __future__ import annotations

from recx.training.runners.base import EpochRunner
from recx.training.runners.registry import RUNNERS


@RUNNERS.register("none")
class NoTraining(EpochRunner):
    n_steps = 0

    def train_epoch(self, epoch, losses, after_step) -> None:
        """Never called: the trainer skips epochs when `n_steps` is 0."""
