"""Alignment and uniformity on the unit hypersphere (Wang & Isola 2020; DirectAU, Wang et al. KDD 2022).

With f(x) = x / ‖x‖ and d²_ab = ‖f(x_a) - f(x_b)‖²:
    alignment(U, I) = E_(u,i) ‖f(u) - f(i)‖²                   (over the batch's positive pairs)
    uniformity(X)   = log E_{a<b} exp(-t d²_ab)                  (form `pairs`: distinct pairs of the batch's rows, t = 2;
                                                                  DirectAU's official torch.pdist form)
    uniformity(X)   = log( (Σ_{a>b} exp(-t d²_ab) + n(n+1)/2 · exp(-2t)) / n² )
                                                                 (form `lower_triangle`: MAWU's official
                                                                  `uniformity_dot`, psm1206/MAWU, the mean over all n²
                                                                  entries of the cosine matrix's strict lower triangle,
                                                                  whose zeroed entries count as distance² 2)
With A = Σ_{a<b} exp(-t d²_ab) and c = n(n+1)/2 · exp(-2t), the lower-triangle form's gradient is the pairs form's
times A / (A + c) ∈ (0, 1]: about 1/2 once rows spread out (d² ≈ 2), so with `pairs` the same γ pushes up to ~2x harder.
Squared distances of unit vectors are computed as 2 - 2 f(x_a)·f(x_b), which has a gradient where rows coincide.

Which rows: the PRISM authors' code (snap-research/PRISM train.py, which produced the PRISM paper's Table 1 for
DirectAU and MAWU) passes one row per distinct user and per distinct item of the batch (rows `unique`, `distinct_rows`);
DirectAU's and MAWU's own releases (THUwangcy/DirectAU, psm1206/MAWU) pass the batch's rows as they come, a user or
item appearing once per interaction (rows `batch`): a duplicate adds pairs at distance 0, which raise the log-mean.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from recx.core.device_paths import accelerator_branch

UNIFORMITY_FORMS = ("pairs", "lower_triangle")
UNIFORMITY_ROWS = ("unique", "batch")


def alignment(users: torch.Tensor, items: torch.Tensor) -> torch.Tensor:
    return (F.normalize(users, dim=-1) - F.normalize(items, dim=-1)).pow(2).sum(-1).mean()


def distinct_rows(rows: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    """The rows at the first occurrence of each distinct id, in increasing id order (uniformity is symmetric in its
    rows, so the order does not matter); rows with equal ids are equal, so which copy is kept does not either."""
    distinct, inverse = torch.unique(ids, return_inverse=True)
    positions = torch.arange(ids.numel(), device=ids.device)
    first = positions.new_full((distinct.numel(),), ids.numel()).scatter_reduce_(0, inverse, positions, reduce="amin")
    return rows[first]


def first_occurrences(ids: torch.Tensor) -> torch.Tensor:
    """bool [n]: True at the first occurrence of each distinct id (a stable sort, no host sync)."""
    ordered, order = torch.sort(ids, stable=True)
    first = torch.ones_like(ordered, dtype=torch.bool)
    first[1:] = ordered[1:] != ordered[:-1]
    return torch.empty_like(first).scatter_(0, order, first)


def uniformity_of(rows: torch.Tensor, ids: torch.Tensor | None, which: str, form: str = "pairs") -> torch.Tensor:
    """uniformity (t = 2) of the batch's rows: `unique`, one row per distinct id (LossInput.users / positives);
    `batch`, all the rows. On the accelerator branch the distinct rows are not gathered (`torch.unique` waits for
    the host): the pairs of every row are masked down to those of first occurrences (`masked_uniformity`)."""
    if which == "batch":
        return uniformity(rows, form=form)
    if ids is None:
        raise ValueError("uniformity rows 'unique' need the batch's ids (LossInput.users and positives)")
    if accelerator_branch(rows):
        return masked_uniformity(rows, first_occurrences(ids), form=form)
    return uniformity(distinct_rows(rows, ids), form=form)


class PairLogSumExp(torch.autograd.Function):
    """log Σ_{a≠b} exp(2t u_a·u_b - 2t) over the rows of `unit` [n, d] (unit rows, so every logit lies in [-4t, 0]
    and is summed without a shift). Forward: one product, the diagonal set to -inf, p = exp in place, s = Σ p.
    Backward: with G = g p / s (symmetric), ∂u = 2t (G + Gᵀ) u = (4t g / s) (p u): one [n, n] x [n, d] product and
    no pass over the n² entries, where autograd through addmm and logsumexp takes two products and four passes."""

    @staticmethod
    def forward(ctx, unit, t):
        pairs = torch.addmm(unit.new_full((), -2.0 * t), unit, unit.T, alpha=2.0 * t)
        pairs.fill_diagonal_(float("-inf")).exp_()
        total = pairs.sum()
        ctx.save_for_backward(unit, pairs, total)
        ctx.t = t
        return total.log()

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad):
        unit, pairs, total = ctx.saved_tensors
        return (pairs @ unit) * (4.0 * ctx.t * grad / total), None


def uniformity(rows: torch.Tensor, t: float = 2.0, form: str = "pairs") -> torch.Tensor:
    """0 for fewer than two rows (no pair). One matrix product gives -t d²_ab = 2t f(x_a)·f(x_b) - 2t for every
    ordered pair; with the diagonal set to -inf, log Σ_{a≠b} = log 2 + log Σ_{a<b} (the matrix is symmetric), so no
    triangle mask is built (`PairLogSumExp`: one product forward and one back)."""
    n = rows.shape[0]
    if n < 2:
        return rows.sum() * 0.0
    pair_terms = PairLogSumExp.apply(F.normalize(rows, dim=-1), t) - math.log(2.0)
    if form == "pairs":
        return pair_terms - math.log(n * (n - 1) / 2)
    constant = math.log(n * (n + 1) / 2) - 2.0 * t
    return torch.logaddexp(pair_terms, torch.full_like(pair_terms, constant)) - 2.0 * math.log(n)


def masked_uniformity(rows: torch.Tensor, kept: torch.Tensor, t: float = 2.0, form: str = "pairs") -> torch.Tensor:
    """`uniformity` of rows[kept] (kept: bool [n]) without gathering them: every pair of rows is scored and the pairs
    not both kept are masked out, so n, the number kept, stays on the device. Equal to `uniformity(rows[kept])` up to
    rounding; 0 when fewer than two rows are kept. The logits lie in [-4t, 0], so their exponentials are summed
    without a shift."""
    unit = F.normalize(rows, dim=-1)
    logits = torch.addmm(unit.new_full((), -2.0 * t), unit, unit.T, alpha=2.0 * t)
    pairs = kept[:, None] & kept[None, :]
    pairs.fill_diagonal_(False)
    n = kept.sum().to(rows.dtype)
    few = n < 2
    total = torch.where(pairs, torch.exp(logits), 0.0).sum() + few.to(rows.dtype)  # few: log 1, no NaN gradient
    pair_terms = torch.log(total) - math.log(2.0)
    n = torch.where(few, 2.0, n)
    if form == "pairs":
        value = pair_terms - torch.log(n * (n - 1) / 2)
    else:
        value = torch.logaddexp(pair_terms, torch.log(n * (n + 1) / 2) - 2.0 * t) - 2.0 * torch.log(n)
    return torch.where(few, 0.0, value)
