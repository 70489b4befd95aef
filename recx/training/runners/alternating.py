"""Alternating closed-form solves (WRMF, RG², RG×): an epoch is a user half-step then an item half-step, or with
`half_steps` one half-step (the user's in odd epochs, the item's in even ones), so that the training loop validates and
stops early after every half-step, as the RG authors' RecStudio loop does (its ALS "epoch" is a half-step,
`val_n_epoch: 1`, early stopping on the first validation metric with patience 10).

No sampler, loss object or optimizer: each step overwrites one factor table with the minimiser of the model's
weighted squared loss (recx.models.als) given the other. A step's recorded loss is that loss after the step
(from what the step's solves hold where they hold it: no pass of its own, recx.models.als.problem), divided by the
number of training interactions; it never increases from one step to the next (up to rounding
with the exact solver; CG steps are a descent method warm-started from the current rows), except with RG's form
official, whose item half-step is not a minimiser of that loss (recx.models.als.rg).
A checkpoint may be taken between the two half-steps (recx.training.runners.base): the factor tables are the whole
state, so the resumed epoch runs the item half-step alone.
"""

from __future__ import annotations

import torch

from recx.training.runners.base import Runner
from recx.training.runners.registry import RUNNERS


@RUNNERS.register("alternating")
class AlternatingEpochs(Runner):
    checkpoints_within_epoch = True
    n_steps = 2

    def __init__(self, config, dataset, model, generator):
        super().__init__(config, dataset, model, generator)
        self.problem = model.weighted_squares(dataset.train)
        self.scale = 1.0 / max(dataset.train.nnz, 1)
        if config.half_steps:
            self.n_steps = 1

    @torch.no_grad()
    def train_epoch(self, epoch, losses, after_step) -> None:
        solves = [self.model.solve_users, self.model.solve_items]
        if self.config.half_steps:
            solves = [solves[(epoch - 1) % 2]]
        for step in range(self.steps_done, self.n_steps):
            losses[step] = solves[step](self.problem) * self.scale
            self.steps_done = step + 1
            after_step(step + 1)
        self.steps_done = 0
