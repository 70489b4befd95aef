"""Launches a shared-candidates softmax step no longer makes (issue 58 §1), with the same numbers: the positives' and
the candidates' rows split rather than sliced (the backward's one `cat` in place of a zero-filled tensor a slice and
their sum) and no subtraction of a log-sum-exp's shift of 0.0. Compared bit for bit with the step as it was computed
before: the loss and both tables' gradients made dense (as dense Adam takes them)."""

from __future__ import annotations

import pytest
import torch

from recx.config.run_config import resolve
from recx.losses.softmax import SharedCandidateLogSumExp, shifted, split_log_q
from recx.training.build import build_loss, build_model, build_sampler
from recx.training.positive_mask import positive_mask
from recx.training.step import input_kind, sample_negatives, training_loss

CONFIGS = {
    "ssl-pop": {
        "sampler": "in_batch_pop",
        "sampler_args": {"keep_positive": True},
        "model_args": {"init": "normal", "init_std": 1.0, "scoring": "dot", "temperature": 1.0},
    },
    "shared uniform, cosine": {"sampler": "uniform", "n_negatives": 40, "sampler_args": {"shared": True}},
}


def bits(tensor: torch.Tensor) -> torch.Tensor:
    return tensor.detach().contiguous().view(torch.int32 if tensor.dtype == torch.float32 else torch.int64)


def test_a_shift_of_zero_is_not_subtracted_and_changes_no_bit():
    values = torch.tensor([1.5, -0.0, 0.0, float("inf"), float("-inf"), float("nan"), -3e-39])
    assert shifted(values, 0.0) is values
    assert torch.equal(bits(values - 0.0), bits(values))
    shift = torch.full((7,), 0.25)
    assert torch.equal(bits(shifted(values, shift)), bits(values - shift))


def sliced_loss(model, loss_fn, users, positives, negatives):
    """The shared-candidates loss as the step computed it before: the rows sliced, the shift subtracted."""
    query, rows = model.rows(users, torch.cat([positives, negatives.items[0]]))
    batch = positives.numel()
    mask = None
    if loss_fn.mask_positive and not negatives.keeps_positive:
        mask = positive_mask(negatives.items, positives)
    temperature = loss_fn.args.temperature
    pos_scores = (query * rows[:batch]).sum(-1)
    if temperature != 1.0:
        query, pos_scores = query / temperature, pos_scores / temperature
    pos = pos_scores - negatives.positive_log_q
    column_log_q, shift = split_log_q(negatives.log_q)
    lse = SharedCandidateLogSumExp.apply(query, rows[batch:], column_log_q, mask) - shift
    return (torch.logaddexp(pos, lse) - pos).mean()


@pytest.mark.parametrize("case", list(CONFIGS))
def test_the_shared_candidates_step_is_the_same_bit_for_bit(tiny, case):
    config = resolve(
        {"dataset": "tiny", "model": "mf", "dim": 8, "device": "cpu", "optimizer": "adam", **CONFIGS[case]}
    )
    torch.manual_seed(0)
    model = build_model(config, tiny, torch.device("cpu"))
    loss_fn = build_loss(config, tiny, torch.device("cpu"))
    generator = torch.Generator().manual_seed(3)
    users = torch.randint(0, tiny.n_users, (64,), generator=generator)
    positives = torch.randint(0, 12, (64,), generator=generator)  # 12 items: most repeated in the batch
    results = []
    for compute in ("now", "before"):
        sampler = build_sampler(config, tiny, torch.Generator().manual_seed(5))
        model.zero_grad(set_to_none=True)
        if compute == "now":
            loss = training_loss(model, sampler, loss_fn, config, users, positives)
        else:
            negatives = sample_negatives(model, sampler, users, positives)
            assert input_kind(model, loss_fn, config, negatives) == "shared_candidates"
            loss = sliced_loss(model, loss_fn, users, positives, negatives)
        loss.backward()
        results.append([loss, *(table.grad.to_dense() for table in model.embedding_tables())])
    for now, before in zip(*results, strict=True):
        assert torch.equal(bits(now), bits(before)), case
