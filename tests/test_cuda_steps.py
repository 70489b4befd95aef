"""On a GPU: one training step's loss and gradients on CUDA equal the CPU's for the same batch and negatives.

tests/test_device_paths.py forces the accelerator branches on the CPU; these tests run them on CUDA itself, through
the kernels torch picks there (the fused shared-candidate softmax and its dense positive mask, XIR's weighted
segments, PairLogSumExp and the masked distinct-row uniformity of DirectAU and MAWU, the elementwise row dots that
replace the CPU's compiled ones, batched weight decay), and the fixed training order's permutation drawn from a CUDA
generator. The negatives are drawn once on the CPU and copied, so both devices score the same candidates. And with
`deterministic = true` two CUDA runs of one seed end with the same weights and results, bit for bit.
"""

from __future__ import annotations

import dataclasses

import pytest
import torch

from recx.config.run_config import resolve
from recx.core.progress import make_progress
from recx.runs.train_run import train_run
from recx.samplers.base import Negatives
from recx.training.build import build_loss, build_model, build_sampler
from recx.training.runners.registry import RUNNERS
from recx.training.step import loss_with, sample_negatives

pytestmark = pytest.mark.gpu

CUDA = torch.device("cuda")
STEP_CASES = {
    "softmax, 60 shared uniform, positive masked (fused)": {
        "loss": "softmax",
        "sampler": "uniform",
        "n_negatives": 60,
        "sampler_args": {"shared": True},
    },
    "softmax, xir segments (fused)": {"loss": "softmax", "sampler": "xir", "n_negatives": 1},
    "softmax, bir resampled": {"loss": "softmax", "sampler": "bir", "n_negatives": 1},
    "softmax, in-batch": {"loss": "softmax", "sampler": "in_batch", "n_negatives": 1},
    "softmax, 20 per-query popularity": {"loss": "softmax", "sampler": "popularity", "n_negatives": 20},
    "bpr, uniform (row dots)": {"loss": "bpr", "sampler": "uniform", "n_negatives": 1},
    "bpr, batched weight decay": {
        "loss": "bpr",
        "sampler": "uniform",
        "n_negatives": 4,
        "weight_decay": 0.01,
        "weight_decay_mode": "batch",
    },
    "bce, 5 per-query": {"loss": "bce", "sampler": "uniform", "n_negatives": 5},
    "directau (distinct rows)": {"loss": "directau", "n_negatives": 1, "optimizer": "adam"},
    "mawu (PRISM init)": {"loss": "mawu", "n_negatives": 1, "optimizer": "adam", "model_args": {"init": "prism"}},
}


def on_cuda(negatives: Negatives) -> Negatives:
    weights = negatives.candidate_weights()
    return dataclasses.replace(
        negatives,
        items=negatives.items.to(CUDA),
        log_q=negatives.log_q.to(CUDA),
        positive_log_q=negatives.positive_log_q.to(CUDA),
        weights=None if weights is None else weights.to(CUDA),
    )


def step_gradients(config, dataset, device, users, positives, negatives):
    model = build_model(config, dataset, device)
    loss = loss_with(model, build_loss(config, dataset, device), config, users, positives, negatives)
    loss.backward()
    grads = [p.grad.to_dense() if p.grad.is_sparse else p.grad for p in model.parameters() if p.grad is not None]
    return loss.detach().cpu(), [g.cpu() for g in grads]


def training_batch(dataset, size: int = 64) -> tuple[torch.Tensor, torch.Tensor]:
    """(users, positives) of `size` training pairs drawn without replacement (users repeat, as in a real batch)."""
    train = dataset.train
    users = torch.repeat_interleave(torch.arange(train.n_rows), train.row_lengths())
    chosen = torch.randperm(users.numel(), generator=torch.Generator().manual_seed(1))[:size]
    return users[chosen], train.indices[chosen].long()


@pytest.mark.parametrize("case", list(STEP_CASES))
def test_a_step_on_cuda_gives_the_cpu_loss_and_gradients(tiny, case):
    config = resolve({"model": "mf", "dim": 16, "batch_size": 64, "seed": 0, **STEP_CASES[case]})
    users, positives = training_batch(tiny)
    model = build_model(config, tiny, torch.device("cpu"))
    sampler = build_sampler(config, tiny, torch.Generator().manual_seed(0))
    negatives = sample_negatives(model, sampler, users, positives)
    cpu_loss, cpu_grads = step_gradients(config, tiny, torch.device("cpu"), users, positives, negatives)
    cuda_loss, cuda_grads = step_gradients(
        config, tiny.to(CUDA), CUDA, users.to(CUDA), positives.to(CUDA), on_cuda(negatives)
    )
    assert torch.isfinite(cuda_loss)
    torch.testing.assert_close(cuda_loss, cpu_loss, rtol=1e-4, atol=1e-6)
    assert len(cuda_grads) == len(cpu_grads) > 0
    for cuda_grad, cpu_grad in zip(cuda_grads, cpu_grads, strict=True):
        torch.testing.assert_close(cuda_grad, cpu_grad, rtol=1e-3, atol=1e-6)


def test_the_fixed_order_is_one_cuda_permutation_for_every_epoch(tiny):
    config = resolve({"model": "mf", "dim": 8, "batch_size": 64, "seed": 5, "fixed_order": True, "device": "cuda"})
    dataset = tiny.to(CUDA)
    model = build_model(config, dataset, CUDA)
    runner = RUNNERS.get(model.runner)(config, dataset, model, torch.Generator(device=CUDA).manual_seed(0))
    first = runner.shuffled(1000)
    runner.generator.manual_seed(123)  # the run's generator does not decide the order
    again = runner.shuffled(1000)
    assert first.device.type == CUDA.type
    assert torch.equal(first, again)
    assert torch.equal(first.sort().values.cpu(), torch.arange(1000))


@pytest.mark.parametrize(
    "case",
    [
        {"model": "mf"},  # the default softmax over shared candidates, row-wise Adagrad
        {"model": "mf", "loss": "softmax", "sampler": "xir", "batch_size": 128},  # draws that follow the rounding
        {"model": "multvae", "loss": "full_softmax", "batch_size": 64},
    ],
)
def test_a_deterministic_cuda_run_repeats_bit_for_bit(tiny, tmp_path, case):
    config = resolve({"seed": 3, "dim": 16, "epochs": 3, "device": "cuda", "deterministic": True, **case})
    for name in ("first", "second"):
        train_run(config, tiny, tmp_path / name, make_progress(quiet=True))
    first, second = (torch.load(tmp_path / name / "model.pt") for name in ("first", "second"))
    assert all(torch.equal(first[key], second[key]) for key in first)
    assert (tmp_path / "first" / "results.parquet").read_bytes() == (
        tmp_path / "second" / "results.parquet"
    ).read_bytes()
