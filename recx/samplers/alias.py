"""Drawing from a fixed discrete distribution: inverse-CDF sampling (torch reference, device-agnostic)."""
from __future__ import annotations

import torch


class DiscreteDistribution:
    """p_i ∝ weights_i. Draws by binary search of uniforms in the cumulative sum (float64 for exactness)."""

    def __init__(self, weights: torch.Tensor):
        weights = weights.to(torch.float64)
        if (weights < 0).any() or weights.sum() <= 0:
            raise ValueError("weights must be non-negative with a positive sum")
        self.probabilities = weights / weights.sum()
        self.cdf = torch.cumsum(self.probabilities, 0)
        self.cdf[-1] = 1.0
        self.log_probabilities = torch.log(self.probabilities).to(torch.float32)

    def sample(self, shape: tuple[int, ...], generator: torch.Generator) -> torch.Tensor:
        uniforms = torch.rand(shape, generator=generator, device=self.cdf.device, dtype=torch.float64)
        index = torch.searchsorted(self.cdf, uniforms.reshape(-1), right=True)
        return index.clamp_max(self.cdf.numel() - 1).reshape(shape)
