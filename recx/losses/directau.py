"""DirectAU (Wang et al., "Towards Representation Alignment and Uniformity in Collaborative Filtering", KDD 2022).

    L = alignment(U_B, I_B) + γ (uniformity(U_B) + uniformity(I_B)) / 2
over the batch's (user, positive item) pairs, on L2-normalised representations (recx.losses.alignment).
Uniformity is taken over the batch's distinct users and distinct items by default (`uniformity_rows: unique`, as the
PRISM authors' code that produced the PRISM paper's Table 1, snap-research/PRISM train.py); `uniformity_rows: batch`
takes every row, a user or item once per interaction, as DirectAU's own release (THUwangcy/DirectAU).
It reads LossInput.query and positive_repr (and users/positives for the distinct rows) only: negatives are
ignored, so any sampler works and the cheapest (uniform, n_negatives 1) is the one to use.
"""

from __future__ import annotations

from dataclasses import dataclass

from recx.core.args import arg
from recx.losses.alignment import UNIFORMITY_ROWS, alignment, uniformity_of
from recx.losses.base import Loss, LossInput
from recx.losses.registry import LOSSES


@dataclass
class DirectAUArgs:
    gamma: float = arg(1.0, at_least=0, help="weight of the uniformity terms")
    uniformity_rows: str = arg("unique", choices=UNIFORMITY_ROWS, help="the batch's distinct rows, or every row")


@LOSSES.register("directau")
class DirectAU(Loss):
    summary = "DirectAU: alignment of user and positive item plus γ × uniformity (negatives unused)"
    Args = DirectAUArgs
    uses_negatives = False

    def __call__(self, batch: LossInput):
        users, items = batch.representations()
        which = self.args.uniformity_rows
        spread = uniformity_of(users, batch.users, which) + uniformity_of(items, batch.positives, which)
        return alignment(users, items) + self.args.gamma * spread / 2
