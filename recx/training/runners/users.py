"""User batches (Mult-VAE / FastVAE): shuffled users with training items, `batch_size` users per step.

The seam with the training loop (recx.training.fit): its epochs, validation, early stopping and records are the same
for every runner; this runner owns an epoch's steps. A step encodes the users' histories (dropout and the
reparameterisation drawn from the run's generator), decodes the queries, and scores each user's training items:
- full softmax (`multvae`): nll = Σ_{(u,i)} logsumexp_j(o_uj) - o_ui over all items j;
- sampled softmax (`fastvae`, the FastVAE paper's §6): Φ_u = the run sampler's negatives for user u (one draw per
  user, shared by all of u's positives), o' = o - log q (logQ correction), and
      nll = Σ_{(u,i)} log(exp(o'_ui) + Σ_{j ∈ Φ_u} exp(o'_uj)) - o'_ui;
  the positives' log q come from `Sampler.log_probability`.
`loss_args` apply as for the softmax losses: logits o = s / temperature (s = query · q_i, + b_i with multvae's
`item_bias`), `logq_correction: false` drops log q (an item a resampler did not draw, log q = +inf, stays out).
The objective is Σ_u [nll_u + β_t KL_u] summed over the batch (the official FastVAE code's reduction, the scale at
which Adam's weight decay of 0.01 was tuned); the recorded step loss is that sum divided by the batch's user count.
Dense Adam (fused), the official codes' and the only optimizer these models declare (`resolve` refuses another),
with `weight_decay` (mode `full`; the models refuse `batch`, an MF notion), its learning rate stepped down between
epochs by the run's schedule (recx.training.schedule; the official FastVAE code's StepLR). The model/loss pairing and
the sampler's closed form are the models' declarations, checked by `resolve` before any run.
FastVAE's encoder and item tables (`row_sparse_gradients`) keep a dense gradient buffer, allocated once and zeroed in
place each step, into which their gathered rows' row-sparse gradients are summed (recx.core.gather): at 1.5M items
a fresh [M, 200] gradient per table and step cost 0.3-1 s of page faults (282K-559K faults a step, measured with
bench/fastvae_speed.py's shapes). Mult-VAE takes fresh gradients, as before.
A checkpoint may be taken after any step (recx.training.runners.base): the epoch's order of users is drawn again from the
generator's state at its start, and the sampler's per-epoch rebuild is not repeated.
"""

from __future__ import annotations

import math

import torch

from recx.core.gather import gather_rows
from recx.samplers.base import Batch, checked_draw
from recx.training.build import build_sampler
from recx.training.runners.base import Runner
from recx.training.runners.registry import RUNNERS
from recx.training.schedule import EpochSchedule

# Per-user negatives are scored by one [B, M] product and a gather when M <= this x negatives per user: gathering
# B·T rows of the item table (and scattering their gradients back) is memory-bound; on one CPU core, B = 256,
# T = 1,000, M = 41K, D = 200, the product and gather took 0.6 s forward + backward, the row gather 2.1 s.
DENSE_SCORES_RATIO = 64


def full_softmax_nll(
    query: torch.Tensor,
    item_table: torch.Tensor,
    rows: torch.Tensor,
    positives: torch.Tensor,
    item_bias: torch.Tensor | None = None,
) -> torch.Tensor:
    """Σ over (row, positive) pairs of -log softmax(query[row] · item_table + item_bias)[positive]."""
    logits = query @ item_table.T
    positive_scores = (gather_rows(query, rows) * gather_rows(item_table, positives)).sum(-1)
    if item_bias is not None:
        logits = logits + item_bias
        positive_scores = positive_scores + item_bias[positives]
    return (gather_rows(torch.logsumexp(logits, dim=1), rows) - positive_scores).sum()


def sampled_softmax_nll(
    query: torch.Tensor,
    item_table: torch.Tensor,
    rows: torch.Tensor,
    positives: torch.Tensor,
    positive_log_q: torch.Tensor,
    negatives,
    row_sparse: bool = False,
) -> torch.Tensor:
    """Σ over (row, positive) pairs of the logQ-corrected sampled softmax over {positive} ∪ Φ_row; `row_sparse`: the
    gathered item rows send a row-sparse gradient (recx.core.gather)."""
    if negatives.shared:
        negative_scores = query @ gather_rows(item_table, negatives.items[0], sparse=row_sparse).T
    elif item_table.shape[0] <= DENSE_SCORES_RATIO * negatives.items.shape[1]:
        negative_scores = (query @ item_table.T).gather(1, negatives.items)
    else:
        negative_scores = torch.einsum("bd,bnd->bn", query, gather_rows(item_table, negatives.items, sparse=row_sparse))
    negative_lse = torch.logsumexp(negative_scores - negatives.log_q, dim=1)
    positive_rows = gather_rows(item_table, positives, sparse=row_sparse)
    positive = (gather_rows(query, rows) * positive_rows).sum(-1) - positive_log_q
    return (torch.logaddexp(positive, gather_rows(negative_lse, rows)) - positive).sum()


@RUNNERS.register("users")
class UserEpochs(Runner):
    def __init__(self, config, dataset, model, generator):
        super().__init__(config, dataset, model, generator)
        if config.optimizer != "adam":
            raise ValueError(f"the users runner trains with dense Adam, not {config.optimizer!r} (resolve refuses it)")
        decay = config.weight_decay if config.weight_decay_mode == "full" else 0.0
        self.optimizer = torch.optim.Adam(model.parameters(), lr=config.lr, weight_decay=decay, fused=True)
        self.schedule = EpochSchedule(self.optimizer, config)
        self.sampler = build_sampler(config, dataset, generator) if model.sampled_softmax else None
        self.users = torch.nonzero(dataset.train.row_lengths() > 0).flatten().to(model.device)
        self.n_steps = math.ceil(self.users.numel() / config.batch_size)
        self.updates = 0

    def batch_objective(self, users: torch.Tensor, nnz: int | None = None) -> torch.Tensor:
        """Σ_u [nll_u + β KL_u] over the batch's users (`nnz`: their number of training items, when known)."""
        model = self.model
        rows, positives = model.history(users, nnz)
        mu, log_var = model.posterior(users, self.generator, (rows, positives))
        noise = torch.randn(mu.shape, generator=self.generator, device=mu.device, dtype=mu.dtype)
        temperature = self.config.loss_args["temperature"]
        query = model.decode(mu + noise * torch.exp(0.5 * log_var)) / temperature
        item_table = model.items
        if self.sampler is None:
            bias = model.item_bias / temperature if model.item_bias is not None else None
            nll = full_softmax_nll(query, item_table, rows, positives, bias)
        else:
            nll = self.sampled_nll(users, query, item_table, rows, positives)
        return nll + model.beta(self.updates) * model.kl_divergence(mu, log_var).sum()

    def sampled_nll(self, users, query, item_table, rows, positives) -> torch.Tensor:
        """Negatives drawn once per user (the sampler's `positives` are each user's first training item, only for
        the contract); the positives' log q are asked for all of them at once, as (user row, item) pairs."""
        first = self.model.first_of_rows(rows, positives, users.numel())
        batch = Batch(users, first, query.detach(), item_table.detach())
        negatives = checked_draw(self.sampler, self.sampler.sample(batch), users.numel(), users.device)
        positive_log_q = self.sampler.pair_log_probability(batch, rows, positives)
        if not self.config.loss_args["logq_correction"]:
            positive_log_q = torch.zeros_like(positive_log_q)
            negatives.log_q = torch.where(torch.isinf(negatives.log_q), negatives.log_q, 0.0)
        return sampled_softmax_nll(
            query, item_table, rows, positives, positive_log_q, negatives, self.model.row_sparse_gradients
        )

    def clear_gradients(self) -> None:
        """Zero the kept gradient buffers in place (allocated on first use: their gathered rows' sparse gradients
        are summed into them); drop the others (backward hands over fresh ones)."""
        model = self.model
        kept = {id(table) for table in model.kept_gradient_tables()}
        for param in model.parameters():
            if id(param) not in kept:
                param.grad = None
            elif param.grad is None:
                param.grad = torch.zeros_like(param)
            else:
                param.grad.zero_()

    def history_sizes(self, order: torch.Tensor) -> list[int]:
        """Training items per step's users, read once per epoch (the only host read of an epoch's steps on CUDA)."""
        indptr = self.model.history_indptr
        lengths = indptr[order + 1] - indptr[order]
        padded = torch.zeros(self.n_steps * self.config.batch_size, dtype=lengths.dtype, device=lengths.device)
        padded[: lengths.numel()] = lengths
        return padded.view(self.n_steps, -1).sum(1).tolist()

    checkpoints_within_epoch = True

    def train_epoch(self, epoch, losses, after_step) -> None:
        config, model = self.config, self.model
        if self.sampler is not None and self.sampler.rebuild_every == "epoch" and self.steps_done == 0:
            self.sampler.rebuild(None, model.item_table())
        order = self.users[self.shuffled(self.users.numel())]
        sizes = self.history_sizes(order)
        for step in range(self.steps_done, self.n_steps):
            users = order[step * config.batch_size : (step + 1) * config.batch_size]
            objective = self.batch_objective(users, sizes[step])
            self.clear_gradients()
            objective.backward()
            self.optimizer.step()
            self.updates += 1
            losses[step] = objective.detach() / users.numel()
            self.steps_done = step + 1
            after_step(step + 1)
        self.steps_done = 0
        self.schedule.end_epoch()
