"""DirectAU and MAWU against float64 references written with explicit pair loops (values and gradients), for every
row reading (`uniformity_rows`) and alignment form; the defaults are checked against the official code's figures in
tests/test_official_prism.py."""

import math
from types import SimpleNamespace

import pytest
import torch

from recx.config.run_config import resolve
from recx.core.errors import RecxError
from recx.losses.alignment import uniformity
from recx.losses.base import LossInput
from recx.losses.directau import DirectAU, DirectAUArgs
from recx.losses.mawu import MAWU, MAWUArgs
from tests.loss_reference import assert_same_value_and_gradients

B, D = 6, 4


USER_IDS = torch.tensor([0, 1, 2, 1, 3, 4])  # user 1 twice in the batch (rows 1 and 3 are equal)
ITEM_IDS = torch.tensor([0, 1, 2, 3, 2, 5])  # item 2 twice (rows 2 and 4 are equal)


def _inputs(seed: int):
    g = torch.Generator().manual_seed(seed)
    users, items = torch.randn(B, D, generator=g), torch.randn(B, D, generator=g)
    users[3] = users[1]  # a user twice in the batch: distance 0 must keep a finite gradient
    items[4] = items[2]
    return {"users": users, "items": items}


def _rows(rows, which, first_rows):
    """The reference's `unique` rows: the first occurrences, listed by hand."""
    return rows if which == "batch" else rows[first_rows]


USER_FIRST, ITEM_FIRST = [0, 1, 2, 4, 5], [0, 1, 2, 3, 5]


def _unit(x):
    return x / torch.sqrt((x * x).sum())


def _uniformity_reference(rows):
    terms = [
        torch.exp(-2 * ((_unit(rows[a]) - _unit(rows[b])) ** 2).sum())
        for a in range(len(rows))
        for b in range(a + 1, len(rows))
    ]
    return torch.log(sum(terms) / len(terms))


def _uniformity_lower_triangle_reference(rows):
    """MAWU's official uniformity_dot: cos matrix, entries on or above the diagonal set to 0 (distance² 2), mean of
    exp(-2 (2 - 2 cos)) over all n² entries, log."""
    n = len(rows)
    terms = [
        torch.exp(-2 * (2 - 2 * (_unit(rows[a]) * _unit(rows[b])).sum())) if a > b else torch.exp(rows.new_tensor(-4.0))
        for a in range(n)
        for b in range(n)
    ]
    return torch.log(sum(terms) / (n * n))


UNIFORMITY_REFERENCES = {"lower_triangle": _uniformity_lower_triangle_reference, "pairs": _uniformity_reference}


def _batch(users, items, user_ids=USER_IDS, item_ids=ITEM_IDS):
    zeros = torch.zeros(B, dtype=torch.float64)
    return LossInput(zeros, zeros[:, None], zeros, zeros[:, None], None, user_ids, item_ids, users, items)


@pytest.mark.parametrize("which", ["unique", "batch"])
def test_directau_matches_reference(which):
    gamma = 1.7
    loss = DirectAU(DirectAUArgs(gamma=gamma, uniformity_rows=which))

    def reference(users, items):
        align = sum(((_unit(users[b]) - _unit(items[b])) ** 2).sum() for b in range(B)) / B
        return (
            align
            + gamma
            * (
                _uniformity_reference(_rows(users, which, USER_FIRST))
                + _uniformity_reference(_rows(items, which, ITEM_FIRST))
            )
            / 2
        )

    assert_same_value_and_gradients(
        lambda **t: loss(_batch(t["users"], t["items"])), reference, _inputs(4), ["users", "items"]
    )


@pytest.mark.parametrize("form", ["lower_triangle", "pairs"])
@pytest.mark.parametrize("which", ["unique", "batch"])
@pytest.mark.parametrize("alignment", ["broadcast", "pairs"])
def test_mawu_matches_reference_including_margin_gradients(form, which, alignment):
    g = torch.Generator().manual_seed(5)
    n_users, n_items = 5, 8
    user_ids, item_ids = USER_IDS, ITEM_IDS
    w_user, w_item = torch.rand(n_users, generator=g) * 1.4 - 0.2, torch.rand(n_items, generator=g) * 1.4 - 0.2
    args = MAWUArgs(gamma_user=1.3, gamma_item=0.6, uniformity=form, uniformity_rows=which, alignment=alignment)
    uniformity_reference = UNIFORMITY_REFERENCES[form]
    loss = MAWU(args, SimpleNamespace(n_users=n_users, n_items=n_items))

    def ours(users, items, w_user, w_item):
        loss.user_margin, loss.item_margin = w_user, w_item  # the leaves themselves, so their gradients are compared
        return loss(_batch(users, items, user_ids, item_ids))

    def reference(users, items, w_user, w_item):
        margins = [
            1 - 1 / (1 + torch.exp(-(w_user[user_ids[a]].clamp(0, 1) + w_item[item_ids[a]].clamp(0, 1))))
            for a in range(B)
        ]
        angles = [torch.arccos((_unit(users[b]) * _unit(items[b])).sum()) for b in range(B)]
        pairs = [(a, b) for a in range(B) for b in range(B)] if alignment == "broadcast" else [(b, b) for b in range(B)]
        align = -sum(torch.cos(torch.clamp(angles[b] + margins[a], max=math.pi)) for a, b in pairs) / len(pairs)
        return (
            align
            + args.gamma_user * uniformity_reference(_rows(users, which, USER_FIRST))
            + args.gamma_item * uniformity_reference(_rows(items, which, ITEM_FIRST))
        )

    inputs = {**_inputs(6), "w_user": w_user.clamp(0, 1), "w_item": w_item.clamp(0, 1)}
    assert_same_value_and_gradients(ours, reference, inputs, ["users", "items", "w_user", "w_item"])
    assert [p.shape[0] for p in loss.parameters()] == [n_users, n_items]


def test_mawu_reads_the_margins_as_left_then_projects_them_onto_the_unit_interval():
    """As both official codes: the loss reads w as the last step left it (here w_u + w_i = 0), then w is clipped."""
    loss = MAWU(MAWUArgs(), SimpleNamespace(n_users=3, n_items=3))
    with torch.no_grad():
        loss.user_margin.fill_(5.0)
        loss.item_margin.fill_(-5.0)
    margin = loss.margins(torch.tensor([0, 1]), torch.tensor([2, 2]))
    assert torch.allclose(margin, torch.full((2,), 0.5))
    assert loss.user_margin.max() == 1.0 and loss.item_margin.min() == 0.0
    again = loss.margins(torch.tensor([0, 1]), torch.tensor([2, 2]))
    assert torch.allclose(again, torch.full((2,), 1 - 1 / (1 + math.exp(-1.0))))


def test_mawu_defaults_to_the_official_lower_triangle_uniformity():
    assert MAWUArgs().uniformity == "lower_triangle"


def test_defaults_follow_the_prism_code_distinct_rows_and_broadcast_alignment():
    assert DirectAUArgs().uniformity_rows == MAWUArgs().uniformity_rows == "unique"
    assert MAWUArgs().alignment == "broadcast"


@pytest.mark.parametrize(
    "loss, key, value",
    [
        ("directau", "uniformity_rows", "distinct"),
        ("mawu", "uniformity_rows", "all"),
        ("mawu", "alignment", "per_pair"),
    ],
)
def test_unknown_row_reading_or_alignment_is_refused(loss, key, value):
    with pytest.raises(RecxError, match=f"loss_args.{key} = '{value}': expected one of "):
        resolve({"loss": loss, "loss_args": {key: value}})


def test_distinct_rows_keeps_the_first_row_of_each_id():
    from recx.losses.alignment import distinct_rows

    rows = torch.arange(12.0).reshape(6, 2)
    assert distinct_rows(rows, torch.tensor([4, 1, 4, 0, 1, 7])).tolist() == [[6, 7], [2, 3], [0, 1], [10, 11]]


def test_unique_rows_need_the_batch_ids():
    users, items = torch.randn(B, D), torch.randn(B, D)
    with pytest.raises(ValueError, match="need the batch's ids"):
        DirectAU(DirectAUArgs())(_batch(users, items, None, None))


def test_lower_triangle_uniformity_is_weaker_than_pairs_for_spread_rows():
    """Spread rows (d² ≈ 2): the lower-triangle form's gradient is about half the pairs form's."""
    from recx.losses.alignment import uniformity

    rows = torch.linalg.qr(torch.randn(64, 64, dtype=torch.float64))[0][:32].clone().requires_grad_(True)
    grads = [torch.autograd.grad(uniformity(rows, form=form), rows)[0].norm() for form in ("pairs", "lower_triangle")]
    assert 1.8 < float(grads[0] / grads[1]) < 2.1


def test_broadcast_mean_cosine_equals_the_dense_matrix_with_ties_and_clipped_entries():
    from recx.losses.mawu import broadcast_mean_cosine

    g = torch.Generator().manual_seed(9)
    angle = torch.rand(40, generator=g, dtype=torch.float64) * math.pi
    angle[:3] = math.pi - 1e-9  # entries past π for every margin
    margin = torch.rand(40, generator=g, dtype=torch.float64) * 0.5
    margin[5:8] = margin[4]  # tied margins
    inputs = {"angle": angle, "margin": margin}

    def dense(angle, margin):
        return torch.cos((angle[None, :] + margin[:, None]).clamp(0.0, math.pi)).mean()

    assert_same_value_and_gradients(broadcast_mean_cosine, dense, inputs, ["angle", "margin"])


@pytest.mark.parametrize(
    "init, check",
    [
        ("xavier_uniform", lambda w, n: w.abs().max() <= math.sqrt(6 / (n + 1)) and _close(w.var(), 2 / (n + 1))),
        ("xavier_normal", lambda w, n: _close(w.var(), 2 / (n + 1)) and w.abs().max() > math.sqrt(6 / (n + 1))),
    ],
)
def test_mawu_margins_start_as_the_official_codes_xavier_from_the_runs_seed(init, check):
    """`margin_init`: the official codes' Xavier start of the [n, 1] margin tables (PRISM uniform, MAWU normal: both
    of variance 2 / (n + 1); only the normal exceeds the uniform's bound), from torch's generator as the run's seed
    left it: the same for the same seed, other for another; `zero` (the default) keeps w at 0 and earlier run ids."""
    from recx.training.build import build_loss

    dataset = SimpleNamespace(n_users=20_000, n_items=30_000, item_popularity=torch.ones(30_000))
    config = resolve({"model": "mf", "loss": "mawu", "dim": 4, "loss_args": {"margin_init": init}})

    def margins(seed):
        torch.manual_seed(seed)
        return build_loss(config, dataset, torch.device("cpu")).parameters()

    users, items = margins(0)
    assert check(users.detach().double(), 20_000) and check(items.detach().double(), 30_000)
    assert torch.equal(margins(0)[0], users) and not torch.equal(margins(1)[0], users)
    zero = resolve({"model": "mf", "loss": "mawu", "dim": 4})
    assert all(torch.equal(w, torch.zeros_like(w)) for w in build_loss(zero, dataset, torch.device("cpu")).parameters())
    assert (
        zero.run_id()
        == resolve({"model": "mf", "loss": "mawu", "dim": 4, "loss_args": {"margin_init": "zero"}}).run_id()
    )


def _close(value, expected) -> bool:
    return abs(float(value) / expected - 1) < 0.05


@pytest.mark.parametrize("form", ["pairs", "lower_triangle"])
def test_uniformity_gradient_from_one_product_is_the_numerical_one(form):
    """PairLogSumExp's backward (one product, ∂u = (4t g / s) p u, the pair matrix taken as symmetric) against finite
    differences through F.normalize, float64, rows in general position and two equal rows."""
    rows = torch.randn(7, 3, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    rows[5] = rows[1]
    assert torch.autograd.gradcheck(lambda x: uniformity(x, form=form), (rows.requires_grad_(),))
