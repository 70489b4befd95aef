"""Beyond-accuracy metrics (issue 45, section 1): ARP, APLT, EPC (per user), item coverage, Gini, Shannon entropy and
the exposure share per stratum (catalogue-level), each against a hand-worked example and an independent numpy
implementation written from RecBole's / Elliot's definitions (per-user Python loops, Counter, sorted counts), on
random lists (short lists included) scored through the evaluator, the lists path and the bootstrap. The per-user
metrics of a list's items (ARP, APLT, EPC) average over the users with a list: a half-covered case pins it."""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pytest
import torch

from recx.data.csr import CSR
from recx.eval.bootstrap import catalogue_replicates, interval, paired_p, resample_weights
from recx.eval.catalogue import Catalogue, Exposure, catalogue_of, exposure_counts
from recx.eval.evaluator import evaluate, score_lists
from recx.eval.metrics.registry import average, catalogue_metrics, listed_users, per_user_metrics
from recx.eval.strata import popularity_strata
from recx.testing import random_dataset

STRATA = ("popular", "neutral", "unpopular")


# --- the independent implementation: one user, one list at a time (-1 ends a list) --------------------------------


def np_coverage(lists, n_items):  # RecBole ItemCoverage
    return len({i for row in lists for i in row if i >= 0}) / n_items


def np_gini(lists, n_items):  # RecBole GiniIndex: sorted counts, the items never recommended at the bottom
    count = Counter(i for row in lists for i in row if i >= 0)
    ordered = np.array(sorted(count.values()), dtype=np.float64)
    index = np.arange(n_items - ordered.size + 1, n_items + 1)
    return float(np.sum((2 * index - n_items - 1) * ordered) / ordered.sum() / n_items)


def np_entropy(lists):  # -Σ p log2 p, p the share of all recommendations (RecBole's, in bits, without its division)
    count = Counter(i for row in lists for i in row if i >= 0)
    total = sum(count.values())
    return -sum(c / total * math.log2(c / total) for c in count.values())


def elliot_entropy(lists):  # Elliot SEntropy: Σ_i w_i (-log2 p_i) / |U|, w_i = Σ_u [i ∈ L_u] / |L_u|
    rows = [[i for i in row if i >= 0] for row in lists]
    count = Counter(i for row in rows for i in row)
    total = sum(count.values())
    weights = Counter()
    for row in rows:
        for i in row:
            weights[i] += 1 / len(row)
    return sum(w * -math.log2(count[i] / total) for i, w in weights.items()) / len(rows)


def np_exposure(lists, stratum):
    count = Counter(int(stratum[i]) for row in lists for i in row if i >= 0)
    total = sum(count.values())
    return {name: count[index] / total for index, name in enumerate(STRATA)}


# The per-user metrics of a list's items: a list's value over the items it holds, the mean over the users with a list
# (a user without one recommends nothing: no value, as Elliot and RecBole, which see only the users they have lists of).


def np_arp(lists, popularity):  # Elliot ARP / RecBole AveragePopularity
    values = []
    for row in lists:
        row = [i for i in row if i >= 0]
        if row:
            values.append(sum(popularity[i] for i in row) / len(row))
    return float(np.mean(values))


def np_aplt(lists, tail):  # Elliot APLT with the long tail given
    values = []
    for row in lists:
        row = [i for i in row if i >= 0]
        if row:
            values.append(len(set(row) & tail) / len(row))
    return float(np.mean(values))


def np_epc(lists, relevant, popularity, n_users):  # Elliot EPC: rel x log discount x (1 - φ/|U|), over Σ discounts
    values = []
    for row, seen in zip(lists, relevant, strict=True):
        found = norm = 0.0
        for rank, item in enumerate(i for i in row if i >= 0):
            discount = 1 / math.log(rank + 2) * math.log(2)
            found += (item in seen) * discount * (1 - popularity[item] / n_users)
            norm += discount
        if norm > 0:
            values.append(found / norm)
    return float(np.mean(values))


def np_all(lists, relevant, popularity, n_train_users, k):
    """Every beyond-accuracy value of lists cut at k, by the functions above."""
    lists = [list(row[:k]) for row in lists]
    n_items = len(popularity)
    stratum = popularity_strata(torch.as_tensor(popularity)).numpy()
    tail = {i for i in range(n_items) if stratum[i] == 2}
    out = {
        ("coverage", k, "all"): np_coverage(lists, n_items),
        ("gini", k, "all"): np_gini(lists, n_items),
        ("entropy", k, "all"): np_entropy(lists),
        ("arp", k, "all"): np_arp(lists, popularity),
        ("aplt", k, "all"): np_aplt(lists, tail),
        ("epc", k, "all"): np_epc(lists, relevant, popularity, n_train_users),
    }
    out.update({("exposure", k, name): v for name, v in np_exposure(lists, stratum).items()})
    return out


# --- hand-worked ---------------------------------------------------------------------------------------------------

POPULARITY = [50.0, 30, 20, 10] + [5.0] * 4 + [1.0] * 12  # 20 items: popular {0}, neutral {1, 2, 3}, rest unpopular
LISTS = [[0, 4], [0, 1], [5, 6]]
HELD_OUT = [{4}, {0, 2}, {6}]


def recx_values(lists, relevant, popularity, n_train_users, ks, held_out_share=None):
    items = torch.tensor(lists)
    hits = torch.tensor([[i in seen for i in row] for row, seen in zip(lists, relevant, strict=True)])
    popularity = torch.tensor(popularity, dtype=torch.float64)
    catalogue = Catalogue(popularity, popularity_strata(popularity), n_train_users, held_out_share)
    n_relevant = torch.tensor([len(seen) for seen in relevant])
    per_user = per_user_metrics(hits, n_relevant, ks, None, items, catalogue)
    values = {key: float(average(key, v)) for key, v in per_user.items()}
    counts = {k: exposure_counts(items, k, len(popularity)) for k in ks}
    lists = listed_users(items).sum().to(torch.float64)
    whole = catalogue_metrics(counts, lists, catalogue)
    return values | {key: float(v[0]) for key, v in whole.items()}


def test_hand_worked_values():
    got = recx_values(LISTS, HELD_OUT, POPULARITY, 50, [1, 2])
    d1 = 1 / math.log2(3)
    expected = {
        # five items of 20 recommended at K=2; items 0 and 5 at K=1
        ("coverage", 2, "all"): 5 / 20,
        ("coverage", 1, "all"): 2 / 20,
        # counts ascending: 15 zeros, 1, 1, 1, 1, 2 -> Σ (2j - 21) c_(j) = 11 + 13 + 15 + 17 + 2 * 19 = 94, over 20 * 6
        ("gini", 2, "all"): 94 / 120,
        # p = 2/6, 1/6 x 4
        ("entropy", 2, "all"): -(1 / 3) * math.log2(1 / 3) - 4 * (1 / 6) * math.log2(1 / 6),
        ("exposure", 2, "popular"): 2 / 6,
        ("exposure", 2, "neutral"): 1 / 6,
        ("exposure", 2, "unpopular"): 3 / 6,
        # (50 + 5) / 2, (50 + 30) / 2, (5 + 5) / 2
        ("arp", 2, "all"): (27.5 + 40 + 5) / 3,
        ("arp", 1, "all"): (50 + 50 + 5) / 3,
        ("aplt", 2, "all"): (0.5 + 0 + 1) / 3,
        # users 0 and 2 hit an item of popularity 5 at rank 2: 0.9 d1 / (1 + d1); user 1 hits item 0 (1 - 50/50 = 0)
        ("epc", 2, "all"): 2 * 0.9 * d1 / (1 + d1) / 3,
        ("epc", 1, "all"): 0.0,
    }
    for key, value in expected.items():
        assert got[key] == pytest.approx(value, abs=1e-12), key
    assert got[("gini", 2, "all")] == pytest.approx(0.783333333333, abs=1e-9)
    assert got[("entropy", 2, "all")] == pytest.approx(2.251629167387, abs=1e-9)
    assert got[("epc", 2, "all")] == pytest.approx(0.232112, abs=1e-6)
    for key, value in np_all(LISTS, HELD_OUT, POPULARITY, 50, 2).items():  # the numpy implementation agrees
        assert got[key] == pytest.approx(value, abs=1e-12), key
    assert got[("entropy", 2, "all")] == pytest.approx(elliot_entropy(LISTS), abs=1e-12)  # full lists: Elliot's


def test_the_held_out_share_is_the_stratum_share_of_the_split():
    train = CSR.from_pairs(torch.tensor([0, 0, 1]), torch.tensor([0, 1, 0]), 3, 20)
    test = CSR.from_pairs(torch.tensor([0, 1, 1, 2]), torch.tensor([4, 0, 2, 6]), 3, 20)
    strata = popularity_strata(torch.tensor(POPULARITY))
    catalogue = catalogue_of(train, test, strata)
    assert catalogue.held_out_share.tolist() == [0.25, 0.25, 0.5] and catalogue.n_users == 2


# --- random lists --------------------------------------------------------------------------------------------------


def random_case(seed, n_users=300, n_items=80, depth=20):
    rng = np.random.default_rng(seed)
    popularity = rng.integers(0, 60, n_items).astype(np.float64)
    lists = [
        list(rng.permutation(n_items)[: rng.integers(depth // 2, depth + 1) if u % 3 == 0 else depth])
        for u in range(n_users)
    ]
    lists = [row + [-1] * (depth - len(row)) for row in lists]
    relevant = [set(rng.choice(n_items, rng.integers(1, 6), replace=False).tolist()) for _ in range(n_users)]
    return lists, relevant, popularity.tolist()


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_random_lists_equal_the_numpy_implementation(seed):
    lists, relevant, popularity = random_case(seed)
    got = recx_values(lists, relevant, popularity, 250, [5, 20])
    for k in (5, 20):
        for key, value in np_all(lists, relevant, popularity, 250, k).items():
            assert got[key] == pytest.approx(value, rel=1e-12, abs=1e-12), (seed, key)


def test_the_evaluator_and_the_lists_path_equal_the_numpy_implementation(tiny):
    """A model's full-ranking lists (train and valid items excluded) scored by the evaluator in groups, and the same
    lists given to the lists path, equal the numpy implementation of each metric on those lists."""
    from recx.config.run_config import resolve
    from recx.eval import evaluator
    from recx.training.build import build_model

    model = build_model(resolve({"dataset": "tiny", "dim": 8, "device": "cpu"}), tiny, torch.device("cpu"))
    ks = [5, 10]
    result = evaluate(model, tiny, "test", ks, batch_size=37, keep_topk=True)
    users, topk = result.listed()
    test = [set(tiny.test.indices[tiny.test.indptr[u] : tiny.test.indptr[u + 1]].tolist()) for u in users.tolist()]
    popularity = tiny.item_popularity.double().tolist()
    n_train_users = int((tiny.train.row_lengths() > 0).sum())
    for k in ks:
        for key, value in np_all(topk.tolist(), test, popularity, n_train_users, k).items():
            assert result.values[key] == pytest.approx(value, rel=1e-12, abs=1e-12), key
    share = np.bincount(popularity_strata(tiny.item_popularity).numpy()[tiny.test.indices.numpy()], minlength=3)
    for index, name in enumerate(STRATA):
        for k in ks:
            assert result.values[("heldout_share", k, name)] == pytest.approx(share[index] / share.sum(), abs=1e-15)
    again = score_lists(tiny, "test", users, topk, ks)
    assert again.values == result.values  # the lists path: the same numbers, bit for bit
    old_rows = evaluator.METRIC_ROWS
    try:
        evaluator.METRIC_ROWS = 1
        assert evaluate(model, tiny, "test", ks, batch_size=7).values == result.values  # groups of one batch
    finally:
        evaluator.METRIC_ROWS = old_rows


def test_a_user_without_a_list_has_no_value_and_a_short_list_its_own_items():
    """Hand-worked: the three lists above plus a user without a list and one with a single item at K = 2."""
    lists, held_out = LISTS + [[-1, -1], [1, -1]], HELD_OUT + [{3}, {1}]
    got = recx_values(lists, held_out, POPULARITY, 50, [2])
    assert got[("arp", 2, "all")] == pytest.approx((27.5 + 40 + 5 + 30) / 4, abs=1e-12)  # not / 5
    assert got[("aplt", 2, "all")] == pytest.approx((0.5 + 0 + 1 + 0) / 4, abs=1e-12)
    d1 = 1 / math.log2(3)
    assert got[("epc", 2, "all")] == pytest.approx((2 * 0.9 * d1 / (1 + d1) + 0.4) / 4, abs=1e-12)
    assert got[("coverage", 2, "all")] == pytest.approx(5 / 20, abs=1e-12)  # the same five items
    # NDCG counts the user without a list as a miss: user 1 (1 + 0) / (1 + d1), the others d1, d1 / (1 + d1), 0, 1
    ndcg = [d1, 1 / (1 + d1), d1, 0.0, 1.0]
    assert got[("ndcg", 2, "all")] == pytest.approx(sum(ndcg) / 5, abs=1e-12)


def test_a_half_covered_case_averages_over_the_users_with_a_list(tiny):
    """Lists for half the evaluated users (a quarter of them short), none for the others, through the lists path:
    ARP, APLT and EPC are the numpy means over the users with a list and equal those users' lists scored alone; the
    catalogue-level metrics are numpy's over those lists; NDCG and Recall count a user without a list as a miss; the
    per-user file holds a row per user with a list for ARP and per evaluated user for NDCG."""
    from recx.runs.per_user import per_user_table

    users = torch.nonzero(tiny.test.row_lengths() > 0).flatten()
    rng = np.random.default_rng(5)
    depth, ks = 10, [5, 10]
    items = torch.full((users.numel(), depth), -1, dtype=torch.long)
    for row in range(0, users.numel(), 2):
        length = depth if row % 4 == 0 else int(rng.integers(1, depth))
        items[row, :length] = torch.from_numpy(rng.permutation(tiny.n_items)[:length])
    listed = (items >= 0).any(1)
    assert 0 < int(listed.sum()) < users.numel() and ((items >= 0).sum(1)[listed] < depth).any()
    got = score_lists(tiny, "test", users, items, ks)
    alone = score_lists(tiny, "test", users[listed], items[listed], ks)
    held_out = [set(tiny.test.indices[tiny.test.indptr[u] : tiny.test.indptr[u + 1]].tolist()) for u in users.tolist()]
    popularity = tiny.item_popularity.double().tolist()
    n_train_users = int((tiny.train.row_lengths() > 0).sum())
    share = int(listed.sum()) / users.numel()
    for k in ks:
        for key, value in np_all(items.tolist(), held_out, popularity, n_train_users, k).items():
            assert got.values[key] == pytest.approx(value, rel=1e-12, abs=1e-12), key
        for metric in ("arp", "aplt", "epc", "coverage", "gini", "entropy"):
            assert got.values[(metric, k, "all")] == pytest.approx(alone.values[(metric, k, "all")], abs=1e-12)
        for metric in ("ndcg", "recall"):
            diluted = alone.values[(metric, k, "all")] * share
            assert got.values[(metric, k, "all")] == pytest.approx(diluted, abs=1e-12), metric
    assert got.n_listed == int(listed.sum()) and got.n_users == users.numel()
    table = per_user_table(got).to_pandas()
    overall = table[(table.k == 10) & (table.stratum == "all")]
    arp, ndcg = overall[overall.metric == "arp"], overall[overall.metric == "ndcg"]
    assert len(arp) == got.n_listed and len(ndcg) == users.numel()
    assert arp.value.mean() == pytest.approx(got.values[("arp", 10, "all")], abs=1e-12)


# --- the bootstrap -------------------------------------------------------------------------------------------------


def test_the_resamples_do_not_depend_on_the_chunking():
    whole = resample_weights(50, 0, 12, seed=3)
    assert np.array_equal(np.concatenate([resample_weights(50, 0, 5, 3), resample_weights(50, 5, 7, 3)]), whole)
    assert (whole.sum(1) == 50).all() and not np.array_equal(whole[0], whole[1])


def test_each_replicate_is_the_metric_of_the_users_drawn():
    """Replicate r of every catalogue-level metric equals the numpy implementation on the lists of the users the
    resample drew (each as often as drawn)."""
    lists, relevant, popularity = random_case(4, n_users=40)
    catalogue = Catalogue(
        torch.tensor(popularity, dtype=torch.float64), popularity_strata(torch.tensor(popularity)), 40
    )
    found = catalogue_replicates(torch.tensor(lists), catalogue, [5, 20], resamples=6, seed=2)
    weights = resample_weights(40, 0, 6, seed=2)
    for r in range(6):
        drawn = [row for row, times in zip(lists, weights[r], strict=True) for _ in range(int(times))]
        for k in (5, 20):
            expected = np_all(drawn, [set()] * len(drawn), popularity, 40, k)
            for key in [key for key in expected if key[0] in ("coverage", "gini", "entropy", "exposure")]:
                assert found[key][r] == pytest.approx(expected[key], rel=1e-12, abs=1e-12), (r, key)


def test_the_interval_and_the_paired_test():
    rng = np.random.default_rng(0)
    replicates = 0.3 + 0.01 * rng.standard_normal(1000)
    low, high = interval(0.5, replicates)
    assert low < 0.5 < high and high - low == pytest.approx(4 * 0.01, rel=0.1)  # centred on the estimate
    assert paired_p(0.0, replicates - replicates) == 1.0
    assert paired_p(0.05, 0.01 * rng.standard_normal(1000)) == pytest.approx(1 / 1001)
    assert 0.2 < paired_p(0.01, 0.01 * rng.standard_normal(1000)) < 0.45


def test_exposure_counts_are_exact_and_weighted():
    items = torch.tensor([[0, 1, -1], [1, 2, 3]])
    assert exposure_counts(items, 2, 5).tolist() == [1, 2, 1, 0, 0]
    weighted = exposure_counts(items, 3, 5, torch.tensor([[2.0, 0.0], [1.0, 3.0]]))
    assert weighted.tolist() == [[2, 2, 0, 0, 0], [1, 4, 3, 3, 0]]
    catalogue = Catalogue(torch.ones(5, dtype=torch.float64), torch.tensor([0, 1, 2, 2, 2]), 2)
    empty = Exposure(torch.zeros(1, 5, dtype=torch.float64), torch.zeros(1, dtype=torch.float64), catalogue)
    for key, value in catalogue_metrics({3: empty.counts}, empty.lists, catalogue).items():
        assert torch.isfinite(value).all(), key  # no recommendation at all: finite values (0), not nan
    assert random_dataset() is not None
