"""The model contract (docs/design.md "Models"): representations whose inner product is the score."""

from __future__ import annotations

from typing import ClassVar

import torch
from torch import nn

from recx.core.gather import gather_rows


class Model(nn.Module):
    """Subclasses implement `representations`; scoring, evaluation and samplers only use these tensors.

    What a model trains with, which `resolve` checks before any run: `losses` (None: any loss; (): none, the model
    has its own objective), `optimizers` (None: any; (): none, not trained by gradient steps, and `runner_note`
    says how it is fitted), `weight_decay_modes`, and `closed_form_sampler` (the sampler must give each item's
    normalised log q). `check_args(args)` refuses what the arguments and the model's class decide together."""

    summary: ClassVar[str] = ""
    label: ClassVar[str] = ""  # the name in report rows (default: the registered name)
    runner: ClassVar[str] = "interactions"  # the runner (recx.training.runners) that fits this model
    losses: ClassVar[tuple[str, ...] | None] = None
    optimizers: ClassVar[tuple[str, ...] | None] = None
    runner_note: ClassVar[str] = ""
    weight_decay_modes: ClassVar[tuple[str, ...]] = ("none", "full", "batch")
    closed_form_sampler: ClassVar[bool] = False
    ordered_examples: ClassVar[bool] = True  # its epochs take training examples in an order: `fixed_order` applies
    alternates: ClassVar[bool] = False  # fitted by alternating half-steps (user, then item): `half_steps` applies
    # `query(users)` computes each user's row alone (gathers and row-wise operations, no product across rows), so the
    # queries of all users at once are bit for bit those of any batch of them: the evaluator then computes them once
    # (a subclass whose query mixes rows, e.g. through a matrix product, must set it False)
    row_queries: ClassVar[bool] = False
    n_users: int
    n_items: int

    @classmethod
    def check_args(cls, args) -> None:
        """Refuse (RecxError naming `model_args.<key>`) arguments that this class does not take together."""

    def representations(self, users: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(query [len(users), d], item table [n_items, d]); score(u, i) = query[u] · items[i]."""
        raise NotImplementedError

    def rows(self, users: torch.Tensor, items: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(query [len(users), d], item representations [len(items), d]) of the given ids only: a training step
        asks for the rows it scores, so gradients (and row-sparse optimizer updates) touch only those rows where the
        model allows it. This default computes the whole item table and picks the rows."""
        query, table = self.representations(users)
        return query, gather_rows(table, items)

    def dot_tables(self) -> tuple[nn.Parameter, nn.Parameter] | None:
        """(user table, item table) when score(u, i) is exactly user_table[u] · item_table[i] and those two tables are
        all the model's parameters (a step may then compute its gradients row by row: recx.training.step); else None."""
        return None

    def embedding_tables(self) -> list[nn.Parameter]:
        """The per-user / per-item parameter tables (rows indexed by id), for weight decay modes."""
        raise NotImplementedError

    @torch.no_grad()
    def item_table(self) -> torch.Tensor:
        """All item representations, for evaluation (computed once, reused across user batches)."""
        return self.representations(torch.zeros(1, dtype=torch.long, device=self.device))[1].detach()

    @torch.no_grad()
    def query(self, users: torch.Tensor) -> torch.Tensor:
        return self.rows(users, users.new_zeros(0))[0].detach()

    @property
    def device(self) -> torch.device:
        return next(self.parameters()).device
