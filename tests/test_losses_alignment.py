"""DirectAU and MAWU against float64 references written with explicit pair loops (values and gradients)."""
import math
from types import SimpleNamespace

import pytest
import torch

from recx.losses.base import LossInput
from recx.losses.directau import DirectAU, DirectAUArgs
from recx.losses.mawu import MAWU, MAWUArgs
from tests.loss_reference import assert_same_value_and_gradients

B, D = 6, 4


def _inputs(seed: int):
    g = torch.Generator().manual_seed(seed)
    users, items = torch.randn(B, D, generator=g), torch.randn(B, D, generator=g)
    users[3] = users[1]  # a user twice in the batch: distance 0 must keep a finite gradient
    return {"users": users, "items": items}


def _unit(x):
    return x / torch.sqrt((x * x).sum())


def _uniformity_reference(rows):
    terms = [torch.exp(-2 * ((_unit(rows[a]) - _unit(rows[b])) ** 2).sum())
             for a in range(len(rows)) for b in range(a + 1, len(rows))]
    return torch.log(sum(terms) / len(terms))


def _uniformity_lower_triangle_reference(rows):
    """MAWU's official uniformity_dot: cos matrix, entries on or above the diagonal set to 0 (distance² 2), mean of
    exp(-2 (2 - 2 cos)) over all n² entries, log."""
    n = len(rows)
    terms = [torch.exp(-2 * (2 - 2 * (_unit(rows[a]) * _unit(rows[b])).sum())) if a > b
             else torch.exp(rows.new_tensor(-4.0)) for a in range(n) for b in range(n)]
    return torch.log(sum(terms) / (n * n))


UNIFORMITY_REFERENCES = {"lower_triangle": _uniformity_lower_triangle_reference, "pairs": _uniformity_reference}


def _batch(users, items, user_ids=None, item_ids=None):
    zeros = torch.zeros(B, dtype=torch.float64)
    return LossInput(zeros, zeros[:, None], zeros, zeros[:, None], None, user_ids, item_ids, users, items)


def test_directau_matches_reference():
    gamma = 1.7
    loss = DirectAU(DirectAUArgs(gamma=gamma))

    def reference(users, items):
        align = sum(((_unit(users[b]) - _unit(items[b])) ** 2).sum() for b in range(B)) / B
        return align + gamma * (_uniformity_reference(users) + _uniformity_reference(items)) / 2

    assert_same_value_and_gradients(lambda **t: loss(_batch(t["users"], t["items"])), reference, _inputs(4),
                                    ["users", "items"])


@pytest.mark.parametrize("form", ["lower_triangle", "pairs"])
def test_mawu_matches_reference_including_margin_gradients(form):
    g = torch.Generator().manual_seed(5)
    n_users, n_items = 5, 8
    user_ids, item_ids = torch.randint(0, n_users, (B,), generator=g), torch.randint(0, n_items, (B,), generator=g)
    user_ids[3] = user_ids[1]
    w_user, w_item = torch.rand(n_users, generator=g) * 1.4 - 0.2, torch.rand(n_items, generator=g) * 1.4 - 0.2
    args = MAWUArgs(gamma_user=1.3, gamma_item=0.6, uniformity=form)
    uniformity_reference = UNIFORMITY_REFERENCES[form]
    loss = MAWU(args, SimpleNamespace(n_users=n_users, n_items=n_items))

    def ours(users, items, w_user, w_item):
        loss.user_margin, loss.item_margin = w_user, w_item  # the leaves themselves, so their gradients are compared
        return loss(_batch(users, items, user_ids, item_ids))

    def reference(users, items, w_user, w_item):
        total = users.new_zeros(())
        for b in range(B):
            w = w_user[user_ids[b]].clamp(0, 1) + w_item[item_ids[b]].clamp(0, 1)
            margin = 1 - 1 / (1 + torch.exp(-w))
            cosine = (_unit(users[b]) * _unit(items[b])).sum()
            total = total - torch.cos(torch.clamp(torch.arccos(cosine) + margin, max=math.pi))
        return total / B + args.gamma_user * uniformity_reference(users) + args.gamma_item * uniformity_reference(items)

    inputs = {**_inputs(6), "w_user": w_user.clamp(0, 1), "w_item": w_item.clamp(0, 1)}
    assert_same_value_and_gradients(ours, reference, inputs, ["users", "items", "w_user", "w_item"])
    assert [p.shape[0] for p in loss.parameters()] == [n_users, n_items]


def test_mawu_projects_margins_onto_the_unit_interval():
    loss = MAWU(MAWUArgs(), SimpleNamespace(n_users=3, n_items=3))
    with torch.no_grad():
        loss.user_margin.fill_(5.0)
        loss.item_margin.fill_(-5.0)
    margin = loss.margins(torch.tensor([0, 1]), torch.tensor([2, 2]))
    assert torch.allclose(margin, torch.full((2,), 1 - 1 / (1 + math.exp(-1.0))))
    assert loss.user_margin.max() == 1.0 and loss.item_margin.min() == 0.0


def test_mawu_defaults_to_the_official_lower_triangle_uniformity():
    assert MAWUArgs().uniformity == "lower_triangle"


def test_lower_triangle_uniformity_is_weaker_than_pairs_for_spread_rows():
    """Spread rows (d² ≈ 2): the lower-triangle form's gradient is about half the pairs form's."""
    from recx.losses.alignment import uniformity
    rows = torch.linalg.qr(torch.randn(64, 64, dtype=torch.float64))[0][:32].clone().requires_grad_(True)
    grads = [torch.autograd.grad(uniformity(rows, form=form), rows)[0].norm() for form in ("pairs", "lower_triangle")]
    assert 1.8 < float(grads[0] / grads[1]) < 2.1
