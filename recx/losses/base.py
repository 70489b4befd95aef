"""The loss contract (docs/design.md "Losses")."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, ClassVar, NamedTuple

import torch


@dataclass
class LossInput:
    """What a loss may use. Scores are inner products of the model's representations.

    pos_scores [B]; neg_scores [B, n] (a query's own positive among its candidates is -inf when the loss asks for
    `mask_positive`); pos_log_q [B] and neg_log_q [B or 1, n] are the proposal's log-probabilities; neg_weights
    [B, n] are a sampler's detached per-candidate weights (None: equal weights). Losses defined on the
    representations themselves (alignment/uniformity) read query [B, d] and positive_repr [B, d]. neg_segments
    (optional) splits the candidate columns into groups whose softmax losses are averaged with given weights
    (recx.samplers.base.Negatives.segments).
    """

    pos_scores: torch.Tensor
    neg_scores: torch.Tensor
    pos_log_q: torch.Tensor
    neg_log_q: torch.Tensor
    neg_weights: torch.Tensor | None = None
    users: torch.Tensor | None = None
    positives: torch.Tensor | None = None
    query: torch.Tensor | None = None
    positive_repr: torch.Tensor | None = None
    neg_segments: tuple[tuple[int, float], ...] | None = None

    def representations(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(query [B, d], positive_repr [B, d]) for the losses on representations."""
        if self.query is None or self.positive_repr is None:
            raise ValueError("this loss reads the representations (LossInput.query and positive_repr)")
        return self.query, self.positive_repr

    def ids(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(users [B], positives [B]): the batch's ids."""
        if self.users is None or self.positives is None:
            raise ValueError("this loss needs the batch's ids (LossInput.users and positives)")
        return self.users, self.positives


@dataclass
class Histories:
    """Users each scored against the items of their training history (the users runner: Mult-VAE, FastVAE).

    query [B, d]: the users' queries, before the loss's temperature; item_table [M, d]; item_bias [M] or None (added
    to the scores); rows [P] and positives [P]: the P (query row, item) pairs of the users' histories. `draw(logits
    query [B, d], detached) -> (negatives, positive log q [P])`: the run sampler's candidates per user (a
    recx.samplers.base.Negatives, shared by the user's positives) and each pair's positive log q, or None without a
    sampler. `row_sparse`: gathered item rows send row-sparse gradients (recx.core.gather).
    """

    query: torch.Tensor
    item_table: torch.Tensor
    rows: torch.Tensor
    positives: torch.Tensor
    item_bias: torch.Tensor | None = None
    draw: Callable[[torch.Tensor], tuple[Any, torch.Tensor]] | None = None
    row_sparse: bool = False

    def candidates(self, query: torch.Tensor) -> tuple[Any, torch.Tensor]:
        """`draw(query)`, for the losses that need candidates."""
        if self.draw is None:
            raise ValueError("this loss needs the run sampler's candidates (Histories.draw)")
        return self.draw(query)


# The inputs a loss may take (`Loss.takes`) and the method each is given to:
INPUTS = {
    # LossInput: the scores of each query's positive and candidates (every loss)
    "scores": "__call__",
    # over_shared_candidates(query [B, d], candidates [n, d], pos_scores [B], pos_log_q [B], neg_log_q [B or 1, n],
    # mask, segments=None): candidates shared by the batch as representations, so no [B, n] scores are handed over;
    # mask: where a query's own positive is among them (None, a [B, n] bool tensor or (rows, cols)); segments: as
    # in LossInput
    "shared_candidates": "over_shared_candidates",
    # row_gradients(user_table [U, d], item_table [M, d], users [B], ids [B, 1 + k]) -> (loss, user row gradients
    # [B, d], id row gradients [B, 1 + k, d]): unweighted per-query candidates (positive first) on dot scores, the
    # gradients computed without autograd (compiled, CPU tables)
    "row_gradients": "row_gradients",
    # over_histories(Histories): users each scored against every item of their training history (the users runner)
    "histories": "over_histories",
}


class Bundle(NamedTuple):
    """Settings a loss applies together to a run that sets none of `values`' keys (dotted: `model_args.scoring`)
    nor of `blocked_by`, and whose settings (given, by default or by an earlier bundle) equal `requires`."""

    values: dict
    blocked_by: tuple[str, ...] = ()
    requires: dict | None = None


class Loss:
    """`__call__(LossInput) -> scalar`, the mean over the batch's queries (BPR's `reduction: sum`: their sum).

    `summary`: one line for `recx list`. `default_bundles`: settings that go with the loss, applied in order to a run
    that sets none of their keys (recx.config.run_config.apply_loss_defaults). `auto_optimizer`: what the optimizer
    `auto` resolves to with this loss (dense Adam for full-table decay whatever the loss).

    `required_sampler` names the only sampler the loss is defined with (None: any). `mask_positive` asks the
    trainer to remove a query's own positive from its candidates (score -inf), as softmax losses need.
    `uses_negatives` False (alignment/uniformity losses): the candidates play no part, so batched weight decay
    does not touch their rows. Losses with learned parameters (margins) return them from `parameters()`; the
    optimizer trains them too. `check_model(model, model_args, args)`: refuse a model or scoring the loss is not
    defined for, at plan time.

    `takes`: the inputs the loss has a method for (INPUTS), each the same loss from another form of a step's data.
    The interactions runner's step gives it the one that fits the batch (recx.training.step.input_kind), else the
    scores; the users runner gives it "histories".
    """

    summary: ClassVar[str] = ""
    default_bundles: ClassVar[tuple[Bundle, ...]] = ()
    auto_optimizer: ClassVar[str] = "lazy_adam"
    required_sampler: str | None = None
    mask_positive: bool = False
    uses_negatives: bool = True
    takes: ClassVar[tuple[str, ...]] = ("scores",)

    def __init__(self, args, dataset=None):
        self.args = args

    @classmethod
    def check_model(cls, model: str, model_args: dict, args) -> None:
        """A plan-time check of the model this loss trains (`resolve` runs it before any run starts, as a model's
        `check_args`): refuse, with a RecxError naming the key (`model_args.scoring`), a model or scoring the loss is
        not defined for (e.g. a loss of cosine scores). `model_args`: the model's resolved arguments; `args`: this
        loss's Args."""

    @classmethod
    def decays_with_model(cls, args) -> bool:
        """Whether the run's `full` weight decay reaches this loss's own parameters as it reaches the model's (one
        optimizer group with the model's decay); else they are never decayed."""
        return False

    def parameters(self) -> list[torch.nn.Parameter]:
        return []

    def to(self, device: torch.device) -> "Loss":
        return self

    def __call__(self, batch: LossInput) -> torch.Tensor:
        raise NotImplementedError
