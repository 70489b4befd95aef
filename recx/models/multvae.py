"""Mult-VAE (Liang et al. 2018) as the FastVAE paper configures it (its §3.1 and §7.1.4), and FastVAE (its §6).

Encoder: the user's training history y_u (binary, L2-normalised, each entry dropped with probability `dropout` and
the rest scaled by 1/(1-p)) -> Linear(M, 200) -> ReLU -> Linear(200, 2·32) = (μ, log σ²). Decoder: z -> Linear(32, 200)
= the query; score(u, i) = query · q_i with the item table Q [M, 200] as the output layer (by default no item bias,
so that the score is an inner product of representations and samplers can use them; `item_bias` adds b_i in
training, score = query · q_i + b_i).

Training (recx.training.runners.users), per user, with z = μ + σ ε, ε ~ N(0, I):
    L(u) = -Σ_{i ∈ y_u} log softmax_i(query(z) · Q) + β_t KL(N(μ, σ²) ‖ N(0, I)),
    KL = ½ Σ_d (σ_d² + μ_d² - 1 - log σ_d²),  β_t = min(anneal_cap, t / anneal_steps), t the update count
(Liang et al.'s linear KL annealing). `multvae` trains with the full softmax; `fastvae` replaces it with a sampled
softmax whose negatives are drawn per user by the run's sampler and shared by that user's positives, logQ-corrected.
Evaluation uses μ (no sampling, no dropout) on the training history.

The official FastVAE code (HERECJ/FastVae_Gpu, whose runs gave the paper's numbers) differs from this text; its
choices are model_args, off by default: `dropout_at: hidden` (dropout on the normalised history sum, not the input),
`input_init: normal` (the encoder table drawn N(0, 1), torch's Embedding default, instead of U(±1/√hidden)),
`encoder_bias: false` (its encoder's first layer is an Embedding sum, with no bias), `item_init: normal` (fastvae: its
item table is an Embedding, drawn N(0, 1); its Mult-VAE's output layer is a Linear, its weights uniform as here),
`item_bias: true` (multvae: the output layer's bias b_i joins the training logits, query · q_i + b_i; evaluation
ranks by query · q_i, as the official `_get_item_emb` drops it; recx starts b at 0, the official Linear at
U(±1/√hidden)); its StepLR (the learning rate times 0.95 every 5 epochs) is the run's `lr_step_epochs: 5`
(recx.training.schedule, every runner). Its KL enters the loss as a constant (`kl.item()`), which `anneal_cap: 0.0`
matches in gradient. Its Mult-VAE's softmax also spans a padding column (item 0, never a positive:
one extra negative); recx's spans the M items.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import nn

from recx.core.args import arg
from recx.core.errors import RecxError
from recx.core.gather import gather_rows
from recx.models.base import Model
from recx.models.registry import MODELS


@dataclass
class MultVAEArgs:
    hidden: int = arg(
        200, at_least=1, at_most=1_000_000, help="the encoder's hidden layer and the item representations' size"
    )
    dropout: float = arg(0.5, at_least=0, below=1, help="the dropout probability, applied where dropout_at says")
    anneal_cap: float = arg(0.2, at_least=0, help="the KL weight's cap")
    anneal_steps: int = arg(200_000, at_least=1, help="updates over which the KL weight rises to its cap")
    dropout_at: str = arg(
        "input", choices=("input", "hidden"), help="input (Liang et al., the paper's text) or hidden (official code)"
    )
    input_init: str = arg(
        "uniform", choices=("uniform", "normal"), help="the encoder table: U(±1/√hidden) or N(0, 1) (official code)"
    )
    item_init: str = arg(
        "uniform", choices=("uniform", "normal"), help="the item table: uniform or normal (official FastVAE)"
    )
    encoder_bias: bool = arg(True, help="a bias on the encoder's hidden layer (the official code has none)")
    item_bias: bool = arg(False, help="multvae: a trained output bias b_i in the softmax, left out at evaluation")


class History(NamedTuple):
    """The training items of a batch of B users as P (row, item) pairs in row order: rows [P] (the user's position
    in the batch) and items [P], with each user's number of items, lengths [B], and the position of its first pair,
    firsts [B] = cumsum(lengths) - lengths."""

    rows: torch.Tensor
    items: torch.Tensor
    lengths: torch.Tensor
    firsts: torch.Tensor


@MODELS.register("multvae")
class MultVAE(Model):
    """`dim` (the run's `dim`) is the latent size (32 in the paper); representations have size `hidden`. Trained
    with the official codes' fused dense Adam only (recx.training.runners.users), every row every step."""

    summary = "Mult-VAE: a variational auto-encoder of each user's history, full softmax likelihood"
    Args = MultVAEArgs
    runner = "users"
    losses = ("full_softmax",)
    optimizers = ("adam",)
    weight_decay_modes = ("none", "full")
    sampled_softmax = False  # True: the runner draws negatives with the run's sampler (FastVAE)
    # True: the encoder and item tables' gathered rows send row-sparse gradients, summed into dense buffers the runner
    # keeps (FastVAE, whose step is otherwise light; Mult-VAE's step is its [B, M] product, and a kept encoder buffer
    # raised its page faults: 6.4M against 5.4M over 3 steps at 1.5M items)
    row_sparse_gradients = False
    history_indptr: torch.Tensor  # buffers: the training CSR's indptr [n_users + 1] and indices [nnz]
    history_items: torch.Tensor

    def __init__(self, n_users: int, n_items: int, dim: int, args: MultVAEArgs, dataset=None):
        super().__init__()
        if dataset is None:
            raise RecxError("multvae/fastvae need the training data (the encoder reads each user's history)")
        self.n_users, self.n_items, self.latent, self.args = n_users, n_items, dim, args
        self.register_buffer("history_indptr", dataset.train.indptr.clone(), persistent=False)
        self.register_buffer("history_items", dataset.train.indices.clone(), persistent=False)
        bound = 1 / math.sqrt(args.hidden)

        def table(init: str) -> nn.Parameter:
            values = torch.empty(n_items, args.hidden)
            return nn.Parameter(values.normal_() if init == "normal" else values.uniform_(-bound, bound))

        self.encoder_in = table(args.input_init)
        self.encoder_bias = nn.Parameter(torch.zeros(args.hidden)) if args.encoder_bias else None
        self.encoder_out = nn.Linear(args.hidden, 2 * dim)
        self.decoder = nn.Linear(dim, args.hidden)
        self.items = table(args.item_init)
        self.item_bias = nn.Parameter(torch.zeros(n_items)) if args.item_bias else None

    def history(self, users: torch.Tensor, nnz: int | None = None) -> History:
        """The training items of `users` (row = position of the user in `users`), read from the CSR. `nnz`, their
        number when the caller knows it, spares a CUDA host sync."""
        starts = self.history_indptr[users]
        lengths = self.history_indptr[users + 1] - starts
        rows = torch.repeat_interleave(torch.arange(users.numel(), device=users.device), lengths, output_size=nnz)
        firsts = torch.cumsum(lengths, 0) - lengths
        offsets = torch.arange(rows.numel(), device=users.device) - firsts[rows]
        return History(rows, self.history_items[starts[rows] + offsets], lengths, firsts)

    def posterior(
        self,
        users: torch.Tensor,
        generator: torch.Generator | None = None,
        history: History | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """(μ, log σ²) [B, dim] from the users' training histories (`history`: `self.history(users)` when the caller
        has it already); `generator` given: dropout is applied (at `dropout_at`)."""
        rows, items, lengths, _ = self.history(users) if history is None else history
        weights = lengths.clamp_min(1).to(self.items.dtype).rsqrt()[rows]
        dropout = self.args.dropout if generator is not None else 0.0
        if dropout > 0 and self.args.dropout_at == "input":
            keep = torch.rand(rows.shape, generator=generator, device=rows.device) >= dropout
            weights = weights * keep / (1 - dropout)
        hidden = torch.zeros(users.numel(), self.args.hidden, device=users.device, dtype=self.items.dtype)
        hidden.index_add_(
            0, rows, gather_rows(self.encoder_in, items, sparse=self.row_sparse_gradients) * weights[:, None]
        )
        if dropout > 0 and self.args.dropout_at == "hidden":
            keep = torch.rand(hidden.shape, generator=generator, device=hidden.device, dtype=hidden.dtype) >= dropout
            hidden = hidden * keep / (1 - dropout)
        if self.encoder_bias is not None:
            hidden = hidden + self.encoder_bias
        mu, log_var = self.encoder_out(F.relu(hidden)).chunk(2, dim=-1)
        return mu, log_var

    def decode(self, z: torch.Tensor) -> torch.Tensor:
        """The query [B, hidden] whose inner products with the item table are the logits."""
        return self.decoder(z)

    def representations(self, users: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.decode(self.posterior(users)[0]), self.items

    @torch.no_grad()
    def item_table(self) -> torch.Tensor:
        return self.items.detach()

    def embedding_tables(self) -> list[nn.Parameter]:
        return [self.items]

    def beta(self, update: int) -> float:
        """KL weight after `update` optimizer steps (linear annealing, capped)."""
        return min(self.args.anneal_cap, update / self.args.anneal_steps)

    @staticmethod
    def kl_divergence(mu: torch.Tensor, log_var: torch.Tensor) -> torch.Tensor:
        """KL(N(μ, σ²) ‖ N(0, I)) per row: ½ Σ (σ² + μ² - 1 - log σ²)."""
        return 0.5 * (log_var.exp() + mu.pow(2) - 1 - log_var).sum(-1)

    def kept_gradient_tables(self) -> list[nn.Parameter]:
        """The tables whose gradient buffers a step keeps and zeroes in place (their gathered rows send row-sparse
        gradients into them: `row_sparse_gradients`)."""
        return [self.encoder_in, self.items] if self.row_sparse_gradients else []


@MODELS.register("fastvae")
class FastVAE(MultVAE):
    """Mult-VAE trained with a sampled softmax (negatives per user from the run's sampler, logQ-corrected); each
    positive's log q comes from the sampler's closed form."""

    summary = "FastVAE: Mult-VAE with a sampled softmax over the run sampler's negatives, logQ-corrected"
    losses = ("softmax",)
    closed_form_sampler = True
    sampled_softmax = True
    row_sparse_gradients = True

    @classmethod
    def check_args(cls, args) -> None:
        if args.item_bias:
            raise RecxError("model_args.item_bias applies to multvae only: a sampled softmax scores inner products")
