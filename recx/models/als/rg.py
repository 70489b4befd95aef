"""RG² and RG× (the RG paper: "Ranking-Consistent Softmax Approximation with Accelerated Convergence", Eq. 31–39):
Taylor expansions of the softmax loss at o = 0 written as weighted squared losses and solved by ALS.

    RG²: Σ_{x,y} W_xy (S_xy − P_x·Q_y)² + λ Σ_x (Σ_y W_xy) ‖P_x‖² + λ Σ_y (Σ_x W_xy) ‖Q_y‖²      (Eq. 31, 36–37)
    RG×: RG² − Σ_x V_x P_x QᵀQ P_xᵀ                                                          (Eq. 31, 38–39)

S_xy = r_xy N / |I_x| − 1 (Eq. 32; Algorithm 1 line 7). The regulariser is row-weighted as in the updates Eq. 36–39
(Eq. 31 prints λ(‖P‖² + ‖Q‖²), which those updates do not minimise). RG×'s term is Eq. 31's V_x ‖Q P_xᵀ‖², the one
Eq. 38–39 use (Eq. 17's (1ᵀo)² would be a rank-one term instead). `weights` picks W and V:
- eq16: W_xy = |I_x|, V_x = |I_x| / N (full softmax, Eq. 16–17);
- eq18: W_xy = |I_x| on observed pairs, |I_x| (n+1) / N elsewhere, V_x = |I_x| (n+1) / N² (sampled softmax with
  n = `n_negatives` uniform negatives, Eq. 18–19);
- hyper: the hyper-parameters α, β that replace W and V in the paper's experiments (App. B.2), as the authors'
  code sets them: W_xy = |I_x| / (2N) + α r_xy, V_x = β |I_x| / (2N), and on observed pairs the target
  (|I_x|/(2N) · S_xy + α) / W_xy, i.e. Eq. 16's loss / 2N plus α Σ_observed (1 − P_x·Q_y)².
W depends on the context x only (and on r), so each half-step is the shared-Gramian system of
recx.models.als.problem: O(|D| d² + (M + N) d³) exact, as the paper's §4.4.2.

`form` (weights hyper) picks between the authors' code (yuanhao53/RG2, rg2.py / rgx.py `training_step`, which
produced the paper's Table 3) and the text's updates; with a_x = |I_x| / (2N), M users, N items:
- official (default):
    user: A_x = (1 − β) a_x QᵀQ + α Σ_{y∈I_x} Q_yQ_yᵀ + λ (|I_x|/2 + α N) I [+ λ I for RG²],
          b_x = −a_x Σ_y Q_y + (1/2 + α) Σ_{y∈I_x} Q_y;
    item: A_y = (1 − β) Pᵀ diag(a) P + α Σ_{x∈U_y} P_xP_xᵀ + λ (Σ_x a_x + α M) I,
          b_y = +Σ_x a_x P_x + (1/2 + α) Σ_{x∈U_y} P_x
  (β = 0 for RG²). The item right-hand side's + is not the minimiser of the loss the user side minimises (that
  has −Σ_x a_x P_x), so the recorded loss (the one below with these ridges) can rise after an item half-step.
- text: both half-steps minimise the loss above with λ Σ_y W_xy = λ (|I_x|/2 + α |I_x|) and
  λ Σ_x W_xy = λ (Σ_x a_x + α |U_y|), i.e. b_y = −Σ_x a_x P_x + (1/2 + α) Σ_{x∈U_y} P_x (Eq. 36–39 as printed).
weights eq16 / eq18 exist in the text only: they take form text.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from recx.core.args import arg
from recx.core.errors import RecxError
from recx.models.als.base import AlternatingArgs, AlternatingModel
from recx.models.als.problem import WeightedSquares
from recx.models.registry import MODELS

WEIGHTS = ("eq16", "eq18", "hyper")
FORMS = ("official", "text")


@dataclass
class RGArgs(AlternatingArgs):
    regularization: float = arg(0.1, at_least=0, help="λ of the ridge term")
    weights: str = arg("hyper", choices=WEIGHTS, help="the weights of Eq. 16, Eq. 18, or the hyper-parameters α, β")
    alpha: float = arg(0.1, at_least=0, help="α of the hyper weights")
    beta: float = arg(0.1, at_least=0, at_most=1, help="β of the hyper weights (above 1 the half-steps lose convexity)")
    n_negatives: int = arg(100, at_least=1, at_most=10_000_000, help="Eq. 18's sampled negatives")
    form: str = arg("official", choices=FORMS, help="the authors' code (official) or the paper's text")

    def __post_init__(self):
        if self.form == "official" and self.weights != "hyper":
            raise RecxError(
                f"model_args.form: 'official' (the authors' code) has weights hyper only, got weights "
                f"{self.weights!r}; set form: text for eq16 / eq18"
            )


def rg_weights(lengths: torch.Tensor, n_items: int, args: RGArgs) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(a_x, c_x, V_x): W_xy = a_x + c_x r_xy and RG×'s V_x, per user, for `args.weights`."""
    if args.weights == "eq16":
        return lengths, torch.zeros_like(lengths), lengths / n_items
    if args.weights == "eq18":
        ratio = (args.n_negatives + 1) / n_items
        return lengths * ratio, lengths * (1 - ratio), lengths * ratio / n_items
    base = lengths / (2 * n_items)
    return base, torch.full_like(lengths, args.alpha), args.beta * base


class RankingGeneralizable(AlternatingModel):
    Args = RGArgs
    interactive = False

    def weighted_squares(self, train):
        dtype = self.user_factors.dtype
        n_items, ridge = train.n_cols, self.args.regularization
        lengths = train.row_lengths().to(dtype)
        base, extra, interaction = rg_weights(lengths, n_items, self.args)
        rows = train.row_ids()
        softmax_target = n_items / lengths[rows] - 1
        if self.args.weights == "hyper":
            positive = (base[rows] * softmax_target + self.args.alpha) / (base[rows] + extra[rows])
        else:
            positive = softmax_target
        if self.args.form == "official":
            user_ridge = ridge * (n_items * (base + extra) + (0.0 if self.interactive else 1.0))
            item_ridge = ridge * (base.sum() + extra.sum()).repeat(n_items)
            item_negative_target = 1.0
        else:
            user_ridge = ridge * (n_items * base + lengths * extra)
            # Σ_{x∈U_y} c_x; on CUDA under deterministic algorithms torch's index_add_ sorts the entries by item and adds
            # each item's terms in sequence (no atomic adds), so it repeats bit for bit there
            item_extra = torch.zeros(n_items, dtype=dtype, device=rows.device).index_add_(0, train.indices, extra[rows])
            item_ridge = ridge * (base.sum() + item_extra)
            item_negative_target = None
        return WeightedSquares.build(
            train,
            base_weight=base,
            extra_weight=extra[rows],
            negative_target=-1.0,
            positive_target=positive,
            interaction=interaction if self.interactive else torch.zeros_like(interaction),
            user_ridge=user_ridge,
            item_ridge=item_ridge,
            item_negative_target=item_negative_target,
        )


@MODELS.register("rg2")
class RG2(RankingGeneralizable):
    """RG²: Eq. 31 without the interactive term; updates Eq. 36–37 (form text) or the authors' rg2.py (official,
    with its extra λ I in the user system)."""

    summary = "RG²: the ranking-generalisable quadratic softmax approximation, fitted by alternating solves"


@MODELS.register("rgx")
class RGX(RankingGeneralizable):
    """RG×: Eq. 31 with −Σ_x V_x ‖Q P_xᵀ‖²; updates Eq. 38–39 (form text) or the authors' rgx.py (official)."""

    summary = "RG×: RG² with the interactive term, fitted by alternating solves"

    interactive = True
