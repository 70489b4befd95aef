"""BPR and BCE against float64 references written out term by term (values and gradients)."""

import math

import torch

from recx.losses.base import LossInput
from recx.losses.bce import BCE, BCEArgs
from recx.losses.bpr import BPR, BPRArgs
from tests.loss_reference import assert_same_value_and_gradients

B, N = 7, 5


def _inputs(seed: int, weighted: bool):
    g = torch.Generator().manual_seed(seed)
    inputs = {"pos": torch.randn(B, generator=g) * 2, "neg": torch.randn(B, N, generator=g) * 2}
    if weighted:
        raw = torch.rand(B, N, generator=g)
        inputs["weights"] = raw / raw.sum(1, keepdim=True)
    return inputs


def _batch(pos, neg, weights=None):
    zeros = torch.zeros_like(pos)
    return LossInput(pos, neg, zeros, torch.zeros_like(neg), weights)


def _sigmoid(x):
    return 1 / (1 + torch.exp(-x))


def bpr_reference(pos, neg, weights=None, summed=False):
    total = pos.new_zeros(())
    for b in range(B):
        for j in range(N):
            w = weights[b, j] if weights is not None else (1.0 if summed else 1.0 / N)
            total = total - w * torch.log(_sigmoid(pos[b] - neg[b, j]))
    return total if summed else total / B


def bce_reference(pos, neg, weights=None):
    total = pos.new_zeros(())
    for b in range(B):
        total = total - torch.log(_sigmoid(pos[b]))
        for j in range(N):
            w = weights[b, j] if weights is not None else 1.0 / N
            total = total - w * torch.log(1 - _sigmoid(neg[b, j]))
    return total / B


def test_bpr_matches_reference_unweighted_and_weighted():
    for weighted in (False, True):
        loss = BPR(BPRArgs())
        assert_same_value_and_gradients(
            lambda loss=loss, **t: loss(_batch(t["pos"], t["neg"], t.get("weights"))),
            bpr_reference,
            _inputs(0, weighted),
            ["pos", "neg"],
        )


def test_bpr_sum_reduction_sums_over_queries_and_candidates_as_the_hns_official_code():
    for weighted in (False, True):
        loss = BPR(BPRArgs(reduction="sum"))
        assert_same_value_and_gradients(
            lambda loss=loss, **t: loss(_batch(t["pos"], t["neg"], t.get("weights"))),
            lambda **t: bpr_reference(**t, summed=True),
            _inputs(1, weighted),
            ["pos", "neg"],
        )


def test_bce_matches_reference_unweighted_and_weighted():
    for weighted in (False, True):
        loss = BCE(BCEArgs())
        assert_same_value_and_gradients(
            lambda loss=loss, **t: loss(_batch(t["pos"], t["neg"], t.get("weights"))),
            bce_reference,
            _inputs(1, weighted),
            ["pos", "neg"],
        )


def test_bce_masked_candidate_contributes_nothing():
    pos, neg = torch.tensor([0.3], dtype=torch.float64), torch.tensor([[0.5, -math.inf]], dtype=torch.float64)
    weights = torch.tensor([[1.0, 0.0]], dtype=torch.float64)
    value = BCE(BCEArgs())(_batch(pos, neg, weights))
    expected = -math.log(1 / (1 + math.exp(-0.3))) - math.log(1 - 1 / (1 + math.exp(-0.5)))
    assert abs(value.item() - expected) < 1e-12
