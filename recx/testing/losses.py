"""The loss contract (docs/design.md "Losses"): a finite differentiable scalar over a step's scores; training."""

from __future__ import annotations

from pathlib import Path

import torch

from recx.config.run_config import resolve
from recx.samplers.base import Batch
from recx.testing.data import make_sampler, random_dataset
from recx.testing.runs import check_trains
from recx.training.build import build_loss, build_model
from recx.training.step import loss_input


def label(name: str, args: dict | None, sampler: str, n_negatives: int, run: dict | None = None) -> str:
    """`loss 'x' (loss_args {...}, sampler uniform, n_negatives 8)`: the loss and what a check ran it with."""
    extra = "".join(f", {key} {value}" for key, value in (run or {}).items())
    return f"loss {name!r} (loss_args {args or {}}, sampler {sampler}, n_negatives {n_negatives}{extra})"


def _value(
    name: str, args: dict, sampler: str, n_negatives: int, run: dict | None = None
) -> tuple[torch.Tensor, list[torch.Tensor]]:
    dataset = random_dataset(n_users=40, n_items=60, density=0.15)
    settings = {"loss": name, "sampler": sampler, "n_negatives": n_negatives, "loss_args": args, "dim": 8}
    config = resolve({**settings, **(run or {})})
    model = build_model(config, dataset, torch.device("cpu"))
    loss = build_loss(config, dataset, torch.device("cpu"))
    users, positives = dataset.train.row_ids()[:32], dataset.train.indices[:32]
    drawn = make_sampler(config.sampler, dataset, n_negatives, 0, **config.sampler_args)
    negatives = drawn.sample(Batch(users, positives, lambda: model.query(users), model.item_table))
    value = loss(loss_input(model, loss, users, positives, negatives))
    value.backward()
    return value.detach(), [p.grad.to_dense() for p in model.parameters() if p.grad is not None]


def check_loss_value(
    name: str, args: dict | None = None, sampler: str = "uniform", n_negatives: int = 8, run: dict | None = None
) -> None:
    """On MF's scores of 32 queries and their candidates: a finite scalar, the same twice, whose gradients reach
    the model's parameters, finite and not all zero. `run`: other settings of the run (the model and its
    arguments a loss's `check_model` requires)."""
    shown = label(name, args, sampler, n_negatives, run)
    value, grads = _value(name, args or {}, sampler, n_negatives, run)
    if value.shape != () or not torch.isfinite(value):
        raise AssertionError(f"{shown}: {value} is not a finite scalar")
    if not grads or not all(torch.isfinite(g).all() for g in grads) or not any(g.abs().sum() > 0 for g in grads):
        raise AssertionError(f"{shown}: its gradients are missing, non-finite or all zero")
    if not torch.equal(value, _value(name, args or {}, sampler, n_negatives, run)[0]):
        raise AssertionError(f"{shown}: two evaluations of the same step differ")


def check_loss(
    name: str,
    args: dict | None = None,
    *,
    sampler: str = "uniform",
    n_negatives: int = 8,
    workdir: Path | None = None,
    run: dict | None = None,
) -> None:
    """`check_loss_value`, then two epochs of MF with the loss over `sampler`'s draws (training lowers the loss);
    `run`: other settings of both (e.g. {"model_args": {"scoring": "cosine"}} for a loss of cosine scores)."""
    check_loss_value(name, args, sampler, n_negatives, run)
    settings = {"loss": name, "sampler": sampler, "n_negatives": n_negatives, "loss_args": args or {}}
    check_trains({**settings, **(run or {})}, workdir)
