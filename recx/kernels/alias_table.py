"""Walker's alias method for a fixed discrete distribution: O(1) per draw after an O(n log n) vectorised build.

Build (torch, float64, no Python loop over items). Masses m_i = n p_i have mean 1; lights (m < 1) need a deficit
d = 1 - m from one donor, heavies (m >= 1) have an excess m - 1. With lights and heavies each in index order,
D_i = d_1 + ... + d_i and E_j = sum of the first j excesses, this is Vose's sweep in closed form:
- light i keeps prob m_i and its alias is the heavy h_j with the smallest j such that E_j > D_{i-1};
- heavy h_j runs out (becomes a light) at the first light i with D_i >= E_j; it keeps prob 1 + E_j - D_i and its
  alias is the next heavy h_{j+1} (the last heavy keeps prob 1).
Each heavy's mass is then exactly accounted for: own prob + what it gave the lights it serves + the top-up of the
previous heavy's bucket = 1 + E_j - E_{j-1} = m_j.

Draw: one uniform u in [0, 1): bucket k = floor(u n), f = u n - k; the item is k if f < prob_k, else alias_k.
The CuPy kernel reads the same uniforms (drawn by torch from the sampler's generator) and returns the same items.
"""

from __future__ import annotations

import torch

from recx.kernels.choice import resolve_kernels


def build_alias(weights: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(prob float64 [n], alias int64 [n]) for p ∝ weights (non-negative, positive sum)."""
    weights = weights.to(torch.float64)
    if weights.ndim != 1 or (weights < 0).any() or weights.sum() <= 0:
        raise ValueError("weights must be a 1-d tensor, non-negative, with a positive sum")
    n = weights.numel()
    mass = weights * (n / weights.sum())
    prob = torch.ones(n, dtype=torch.float64, device=weights.device)
    alias = torch.arange(n, device=weights.device)
    light = torch.nonzero(mass < 1).flatten()
    heavy = torch.nonzero(mass >= 1).flatten()
    if light.numel() == 0 or heavy.numel() == 0:
        return prob, alias
    deficit = 1 - mass[light]
    light_ends = torch.cumsum(deficit, 0)
    heavy_ends = torch.cumsum(mass[heavy] - 1, 0)
    donor = torch.searchsorted(heavy_ends, light_ends - deficit, right=True).clamp_max(heavy.numel() - 1)
    prob[light] = mass[light]
    alias[light] = heavy[donor]
    runs_out_at = torch.searchsorted(light_ends, heavy_ends)
    inside = runs_out_at < light.numel()
    kept = 1 + heavy_ends - light_ends[runs_out_at.clamp_max(light.numel() - 1)]
    prob[heavy] = torch.where(inside, kept, torch.ones_like(kept)).clamp(0, 1)
    prob[heavy[-1]] = 1.0
    alias[heavy[:-1]] = heavy[1:]
    return prob, alias


def implied_probabilities(prob: torch.Tensor, alias: torch.Tensor) -> torch.Tensor:
    """The distribution an alias table draws from: (prob_j + Σ_{k: alias_k = j} (1 - prob_k)) / n."""
    n = prob.numel()
    return (prob + torch.zeros_like(prob).index_add_(0, alias, 1 - prob)) / n


def draw_torch(prob: torch.Tensor, alias: torch.Tensor, uniforms: torch.Tensor) -> torch.Tensor:
    """Reference draw: bucket floor(u n), keep it when the fractional part is below its prob, else its alias."""
    n = prob.numel()
    scaled = uniforms * n
    bucket = scaled.to(torch.int64).clamp_max(n - 1)
    return torch.where(scaled - bucket < prob[bucket], bucket, alias[bucket])


class AliasTable:
    """A fixed distribution p ∝ weights on the weights' device; `sample` draws ids with the given generator."""

    def __init__(self, weights: torch.Tensor, kernels: str = "auto"):
        self.prob, self.alias = build_alias(weights)
        weights = weights.to(torch.float64)
        self.log_probabilities = torch.log(weights / weights.sum()).to(torch.float32)
        self.kernels = resolve_kernels(kernels, weights.device)

    def sample(self, shape: tuple[int, ...], generator: torch.Generator) -> torch.Tensor:
        uniforms = torch.rand(shape, generator=generator, device=self.prob.device, dtype=torch.float64)
        if self.kernels == "cupy":
            from recx.kernels.cupy_kernels import alias_draw

            return alias_draw(self.prob, self.alias, uniforms)
        return draw_torch(self.prob, self.alias, uniforms)
