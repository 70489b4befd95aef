"""MAWU: margin-aware alignment and weighted uniformity (Park et al., "Toward a Better Understanding of Loss
Functions for Collaborative Filtering", CIKM 2023; the PRISM paper's Appendix B.4.4, Eq. 10).

    L = -E cos(θ + m) + γ_u uniformity(U_B) + γ_i uniformity(I_B)
θ_b is the angle between the b-th pair's user and positive item representations (cos clipped to ±(1 - 1e-7), θ + m
clipped to [0, π]). The margin follows the authors' released code (psm1206/MAWU): m_b = 1 - σ(w_u + w_i) with
learned per-user and per-item w, projected onto [0, 1] after each use (before the step: a loss reads w as the last
step left it), so m_b lies in [1 - σ(2), 1/2] but for the overshoot of one step. w starts at 0 (`margin_init: zero`)
or as the official codes start it, Xavier on each [n, 1] margin table (fan-in 1, fan-out n): `xavier_uniform`,
U(-a, a) with a = √(6 / (n + 1)) (snap-research/PRISM models.py, `torch.nn.init.xavier_uniform_`), or
`xavier_normal`, N(0, 2 / (n + 1)) (psm1206/MAWU, RecBole's `xavier_normal_initialization`); drawn from torch's
global generator right after the model's tables (recx.training.build seeds it with the run's seed), users then items,
as both official codes draw them after their embeddings. Both released codes (psm1206/MAWU and the PRISM authors', snap-research/PRISM, which produced the PRISM paper's
Table 1) add a [B] angle vector to a [B, 1] margin column, which broadcasts: the alignment term is
-mean_{a,b} cos(θ_b + m_a), every pair's angle with every pair's margin (`alignment: broadcast`, the default);
`alignment: pairs` is the paper's -mean_b cos(θ_b + m_b). Uniformity follows the released `uniformity_dot` by
default (`uniformity: lower_triangle`, the mean over all n² entries of the strict lower triangle, the zeroed ones
counting as distance² 2); `uniformity: pairs` is DirectAU's mean over distinct pairs, with which the same γ pushes up
to ~1.9x harder (recx.losses.alignment). Its rows are the batch's distinct users and items (`uniformity_rows:
unique`, the PRISM authors' code) or all the batch's rows (`uniformity_rows: batch`, psm1206/MAWU).
A pair's margin reads the margin rows of its own user and item (`margin_ids: own`, psm1206/MAWU and the paper);
`margin_ids: batch_position` reads them where the PRISM authors' code does: its `RecModel.get_margins` indexes the
margin tables with the loader's relabelled edge_label_index, the user's (item's) position among the batch's distinct
users (items) in ascending id order, so the batch's pairs share the first rows of the margin tables with whichever
users and items hold those positions in other batches (tests/test_official_prism.py, the official loop).
With `margin_decay` the run's `full` weight decay reaches the margins as it reaches the tables (PRISM's Adam holds
them beside the embeddings; psm1206/MAWU's RecBole optimizer over all parameters likewise); without it they are never
decayed. Negatives are ignored, as in DirectAU: any sampler works (uniform with n_negatives 1 is the cheapest).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from recx.core.args import arg
from recx.losses.alignment import UNIFORMITY_FORMS, UNIFORMITY_ROWS, uniformity_of
from recx.losses.base import Loss, LossInput
from recx.losses.registry import LOSSES

COS_CLIP = 1e-7
ALIGNMENTS = ("broadcast", "pairs")
MARGIN_IDS = ("own", "batch_position")
MARGIN_INITS = {
    "zero": torch.nn.init.zeros_,
    "xavier_uniform": torch.nn.init.xavier_uniform_,
    "xavier_normal": torch.nn.init.xavier_normal_,
}


@dataclass
class MAWUArgs:
    gamma_user: float = arg(0.5, at_least=0, help="weight of the users' uniformity")
    gamma_item: float = arg(0.5, at_least=0, help="weight of the items' uniformity")
    uniformity: str = arg("lower_triangle", choices=UNIFORMITY_FORMS, help="the released code's form, or pairs")
    uniformity_rows: str = arg("unique", choices=UNIFORMITY_ROWS, help="the batch's distinct rows, or every row")
    alignment: str = arg("broadcast", choices=ALIGNMENTS, help="the released codes' broadcast, or the paper's pairs")
    margin_ids: str = arg(
        "own", choices=MARGIN_IDS, help="a pair's own user's and item's margins, or PRISM's in-batch positions"
    )
    margin_init: str = arg(
        "zero",
        choices=tuple(MARGIN_INITS),
        help="w's start: 0, or Xavier as PRISM's (uniform) / MAWU's (normal) code",
        added=True,
    )
    margin_decay: bool = arg(
        False,
        help="the run's full weight decay reaches the margins too (PRISM's Adam holds them beside the tables)",
        added=True,
    )


def start_margins(n: int, init: str) -> torch.Tensor:
    """w [n]: an [n, 1] table started by `init` (MARGIN_INITS, torch's global generator), flattened."""
    table = torch.empty(n, 1)
    MARGIN_INITS[init](table)
    return table[:, 0].clone()


def batch_positions(ids: torch.Tensor) -> torch.Tensor:
    """Each id's position among the distinct ids of the batch in ascending order (PyG's relabelling of a batch)."""
    return torch.unique(ids, return_inverse=True)[1]


def broadcast_mean_cosine(angle: torch.Tensor, margin: torch.Tensor) -> torch.Tensor:
    """mean_{a,b} cos(min(θ_b + m_a, π)) for angles in [0, π] and margins ≥ 0 (so θ + m ≥ 0), in O(B log B) rather
    than over the [B, B] matrix (0.8 s per step at B = 4096 on one CPU thread): with the margins sorted, the a's whose
    m_a ≤ π - θ_b are a prefix of length k_b, and for them cos(θ_b + m_a) = cos θ_b cos m_a - sin θ_b sin m_a sums
    through prefix sums of cos m and sin m; the other B - k_b entries are cos π = -1 (no gradient, as with clamp)."""
    m = torch.sort(margin).values
    zero = m.new_zeros(1)
    cos_sums = torch.cat([zero, torch.cumsum(torch.cos(m), 0)])
    sin_sums = torch.cat([zero, torch.cumsum(torch.sin(m), 0)])
    k = torch.searchsorted(m.detach(), (math.pi - angle).detach(), right=True)
    inside = torch.cos(angle) * cos_sums[k] - torch.sin(angle) * sin_sums[k]
    n = angle.numel() * margin.numel()
    return (inside.sum() - (n - k.sum())) / n


def margin_alignment(
    users: torch.Tensor, items: torch.Tensor, margin: torch.Tensor, form: str = "broadcast"
) -> torch.Tensor:
    """`pairs`: -mean_b cos(θ_b + m_b); `broadcast`: -mean_{a,b} cos(θ_b + m_a) (margins ≥ 0)."""
    cosine = (F.normalize(users, dim=-1) * F.normalize(items, dim=-1)).sum(-1)
    angle = torch.arccos(cosine.clamp(-1 + COS_CLIP, 1 - COS_CLIP))
    if form == "broadcast":
        return -broadcast_mean_cosine(angle, margin)
    return -torch.cos((angle + margin).clamp(0.0, math.pi)).mean()


@LOSSES.register("mawu")
class MAWU(Loss):
    summary = "MAWU: margin-aware alignment (learned margins) plus weighted uniformity (negatives unused)"
    Args = MAWUArgs
    uses_negatives = False

    def __init__(self, args: MAWUArgs, dataset=None):
        super().__init__(args, dataset)
        self.user_margin = torch.nn.Parameter(start_margins(dataset.n_users, args.margin_init))
        self.item_margin = torch.nn.Parameter(start_margins(dataset.n_items, args.margin_init))

    @classmethod
    def decays_with_model(cls, args: MAWUArgs) -> bool:
        return args.margin_decay

    def parameters(self) -> list[torch.nn.Parameter]:
        return [self.user_margin, self.item_margin]

    def to(self, device: torch.device) -> "MAWU":
        self.user_margin = torch.nn.Parameter(self.user_margin.detach().to(device))
        self.item_margin = torch.nn.Parameter(self.item_margin.detach().to(device))
        return self

    def margins(self, users: torch.Tensor, items: torch.Tensor) -> torch.Tensor:
        """m_ui = 1 - σ(w_u + w_i) from w as the last step left it; then w is projected onto [0, 1] in place, before
        the backward pass and the step, as both official codes do (PRISM's `clip_margins` after the loss, psm1206/MAWU
        at the end of `calculate_loss`): a loss reads the margins the previous step left, outside [0, 1] or not."""
        margin = 1.0 - torch.sigmoid(self.user_margin[users] + self.item_margin[items])
        with torch.no_grad():
            self.user_margin.clamp_(0.0, 1.0)
            self.item_margin.clamp_(0.0, 1.0)
        return margin

    def __call__(self, batch: LossInput):
        (users, items), (user_ids, item_ids), args = batch.representations(), batch.ids(), self.args
        margin_users, margin_items = user_ids, item_ids
        if args.margin_ids == "batch_position":
            margin_users, margin_items = batch_positions(user_ids), batch_positions(item_ids)
        align = margin_alignment(users, items, self.margins(margin_users, margin_items), args.alignment)
        return (
            align
            + args.gamma_user * uniformity_of(users, user_ids, args.uniformity_rows, args.uniformity)
            + args.gamma_item * uniformity_of(items, item_ids, args.uniformity_rows, args.uniformity)
        )
