"""Evaluation metrics batched across (metric, K, stratum) (issue 58 §3): every per-user metric at every cut-off and
in every stratum from one table of per-place terms (`TopK.cutoff_sums`), the items' counts at every cut-off in one
`index_add_`, the catalogue-level metrics at every cut-off in one call, one average over all the per-user values.
Each is compared bit for bit with the per-cut-off computation it replaces (the formulas below are recx's metrics as
they were computed one cut-off and one stratum at a time)."""

from __future__ import annotations

import math

import pytest
import torch

from recx.eval.catalogue import cutoff_counts, exposure_counts
from recx.eval.evaluator import averaged
from recx.eval.metrics.registry import (
    METRICS,
    Metric,
    TopK,
    catalogue_metrics,
    cutoff_metrics,
    per_user_metrics,
    per_user_table,
)
from recx.eval.strata import STRATA
from recx.testing.metrics import random_catalogue, random_lists


def per_place(top: TopK, per_item: torch.Tensor, k: int) -> torch.Tensor:
    values = per_item.to(torch.float64)[top.items[:, :k].clamp_min(0)]
    return torch.where(top.listed(k), values, 0.0)


# the per-cut-off formulas the metrics had before they were batched, one cut-off and one TopK (stratum) at a time
BEFORE = {
    "ndcg": lambda top, k: top.gains[:, :k].sum(1) / top.ideal_dcg(k),
    "recall": lambda top, k: top.n_hits(k) / top.n_relevant.to(torch.float64),
    "precision": lambda top, k: top.n_hits(k) / k,
    "hitrate": lambda top, k: (top.n_hits(k) > 0).to(torch.float64),
    "mrr": lambda top, k: torch.where(top.first_hit < k, 1.0 / (top.first_hit.to(torch.float64) + 1), 0.0),
    "aplt": lambda top, k: per_place(top, top.catalogue.tail, k).sum(1) / top.list_lengths(k).clamp_min(1),
    "arp": lambda top, k: per_place(top, top.catalogue.popularity, k).sum(1) / top.list_lengths(k).clamp_min(1),
    "epc": lambda top, k: (
        (
            top.hits[:, :k].to(torch.float64)
            * per_place(top, 1.0 - top.catalogue.popularity / max(top.catalogue.n_users, 1), k)
            * top.discounts[:k]
        ).sum(1)
        / (top.listed(k).to(torch.float64) * top.discounts[:k]).sum(1).clamp_min(1e-300)
    ),
}


def lists(seed: int, users: int = 300, depth: int = 50, n_items: int = 120):
    """random_lists at a depth where the sums are vectorised (their order then depends on the row length), a few
    users without a list."""
    items, hits, n_relevant, _ = random_lists(seed, users, depth, n_items)
    items[users // 2 :: 17], hits[users // 2 :: 17] = -1, False
    catalogue = random_catalogue(n_items)
    strata = torch.where(items >= 0, catalogue.strata[items.clamp_min(0)], -1)
    return items, hits, n_relevant, strata, catalogue


def test_the_per_user_metrics_are_computed_as_before_bit_for_bit():
    assert set(BEFORE) == {name for name, _ in cutoff_metrics()}  # recx's per-user metrics, every one compared
    for seed in range(3):
        items, hits, n_relevant, strata, catalogue = lists(seed)
        ks = list(range(1, 51)) if seed == 0 else [50, 10, 20, 3, 20]
        got = per_user_metrics(hits, n_relevant, ks, strata, items, catalogue)
        top = TopK(hits, n_relevant, items, catalogue)
        for name, formula in BEFORE.items():
            parts = [("all", top)] + [(s, top.within(strata == i)) for i, s in enumerate(STRATA)]
            for k in ks:
                for stratum, part in parts if METRICS.get(name).additive else parts[:1]:
                    expected = formula(part, k)
                    if METRICS.get(name).needs_list:  # no value without a list
                        expected = torch.where(top.listed(k).any(1), expected, torch.nan)
                    assert torch.equal(got[(name, k, stratum)].nan_to_num(7.0), expected.nan_to_num(7.0)), (name, k)


def test_the_keys_keep_their_order_and_metrics_needing_what_is_not_given_are_left_out():
    items, hits, n_relevant, strata, catalogue = lists(4, users=20, depth=12)
    ks = [5, 12]
    full = list(per_user_metrics(hits, n_relevant, ks, strata, items, catalogue))
    expected = [
        (name, k, part)
        for name, metric in cutoff_metrics()
        for k in ks
        for part in (("all", *STRATA) if metric.additive else ("all",))
    ]
    assert full == expected
    bare = per_user_metrics(hits, n_relevant, ks)
    assert {name for name, _, _ in bare} == {"ndcg", "recall", "precision", "hitrate", "mrr"}
    assert {part for _, _, part in bare} == {"all"}  # no strata given
    keys, values = per_user_table(hits, n_relevant, ks, strata, items)  # item ids without the catalogue
    assert {name for name, _, _ in keys} == {"ndcg", "recall", "precision", "hitrate", "mrr"}
    assert values.shape == (len(keys), 20) and values.dtype == torch.float64


def test_the_counts_at_every_cutoff_are_each_cutoffs_counts():
    items, *_ = lists(5, users=40, depth=30, n_items=60)
    for ks in ([5, 10, 30], [30, 5, 10, 10], [7], [1, 30], [10, 40]):  # sorted, not, repeated, one, past the lists
        counts = cutoff_counts(items, ks, 60)
        assert counts.shape == (len(ks), 60)
        for row, k in zip(counts, ks, strict=True):
            assert torch.equal(row, exposure_counts(items, k, 60)), (ks, k)


def test_the_catalogue_metrics_at_every_cutoff_in_one_call_are_each_cutoffs(monkeypatch):
    items, *_ = lists(6, users=80, depth=30, n_items=60)
    catalogue = random_catalogue(60)
    weights = torch.randint(0, 3, (4, 80), generator=torch.Generator().manual_seed(1)).to(torch.float64)
    ks = [10, 1, 30]
    for weighting, layout in ((None, "rows"), (weights, "as the product gives them"), (weights, "rows")):
        counts = {k: exposure_counts(items, k, 60, weighting) for k in ks}
        if layout == "rows":  # the bootstrap's product gives them column by column: then each cut-off alone
            counts = {k: value.contiguous() for k, value in counts.items()}
        lists_ = torch.tensor(80.0, dtype=torch.float64) if weighting is None else weighting.sum(1)
        together = catalogue_metrics(counts, lists_, catalogue)
        for _, metric in cutoff_metrics("catalogue"):
            monkeypatch.setattr(type(metric), "counts_only", False)
        alone = catalogue_metrics(counts, lists_, catalogue)
        monkeypatch.undo()
        assert list(together) == list(alone)  # (k, metric, key) in the same order
        for key, value in alone.items():
            assert torch.equal(together[key].reshape(-1), value.reshape(-1)), key


def test_a_metric_with_per_user_alone_keeps_the_generic_path(isolated_plugins):
    from recx import register_metric

    @register_metric("hits_squared")
    class HitsSquared(Metric):
        additive = True  # (not additive in truth: only the path is tested)

        def per_user(self, top: TopK, k: int) -> torch.Tensor:
            return top.n_hits(k) ** 2

    items, hits, n_relevant, strata, catalogue = lists(7, users=30, depth=20)
    got = per_user_metrics(hits, n_relevant, [4, 20], strata, items, catalogue)
    top = TopK(hits, n_relevant, items, catalogue)
    for k in (4, 20):
        assert torch.equal(got[("hits_squared", k, "all")], top.n_hits(k) ** 2)
        for index, stratum in enumerate(STRATA):
            assert torch.equal(got[("hits_squared", k, stratum)], top.within(strata == index).n_hits(k) ** 2)


def test_a_metric_implementing_per_user_at_is_accepted_and_a_wrong_shape_is_refused(isolated_plugins):
    from recx import register_metric

    @register_metric("first_place")
    class FirstPlace(Metric):
        def per_user_at(self, top: TopK, ks):
            return top.hits[:, :1].to(torch.float64).T.expand(len(ks), -1)[:, None, :]

    @register_metric("flat")
    class Flat(Metric):
        def per_user_at(self, top: TopK, ks):
            return torch.zeros(top.hits.shape[0], dtype=torch.float64)

    items, hits, n_relevant, strata, catalogue = lists(8, users=10, depth=5)
    assert torch.equal(FirstPlace().per_user(TopK(hits, n_relevant), 3), hits[:, 0].to(torch.float64))
    with pytest.raises(ValueError, match=r"metric 'flat': per_user_at gave \(10,\), expected \(2, 1, 10\)"):
        per_user_metrics(hits, n_relevant, [2, 5], strata, items, catalogue)


def test_a_metric_implementing_neither_is_refused(isolated_plugins):
    from recx import register_metric
    from recx.core.errors import RecxError

    with pytest.raises(RecxError, match=r"a user-level metric must implement per_user \(or per_user_at\)"):

        @register_metric("nothing")
        class Nothing(Metric):
            pass


def test_the_averages_of_needs_list_metrics_run_over_the_users_with_a_value():
    values = torch.rand(4, 1_000, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    values[1:3, ::3] = torch.nan
    values[3] = torch.nan
    keys = [("ndcg", 10, "all"), ("arp", 10, "all"), ("epc", 10, "all"), ("aplt", 10, "all")]
    got = averaged(keys, values, {("coverage", 10, "all"): torch.tensor(0.5, dtype=torch.float64)})
    assert got[("ndcg", 10, "all")] == float(values[0].clone().mean())
    assert got[("arp", 10, "all")] == float(values[1].clone().nanmean())  # Tensor.nanmean's value, bit for bit
    assert got[("epc", 10, "all")] == float(values[2].clone().nanmean())
    assert ("aplt", 10, "all") not in got  # no user with a value: no average
    assert got[("coverage", 10, "all")] == 0.5


def test_the_averages_do_not_depend_on_the_thread_count():
    """One reduction over [keys, users] sums each row on its own: above 32,768 users torch's mean of a single row is
    split among the threads (the per-key means before issue 58 §3 moved in the last bits with the thread count)."""
    values = torch.rand(3, 70_001, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    keys = [("m", 1, "all"), ("m", 2, "all"), ("m", 3, "all")]
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one = averaged(keys, values, {})
        alone = [float(row.clone().mean()) for row in values]
        torch.set_num_threads(2)
        two = averaged(keys, values, {})
    finally:
        torch.set_num_threads(before)
    assert one == two
    assert list(one.values()) == alone  # one thread: each key's own mean, bit for bit
    assert all(math.isfinite(value) for value in one.values())
