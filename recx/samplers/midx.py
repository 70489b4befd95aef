"""MIDX samplers (the FastVAE paper, §4-5): draws through the inverted multi-index of recx.samplers.codebooks.

With r¹_k = z¹·c¹_k, r²_k = z²·c²_k and a per-item stage-3 weight w_i, a draw is three multinomials:
    stage 1  k1 ~ P¹(k1) ∝ Σ_k2 W[k1, k2] exp(r¹_k1 + r²_k2)
    stage 2  k2 ~ P²(k2 | k1) ∝ W[k1, k2] exp(r²_k2)
    stage 3  i ~ w_i / W[k1, k2] within the cell Ω_{k1,k2},        W[k1, k2] = Σ_{i ∈ Ω_{k1,k2}} w_i,
so that q(i) = exp(r¹_{k1(i)} + r²_{k2(i)}) w_i / Σ_{k,k'} W[k, k'] exp(r¹_k + r²_k').
- `midx` (Theorem 4.1): w_i = exp(z·q̃_i), the residual softmax; q equals the softmax exp(z·q_i) / Σ_j exp(z·q_j)
  exactly (O(MD) per query: every residual score is needed).
- `midx_uni` (Theorem 5.1, Eq. 4): w_i = 1; q(i) ∝ exp(z·(q_i - q̃_i)).
- `midx_pop` (Theorem 5.2, Eq. 5): w_i = pop(i), by default log(1 + count) (the paper's §7.1.4; the official
  MidxUniPop adds 1e-6 to it); `variant` count or pow0.75, `smoothing` added to the counts first;
  q(i) ∝ exp(z·(q_i - q̃_i) + log pop(i)). An item of weight 0 (log variant, unseen in training) is never drawn.
`log_q` is the closed form above, normalised (O(K²) per query for the static variants). Codebooks are rebuilt by
k-means before each epoch (`rebuild_every = "epoch"`; by default from a fresh random start, up to 300 Lloyd
iterations to a 1e-6 relative tolerance, as the official code; `kmeans_init: warm` starts from the last codewords); the exact variant stays exact between rebuilds (Theorem 4.1
holds for any codewords, the residual is taken against the current item vectors).
The draw reads three uniforms per negative; the CuPy kernel (recx.kernels.midx_draw) reads the same ones.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from recx.core.args import arg
from recx.kernels.midx_draw import draw_cells_and_items
from recx.samplers.base import Batch, Negatives, Sampler
from recx.samplers.codebooks import ProductCodebooks
from recx.samplers.registry import SAMPLERS
from recx.samplers.shared import TRANSFORMS

EXACT_CHUNK_ENTRIES = 1 << 23  # queries x items per chunk of the exact sampler's residual scores


KMEANS_INITS = ("random", "warm")


@dataclass
class MidxArgs:
    n_codewords: int = arg(
        16, at_least=1, at_most=1_000_000, help="K per codebook (the paper: 16 for training, 64 for its Figure 2)"
    )
    kmeans_iterations: int = arg(
        300, at_least=1, at_most=10_000, help="the most Lloyd iterations per rebuild (the official max_iter)"
    )
    kmeans_tolerance: float = arg(
        1e-6, at_least=0, below=1, help="stop when the squared error falls by less than this fraction (official)"
    )
    kmeans_init: str = arg(
        "random", choices=KMEANS_INITS, help="random: K random items every rebuild (official); warm: the last codewords"
    )


@dataclass
class MidxPopArgs(MidxArgs):
    variant: str = arg(
        "log",
        choices=tuple(TRANSFORMS),
        help="pop(i): log(1 + count) (the paper's §7.1.4 and official), count, pow0.75",
    )
    smoothing: float = arg(
        0.0, at_least=0, at_most=1e6, help="added to every count first (> 0: items unseen in training get drawn)"
    )


@dataclass
class Proposal:
    """Per-query quantities of one batch: codeword scores, the cells' joint log-weights and the normaliser."""

    first: torch.Tensor  # [B, K]
    second: torch.Tensor  # [B, K]
    log_joint: torch.Tensor  # [B, K, K]: log W[k1, k2] + r¹_k1 + r²_k2
    log_norm: torch.Tensor  # [B]
    cumulative: (
        torch.Tensor | None
    )  # [M + 1] or [B, M + 1] float64 cumulative stage-3 weights in cell order; None: equal
    residual_scores: torch.Tensor | None = None  # [B, M] z·q̃_i (exact variant only)


class InvertedMultiIndexSampler(Sampler):
    rebuild_every = "epoch"
    adaptive = True  # codebooks re-clustered from the item vectors before each epoch
    Args = MidxArgs

    def __init__(self, dataset, n_negatives, args: MidxArgs, generator, kernels: str = "auto"):
        super().__init__(dataset, n_negatives, args, generator, kernels)
        self.codebooks = ProductCodebooks(
            args.n_codewords, args.kmeans_iterations, args.kmeans_tolerance, args.kmeans_init
        )
        self.built = False

    def rebuild(self, query_table: torch.Tensor | None, item_table: torch.Tensor) -> None:
        seed = int(torch.randint(0, 2**31 - 1, (1,), generator=self.generator, device=self.generator.device))
        self.codebooks.fit(item_table, seed)
        self.built = True
        self.after_rebuild(item_table)

    def after_rebuild(self, item_table: torch.Tensor) -> None:
        """Static state that depends on the codebooks (cell weights, cumulative stage-3 weights)."""

    def proposal(self, query: torch.Tensor, item_table: torch.Tensor) -> Proposal:
        raise NotImplementedError

    def item_log_weight(self, proposal: Proposal, items: torch.Tensor, read) -> torch.Tensor:
        """log w_i of the items for their queries (`read(table [B, M], items)` reads a per-query table)."""
        raise NotImplementedError

    def _ready(self, batch: Batch) -> None:
        if not self.built:
            self.rebuild(None, batch.item_table)

    def _log_q(self, proposal: Proposal, items: torch.Tensor, rows: torch.Tensor | None = None) -> torch.Tensor:
        """log q of items [B, L] for query rows 0 … B-1 of the proposal, or of pairs (rows [P], items [P])."""

        def read(table: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
            return table.gather(1, index) if rows is None else table[rows, index]

        first, second = (assignment.take(items) for assignment in self.codebooks.assignments)
        score = read(proposal.first, first) + read(proposal.second, second)
        log_norm = proposal.log_norm[:, None] if rows is None else proposal.log_norm[rows]
        log_q = score + self.item_log_weight(proposal, items, read) - log_norm
        return log_q.to(proposal.first.dtype)

    def log_probability(self, batch: Batch, items: torch.Tensor) -> torch.Tensor:
        self._ready(batch)
        return torch.cat(
            [
                self._log_q(self.proposal(query, batch.item_table), part)
                for query, part in zip(self._chunks(batch.query), self._chunks(items), strict=True)
            ]
        )

    def pair_log_probability(self, batch: Batch, rows: torch.Tensor, items: torch.Tensor) -> torch.Tensor:
        """The proposal once per query row (chunk by chunk), each pair read from its row's: O(B (KD + K²) + P)
        for the static variants instead of O(P (KD + K²)); no host sync (pairs outside a chunk are masked)."""
        self._ready(batch)
        log_q = torch.zeros(items.shape, dtype=batch.query.dtype, device=items.device)
        start = 0
        for query in self._chunks(batch.query):
            proposal = self.proposal(query, batch.item_table)
            inside = (rows >= start) & (rows < start + query.shape[0])
            local = (rows - start).clamp(0, query.shape[0] - 1)
            log_q = torch.where(inside, self._log_q(proposal, items, local), log_q)
            start += query.shape[0]
        return log_q

    def sample(self, batch: Batch) -> Negatives:
        self._ready(batch)
        items, log_q, positive_log_q = [], [], []
        for query, positives in zip(self._chunks(batch.query), self._chunks(batch.positives), strict=True):
            proposal = self.proposal(query, batch.item_table)
            drawn = self._draw(proposal)
            items.append(drawn)
            log_q.append(self._log_q(proposal, drawn))
            positive_log_q.append(self._log_q(proposal, positives[:, None])[:, 0])
        return Negatives(torch.cat(items), torch.cat(log_q), torch.cat(positive_log_q))

    def sample_with_pair_log_probability(
        self, batch: Batch, rows: torch.Tensor, items: torch.Tensor
    ) -> tuple[Negatives, torch.Tensor]:
        """With the queries in one chunk (the static variants; the exact one when B·M fits a chunk): the proposal
        once, and one pass of `_log_q` over the negatives [B, n], the positives [B] and the pairs [P] laid end to end
        as (row, item) pairs; the same draws and numbers as the two calls, which several chunks make (and a subclass
        that overrides either)."""
        self._ready(batch)
        if len(self._chunks(batch.query)) > 1 or self._replaces_sampling():
            return super().sample_with_pair_log_probability(batch, rows, items)
        proposal = self.proposal(batch.query, batch.item_table)
        drawn = self._draw(proposal)
        n_queries, n = drawn.shape
        query_rows = torch.arange(n_queries, device=drawn.device)
        log_q = self._log_q(
            proposal,
            torch.cat([drawn.reshape(-1), batch.positives, items]),
            torch.cat([query_rows[:, None].expand(-1, n).reshape(-1), query_rows, rows]),
        )
        negative_log_q, positive_log_q, pair_log_q = log_q.split([drawn.numel(), n_queries, items.numel()])
        return Negatives(drawn, negative_log_q.view(n_queries, n), positive_log_q), pair_log_q

    def _replaces_sampling(self) -> bool:
        """Whether a subclass replaced `sample` or `pair_log_probability` (then its own two calls are made)."""
        own = InvertedMultiIndexSampler
        return type(self).sample is not own.sample or type(self).pair_log_probability is not own.pair_log_probability

    def _draw(self, proposal: Proposal) -> torch.Tensor:
        """`n_negatives` items [B, n] for each query of the proposal, from three uniforms per draw."""
        n_queries = proposal.first.shape[0]
        uniforms = torch.rand(
            (3, n_queries, self.n_negatives),
            generator=self.generator,
            device=proposal.first.device,
            dtype=torch.float64,
        ).permute(1, 2, 0)  # [B, n, 3]
        return draw_cells_and_items(
            proposal.log_joint,
            proposal.cumulative,
            self.codebooks.cell_ptr,
            self.codebooks.order,
            uniforms,
            self.codebooks.largest_cell,
            self.kernels,
        )

    def _chunks(self, tensor: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return (tensor,)


class StaticCellSampler(InvertedMultiIndexSampler):
    """Stage 3 from a fixed per-item weight (uniform or popularity): O(KD + K²) per query, O(log K + log M) per
    draw (O(log K) when the weights are equal: stage 3 is then start + floor(u3 · |cell|))."""

    equal_weights = False

    def item_weights(self) -> torch.Tensor:
        raise NotImplementedError

    def after_rebuild(self, item_table: torch.Tensor) -> None:
        weights = self.item_weights().to(item_table.device, torch.float64)
        self.log_weights = torch.log(weights).to(item_table.dtype)
        k = self.codebooks.k
        self.log_cell_weights = torch.log(self.codebooks.cell_sums(weights)).to(item_table.dtype).view(k, k)
        self.cumulative = None
        if not self.equal_weights:
            self.cumulative = torch.zeros(weights.numel() + 1, dtype=torch.float64, device=weights.device)
            self.cumulative[1:] = torch.cumsum(weights[self.codebooks.order], 0)

    def proposal(self, query: torch.Tensor, item_table: torch.Tensor) -> Proposal:
        first, second = self.codebooks.codeword_scores(query)
        log_joint = self.log_cell_weights + first[:, :, None] + second[:, None, :]
        return Proposal(first, second, log_joint, torch.logsumexp(log_joint.flatten(1), dim=1), self.cumulative)

    def item_log_weight(self, proposal: Proposal, items: torch.Tensor, read) -> torch.Tensor:
        return self.log_weights.take(items)


@SAMPLERS.register("midx_uni")
class MidxUniform(StaticCellSampler):
    summary = "MIDX_Uni: the inverted multi-index proposal q(i) ∝ exp(z·(q_i - q̃_i)) (Eq. 4)"
    figure = (4, {})
    equal_weights = True

    def item_weights(self) -> torch.Tensor:
        return torch.ones(self.dataset.n_items)


@SAMPLERS.register("midx_pop")
class MidxPopularity(StaticCellSampler):
    summary = "MIDX_Pop: the inverted multi-index proposal weighted by popularity, ∝ exp(z·(q_i - q̃_i)) pop(i) (Eq. 5)"
    figure = (5, {"variant": "log"})
    Args = MidxPopArgs

    def item_weights(self) -> torch.Tensor:
        counts = self.dataset.item_popularity.to("cpu", torch.float64) + self.args.smoothing
        return TRANSFORMS[self.args.variant](counts)


@SAMPLERS.register("midx")
class MidxExact(InvertedMultiIndexSampler):
    """Theorem 4.1: stage 3 is the residual softmax exp(z·q̃_i) / Σ_{j ∈ Ω} exp(z·q̃_j); the law is the softmax.

    O(MD) per query (all residual scores), processed in chunks of queries to bound memory."""

    summary = "MIDX: the inverted multi-index with the residual softmax, an exact draw from the model's softmax"
    figure = (6, {})

    def reference_log_q_gap(self, batch: Batch, negatives: Negatives) -> torch.Tensor:
        """The law is the model's softmax: log q(j) - log q(i) = s(u, j) - s(u, i) (float64)."""
        query, table = batch.query.detach().double().cpu(), batch.item_table.detach().double().cpu()
        items = negatives.items.cpu()
        scores = (
            query @ table[items].transpose(-1, -2) if negatives.shared else (query[:, None, :] * table[items]).sum(-1)
        )
        return scores.reshape(batch.positives.numel(), -1) - (query * table[batch.positives.cpu()]).sum(-1)[:, None]

    def _chunks(self, tensor: torch.Tensor) -> tuple[torch.Tensor, ...]:
        size = max(1, EXACT_CHUNK_ENTRIES // self.dataset.n_items)
        return torch.split(tensor, size)

    def proposal(self, query: torch.Tensor, item_table: torch.Tensor) -> Proposal:
        codebooks = self.codebooks
        residual = item_table - codebooks.quantised()
        residual_scores = (query @ residual.T).to(torch.float64)  # [B, M]
        shift = residual_scores.max(dim=1, keepdim=True).values
        weights = torch.exp(residual_scores - shift)
        cumulative = torch.zeros(query.shape[0], weights.shape[1] + 1, dtype=torch.float64, device=query.device)
        cumulative[:, 1:] = torch.cumsum(weights[:, codebooks.order], dim=1)
        k = codebooks.k
        first, second = codebooks.codeword_scores(query)
        log_cells = (torch.log(codebooks.cell_sums(weights)) + shift).view(-1, k, k)
        log_joint = log_cells + first.to(torch.float64)[:, :, None] + second.to(torch.float64)[:, None, :]
        return Proposal(
            first, second, log_joint, torch.logsumexp(log_joint.flatten(1), dim=1), cumulative, residual_scores
        )

    def item_log_weight(self, proposal: Proposal, items: torch.Tensor, read) -> torch.Tensor:
        return read(proposal.residual_scores, items)
