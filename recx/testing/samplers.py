"""The sampler contract (docs/design.md "Samplers"): draws, the log q convention, the law, training."""

from __future__ import annotations

import math
from dataclasses import fields
from pathlib import Path
from typing import Callable

import torch

from recx.samplers.base import Negatives
from recx.samplers.registry import SAMPLERS
from recx.testing.data import make_sampler, random_batch, random_dataset
from recx.testing.runs import check_trains
from recx.testing.stats import assert_follows

# (dataset, batch, negatives, sampler) -> expected log_q - positive_log_q[:, None], [B, n] float64 (where finite)
LogQGap = Callable[..., torch.Tensor]


def _fail(message: str) -> None:
    raise AssertionError(message)


def offers_exclude_train(name: str) -> bool:
    return "exclude_train" in {spec.name for spec in fields(SAMPLERS.get(name).Args)}


def _sample(name: str, args: dict, n_negatives: int, seed: int = 0):
    dataset = random_dataset(n_users=30, n_items=50, density=0.2)
    batch = random_batch(dataset, batch_size=12, dim=4, scale=0.5)
    sampler = make_sampler(name, dataset, n_negatives, seed, **args)
    return dataset, batch, sampler, sampler.sample(batch)


def _check_shapes(name: str, dataset, batch, negatives: Negatives) -> None:
    n_rows, n = negatives.items.shape
    if n_rows not in (1, batch.users.numel()) or n < 1:
        _fail(f"sampler {name!r}: items {tuple(negatives.items.shape)}, expected [B, n] or [1, n] with n >= 1")
    if negatives.items.dtype != torch.long or negatives.items.device != batch.users.device:
        _fail(f"sampler {name!r}: items must be int64 on the batch's device")
    if int(negatives.items.min()) < 0 or int(negatives.items.max()) >= dataset.n_items:
        _fail(f"sampler {name!r}: an item id outside [0, n_items)")
    if negatives.log_q.shape not in ((n_rows, n), (batch.users.numel(), n)):
        _fail(f"sampler {name!r}: log_q {tuple(negatives.log_q.shape)} does not match the items {(n_rows, n)}")
    if negatives.positive_log_q.shape != batch.positives.shape:
        _fail(f"sampler {name!r}: positive_log_q must be [B]")
    if torch.isnan(negatives.log_q).any() or not torch.isfinite(negatives.positive_log_q).all():
        _fail(f"sampler {name!r}: NaN in log_q, or a non-finite positive_log_q")
    weights = negatives.candidate_weights()
    if weights is not None:
        if weights.shape != (batch.users.numel(), n) or weights.requires_grad or (weights < 0).any():
            _fail(f"sampler {name!r}: weights must be detached, non-negative, [B, n]")
        if (weights.double().sum(1) - 1).abs().max() > 1e-6:
            _fail(f"sampler {name!r}: a row of weights does not sum to 1")
        if (weights[torch.isposinf(negatives.log_q.expand_as(weights))] != 0).any():
            _fail(f"sampler {name!r}: a candidate not drawn (log_q +inf) has a weight")
    if negatives.segments is not None:
        if sum(size for size, _ in negatives.segments) != n or not math.isclose(
            sum(weight for _, weight in negatives.segments), 1.0
        ):
            _fail(f"sampler {name!r}: segments must cover the n columns with weights summing to 1")


def check_sampler_draws(name: str, args: dict | None = None, n_negatives: int = 8) -> None:
    """Shapes, ids, weights, determinism under the seed and, where offered, `exclude_train` (both settings)."""
    settings = [False, True] if offers_exclude_train(name) else [False]
    for exclude in settings:
        given = {**(args or {}), **({"exclude_train": True} if exclude else {})}
        dataset, batch, sampler, negatives = _sample(name, given, n_negatives)
        _check_shapes(name, dataset, batch, negatives)
        again = _sample(name, given, n_negatives, seed=0)[3]
        for first, second in (
            (negatives.items, again.items),
            (negatives.log_q, again.log_q),
            (negatives.positive_log_q, again.positive_log_q),
            (negatives.candidate_weights(), again.candidate_weights()),
        ):
            if not ((first is None and second is None) or torch.equal(first, second)):
                _fail(f"sampler {name!r}: two draws under the same seed differ")
        if exclude:
            items = negatives.items.expand(batch.users.numel(), -1)
            weights = negatives.candidate_weights()
            proposed = torch.ones_like(items, dtype=torch.bool) if weights is None else weights > 0
            if (sampler.is_training_item(batch.users, items) & proposed).any():
                _fail(f"sampler {name!r}: exclude_train drew a training item of its user")


def _closed_form_gap(dataset, batch, negatives, sampler) -> torch.Tensor:
    items = negatives.items.expand(batch.positives.numel(), -1)
    log_q = sampler.log_probability(batch, torch.cat([batch.positives[:, None], items], dim=1)).double()
    return log_q[:, 1:] - log_q[:, :1]


def check_sampler_log_q(
    name: str, args: dict | None = None, log_q_gap: LogQGap | None = None, n_negatives: int = 8
) -> None:
    """One normaliser for a query's positive and its candidates: log_q - positive_log_q equals `log_q_gap` (a
    formula of the caller's), else the gap of the sampler's closed form (`log_probability`, which must then sum to
    one over the catalogue for every query). A sampler with neither is not checked here."""
    settings = [False, True] if offers_exclude_train(name) else [False]
    closed = SAMPLERS.get(name).has_closed_form()
    if log_q_gap is None and not closed:
        return
    for exclude in settings:
        given = {**(args or {}), **({"exclude_train": True} if exclude else {})}
        dataset, batch, sampler, negatives = _sample(name, given, n_negatives)
        gap = (negatives.log_q.double() - negatives.positive_log_q.double()[:, None]).expand(batch.users.numel(), -1)
        expected = (log_q_gap or _closed_form_gap)(dataset, batch, negatives, sampler).expand_as(gap)
        finite = torch.isfinite(gap)
        if not torch.equal(finite, torch.isfinite(expected)):
            _fail(f"sampler {name!r}: log_q is infinite where the formula is not (or the reverse)")
        if not torch.allclose(gap[finite], expected[finite], rtol=0, atol=1e-5):
            worst = (gap[finite] - expected[finite]).abs().max()
            _fail(f"sampler {name!r}: log_q - positive_log_q differs from the formula by up to {float(worst):.2e}")
        if closed and not exclude:
            catalogue = torch.arange(dataset.n_items)[None, :].expand(batch.users.numel(), -1)
            total = torch.logsumexp(sampler.log_probability(batch, catalogue).double(), dim=1)
            if total.abs().max() > 1e-5:
                _fail(f"sampler {name!r}: log_probability sums to exp({float(total.abs().max()):.2e}) != 1")


def check_sampler_law(name: str, args: dict | None = None, draws: int = 20_000) -> None:
    """For a sampler with a closed form: one query's draws follow exp(log_probability) (chi-square, p > 1e-3)."""
    if not SAMPLERS.get(name).has_closed_form():
        return
    dataset = random_dataset(n_users=30, n_items=50, density=0.2)
    batch = random_batch(dataset, batch_size=1, dim=4, scale=0.5)
    given = {**(args or {}), **({"exclude_train": False} if offers_exclude_train(name) else {})}
    sampler = make_sampler(name, dataset, draws, 0, **given)
    if sampler.rebuild_every is not None:
        sampler.rebuild(batch.query, batch.item_table)
    negatives = sampler.sample(batch)
    if negatives.candidate_weights() is not None:
        return  # weighted candidates: their law is not the draws' counts
    probabilities = sampler.log_probability(batch, torch.arange(dataset.n_items)[None, :]).double().exp()[0]
    try:
        assert_follows(negatives.items[0].numpy(), probabilities.numpy())
    except AssertionError as error:
        _fail(f"sampler {name!r}: {error}")


def check_sampler(
    name: str,
    args: dict | None = None,
    log_q_gap: LogQGap | None = None,
    *,
    loss: str = "softmax",
    n_negatives: int = 8,
    workdir: Path | None = None,
) -> None:
    """Every sampler check, then two epochs of MF with `loss` over its draws (training lowers the loss)."""
    check_sampler_draws(name, args, n_negatives)
    check_sampler_log_q(name, args, log_q_gap, n_negatives)
    check_sampler_law(name, args)
    check_trains({"loss": loss, "sampler": name, "n_negatives": n_negatives, "sampler_args": args or {}}, workdir)
