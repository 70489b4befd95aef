"""Helpers for checking a loss against an independent float64 reference: values and gradients."""

from __future__ import annotations

import torch


def leaves(**tensors) -> dict[str, torch.Tensor]:
    """float64 leaf copies that record gradients."""
    return {name: t.detach().to(torch.float64).clone().requires_grad_(True) for name, t in tensors.items()}


def assert_same_value_and_gradients(ours, reference, inputs: dict[str, torch.Tensor], differentiable: list[str]):
    """Runs `ours(**copy)` and `reference(**copy)` on separate float64 copies; compares the values and gradients."""
    mine, theirs = leaves(**inputs), leaves(**inputs)
    value, expected = ours(**mine), reference(**theirs)
    assert value.dtype == torch.float64
    assert torch.allclose(value, expected, rtol=1e-10, atol=1e-12), (value.item(), expected.item())
    value.backward()
    expected.backward()
    for name in differentiable:
        got, want = mine[name].grad, theirs[name].grad
        assert got is not None and want is not None, name
        assert torch.allclose(got, want, rtol=1e-9, atol=1e-12), (name, (got - want).abs().max().item())
