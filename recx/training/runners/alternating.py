"""Alternating closed-form solves (WRMF, RG², RG×): an epoch is a user half-step then an item half-step.

No sampler, loss object or optimizer: each step overwrites one factor table with the minimiser of the model's
weighted squared loss (recx.models.als) given the other. A step's recorded loss is that loss after the step,
divided by the number of training interactions; it never increases from one step to the next (up to rounding
with the exact solver; CG steps are a descent method warm-started from the current rows), except with RG's form
official, whose item half-step is not a minimiser of that loss (recx.models.als.rg).
"""

from __future__ import annotations

import torch

from recx.training.runners.base import EpochRunner
from recx.training.runners.registry import RUNNERS


@RUNNERS.register("alternating")
class AlternatingEpochs(EpochRunner):
    n_steps = 2

    def __init__(self, config, dataset, model, generator):
        super().__init__(config, dataset, model, generator)
        self.problem = model.weighted_squares(dataset.train)
        self.scale = 1.0 / max(dataset.train.nnz, 1)

    @torch.no_grad()
    def train_epoch(self, epoch, losses, after_step) -> None:
        for step, solve in enumerate((self.model.solve_users, self.model.solve_items)):
            solve(self.problem)
            losses[step] = self.model.loss(self.problem) * self.scale
            after_step(step + 1)
