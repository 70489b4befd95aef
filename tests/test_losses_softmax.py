"""Sampled softmax (with and without logQ) and full softmax against float64 references."""

import pytest
import torch

from recx.losses.base import LossInput
from recx.losses.softmax import FullSoftmax, RowLogSumExp, SampledSoftmax, SoftmaxArgs, corrected_logits
from tests.loss_reference import assert_same_value_and_gradients

B, N, TAU = 6, 9, 0.3


def _inputs(seed: int):
    g = torch.Generator().manual_seed(seed)
    return {
        "pos": torch.randn(B, generator=g),
        "neg": torch.randn(B, N, generator=g),
        "pos_log_q": -torch.rand(B, generator=g) * 4,
        "neg_log_q": -torch.rand(B, N, generator=g) * 4,
    }


def sampled_reference(correct: bool):
    def reference(pos, neg, pos_log_q, neg_log_q):
        total = pos.new_zeros(())
        for b in range(B):
            shift_pos = pos_log_q[b] if correct else 0.0
            top = torch.exp(pos[b] / TAU - shift_pos)
            bottom = top + sum(torch.exp(neg[b, j] / TAU - (neg_log_q[b, j] if correct else 0.0)) for j in range(N))
            total = total - torch.log(top / bottom)
        return total / B

    return reference


def test_sampled_softmax_with_and_without_logq_matches_reference():
    for correct in (True, False):
        loss = SampledSoftmax(SoftmaxArgs(temperature=TAU, logq_correction=correct))
        assert_same_value_and_gradients(
            lambda loss=loss, **t: loss(LossInput(t["pos"], t["neg"], t["pos_log_q"], t["neg_log_q"])),
            sampled_reference(correct),
            _inputs(2),
            ["pos", "neg"],
        )


@pytest.mark.parametrize("temperature", [TAU, 1.0])
def test_full_softmax_is_the_cross_entropy_over_all_items(temperature):
    g = torch.Generator().manual_seed(3)
    n_items = 11
    scores = torch.randn(B, n_items, generator=g)
    scores[0, 0] = -80.0  # an entry far below the rest of its row (probability < 1e-30)
    positives = torch.randint(0, n_items, (B,), generator=g)
    loss = FullSoftmax(SoftmaxArgs(temperature=temperature))

    def ours(scores):
        pos = scores.gather(1, positives[:, None]).squeeze(1)
        neg = scores  # the `full` sampler's candidates: every item, the positive included once
        uniform = torch.full((1, n_items), -torch.log(torch.tensor(float(n_items))), dtype=torch.float64)
        return loss(LossInput(pos, neg, uniform[0, :B], uniform))

    def reference(scores):
        return torch.stack([-torch.log_softmax(scores[b] / temperature, 0)[positives[b]] for b in range(B)]).mean()

    assert_same_value_and_gradients(ours, reference, {"scores": scores}, ["scores"])


def test_a_query_whose_candidates_are_all_masked_gets_zero_loss_and_finite_gradients():
    """In-batch candidates that are all the query's own positive are masked to -inf: the positive alone is the
    softmax, so the loss is 0 and no gradient is NaN (the other rows still learn)."""
    pos = torch.randn(2, dtype=torch.float64, requires_grad=True)
    neg = torch.randn(2, 4, dtype=torch.float64)
    neg[1] = float("-inf")
    neg.requires_grad_()
    zeros = torch.zeros(2, dtype=torch.float64)
    loss = SampledSoftmax(SoftmaxArgs())(LossInput(pos, neg, zeros, torch.zeros(2, 4, dtype=torch.float64)))
    loss.backward()
    expected = (torch.logsumexp(torch.cat([pos[:1, None], neg[:1]], dim=1), dim=1) - pos[:1]).sum() / 2
    torch.testing.assert_close(loss, expected)
    assert torch.isfinite(neg.grad).all() and torch.isfinite(pos.grad).all()
    assert torch.equal(neg.grad[1], torch.zeros(4, dtype=torch.float64)) and pos.grad[1] == 0


def test_row_logsumexp_equals_torch_and_passes_gradcheck():
    logits = torch.randn(5, 7, dtype=torch.float64, requires_grad=True)
    torch.testing.assert_close(RowLogSumExp.apply(logits), torch.logsumexp(logits, dim=1))
    assert torch.autograd.gradcheck(RowLogSumExp.apply, (logits,))


def test_row_logsumexp_is_exact_where_most_exponentials_underflow_and_with_masked_entries():
    """lse = x_max - log p_max: exact when the row's spread is far beyond float32's exponent range."""
    logits = torch.tensor([[300.0, -400.0, 0.0, float("-inf")], [-1e3, -1e3 - 150.0, float("-inf"), -1e3 + 1.0]])
    lse = RowLogSumExp.apply(logits)
    torch.testing.assert_close(lse, torch.logsumexp(logits.double(), dim=1).float(), rtol=0, atol=1e-4)
    masked = torch.randn(3, 5, dtype=torch.float64)
    masked[0, 1], masked[2, :] = float("-inf"), float("-inf")
    masked.requires_grad_()
    out = RowLogSumExp.apply(masked)
    assert torch.isneginf(out[2]) and torch.isfinite(out[:2]).all()
    out[:2].sum().backward()
    torch.testing.assert_close(masked.grad[:2], torch.softmax(masked.detach()[:2], dim=1))
    assert torch.equal(masked.grad[2], torch.zeros(5, dtype=torch.float64))


def test_row_logsumexp_rows_whose_first_column_underflows_or_is_masked_take_the_maxima_path():
    """Column 0 anchors lse = x_0 - log p_0 on the CPU; where p_0 underflows or x_0 is -inf the row falls back to
    max x - log max p (the path every row takes on CUDA): both equal float64 logsumexp, gradients too."""
    from recx.losses.softmax import _lse_from_maxima

    logits = torch.tensor(
        [[-200.0, 0.0, 1.0], [float("-inf"), 2.0, -1.0], [0.5, 0.2, -0.3], [float("-inf")] * 3], requires_grad=True
    )
    lse = RowLogSumExp.apply(logits)
    expected = torch.logsumexp(logits.detach().double(), dim=1).float()
    torch.testing.assert_close(lse[:3], expected[:3], rtol=0, atol=1e-5)
    assert torch.isneginf(lse[3])
    lse[:3].sum().backward()
    torch.testing.assert_close(logits.grad[:3], torch.softmax(logits.detach()[:3], dim=1))
    assert torch.equal(logits.grad[3], torch.zeros(3))
    probabilities = torch.softmax(logits.detach(), dim=1)
    everywhere = _lse_from_maxima(logits.detach(), probabilities, None)
    torch.testing.assert_close(everywhere, lse.detach(), rtol=0, atol=1e-5)
    assert torch.equal(probabilities[3], torch.zeros(3))


def test_a_uniform_log_q_shifts_the_log_sum_exp_and_equals_subtracting_it_from_every_logit():
    """A uniform proposal carries one log q per row (a stride-0 row, [B, n] per query or [1, n] shared): it is
    subtracted from the log-sum-exp once, with the loss and gradient of subtracting it from every logit."""
    per_query = torch.full((B, 1), -2.5, dtype=torch.float64).expand(B, N)
    shared = torch.full((1, 1), -2.5, dtype=torch.float64).expand(1, N)
    _, _, shift = corrected_logits(torch.zeros(B), torch.zeros(B, N), torch.zeros(B), shared, 1.0, True)
    assert torch.is_tensor(shift) and shared.stride(1) == 0
    loss = SampledSoftmax(SoftmaxArgs(temperature=TAU))
    for log_q in (per_query, shared):
        assert_same_value_and_gradients(
            lambda log_q=log_q, **t: loss(LossInput(t["pos"], t["neg"], t["pos_log_q"], log_q)),
            lambda pos, neg, pos_log_q: sampled_reference(True)(
                pos, neg, pos_log_q, torch.full((B, N), -2.5, dtype=torch.float64)
            ),
            {key: value for key, value in _inputs(5).items() if key != "neg_log_q"},
            ["pos", "neg"],
        )


@pytest.mark.parametrize(
    "temperature, correct, column_log_q", [(1.0, True, False), (0.3, True, True), (0.3, False, True), (1.0, True, True)]
)
def test_the_fused_shared_candidate_loss_equals_scores_then_loss(temperature, correct, column_log_q):
    """over_shared_candidates (the product inside, rows of p scaled in the backward's products) against the loss on
    the [B, n] scores with the positives masked: same value and gradients, float64; a row whose candidates are all
    its positive included."""
    from recx.training.positive_mask import positive_mask

    g = torch.Generator().manual_seed(11)
    n = 7
    candidates_ids = torch.randint(0, 5, (1, n), generator=g)
    candidates_ids[0, :] = torch.where(torch.arange(n) < n - 1, candidates_ids[0], candidates_ids[0, 0])
    positives = torch.cat([candidates_ids[0, :3], torch.tensor([9, 10, 11])])  # hits in rows 0-2
    inputs = {
        "query": torch.randn(6, 4, generator=g, dtype=torch.float64),
        "candidates": torch.randn(n, 4, generator=g, dtype=torch.float64),
        "positive_repr": torch.randn(6, 4, generator=g, dtype=torch.float64),
    }
    pos_log_q = -torch.rand(6, generator=g, dtype=torch.float64) * 3
    neg_log_q = (
        -torch.rand(1, n, generator=g, dtype=torch.float64) * 3
        if column_log_q
        else torch.full((1, 1), -2.0, dtype=torch.float64).expand(1, n)
    )
    loss = SampledSoftmax(SoftmaxArgs(temperature=temperature, logq_correction=correct))

    def fused(query, candidates, positive_repr):
        pos = (query * positive_repr).sum(-1)
        return loss.over_shared_candidates(
            query, candidates, pos, pos_log_q, neg_log_q, positive_mask(candidates_ids, positives)
        )

    def scores_then_loss(query, candidates, positive_repr):
        neg = (query @ candidates.T).masked_fill(candidates_ids == positives[:, None], float("-inf"))
        return loss(LossInput((query * positive_repr).sum(-1), neg, pos_log_q, neg_log_q))

    assert_same_value_and_gradients(fused, scores_then_loss, inputs, ["query", "candidates", "positive_repr"])
    everything = SampledSoftmax(SoftmaxArgs()).over_shared_candidates(
        inputs["query"][:1],
        inputs["candidates"][:1],
        torch.zeros(1, dtype=torch.float64),
        pos_log_q[:1],
        neg_log_q[:, :1],
        positive_mask(candidates_ids[:, :1], candidates_ids[0, :1]),
    )
    assert everything.item() == 0.0  # the positive alone makes up the softmax


@pytest.mark.parametrize("mask_form", ["pairs", "matrix"])
def test_the_fused_loss_over_segments_equals_scores_then_the_segmented_loss(mask_form):
    """XIR's column groups through over_shared_candidates (each group's log-sum-exp from its own candidates) against
    the [B, n] scores sliced by `segmented_cross_entropy`: same value and gradients, float64, with per-row log q
    (multiplicities: +inf where a candidate was not drawn) and a mask in either form reaching both groups."""
    from recx.training.positive_mask import positive_mask

    g = torch.Generator().manual_seed(5)
    n, segments = 9, ((4, 0.7), (5, 0.3))
    candidates_ids = torch.randint(0, 6, (1, n), generator=g)
    positives = torch.stack([candidates_ids[0, 1], candidates_ids[0, 6], torch.tensor(20), torch.tensor(21)])
    counts = torch.randint(0, 3, (4, n), generator=g).double()
    neg_log_q = -counts.log()
    pos_log_q = torch.zeros(4, dtype=torch.float64)
    mask = positive_mask(candidates_ids, positives)
    if mask_form == "matrix":
        mask = candidates_ids == positives[:, None]
    assert isinstance(mask, tuple) == (mask_form == "pairs")
    inputs = {
        "query": torch.randn(4, 3, generator=g, dtype=torch.float64),
        "candidates": torch.randn(n, 3, generator=g, dtype=torch.float64),
        "positive_repr": torch.randn(4, 3, generator=g, dtype=torch.float64),
    }
    loss = SampledSoftmax(SoftmaxArgs(temperature=0.5))

    def fused(query, candidates, positive_repr):
        pos = (query * positive_repr).sum(-1)
        return loss.over_shared_candidates(query, candidates, pos, pos_log_q, neg_log_q, mask, segments=segments)

    def scores_then_loss(query, candidates, positive_repr):
        neg = (query @ candidates.T).masked_fill(candidates_ids == positives[:, None], float("-inf"))
        pos = (query * positive_repr).sum(-1)
        return loss(LossInput(pos, neg, pos_log_q, neg_log_q, neg_segments=segments))

    assert_same_value_and_gradients(fused, scores_then_loss, inputs, ["query", "candidates", "positive_repr"])
