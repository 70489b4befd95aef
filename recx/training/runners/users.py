"""User batches (Mult-VAE / FastVAE): shuffled users with training items, `batch_size` users per step.

The seam with the training loop (recx.training.fit): its epochs, validation, early stopping and records are the same
for every runner; this runner owns an epoch's steps. A step encodes the users' histories (dropout and the
reparameterisation drawn from the run's generator), decodes the queries, and hands them with the users' training
items to the run's loss as `Histories` (recx.losses.base): `full_softmax` (`multvae`) scores every item,
`softmax` (`fastvae`, the FastVAE paper's §6) the run sampler's negatives, drawn once per user for the loss's logits
and shared by the user's positives, and the positives' log q as (user row, item) pairs, both from
`Sampler.sample_with_pair_log_probability` (recx.losses.user_softmax). The objective is Σ_u [nll_u + β_t KL_u]
summed over the batch (the official FastVAE code's reduction, the scale at which Adam's weight decay of 0.01 was
tuned); the recorded step loss is that sum divided by the batch's user count.
Dense Adam (fused), the official codes' and the only optimizer these models declare (`resolve` refuses another),
with `weight_decay` (mode `full`; the models refuse `batch`, an MF notion), its learning rate stepped down between
epochs by the run's schedule (recx.training.schedule; the official FastVAE code's StepLR). The model/loss pairing and
the sampler's closed form are the models' declarations, checked by `resolve` before any run.
FastVAE's encoder and item tables (`row_sparse_gradients`) keep a dense gradient buffer, allocated once and zeroed in
place each step, into which their gathered rows' row-sparse gradients are summed (recx.core.gather): at 1.5M items
a fresh [M, 200] gradient per table and step cost 0.3-1 s of page faults (282K-559K faults a step, measured with
bench/fastvae_speed.py's shapes). Mult-VAE takes fresh gradients, as before.
A checkpoint may be taken after any step (recx.training.runners.base): the epoch's order of users is drawn again from the
generator's state at its start, and the sampler's per-epoch rebuild is not repeated."""

from __future__ import annotations

import functools
import math
from typing import TYPE_CHECKING

import torch

from recx.losses.base import Histories
from recx.samplers.base import Batch, checked_draw
from recx.training.build import build_loss, build_sampler
from recx.training.runners.base import Runner
from recx.training.runners.registry import RUNNERS
from recx.training.schedule import EpochSchedule

if TYPE_CHECKING:
    from recx.models.multvae import History


@RUNNERS.register("users")
class UserEpochs(Runner):
    def __init__(self, config, dataset, model, generator):
        super().__init__(config, dataset, model, generator)
        if config.optimizer != "adam":
            raise ValueError(f"the users runner trains with dense Adam, not {config.optimizer!r} (resolve refuses it)")
        decay = config.weight_decay if config.weight_decay_mode == "full" else 0.0
        self.optimizer = torch.optim.Adam(model.parameters(), lr=config.lr, weight_decay=decay, fused=True)
        self.schedule = EpochSchedule(self.optimizer, config)
        self.loss_fn = build_loss(config, dataset, model.device)
        self.sampler = build_sampler(config, dataset, generator) if model.sampled_softmax else None
        self.users = torch.nonzero(dataset.train.row_lengths() > 0).flatten().to(model.device)
        self.n_steps = math.ceil(self.users.numel() / config.batch_size)
        self.updates = 0

    def batch_objective(self, users: torch.Tensor, nnz: int | None = None) -> torch.Tensor:
        """Σ_u [nll_u + β KL_u] over the batch's users (`nnz`: their number of training items, when known). At β = 0
        (anneal_cap 0, or the first update) the KL term is not computed: 0 · KL adds exactly 0 to the objective and
        to every gradient wherever the KL is finite (where exp(log σ²) overflows it would have made them NaN)."""
        model = self.model
        history = model.history(users, nnz)
        mu, log_var = model.posterior(users, self.generator, history)
        noise = torch.randn(mu.shape, generator=self.generator, device=mu.device, dtype=mu.dtype)
        query = model.decode(mu + noise * torch.exp(0.5 * log_var))
        draw = functools.partial(self.candidates, users, history) if self.sampler is not None else None
        histories = Histories(
            query, model.items, history.rows, history.items, model.item_bias, draw, model.row_sparse_gradients
        )
        nll = self.loss_fn.over_histories(histories)
        beta = model.beta(self.updates)
        if beta == 0:
            return nll
        return nll + beta * model.kl_divergence(mu, log_var).sum()

    def candidates(self, users: torch.Tensor, history: History, query: torch.Tensor):
        """`Histories.draw`: negatives drawn once per user for the logits' query (the sampler's `positives` are each
        user's first training item, only for the contract), and the positives' log q, asked for all of them at once
        as (user row, item) pairs."""
        batch = Batch(users, history.items[history.firsts], query, self.model.items.detach())
        negatives, log_q = self.sampler.sample_with_pair_log_probability(batch, history.rows, history.items)
        return checked_draw(self.sampler, negatives, users.numel(), users.device), log_q

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
