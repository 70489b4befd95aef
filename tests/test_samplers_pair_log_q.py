"""`pair_log_probability` (a query's many items as (row, item) pairs, FastVAE's positives) equals
`log_probability` read at each pair, for every sampler with a closed-form proposal; the overrides compute the
per-query terms once per row, the exact MIDX chunk by chunk. It also carries the normaliser `sample` gives a
query's candidates: FastVAE reads its positives' log q through it and its negatives' from `sample`, both from one
`sample_with_pair_log_probability`, which gives the two calls' numbers to the bit."""

from __future__ import annotations

from dataclasses import fields

import pytest
import torch
from sampler_helpers import make_sampler, random_batch, random_dataset
from test_contract import SAMPLER_CASES

import recx.samplers.midx as midx
from recx.core.errors import RecxError
from recx.samplers.base import Sampler
from recx.samplers.registry import SAMPLERS


def _has_closed_form(name: str) -> bool:
    """A closed-form proposal: the class overrides the base's `log_probability` (which raises) or
    `pair_log_probability` (which reads it)."""
    sampler_class = SAMPLERS.get(name)
    return (
        sampler_class.log_probability is not Sampler.log_probability
        or sampler_class.pair_log_probability is not Sampler.pair_log_probability
    )


# Settings beyond the contract's arguments, per name (this file's hand list had them): popularity's default variant
# (count) and the kernel's default alpha (100).
EXTRA_SETTINGS: dict[str, list[dict]] = {
    "popularity": [{}, {"exclude_train": True}],
    "kernel": [{"leaf_size": 4}],
}


def _with_log_q() -> list[tuple[str, dict]]:
    """Every registered sampler with a closed form, with its contract arguments (test_contract's SAMPLER_CASES),
    again with `exclude_train` where it offers it, and with its EXTRA_SETTINGS."""
    cases: list[tuple[str, dict]] = []
    for name in sorted(SAMPLERS.names()):
        if not _has_closed_form(name):
            continue
        args = SAMPLER_CASES[name].args
        settings = [dict(args)]
        if "exclude_train" in {f.name for f in fields(SAMPLERS.get(name).Args)}:
            settings.append({**args, "exclude_train": True})
        for setting in settings + EXTRA_SETTINGS.get(name, []):
            if (name, setting) not in cases:
                cases.append((name, setting))
    return cases


SAMPLERS_WITH_LOG_Q = _with_log_q()
IDS = [f"{name}-" + (",".join(f"{k}={v}" for k, v in args.items()) or "defaults") for name, args in SAMPLERS_WITH_LOG_Q]


def test_the_closed_form_samplers_are_found_in_the_registry():
    """The list is read from the registry: the known closed forms are in, and the extra settings name samplers that
    are in (the reading itself is checked sampler by sampler below)."""
    names = {name for name, _ in SAMPLERS_WITH_LOG_Q}
    assert {"uniform", "popularity", "midx", "midx_uni", "midx_pop", "kernel"} <= names
    assert set(EXTRA_SETTINGS) <= names


@pytest.mark.parametrize("name", sorted(SAMPLERS.names()))
def test_a_sampler_left_out_has_no_closed_form(name):
    """A sampler left out of SAMPLERS_WITH_LOG_Q has no closed form (its `log_probability` raises); one taken in
    gives each query a normalised law over the items."""
    dataset = random_dataset(20, 40, seed=2)
    batch = random_batch(dataset, batch_size=7, dim=6, seed=3)
    sampler = make_sampler(name, dataset, 5, **SAMPLER_CASES[name].args)
    every_item = torch.arange(40)[None, :].expand(7, -1)
    if name in {taken for taken, _ in SAMPLERS_WITH_LOG_Q}:
        log_q = sampler.log_probability(batch, every_item).double()
        assert not torch.isnan(log_q).any() and not torch.isposinf(log_q).any()
        torch.testing.assert_close(
            torch.logsumexp(log_q, dim=1), torch.zeros(7, dtype=torch.float64), rtol=0, atol=1e-5
        )
    else:
        with pytest.raises(RecxError, match="no closed-form proposal"):
            sampler.log_probability(batch, every_item)


@pytest.mark.parametrize("name, args", SAMPLERS_WITH_LOG_Q, ids=IDS)
def test_pairs_read_each_rows_log_probability(name, args, monkeypatch):
    monkeypatch.setattr(midx, "EXACT_CHUNK_ENTRIES", 3 * 40)  # the exact sampler then proposes 3 rows per chunk
    dataset = random_dataset(20, 40, seed=2)
    batch = random_batch(dataset, batch_size=7, dim=6, seed=3)
    batch = type(batch)(batch.users, batch.positives, batch.query.double(), batch.item_table.double())
    sampler = make_sampler(name, dataset, 5, **args)
    generator = torch.Generator().manual_seed(4)
    rows = torch.randint(0, 7, (60,), generator=generator)
    items = torch.randint(0, 40, (60,), generator=generator)
    every_item = torch.arange(40)[None, :].expand(7, -1)
    expected = sampler.log_probability(batch, every_item)[rows, items]
    pairs = sampler.pair_log_probability(batch, rows, items)
    assert torch.allclose(pairs, expected, atol=1e-12, rtol=0)
    if name not in ("uniform", "popularity"):  # the proposal depends on the query: each pair reads its own row's
        assert not torch.allclose(pairs, sampler.log_probability(batch, every_item)[rows.flip(0), items], atol=1e-6)


@pytest.mark.parametrize("name, args", SAMPLERS_WITH_LOG_Q, ids=IDS)
def test_pairs_share_the_normaliser_of_the_drawn_candidates(name, args):
    """A user's positives (pairs) get the log q `sample` gives its positive, with the candidates' normaliser.
    Catches uniform with `exclude_train` reading -log n for FastVAE's positives while its negatives carried
    -log(n - |I_u|) (a per-user margin log(n / (n - |I_u|)) in the sampled softmax)."""
    dataset = random_dataset(20, 40, density=0.4, seed=2)
    batch = random_batch(dataset, batch_size=7, dim=6, seed=3)
    batch = type(batch)(batch.users, batch.positives, batch.query.double(), batch.item_table.double())
    sampler = make_sampler(name, dataset, 5, **args)
    drawn = sampler.sample(batch)
    pairs = sampler.pair_log_probability(batch, torch.arange(7), batch.positives)
    assert torch.allclose(pairs.double(), drawn.positive_log_q.double(), atol=1e-6, rtol=0)


@pytest.mark.parametrize("chunk_entries", [None, 3 * 40], ids=["one-chunk", "chunks-of-3-rows"])
@pytest.mark.parametrize("name, args", SAMPLERS_WITH_LOG_Q, ids=IDS)
def test_sampling_with_the_pairs_log_q_is_the_two_calls_bit_for_bit(name, args, chunk_entries, monkeypatch):
    """`sample_with_pair_log_probability` (FastVAE's step) gives the draws, log q and pairs' log q of `sample` then
    `pair_log_probability` from the same generator state, to the bit: MIDX's override (one proposal, one pass of
    log q) and, with the exact sampler's queries in several chunks, the two calls it falls back to."""
    if chunk_entries is not None:
        monkeypatch.setattr(midx, "EXACT_CHUNK_ENTRIES", chunk_entries)
    dataset = random_dataset(20, 40, density=0.4, seed=2)
    batch = random_batch(dataset, batch_size=7, dim=6, seed=3)
    generator = torch.Generator().manual_seed(4)
    rows = torch.randint(0, 7, (60,), generator=generator)
    items = torch.randint(0, 40, (60,), generator=generator)
    separate = make_sampler(name, dataset, 5, **args)
    expected = separate.sample(batch), separate.pair_log_probability(batch, rows, items)
    negatives, pairs = make_sampler(name, dataset, 5, **args).sample_with_pair_log_probability(batch, rows, items)
    assert torch.equal(negatives.items, expected[0].items)
    assert torch.equal(negatives.log_q, expected[0].log_q)
    assert torch.equal(negatives.positive_log_q, expected[0].positive_log_q)
    assert torch.equal(pairs, expected[1])


def test_a_midx_subclass_that_replaces_sample_is_sampled_through_it():
    """A subclass (a plugin's) that replaces `sample` gets its own draws in FastVAE's step, not MIDX's fused ones."""

    class Replaced(midx.MidxPopularity):
        def sample(self, batch):
            negatives = super().sample(batch)
            negatives.items = negatives.items.flip(1)
            return negatives

    dataset = random_dataset(20, 40, density=0.4, seed=2)
    batch = random_batch(dataset, batch_size=7, dim=6, seed=3)
    sampler = make_sampler("midx_pop", dataset, 5, **SAMPLER_CASES["midx_pop"].args)
    sampler.__class__ = Replaced
    negatives, _ = sampler.sample_with_pair_log_probability(batch, torch.arange(7), batch.positives)
    expected = make_sampler("midx_pop", dataset, 5, **SAMPLER_CASES["midx_pop"].args).sample(batch)
    assert torch.equal(negatives.items, expected.items.flip(1))
