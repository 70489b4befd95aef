"""Per-cluster sums of points for Lloyd's centroid update, a compiled CPU kernel (numba).

sums[k] = Σ_{i: labels_i = k} x_i and counts[k] = |{i: labels_i = k}|, accumulated in float64. Points are split
into fixed chunks of CHUNK rows, each summed in order into its own partial sums (chunks in parallel, in blocks on the
compute threads: recx.kernels.in_threads), and the partials are added in chunk order: the result does not depend on
the thread count. One pass over the points, where the one-hot product `members @ points` (recx.samplers.kmeans on the accelerator branch) writes a [K, N]
matrix and multiplies it: ~2x this kernel's time for 1.5M points of 100 dimensions.

Shapes: points [N, D], labels int64 [N] in [0, k) -> (sums [k, D] float64, counts [k] float64). `cluster_sums_reference`:
the same by torch's index_add_ (tests/test_kernels_references.py).
"""

from __future__ import annotations

import numba
import numpy as np
import torch

from recx.kernels.in_threads import aligned, run_blocks
from recx.kernels.jit import compiled

CHUNK = 1 << 16


@compiled(noalias=True)
def _chunk_sums(points, labels, partial, partial_counts, first, end):
    """partial[c] and partial_counts[c] of the chunks first <= c < end."""
    n, d = points.shape
    for chunk in range(first, end):
        for i in range(chunk * CHUNK, min(n, (chunk + 1) * CHUNK)):
            label = labels[i]
            partial_counts[chunk, label] += 1.0
            for c in range(d):
                partial[chunk, label, c] += points[i, c]


def cluster_sums(points: np.ndarray, labels: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The chunks' partial sums on the compute threads (recx.kernels.in_threads), then added in chunk order."""
    n, d = points.shape
    n_chunks = (n + CHUNK - 1) // CHUNK
    partial = aligned((n_chunks, k, d), np.float64, zeros=True)
    partial_counts = aligned((n_chunks, k), np.float64, zeros=True)
    run_blocks(_chunk_sums, n_chunks, numba.get_num_threads(), (points, labels, partial, partial_counts))
    sums = np.zeros((k, d))
    counts = np.zeros(k)
    for chunk in range(n_chunks):
        sums += partial[chunk]
        counts += partial_counts[chunk]
    return sums, counts


def cluster_sums_reference(points: torch.Tensor, labels: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(sums [k, D], counts [k]) in float64 by index_add_ and bincount (the kernel's reference)."""
    sums = torch.zeros(k, points.shape[1], dtype=torch.float64).index_add_(0, labels, points.double())
    return sums, torch.bincount(labels, minlength=k).double()
