"""Runner `none` (MostPop): no steps, no optimizer; the training loop runs no epoch and evaluates the model as built."""

from __future__ import annotations

from recx.training.runners.base import Runner
from recx.training.runners.registry import RUNNERS


@RUNNERS.register("none")
class NoTraining(Runner):
    n_steps = 0

    def train_epoch(self, epoch, losses, after_step) -> None:
        """Never called: the training loop skips epochs when `n_steps` is 0."""
