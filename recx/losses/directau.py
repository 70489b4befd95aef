"""DirectAU (Wang et al., "Towards Representation Alignment and Uniformity in Collaborative Filtering", KDD 2022).

    L = alignment(U_B, I_B) + γ (uniformity(U_B) + uniformity(I_B)) / 2
over the batch's (user, positive item) pairs, on L2-normalised representations (recx.losses.alignment).
It reads LossInput.query and positive_repr only: negatives are ignored, so any sampler works and the cheapest
(uniform, n_negatives 1) is the one to use; their scores and log_q play no part.
"""
from __future__ import annotations

from dataclasses import dataclass

from recx.losses import LOSSES
from recx.losses.alignment import alignment, uniformity
from recx.losses.base import Loss, LossInput


@dataclass
class DirectAUArgs:
    gamma: float = 1.0


@LOSSES.register("directau")
class DirectAU(Loss):
    Args = DirectAUArgs
    uses_negatives = False

    def __call__(self, batch: LossInput):
        users, items = batch.query, batch.positive_repr
        return alignment(users, items) + self.args.gamma * (uniformity(users) + uniformity(items)) / 2
