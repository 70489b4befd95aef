"""Lloyd's k-means as the FastVAE paper's official code clusters item sub-vectors (HERECJ/FastVae_Gpu at 1f46449,
sampler_gpu_mm.py:13-38 `kmeans`), in torch on the points' device.

From centroids C (k random points, or given ones), repeat up to `max_iterations` times:
    a_i = argmin_k d_ik,   d_ik = ‖x_i‖² - 2 x_i·c_k + ‖c_k‖²,   L = Σ_i d_{i a_i} (= Σ_i ‖x_i - c_{a_i}‖²);
    stop when L_prev - L < tolerance · L_prev (a relative fall: sampler_gpu_mm.py:30, tolerance 1e-6); else c_k =
    mean of its points, and every empty cluster gets a random point (without replacement) as its centroid.
It returns the last assignment and the last centroids (as the official code: if the iteration budget runs out, the
centroids are one update past the assignment). Random choices read `generator`, so a seed fixes the result.
"""

from __future__ import annotations

import math

import torch

from recx.core.device_paths import accelerator_branch
from recx.kernels.cluster_sums import cluster_sums


def random_points(points: torch.Tensor, n: int, generator: torch.Generator) -> torch.Tensor:
    """n distinct rows of `points`, uniformly at random."""
    return points[torch.randperm(points.shape[0], generator=generator, device=generator.device)[:n].to(points.device)]


def cluster_sums_of(points: torch.Tensor, labels: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(Σ of each cluster's points [K, D], its size [K]) in the points' dtype: on the host branch a compiled pass
    summing in float64 (recx.kernels.cluster_sums), elsewhere a one-hot product (sums by a product, not an
    atomic scatter-add: deterministic)."""
    if not accelerator_branch(points):
        sums, counts = cluster_sums(points.numpy(), labels.numpy(), k)
        return torch.from_numpy(sums).to(points.dtype), torch.from_numpy(counts).to(points.dtype)
    members = torch.zeros(k, points.shape[0], dtype=points.dtype, device=points.device)
    members.scatter_(0, labels[None, :], 1.0)
    return members @ points, members.sum(1)


def kmeans(
    points: torch.Tensor, centroids: torch.Tensor, max_iterations: int, tolerance: float, generator: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor]:
    """(centroids [K, D], labels [N]) of Lloyd's iterations on points [N, D] from the initial `centroids` [K, D]."""
    k = centroids.shape[0]
    points = points.contiguous()
    squared_norms = points.pow(2).sum(-1, keepdim=True)
    previous = math.inf
    labels = torch.zeros(points.shape[0], dtype=torch.int64, device=points.device)
    for _ in range(max_iterations):
        # (‖x‖² - 2 x·c) + ‖c‖² as written above, the first two in the product's epilogue (scaling by -2 is exact)
        distances = torch.addmm(squared_norms, points, centroids.T, alpha=-2).add_(centroids.pow(2).sum(-1)[None, :])
        labels = distances.argmin(-1)
        loss = float(distances.gather(1, labels[:, None]).sum())
        if previous - loss < previous * tolerance:
            break
        previous = loss
        sums, counts = cluster_sums_of(points, labels, k)
        centroids = sums / counts[:, None]
        empty = counts < 0.5
        if empty.any():
            centroids[empty] = random_points(points, int(empty.sum()), generator)
    return centroids, labels
