"""Every CUDA-only branch, forced on the CPU (recx.core.device_paths), gives what the host branch gives.

CI has no GPU; without these tests the accelerator branches (the log-sum-exp's maxima path, the dense positive
mask and SharedCandidateLogSumExp's dense-mask branch, the uniform sampler's fixed number of redraw rounds, the
sync-free row-sparse optimizer step, the training loop's device-side loss display) would first run on a user's GPU.
"""

from __future__ import annotations

import pytest
import torch

from recx.config.run_config import resolve
from recx.core.device_paths import accelerator_branch, forced_accelerator_branches
from recx.losses.softmax import RowLogSumExp, softmax_and_log_sum_exp
from recx.optim import optimizers as optim
from recx.samplers import shared
from recx.samplers.base import Batch
from recx.training.build import build_model, build_sampler
from recx.training.positive_mask import mask_positives, positive_mask
from recx.training.runners.registry import RUNNERS


def test_forcing_is_scoped_to_the_block():
    cpu = torch.zeros(1)
    assert not accelerator_branch(cpu)
    with forced_accelerator_branches():
        assert accelerator_branch(cpu) and accelerator_branch(torch.device("cpu"))
    assert not accelerator_branch(cpu)


def hard_logits(seed: int) -> torch.Tensor:
    """[40, 30] float64 logits with masked entries, a row where the first entry is masked, a row of -inf only and
    rows whose first entry is far below the others (the rows the host branch sends to the maxima path)."""
    generator = torch.Generator().manual_seed(seed)
    logits = torch.randn(40, 30, generator=generator, dtype=torch.float64) * 5
    logits[torch.rand(40, 30, generator=generator) < 0.2] = float("-inf")
    logits[3, 0] = float("-inf")
    logits[5] = float("-inf")
    logits[7:12, 0] = -800.0
    logits[13, 1:] = 700.0
    return logits


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_log_sum_exp_maxima_branch_equals_host_branch_and_a_float64_reference(seed):
    logits = hard_logits(seed)
    host_p, host_lse = softmax_and_log_sum_exp(logits)
    with forced_accelerator_branches():
        forced_p, forced_lse = softmax_and_log_sum_exp(logits)
    reference = torch.logsumexp(logits, dim=1)
    torch.testing.assert_close(forced_lse, reference, rtol=1e-12, atol=0)
    torch.testing.assert_close(forced_lse, host_lse, rtol=1e-12, atol=0)
    torch.testing.assert_close(forced_p, host_p, rtol=0, atol=0)


def test_row_log_sum_exp_gradient_is_the_same_on_both_branches():
    logits = hard_logits(4)
    weights = torch.rand(40, dtype=torch.float64)
    grads = []
    for forced in (False, True):
        leaf = logits.clone().requires_grad_()
        with forced_accelerator_branches() if forced else torch.enable_grad():
            lse = RowLogSumExp.apply(leaf)
        lse = torch.where(torch.isfinite(lse), lse, 0.0)
        (lse * weights).sum().backward()
        grads.append(leaf.grad)
    torch.testing.assert_close(grads[1], grads[0], rtol=1e-12, atol=0)


def shared_case() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Shared candidates [1, 60] with repeats, 25 positives (some drawn among the candidates, some repeated)."""
    generator = torch.Generator().manual_seed(7)
    candidates = torch.randint(0, 40, (1, 60), generator=generator)
    positives = torch.randint(0, 45, (25,), generator=generator)
    scores = torch.randn(25, 60, generator=generator, dtype=torch.float64)
    return candidates, positives, scores


def test_dense_positive_mask_equals_the_host_hit_list():
    candidates, positives, _ = shared_case()
    rows, cols = positive_mask(candidates, positives)
    host = torch.zeros(25, 60, dtype=torch.bool)
    host[rows, cols] = True
    with forced_accelerator_branches():
        dense = positive_mask(candidates, positives)
    assert dense.dtype == torch.bool and dense.shape == (25, 60)
    assert dense.any(), "the case must hold hits"
    assert torch.equal(dense, host)


def test_masked_scores_and_their_gradient_are_the_same_on_both_branches():
    candidates, positives, scores = shared_case()
    outputs = []
    for forced in (False, True):
        leaf = scores.clone().requires_grad_()
        with forced_accelerator_branches() if forced else torch.enable_grad():
            masked = mask_positives(leaf.clone(), candidates, positives)
        RowLogSumExp.apply(torch.cat([torch.zeros(25, 1, dtype=torch.float64), masked], dim=1)).sum().backward()
        outputs.append((masked.detach(), leaf.grad))
    torch.testing.assert_close(outputs[1][0], outputs[0][0], rtol=0, atol=0)
    torch.testing.assert_close(outputs[1][1], outputs[0][1], rtol=1e-12, atol=0)
    assert torch.isinf(outputs[0][0]).any()


def test_uniform_redraws_return_the_same_items_when_every_round_runs(tiny):
    """The accelerator branch runs every redraw round (no early exit); rounds after the last hit leave the items
    as they are, so one call returns what the host branch returns for the same generator state."""
    config = resolve(
        {"model": "mf", "loss": "bpr", "sampler": "uniform", "n_negatives": 50, "sampler_args": {"exclude_train": True}}
    )
    users = torch.arange(0, tiny.n_users, 3)
    draws = []
    for forced in (False, True):
        sampler = build_sampler(config, tiny, torch.Generator().manual_seed(5))
        with forced_accelerator_branches() if forced else torch.enable_grad():
            draws.append(sampler.sample(Batch(users, users, None, None)).items)
    assert torch.equal(draws[1], draws[0])
    assert not tiny.train.contains(users[:, None].expand_as(draws[0]), draws[0]).any()


def every_round(sampler, users, items, draw, rounds):
    """The rejection rule spelled out: `rounds` rounds, each redrawing every candidate that is a training item."""
    for _ in range(rounds):
        items = torch.where(sampler.is_training_item(users, items), draw(items.shape), items)
    return items


@pytest.mark.parametrize("at_once", [1, 1 << 24])
@pytest.mark.parametrize("rounds", [0, 1, 3, 7])
def test_redraws_in_blocks_of_rounds_keep_the_rejection_rule_and_the_cpu_draws(tiny, monkeypatch, at_once, rounds):
    """The accelerator branch draws its redraw rounds in blocks (one round a block at `at_once` 1, every round in one
    at the default) and keeps each candidate's first draw that is not a training item, the last round's whatever it
    is: the items and the generator's state of the rule run round by round, candidates drawn among 6 items so that
    training items stay after the last round."""
    monkeypatch.setattr(shared, "REDRAWN_AT_ONCE", at_once)
    config = resolve({"model": "mf", "sampler": "uniform", "sampler_args": {"exclude_train": True}})
    sampler = build_sampler(config, tiny, torch.Generator().manual_seed(0))
    users = torch.arange(tiny.n_users)
    outcomes = []
    for forced in (False, True):
        generator = torch.Generator().manual_seed(11)
        draw = lambda shape, generator=generator: torch.randint(0, 6, shape, generator=generator)  # noqa: E731
        items = draw((users.numel(), 5))
        with forced_accelerator_branches() if forced else torch.enable_grad():
            drawn = (shared.redraw_training_items if forced else every_round)(sampler, users, items, draw, rounds)
        outcomes.append((drawn, generator.get_state()))
    assert torch.equal(outcomes[1][0], outcomes[0][0]) and torch.equal(outcomes[1][1], outcomes[0][1])
    before = sampler.is_training_item(users, items).sum()
    left = sampler.is_training_item(users, outcomes[0][0]).sum()
    assert before > 0 and (left == before if rounds == 0 else left < before) and (left > 0 or rounds == 7)


@pytest.mark.parametrize("name", ["rowwise_adagrad", "lazy_adam", "adagrad", "sgd"])
def test_row_sparse_optimizer_takes_the_sync_free_step_when_forced_and_lands_in_the_same_place(name):
    generator = torch.Generator().manual_seed(3)
    start = torch.randn(30, 4, generator=generator, dtype=torch.float64)
    rows = torch.tensor([1, 5, 5, 9, 1, 1, 28])
    results = []
    for forced in (False, True):
        table = torch.nn.Parameter(start.clone())
        optimizer = optim.make_optimizer(name, [table], 0.1, 0.0, [])
        with forced_accelerator_branches() if forced else torch.enable_grad():
            for _ in range(3):
                optimizer.zero_grad(set_to_none=True)
                torch.nn.functional.embedding(rows, table, sparse=True).pow(2).sum().backward()
                optimizer.step()
        results.append(table.detach())
    torch.testing.assert_close(results[1], results[0], rtol=1e-12, atol=1e-15)


TRAINING_CASES = {
    "interactions, shared-candidate softmax with the positive masked": {
        "model": "mf",
        "loss": "softmax",
        "sampler": "uniform",
        "n_negatives": 40,
        "sampler_args": {"shared": True},
        "batch_size": 64,
        "dim": 8,
        "lr": 0.05,
    },
    "interactions, bce (per-query candidates, masked)": {
        "model": "mf",
        "loss": "bce",
        "sampler": "uniform",
        "n_negatives": 5,
        "batch_size": 64,
        "dim": 8,
        "lr": 0.05,
    },
    "users, fastvae with midx_uni": {
        "model": "fastvae",
        "loss": "softmax",
        "sampler": "midx_uni",
        "n_negatives": 30,
        "batch_size": 32,
        "dim": 8,
        "sampler_args": {"n_codewords": 4},
    },
    "users, mult-vae (full softmax)": {"model": "multvae", "loss": "full_softmax", "batch_size": 32, "dim": 8},
}


@pytest.mark.parametrize("case", list(TRAINING_CASES))
def test_two_epochs_train_to_the_same_weights_on_both_branches(tiny, case):
    """Every runner with gradients, two epochs from one seed: the forced accelerator branches end at the
    host branches' weights (float32 sums in another order: close, not equal)."""
    config = resolve({"seed": 0, "device": "cpu", "epochs": 2, **TRAINING_CASES[case]})
    weights = []
    for forced in (False, True):
        torch.manual_seed(0)
        with forced_accelerator_branches() if forced else torch.enable_grad():
            model = build_model(config, tiny, torch.device("cpu"))
            runner = RUNNERS.get(model.runner)(config, tiny, model, torch.Generator().manual_seed(0))
            for epoch in (1, 2):
                losses = torch.zeros(runner.n_steps)
                runner.train_epoch(epoch, losses, lambda step: None)
                assert torch.isfinite(losses).all()
        weights.append([p.detach().clone() for p in model.parameters()])
    for host, forced in zip(*weights, strict=True):
        torch.testing.assert_close(forced, host, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("form", ["pairs", "lower_triangle"])
def test_distinct_row_uniformity_masked_on_the_accelerator_branch_equals_the_gathered_rows(form):
    """DirectAU's and MAWU's uniformity over the batch's distinct users (PRISM's code: `torch.unique`, a host sync)
    is, on the accelerator branch, every pair masked down to first occurrences: same value and gradient, also with
    a single distinct row (0, no NaN gradient)."""
    from recx.losses.alignment import uniformity_of

    generator = torch.Generator().manual_seed(3)
    table = torch.randn(50, 8, dtype=torch.float64, generator=generator)
    for ids in (torch.randint(0, 20, (64,), generator=generator), torch.full((5,), 7), torch.tensor([3])):
        results = []
        for forced in (False, True):
            leaf = table.clone().requires_grad_()
            with forced_accelerator_branches() if forced else torch.enable_grad():
                value = uniformity_of(leaf[ids], ids, "unique", form)
            value.backward()
            results.append((value.detach(), leaf.grad))
        (host, host_grad), (forced_value, forced_grad) = results
        torch.testing.assert_close(forced_value, host, rtol=1e-12, atol=1e-15)
        torch.testing.assert_close(forced_grad, host_grad, rtol=1e-10, atol=1e-15)
