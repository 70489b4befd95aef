"""The sampler contract (docs/design.md "Samplers"): draws, the log q convention, the law, training.

Every failure names the sampler and the arguments it ran with (`sampler 'x' (sampler_args {...}, n_negatives 8)`)."""

from __future__ import annotations

import math
from dataclasses import fields
from pathlib import Path
from typing import Callable

import torch

from recx.samplers.base import Batch, Negatives
from recx.samplers.registry import SAMPLERS
from recx.testing.data import make_sampler, random_batch, random_dataset
from recx.testing.runs import check_trains
from recx.testing.stats import assert_counts_follow

# (dataset, batch, negatives, sampler) -> expected log_q - positive_log_q[:, None], [B, n] float64 (where finite)
LogQGap = Callable[..., torch.Tensor]


def _fail(message: str) -> None:
    raise AssertionError(message)


def label(name: str, args: dict | None, n_negatives: int | None = None) -> str:
    """`sampler 'x' (sampler_args {...}, n_negatives 8)`: the sampler and what a check ran it with."""
    shown = f"sampler_args {args or {}}" + (f", n_negatives {n_negatives}" if n_negatives is not None else "")
    return f"sampler {name!r} ({shown})"


def offers_exclude_train(name: str) -> bool:
    return "exclude_train" in {spec.name for spec in fields(SAMPLERS.get(name).Args)}


def _sample(name: str, args: dict, n_negatives: int, seed: int = 0):
    dataset = random_dataset(n_users=30, n_items=50, density=0.2)
    batch = random_batch(dataset, batch_size=12, dim=4, scale=0.5)
    sampler = make_sampler(name, dataset, n_negatives, seed, **args)
    return dataset, batch, sampler, sampler.sample(batch)


def _check_shapes(name: str, dataset, batch, negatives: Negatives) -> None:
    """`name`: the sampler's label (with its arguments)."""
    n_rows, n = negatives.items.shape
    if n_rows not in (1, batch.users.numel()) or n < 1:
        _fail(f"{name}: items {tuple(negatives.items.shape)}, expected [B, n] or [1, n] with n >= 1")
    if negatives.items.dtype != torch.long or negatives.items.device != batch.users.device:
        _fail(f"{name}: items must be int64 on the batch's device")
    if int(negatives.items.min()) < 0 or int(negatives.items.max()) >= dataset.n_items:
        _fail(f"{name}: an item id outside [0, n_items)")
    if negatives.log_q.shape not in ((n_rows, n), (batch.users.numel(), n)):
        _fail(f"{name}: log_q {tuple(negatives.log_q.shape)} does not match the items {(n_rows, n)}")
    if negatives.positive_log_q.shape != batch.positives.shape:
        _fail(f"{name}: positive_log_q must be [B]")
    if torch.isnan(negatives.log_q).any() or not torch.isfinite(negatives.positive_log_q).all():
        _fail(f"{name}: NaN in log_q, or a non-finite positive_log_q")
    weights = negatives.candidate_weights()
    if weights is not None:
        if weights.shape != (batch.users.numel(), n) or weights.requires_grad or (weights < 0).any():
            _fail(f"{name}: weights must be detached, non-negative, [B, n]")
        if (weights.double().sum(1) - 1).abs().max() > 1e-6:
            _fail(f"{name}: a row of weights does not sum to 1")
        if (weights[torch.isposinf(negatives.log_q.expand_as(weights))] != 0).any():
            _fail(f"{name}: a candidate not drawn (log_q +inf) has a weight")
    if negatives.segments is not None:
        if sum(size for size, _ in negatives.segments) != n or not math.isclose(
            sum(weight for _, weight in negatives.segments), 1.0
        ):
            _fail(f"{name}: segments must cover the n columns with weights summing to 1")


def check_sampler_draws(name: str, args: dict | None = None, n_negatives: int = 8) -> None:
    """Shapes, ids, weights, determinism under the seed and, where offered, `exclude_train` (both settings)."""
    settings = [False, True] if offers_exclude_train(name) else [False]
    for exclude in settings:
        given = {**(args or {}), **({"exclude_train": True} if exclude else {})}
        dataset, batch, sampler, negatives = _sample(name, given, n_negatives)
        _check_shapes(label(name, given, n_negatives), dataset, batch, negatives)
        again = _sample(name, given, n_negatives, seed=0)[3]
        for first, second in (
            (negatives.items, again.items),
            (negatives.log_q, again.log_q),
            (negatives.positive_log_q, again.positive_log_q),
            (negatives.candidate_weights(), again.candidate_weights()),
        ):
            if not ((first is None and second is None) or torch.equal(first, second)):
                _fail(f"{label(name, given, n_negatives)}: two draws under the same seed differ")
        if exclude:
            items = negatives.items.expand(batch.users.numel(), -1)
            weights = negatives.candidate_weights()
            proposed = torch.ones_like(items, dtype=torch.bool) if weights is None else weights > 0
            if (sampler.is_training_item(batch.users, items) & proposed).any():
                _fail(f"{label(name, given, n_negatives)}: exclude_train drew a training item of its user")


def _closed_form_gap(dataset, batch, negatives, sampler) -> torch.Tensor:
    items = negatives.items.expand(batch.positives.numel(), -1)
    log_q = sampler.log_probability(batch, torch.cat([batch.positives[:, None], items], dim=1)).double()
    return log_q[:, 1:] - log_q[:, :1]


def check_sampler_log_q(
    name: str, args: dict | None = None, log_q_gap: LogQGap | None = None, n_negatives: int = 8
) -> None:
    """One normaliser for a query's positive and its candidates: log_q - positive_log_q equals `log_q_gap` (a
    formula of the caller's), else the sampler's own reference formula (`reference_log_q_gap`), else the gap of its
    closed form (`log_probability`, which must then sum to one over the catalogue for every query). A sampler with
    none of them is not checked here, and says so."""
    settings = [False, True] if offers_exclude_train(name) else [False]
    closed = SAMPLERS.get(name).has_closed_form()
    for exclude in settings:
        given = {**(args or {}), **({"exclude_train": True} if exclude else {})}
        dataset, batch, sampler, negatives = _sample(name, given, n_negatives)
        gap = (negatives.log_q.double() - negatives.positive_log_q.double()[:, None]).expand(batch.users.numel(), -1)
        if log_q_gap is not None:
            formula = log_q_gap(dataset, batch, negatives, sampler)
        else:
            formula = sampler.reference_log_q_gap(batch, negatives)
            if formula is None and closed:
                formula = _closed_form_gap(dataset, batch, negatives, sampler)
        if formula is None:
            print(f"{label(name, given, n_negatives)}: log q not checked (no reference_log_q_gap and no closed form)")
            return
        expected = formula.expand_as(gap)
        finite = torch.isfinite(gap)
        if not torch.equal(finite, torch.isfinite(expected)):
            _fail(f"{label(name, given, n_negatives)}: log_q is infinite where the formula is not (or the reverse)")
        if not torch.allclose(gap[finite], expected[finite], rtol=0, atol=1e-5):
            worst = (gap[finite] - expected[finite]).abs().max()
            _fail(
                f"{label(name, given, n_negatives)}: log_q - positive_log_q differs from the formula by up to {float(worst):.2e}"
            )
        if closed and not exclude:
            catalogue = torch.arange(dataset.n_items)[None, :].expand(batch.users.numel(), -1)
            total = torch.logsumexp(sampler.log_probability(batch, catalogue).double(), dim=1)
            if total.abs().max() > 1e-5:
                _fail(
                    f"{label(name, given, n_negatives)}: log_probability sums to exp({float(total.abs().max()):.2e}) != 1"
                )


def _law_batches(dataset, query_user: int, positive: int, batch_size: int, dim: int = 4, seed: int = 5):
    """A fixed model (random user and item tables) and an endless run of batches whose row 0 is always the same
    query (user, positive) and whose other rows are random training interactions."""
    generator = torch.Generator().manual_seed(seed)
    user_table = 0.5 * torch.randn(dataset.n_users, dim, generator=generator)
    item_table = torch.randn(dataset.n_items, dim, generator=generator)
    users_of, items_of = dataset.train.row_ids(), dataset.train.indices

    def batches():
        while True:
            index = torch.randint(0, dataset.train.nnz, (batch_size - 1,), generator=generator)
            users = torch.cat([torch.tensor([query_user]), users_of[index]])
            positives = torch.cat([torch.tensor([positive]), items_of[index]])
            yield Batch(users, positives, user_table[users], item_table)

    return user_table, item_table, batches()


def _worst(counts: torch.Tensor, expected: torch.Tensor, shown: int = 3) -> str:
    order = torch.argsort((counts - expected).abs() / expected.clamp_min(1).sqrt(), descending=True)[:shown]
    return "; ".join(
        f"item {int(j)} drawn {int(counts[j]):,} times, exp(log q) expects {float(expected[j]):,.1f}" for j in order
    )


def check_sampler_law(name: str, args: dict | None = None, draws: int = 20_000, n_negatives: int = 200) -> None:
    """The law of the draws against the sampler's own log q, for every sampler: with a fixed model (random tables,
    rebuilt state), one query (row 0 of every batch: the same user and positive; the other rows random training
    interactions) is drawn for until `draws` candidates; each candidate item must always carry the same
    log q - positive_log q (a proposal of the model, not of the batch's other rows), and the items' counts must follow
    exp(log q) over the items drawn (chi-square, p > 1e-3; the query's own positive left out). With a closed form,
    the draws must also follow `log_probability` over the whole catalogue. A sampler whose `unchecked_law` says why
    its draws do not follow exp(log q) by design is skipped with that reason printed. `exclude_train` is off (the
    law before exclusion)."""
    sampler_class = SAMPLERS.get(name)
    given = {**(args or {}), **({"exclude_train": False} if offers_exclude_train(name) else {})}
    shown = label(name, given, n_negatives)
    if sampler_class.unchecked_law:
        print(f"{shown}: the law of the draws is not checked: {sampler_class.unchecked_law}")
        return
    dataset = random_dataset(n_users=30, n_items=50, density=0.2)
    query_user, positive = int(dataset.train.row_ids()[0]), int(dataset.train.indices[0])
    user_table, item_table, batches = _law_batches(dataset, query_user, positive, batch_size=16)
    sampler = make_sampler(name, dataset, n_negatives, 0, **given)
    if sampler.rebuild_every is not None:
        sampler.rebuild(user_table, item_table)
    counts = torch.zeros(dataset.n_items, dtype=torch.float64)
    gaps = torch.full((dataset.n_items,), math.nan, dtype=torch.float64)
    where = f"{shown}, query user {query_user} with positive {positive}"
    drawn, closed = 0, None
    while drawn < draws:
        batch = next(batches)
        negatives = sampler.sample(batch)
        items = negatives.items[0]
        gap = negatives.log_q[0].double() - negatives.positive_log_q[0].double()
        keep = torch.isfinite(gap) & (items != positive)
        items, gap = items[keep], gap[keep]
        known = ~torch.isnan(gaps[items])
        spread = (gaps[items][known] - gap[known]).abs()
        if spread.numel() and float(spread.max()) > 1e-4:
            worst = int(items[known][spread.argmax()])
            _fail(
                f"{where}: item {worst}'s log q - positive log q changes between draws (by {float(spread.max()):.2e}): "
                "log q must be the item's proposal under the model, the same whatever else the batch holds"
            )
        gaps[items] = gap
        counts.index_add_(0, items, torch.ones(items.numel(), dtype=torch.float64))
        drawn += items.numel()
        if closed is None and sampler_class.has_closed_form():
            catalogue = torch.arange(dataset.n_items)[None, :]
            closed = sampler.log_probability(
                Batch(batch.users[:1], batch.positives[:1], batch.query[:1], item_table), catalogue
            )
    seen = counts > 0
    law = torch.zeros_like(counts)
    law[seen] = torch.exp(gaps[seen] - gaps[seen].max())
    expected = law / law.sum() * counts.sum()
    try:
        assert_counts_follow(counts.numpy(), law.numpy())
    except AssertionError as error:
        _fail(
            f"{where}: the draws do not follow exp(log q) ({error}; {drawn:,} draws); worst: {_worst(counts, expected)}"
        )
    if closed is not None and negatives.candidate_weights() is None:
        law = closed[0].double().exp()
        law[positive] = 0.0
        expected = law / law.sum() * counts.sum()
        try:
            assert_counts_follow(counts.numpy(), law.numpy())
        except AssertionError as error:
            _fail(f"{where}: the draws do not follow exp(log_probability) ({error}); worst: {_worst(counts, expected)}")


def check_sampler(
    name: str,
    args: dict | None = None,
    log_q_gap: LogQGap | None = None,
    *,
    loss: str = "softmax",
    n_negatives: int = 8,
    workdir: Path | None = None,
    adaptive: bool | None = None,
    run: dict | None = None,
) -> None:
    """Every sampler check, then two epochs of MF with `loss` over its draws: training lowers the loss, or, for an
    adaptive sampler (`adaptive`, default the class's: its proposal moves with the model, so its loss is not
    comparable across epochs), the full-softmax loss on held-out pairs, a fixed quantity (recx.testing.runs). `run`:
    other settings of the training run (e.g. {"model_args": {"scoring": "dot"}})."""
    check_sampler_draws(name, args, n_negatives)
    check_sampler_log_q(name, args, log_q_gap, n_negatives)
    check_sampler_law(name, args)
    moving = SAMPLERS.get(name).adaptive if adaptive is None else adaptive
    settings = {"loss": loss, "sampler": name, "n_negatives": n_negatives, "sampler_args": args or {}}
    check_trains({**settings, **(run or {})}, workdir, adaptive=moving)
