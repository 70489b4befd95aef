"""Softmax cross-entropy over the positive and the candidates, with logQ correction.

Sampled softmax (Bengio & Senécal 2008; the FastVAE and RG² papers): with logits o = s / τ,
    L = -(o_pos - log q_pos) + log( exp(o_pos - log q_pos) + Σ_j exp(o_j - log q_j) ).
Subtracting log q makes the gradient, in expectation over j ~ q, that of the full softmax when q is the softmax
itself (all corrected logits then equal log Z). Full softmax is the same loss over all items (sampler `full`).
When the sampler splits its candidates into segments with weights w_g (XIR), the loss is Σ_g w_g L_g, L_g the loss
above over the positive and segment g's candidates. Over users' training histories (Mult-VAE, FastVAE), the same
losses summed over each user's positives, a user's candidates shared by them: recx.losses.user_softmax.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch

from recx.core.args import arg
from recx.core.device_paths import accelerator_branch
from recx.losses.base import Bundle, Histories, Loss, LossInput
from recx.losses.registry import LOSSES
from recx.losses.user_softmax import full_softmax_nll, sampled_softmax_nll

# Scores by cosine at temperature 0.1 (normalised MF, as in the sampled-softmax literature): with dot products and
# Adam the softmax losses overfit early on Gowalla.
COSINE_SCORES = Bundle({"model_args.scoring": "cosine", "model_args.temperature": 0.1}, ("loss_args.temperature",))


@dataclass
class SoftmaxArgs:
    temperature: float = arg(1.0, above=0, help="divides the scores: logits o = s / temperature")
    logq_correction: bool = arg(True, help="subtract each candidate's log q from its logit")


def corrected_logits(
    pos_scores, neg_scores, pos_log_q, neg_log_q, temperature: float, correct: bool
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | float]:
    """(positive logits [B], candidate logits [B or 1, n], row shift): o / τ - log q = candidate logits - shift.

    Where a row's log q is the same for all its candidates (uniform proposals) it is returned as the shift, to be
    subtracted from the row's log-sum-exp instead of from each of its n logits: one pass over [B, n] less."""
    pos, neg = pos_scores, neg_scores
    shift: torch.Tensor | float = 0.0
    if temperature != 1.0:
        pos, neg = pos / temperature, neg / temperature
    if correct:
        pos = pos - pos_log_q
        column_log_q, shift = split_log_q(neg_log_q)
        if column_log_q is not None:
            neg = neg - column_log_q
    return pos, neg, shift


def divided(values: torch.Tensor, temperature: float) -> torch.Tensor:
    """values / τ, the division skipped at τ = 1 (x / 1 is x exactly: one launch fewer forward and one backward)."""
    return values if temperature == 1.0 else values / temperature


def shifted(lse: torch.Tensor, shift: torch.Tensor | float) -> torch.Tensor:
    """lse - shift [B], the subtraction skipped for the float shift 0 (x - 0.0 is x for every float, -0.0, ±inf
    and NaN included: one launch fewer forward, where log q is a column's or not corrected)."""
    return lse if isinstance(shift, float) and shift == 0.0 else lse - shift


def split_log_q(neg_log_q: torch.Tensor) -> tuple[torch.Tensor | None, torch.Tensor | float]:
    """(log q to subtract from each candidate's logit, or None; a per-row shift of the log-sum-exp, or 0): a row
    whose log q is the same for every candidate (a stride-0 row: uniform proposals) becomes the shift."""
    if neg_log_q.shape[1] == 1 or neg_log_q.stride(1) == 0:
        return None, neg_log_q[:, 0]
    return neg_log_q, 0.0


ANCHOR_FLOOR = 1e-30  # a probability this large is a normal float32, exact to a few ulps


class RowLogSumExp(torch.autograd.Function):
    """log Σ_j exp(x_j) over dim 1, through torch's row-fused softmax kernel (one read and one write of [B, n]):
    with p = softmax(x), lse = x_j - log p_j for any column j whose p_j is not tiny. On the CPU j is column 0,
    read without another pass; the rows where p_0 < 1e-30 (or x_0 = -inf) take j = argmax, through
    max x - log max p (max_j p_j = 1 / Σ_j exp(x_j - max x)). On CUDA every row takes the maxima (two fast reads;
    choosing rows would be a host sync). The backward is grad · p, one pass over p. A row whose entries are all -inf
    (every candidate masked: the positive alone makes up the softmax) gets -inf and a zero gradient, not NaN."""

    @staticmethod
    def forward(ctx, logits):
        probabilities, lse = softmax_and_log_sum_exp(logits)
        ctx.save_for_backward(probabilities)
        return lse

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad):
        (probabilities,) = ctx.saved_tensors
        return probabilities * grad[:, None]


def softmax_and_log_sum_exp(logits: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(softmax over dim 1, log-sum-exp over dim 1), as RowLogSumExp computes them."""
    probabilities = torch.softmax(logits, dim=1)
    if accelerator_branch(logits):
        return probabilities, _lse_from_maxima(logits, probabilities, None)
    lse = logits[:, 0] - probabilities[:, 0].log()
    rows = (~(probabilities[:, 0] >= ANCHOR_FLOOR)).nonzero().squeeze(1)  # NaN (all -inf) included
    if rows.numel():
        lse[rows] = _lse_from_maxima(logits[rows], probabilities, rows)
    return probabilities, lse


class SharedCandidateLogSumExp(torch.autograd.Function):
    """lse_b = log Σ_j exp(q_b · c_j - log q_j) over candidates c shared by the batch, with the masked entries
    (`mask`: a [B, n] bool tensor, or (rows, cols)) at -inf, computed from the query and the candidates so that the
    backward scales the rows of p in the products: ∂q = g ⊙ (P C), ∂C = Pᵀ (g ⊙ q), without writing g ⊙ P (one pass
    over [B, n] less than the product followed by RowLogSumExp; the values and gradients are the same)."""

    @staticmethod
    def forward(ctx, query, candidates, column_log_q, mask):
        logits = query @ candidates.T
        if column_log_q is not None:
            logits.sub_(column_log_q)
        if isinstance(mask, tuple):
            logits.index_put_(mask, torch.tensor(float("-inf"), dtype=logits.dtype, device=logits.device))
        elif mask is not None:
            logits.masked_fill_(mask, float("-inf"))
        probabilities, lse = softmax_and_log_sum_exp(logits)
        ctx.save_for_backward(probabilities, query, candidates)
        return lse

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad):
        probabilities, query, candidates = ctx.saved_tensors
        weight = grad[:, None]
        return (probabilities @ candidates) * weight, probabilities.T @ (query * weight), None, None


def _lse_from_maxima(logits: torch.Tensor, probabilities: torch.Tensor, rows: torch.Tensor | None) -> torch.Tensor:
    """max x - log max p for `logits` (the rows `rows` of `probabilities`, or all); an all -inf row gets -inf and
    its probabilities (NaN from the softmax) become 0."""
    top = logits.amax(dim=1)
    own = probabilities if rows is None else probabilities[rows]
    empty = top == float("-inf")
    lse = torch.where(empty, top, top - own.amax(dim=1).log())
    if rows is None:
        probabilities.masked_fill_(empty[:, None], 0.0)
    else:
        probabilities[rows[empty]] = 0.0
    return lse


@LOSSES.register("softmax", default=True)
class SampledSoftmax(Loss):
    """Defaults: 2000 candidates shared by the batch (one [B, 2000] matrix product), cosine scores at temperature 0.1,
    and with MF over those uniform candidates row-wise Adagrad at lr 0.02 (measured on Gowalla: MF dim 64, batch
    2048, seed 0, 10 epochs, 1 thread: best valid NDCG@20 0.1051 and test 0.1165 against dense Adam's 0.1059 and
    0.1146, in shorter epochs; lr 0.01: 0.1041 / 0.1163; 0.05 and above learn slower; lazy Adam 0.0861 valid after
    4 epochs against Adam's 0.0960). A run outside that setup keeps `auto`: dense Adam."""

    summary = "sampled softmax cross-entropy over the positive and the candidates, logQ-corrected"
    Args = SoftmaxArgs
    mask_positive = True
    takes: ClassVar[tuple[str, ...]] = ("shared_candidates", "scores", "histories")
    auto_optimizer = "adam"
    default_bundles: ClassVar[tuple[Bundle, ...]] = (
        Bundle({"n_negatives": 2000, "sampler_args.shared": True}),
        COSINE_SCORES,
        Bundle(
            {"optimizer": "rowwise_adagrad", "lr": 0.02},
            ("weight_decay", "weight_decay_mode"),
            {
                "model": "mf",
                "sampler": "uniform",
                "n_negatives": 2000,
                "sampler_args.shared": True,
                "model_args.scoring": "cosine",
                "model_args.temperature": 0.1,
                "loss_args.temperature": 1.0,
            },
        ),
    )

    def __call__(self, batch: LossInput):
        """log(exp(o_pos) + Σ_j exp(o_j)) as logaddexp(o_pos, logsumexp_j o_j): the [B, 1 + n] logits are never
        concatenated, which saves two passes over the largest tensor of the step."""
        pos, neg, shift = corrected_logits(
            batch.pos_scores,
            batch.neg_scores,
            batch.pos_log_q,
            batch.neg_log_q,
            self.args.temperature,
            self.args.logq_correction,
        )
        if batch.neg_segments is None:
            return (torch.logaddexp(pos, shifted(RowLogSumExp.apply(neg), shift)) - pos).mean()
        return segmented_cross_entropy(pos, neg.expand(pos.shape[0], -1), shift, batch.neg_segments)

    def over_shared_candidates(
        self,
        query: torch.Tensor,
        candidates: torch.Tensor,
        pos_scores: torch.Tensor,
        pos_log_q: torch.Tensor,
        neg_log_q: torch.Tensor,
        mask,
        segments: tuple[tuple[int, float], ...] | None = None,
    ) -> torch.Tensor:
        """The same loss for candidates [n, d] shared by the batch, from the representations (the step's
        `shared_candidates` input): the candidates' scores are never handed over as [B, n]. With `segments`
        (XIR's column groups), Σ_g w_g L_g, each group's log-sum-exp from its own candidates: no [B, n] scores are
        sliced, so no backward fills a zeroed [B, n] copy per group."""
        temperature = self.args.temperature
        if temperature != 1.0:
            query, pos_scores = query / temperature, pos_scores / temperature
        pos, column_log_q = pos_scores, None
        shift: torch.Tensor | float = 0.0
        if self.args.logq_correction:
            pos = pos - pos_log_q
            column_log_q, shift = split_log_q(neg_log_q)
        if segments is None:
            lse = shifted(SharedCandidateLogSumExp.apply(query, candidates, column_log_q, mask), shift)
            return (torch.logaddexp(pos, lse) - pos).mean()
        total, start = pos.new_zeros(()), 0
        for size, weight in segments:
            part = slice(start, start + size)
            group_log_q = None if column_log_q is None else column_log_q[:, part]
            lse = SharedCandidateLogSumExp.apply(query, candidates[part], group_log_q, group_mask(mask, part))
            lse = shifted(lse, shift)
            total = total + weight * (torch.logaddexp(pos, lse) - pos).mean()
            start += size
        return total

    def over_histories(self, batch: Histories) -> torch.Tensor:
        """FastVAE's sampled softmax over each user's history (recx.losses.user_softmax), the candidates drawn by the
        run's sampler for the logits' query; without `logq_correction` log q is dropped (an item a resampler did not
        draw, log q = +inf, stays out)."""
        query = divided(batch.query, self.args.temperature)
        negatives, positive_log_q = batch.candidates(query.detach())
        if not self.args.logq_correction:
            positive_log_q = torch.zeros_like(positive_log_q)
            negatives.log_q = torch.where(torch.isinf(negatives.log_q), negatives.log_q, 0.0)
        return sampled_softmax_nll(
            query, batch.item_table, batch.rows, batch.positives, positive_log_q, negatives, batch.row_sparse
        )


def group_mask(mask, part: slice):
    """The columns `part` of a candidate mask: a [B, n] bool tensor, (rows, cols) pairs, or None."""
    if mask is None:
        return mask
    if isinstance(mask, tuple):
        rows, cols = mask
        kept = (cols >= part.start) & (cols < part.stop)
        return rows[kept], cols[kept] - part.start
    return mask[:, part]


def segmented_cross_entropy(
    pos: torch.Tensor, neg: torch.Tensor, shift, segments: tuple[tuple[int, float], ...]
) -> torch.Tensor:
    """Σ_g w_g mean(log(exp(o_pos) + Σ_{j ∈ g} exp(o_j - shift)) - o_pos) over the column groups g of `neg` [B, n]."""
    total, start = pos.new_zeros(()), 0
    for size, weight in segments:
        group = shifted(RowLogSumExp.apply(neg[:, start : start + size]), shift)
        total = total + weight * (torch.logaddexp(pos, group) - pos).mean()
        start += size
    return total


@LOSSES.register("full_softmax")
class FullSoftmax(SampledSoftmax):
    """-o_pos + log Σ_{all items} exp(o_i), o = s / τ. The `full` sampler's candidates are every item, the
    positive included once, so no masking or concatenation is needed (and log_q, constant, cancels)."""

    summary = "softmax cross-entropy over every item (sampler full)"
    default_bundles = (COSINE_SCORES,)
    required_sampler = "full"
    mask_positive = False
    takes = ("scores", "histories")

    def __call__(self, batch: LossInput):
        """The division by τ is skipped at τ = 1 (exactly the same numbers: a pass over [B, n_items] fewer forward
        and one backward). torch.logsumexp is kept, not RowLogSumExp, whose rounding would change every full-softmax
        result (the quickstart's among them) for a step 1.1x shorter again."""
        pos, neg, _ = corrected_logits(batch.pos_scores, batch.neg_scores, None, None, self.args.temperature, False)
        return (torch.logsumexp(neg, dim=1) - pos).mean()

    def over_histories(self, batch: Histories) -> torch.Tensor:
        """Mult-VAE's full softmax over each user's history (recx.losses.user_softmax), the item bias divided by the
        temperature with the scores."""
        temperature = self.args.temperature
        query = divided(batch.query, temperature)
        bias = divided(batch.item_bias, temperature) if batch.item_bias is not None else None
        return full_softmax_nll(query, batch.item_table, batch.rows, batch.positives, bias)
