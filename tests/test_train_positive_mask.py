"""Masking each query's own positive among its candidates: the sparse path for shared candidates equals the
elementwise mask in value and gradient."""

import torch

from recx.training.positive_mask import MaskEntries, mask_positives, shared_hits


def _shared_case(seed: int):
    g = torch.Generator().manual_seed(seed)
    candidates = torch.randint(0, 12, (1, 40), generator=g)  # 40 draws of 12 items: many repeats
    positives = torch.randint(0, 15, (9,), generator=g)  # some positives never drawn
    return candidates, positives


def test_shared_hits_are_exactly_the_entries_equal_to_the_positive():
    for seed in range(5):
        candidates, positives = _shared_case(seed)
        rows, cols = shared_hits(candidates[0], positives)
        found = torch.zeros(9, 40, dtype=torch.bool)
        found[rows, cols] = True
        assert torch.equal(found, candidates == positives[:, None])
        assert rows.numel() == int((candidates == positives[:, None]).sum())  # each entry once


def test_sparse_mask_equals_the_elementwise_mask_in_value_and_gradient():
    candidates, positives = _shared_case(7)
    upstream = torch.randn(9, 40, dtype=torch.float64)  # not zero at the masked entries: their gradient must be zeroed
    results = []
    for sparse in (True, False):
        scores = torch.randn(9, 40, dtype=torch.float64, generator=torch.Generator().manual_seed(1), requires_grad=True)
        base = scores * 1.0
        masked = (
            mask_positives(base, candidates, positives)
            if sparse
            else base.masked_fill(candidates == positives[:, None], float("-inf"))
        )
        (gradient,) = torch.autograd.grad(masked, scores, upstream)
        results.append((masked.detach(), gradient))
    assert torch.equal(results[0][0], results[1][0]) and torch.equal(results[0][1], results[1][1])
    hits = candidates.expand(9, -1) == positives[:, None]
    assert hits.any() and (results[0][1][hits] == 0).all() and (results[0][1][~hits] == upstream[~hits]).all()


def test_a_gradient_already_zero_at_the_hits_is_passed_on_without_a_copy():
    scores = torch.randn(3, 4, requires_grad=True) * 1.0
    rows, cols = torch.tensor([0, 2]), torch.tensor([1, 3])
    masked = MaskEntries.apply(scores, rows, cols)
    assert torch.isneginf(masked[rows, cols]).all() and masked.data_ptr() == scores.data_ptr()
    grad = torch.ones(3, 4)
    grad[rows, cols] = 0
    passed, _, _ = MaskEntries.backward(type("ctx", (), {"saved_tensors": (rows, cols)})(), grad)
    assert passed is grad
