"""Quadratic-kernel sampler (Blanc & Rendle 2018, "Adaptive sampled softmax with kernel based sampling").

q(i | z) = (α (z·q_i)² + 1) / (α zᵀ S z + M), with S = Σ_i q_i q_iᵀ: (z·q_i)² = ⟨z zᵀ, q_i q_iᵀ⟩, so the kernel mass of
any set of items is α zᵀ S_set z + |set| with S_set the sum of their outer products.

Divide and conquer: items are cut into leaves of `leaf_size` consecutive ids; a complete binary tree over the
leaves stores S_node and the item count of every node (rebuilt before each epoch). A draw descends from the root,
going left with probability mass(left) / (mass(left) + mass(right)) (O(D²) per level), then draws an item of the
leaf by its kernel weight (O(leaf_size · D)): O(D² log(M / leaf_size) + leaf_size · D) per draw, memory
O((M / leaf_size) D²). A query drawing many items gets all its node masses at once (one matrix product, O(M D² /
leaf_size)) and then descends in O(log M) per draw; queries and draws are processed in chunks to bound memory. `log_q` is the closed form above, for the item
vectors the tree was built from (between rebuilds the proposal is the kernel of the epoch's starting vectors).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from recx.core.args import arg
from recx.kernels.midx_draw import inverse_cdf
from recx.models.scoring import per_query_scores
from recx.samplers.base import Batch, Negatives, Sampler
from recx.samplers.registry import SAMPLERS

CHUNK_ENTRIES = 1 << 22  # draws x D² per chunk


@dataclass
class KernelArgs:
    alpha: float = arg(100.0, at_least=0, help="α of the kernel α (z·q)² + 1")
    leaf_size: int = arg(64, at_least=1, at_most=10_000_000, help="items per leaf of the divide-and-conquer tree")


@SAMPLERS.register("kernel")
class QuadraticKernelSampler(Sampler):
    summary = "quadratic kernel (Blanc & Rendle): q(i | z) ∝ α (z·q_i)² + 1, drawn through a tree of leaves"
    figure = (2, {})
    adaptive = True  # the kernel of the item vectors of each epoch's start
    Args = KernelArgs
    rebuild_every = "epoch"

    def reference_log_q_gap(self, batch: Batch, negatives: Negatives) -> torch.Tensor:
        """Blanc & Rendle's kernel: log q(j) - log q(i) = log(α (u·j)² + 1) - log(α (u·i)² + 1) (float64)."""
        query, table = batch.query.detach().double().cpu(), batch.item_table.detach().double().cpu()
        items = negatives.items.cpu().expand(batch.positives.numel(), -1)
        scores = (query[:, None, :] * table[items]).sum(-1)
        positive = (query * table[batch.positives.cpu()]).sum(-1)
        return torch.log1p(self.args.alpha * scores.pow(2)) - torch.log1p(self.args.alpha * positive.pow(2))[:, None]

    def __init__(self, dataset, n_negatives, args: KernelArgs, generator, kernels: str = "auto"):
        super().__init__(dataset, n_negatives, args, generator, kernels)
        self.built = False

    def rebuild(self, query_table: torch.Tensor | None, item_table: torch.Tensor) -> None:
        items = item_table.detach()
        n_items, dim = items.shape
        size = self.args.leaf_size
        n_leaves = math.ceil(n_items / size)
        self.n_leaves = 1 << max(0, math.ceil(math.log2(n_leaves)))
        padded = torch.zeros(self.n_leaves * size, dim, dtype=items.dtype, device=items.device)
        padded[:n_items] = items
        self.leaf_items = padded.view(self.n_leaves, size, dim)
        sums = torch.zeros(2 * self.n_leaves, dim, dim, dtype=items.dtype, device=items.device)
        counts = torch.zeros(2 * self.n_leaves, dtype=items.dtype, device=items.device)
        sums[self.n_leaves :] = self.leaf_items.transpose(1, 2) @ self.leaf_items
        counts[self.n_leaves :] = (n_items - size * torch.arange(self.n_leaves, device=items.device)).clamp(0, size)
        width = self.n_leaves // 2
        while width >= 1:
            parents = torch.arange(width, 2 * width, device=items.device)
            sums[parents] = sums[2 * parents] + sums[2 * parents + 1]
            counts[parents] = counts[2 * parents] + counts[2 * parents + 1]
            width //= 2
        self.items, self.sums, self.counts, self.built = items, sums, counts, True

    def _mass(self, query: torch.Tensor, nodes: torch.Tensor) -> torch.Tensor:
        """α zᵀ S_node z + |node| for each (query row, node) pair [N]: O(D²) each."""
        quadratic = torch.einsum("nd,nde,ne->n", query, self.sums[nodes], query)
        return self.args.alpha * quadratic + self.counts[nodes]

    def _node_masses(self, query: torch.Tensor) -> torch.Tensor:
        """[B, 2P] masses of every tree node for each query: one product of the z zᵀ with the node sums."""
        outer = torch.einsum("bd,be->bde", query, query).flatten(1)
        return self.args.alpha * outer @ self.sums.flatten(1).T + self.counts

    def _leaves(self, mass, uniforms: torch.Tensor) -> torch.Tensor:
        """Leaf [N] reached by each draw; `mass(draws, nodes)` gives node masses for draw indices."""
        draws = torch.arange(uniforms.shape[0], device=uniforms.device)
        node = torch.ones(uniforms.shape[0], dtype=torch.int64, device=uniforms.device)
        for level in range(uniforms.shape[1] - 1):
            left, right = mass(draws, 2 * node), mass(draws, 2 * node + 1)
            node = 2 * node + (uniforms[:, level] * (left + right) >= left).long()
        return node - self.n_leaves

    def _leaf_items(self, query: torch.Tensor, leaf: torch.Tensor, uniforms: torch.Tensor) -> torch.Tensor:
        """An item of each draw's leaf by its kernel weight (padding ids past the catalogue weigh 0)."""
        size = self.args.leaf_size
        scores = torch.einsum("nsd,nd->ns", self.leaf_items[leaf], query)
        ids = leaf[:, None] * size + torch.arange(size, device=query.device)
        weights = torch.where(ids < self.dataset.n_items, self.args.alpha * scores.pow(2) + 1, 0)
        return ids.gather(1, inverse_cdf(weights, uniforms)[:, None])[:, 0]

    def _log_normaliser(self, query: torch.Tensor) -> torch.Tensor:
        """log(α zᵀ S z + M) per query row [B] (the root's mass)."""
        root = torch.ones(query.shape[0], dtype=torch.int64, device=query.device)
        return torch.log(self._mass(query, root))

    def log_probability(self, batch: Batch, items: torch.Tensor) -> torch.Tensor:
        self._ready(batch)
        scores = per_query_scores(batch.query, self.items, items)
        return torch.log(self.args.alpha * scores.pow(2) + 1) - self._log_normaliser(batch.query)[:, None]

    def pair_log_probability(self, batch: Batch, rows: torch.Tensor, items: torch.Tensor) -> torch.Tensor:
        """O(D) per pair and the normaliser once per query row (O(D²) each) instead of once per pair."""
        self._ready(batch)
        scores = (batch.query[rows] * self.items[items]).sum(-1)
        return torch.log(self.args.alpha * scores.pow(2) + 1) - self._log_normaliser(batch.query)[rows]

    def _ready(self, batch: Batch) -> None:
        if not self.built:
            self.rebuild(None, batch.item_table)

    def _draw(self, query: torch.Tensor, rows: torch.Tensor, uniforms: torch.Tensor) -> torch.Tensor:
        """Items [N] for draws of query rows `rows` [N] (into `query` [B, D]) with uniforms [N, depth + 1].

        When a query draws more than (leaves / depth) items, the masses of all nodes are computed once per query
        (O(P D²) per query, then O(log P) per draw); otherwise per draw and level (O(D² log P) per draw)."""
        depth, dim = uniforms.shape[1] - 1, query.shape[1]
        if rows.numel() * depth >= query.shape[0] * self.n_leaves:
            block = max(1, CHUNK_ENTRIES // (dim * dim + 2 * self.n_leaves))
            table = torch.cat([self._node_masses(part) for part in torch.split(query, block)])
            leaf = self._leaves(lambda draws, nodes: table[rows[draws], nodes], uniforms)
        else:
            chunk = max(1, CHUNK_ENTRIES // (dim * dim))
            leaf = torch.cat(
                [
                    self._leaves(lambda draws, nodes, part=part: self._mass(query[part[draws]], nodes), part_uniforms)
                    for part, part_uniforms in zip(torch.split(rows, chunk), torch.split(uniforms, chunk), strict=True)
                ]
            )
        chunk = max(1, CHUNK_ENTRIES // (self.args.leaf_size * dim))
        return torch.cat(
            [
                self._leaf_items(query[part], part_leaf, part_uniforms[:, -1])
                for part, part_leaf, part_uniforms in zip(
                    torch.split(rows, chunk), torch.split(leaf, chunk), torch.split(uniforms, chunk), strict=True
                )
            ]
        )

    def sample(self, batch: Batch) -> Negatives:
        self._ready(batch)
        n_queries = batch.query.shape[0]
        depth = int(math.log2(self.n_leaves))
        rows = torch.arange(n_queries, device=batch.query.device).repeat_interleave(self.n_negatives)
        uniforms = torch.rand(
            (rows.numel(), depth + 1), generator=self.generator, device=rows.device, dtype=batch.query.dtype
        )
        items = self._draw(batch.query, rows, uniforms).view(n_queries, self.n_negatives)
        return Negatives(
            items, self.log_probability(batch, items), self.log_probability(batch, batch.positives[:, None])[:, 0]
        )
