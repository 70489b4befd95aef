"""Sampled softmax (with and without logQ) and full softmax against float64 references."""
import torch

from recx.losses.base import LossInput
from recx.losses.softmax import FullSoftmax, SampledSoftmax, SoftmaxArgs
from tests.loss_reference import assert_same_value_and_gradients

B, N, TAU = 6, 9, 0.3


def _inputs(seed: int):
    g = torch.Generator().manual_seed(seed)
    return {"pos": torch.randn(B, generator=g), "neg": torch.randn(B, N, generator=g),
            "pos_log_q": -torch.rand(B, generator=g) * 4, "neg_log_q": -torch.rand(B, N, generator=g) * 4}


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
            lambda **t: loss(LossInput(t["pos"], t["neg"], t["pos_log_q"], t["neg_log_q"])),
            sampled_reference(correct), _inputs(2), ["pos", "neg"])


def test_full_softmax_is_the_cross_entropy_over_all_items():
    g = torch.Generator().manual_seed(3)
    n_items = 11
    scores = torch.randn(B, n_items, generator=g)
    positives = torch.randint(0, n_items, (B,), generator=g)
    loss = FullSoftmax(SoftmaxArgs(temperature=TAU))

    def ours(scores):
        pos = scores.gather(1, positives[:, None]).squeeze(1)
        neg = scores  # the `full` sampler's candidates: every item, the positive included once
        uniform = torch.full((1, n_items), -torch.log(torch.tensor(float(n_items))), dtype=torch.float64)
        return loss(LossInput(pos, neg, uniform[0, :B], uniform))

    def reference(scores):
        return torch.stack([-torch.log_softmax(scores[b] / TAU, 0)[positives[b]] for b in range(B)]).mean()

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
    from recx.losses.softmax import RowLogSumExp

    logits = torch.randn(5, 7, dtype=torch.float64, requires_grad=True)
    torch.testing.assert_close(RowLogSumExp.apply(logits), torch.logsumexp(logits, dim=1))
    assert torch.autograd.gradcheck(RowLogSumExp.apply, (logits,))
