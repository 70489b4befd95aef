"""The run's learning-rate schedule, shared by every runner with an optimizer (config keys `lr_step_epochs`,
`lr_step_gamma`): the official codes' StepLR (HERECJ/XIR run.py, HERECJ/FastVae_Gpu, swt-user/WWW_2023_code: step
5, γ 0.95). Epoch e (0-based) trains at
    lr_e = lr · γ^floor(e / lr_step_epochs);
`lr_step_epochs: 0` (the default) keeps the learning rate constant. The rate changes between epochs only, as a
Python number in the optimizer's parameter groups, so a step reads nothing from the device for it.
"""

from __future__ import annotations

import torch

from recx.config.run_config import RunConfig


class EpochSchedule:
    """Steps the optimizer's learning rate down at the end of each epoch (nothing when there is no schedule)."""

    def __init__(self, optimizer: torch.optim.Optimizer, config: RunConfig):
        self.scheduler = (
            torch.optim.lr_scheduler.StepLR(optimizer, config.lr_step_epochs, config.lr_step_gamma)
            if config.lr_step_epochs
            else None
        )

    def end_epoch(self) -> None:
        if self.scheduler is not None:
            self.scheduler.step()
