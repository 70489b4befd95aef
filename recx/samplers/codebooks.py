"""The inverted multi-index of the FastVAE paper (§4): two product-quantisation codebooks over item vectors.

Item vectors q_i [M, D] are split into halves q_i¹ ⊕ q_i² (D odd: the first half has one more column); each half is
clustered by k-means into K codewords (recx.samplers.kmeans, the official code's Lloyd iterations), so
q_i = c¹_{k1(i)} ⊕ c²_{k2(i)} + q̃_i with the residual q̃_i. Each fit starts from K random items (`init = "random"`, the
official code, which re-clusters from scratch before every epoch) or from the previous codewords (`"warm"`, when
there are previous ones of the same shape). Items are grouped by their cell Ω_{k1,k2}
(cell id k1·K + k2): `order` lists the item ids cell by cell and `cell_ptr` [K² + 1] delimits each cell in it.
"""

from __future__ import annotations

import torch

from recx.samplers.kmeans import kmeans, random_points


def split_halves(vectors: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    first, second = torch.tensor_split(vectors, 2, dim=-1)
    return first, second


class ProductCodebooks:
    codewords: tuple[torch.Tensor, torch.Tensor]  # set by `fit`

    def __init__(self, n_codewords: int, n_iterations: int, tolerance: float, init: str):
        self.n_codewords, self.n_iterations, self.tolerance, self.init = n_codewords, n_iterations, tolerance, init

    def fit(self, item_table: torch.Tensor, seed: int) -> None:
        """k-means on each half of `item_table` (detached, on its device), random choices seeded by `seed`."""
        n_items = item_table.shape[0]
        k = min(self.n_codewords, n_items)
        generator = torch.Generator(item_table.device).manual_seed(seed)
        codewords, assignments = [], []
        for part, half in enumerate(split_halves(item_table.detach())):
            fitted = getattr(self, "codewords", None)
            previous = None if fitted is None else fitted[part]
            if self.init == "warm" and previous is not None and previous.shape == (k, half.shape[1]):
                initial = previous
            else:
                initial = random_points(half, k, generator)
            centroids, labels = kmeans(half, initial, self.n_iterations, self.tolerance, generator)
            codewords.append(centroids)
            assignments.append(labels)
        self.k = k
        self.codewords = (codewords[0], codewords[1])
        self.assignments = (assignments[0], assignments[1])
        self.cell = assignments[0] * k + assignments[1]
        self.order = torch.argsort(self.cell, stable=True)
        self.cell_ptr = torch.zeros(k * k + 1, dtype=torch.int64, device=item_table.device)
        sizes = torch.bincount(self.cell, minlength=k * k)
        self.cell_ptr[1:] = torch.cumsum(sizes, 0)
        self.largest_cell = int(sizes.max())  # read once per rebuild: the MIDX draw's stage-3 search length

    def quantised(self) -> torch.Tensor:
        """c¹_{k1(i)} ⊕ c²_{k2(i)} for every item [M, D]."""
        return torch.cat([self.codewords[0][self.assignments[0]], self.codewords[1][self.assignments[1]]], dim=1)

    def codeword_scores(self, query: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(z¹ · c¹_k [B, K], z² · c²_k [B, K])."""
        first, second = split_halves(query)
        return first @ self.codewords[0].T, second @ self.codewords[1].T

    def cell_sums(self, weights: torch.Tensor) -> torch.Tensor:
        """Σ_{i ∈ Ω_c} weights[..., i] for every cell c: [..., K²] (weights [..., M])."""
        shape = weights.shape[:-1] + (self.k * self.k,)
        return torch.zeros(shape, dtype=weights.dtype, device=weights.device).index_add_(-1, self.cell, weights)
