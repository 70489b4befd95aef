"""One training step: negatives, the rows they need, the loss in the input it takes, its gradients and update.

The step reads only the representations it scores (`model.rows`: the batch's users, its positives and candidates),
so gradients and row-sparse optimizer updates touch only those rows. The whole item table is computed only where a
method needs it: a sampler that scores every item (read lazily through `Batch.item_table`), a candidate set as large
as the catalogue (full softmax), or per-query candidates on a catalogue small enough that one [B, n_items] product
is cheaper than gathering rows. The loss gets one of the inputs it `takes` (recx.losses.base.INPUTS), chosen by
`input_kind`, one path each: "scores" (a LossInput, every loss), "shared_candidates" (the representations of
candidates shared by the batch, so that the backward needs no [B, n] product of gradients) and "row_gradients" (the
rows' gradients handed straight to a row-sparse optimizer, without autograd: `row_gradient_step`).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from recx.config.run_config import RunConfig
from recx.core.device_paths import accelerator_branch
from recx.core.gather import gather_rows
from recx.kernels.row_dots import row_dots
from recx.losses.base import LossInput
from recx.models.scoring import per_query_scores, whole_table_pays_per_query
from recx.optim.optimizers import RowSparseOptimizer
from recx.samplers.base import Batch, Negatives, checked_draw
from recx.training.positive_mask import mask_positives, positive_mask

FEW_CANDIDATES = 9  # rows per query (positive + candidates) up to which elementwise products beat a bmm


def whole_table_pays(n_items: int, negatives: Negatives) -> bool:
    """True when scoring against the whole item table costs no more than gathering the candidates' rows."""
    n_candidates = negatives.items.shape[1]
    return n_candidates >= n_items if negatives.shared else whole_table_pays_per_query(n_items, n_candidates)


def scores_from_table(
    query: torch.Tensor, item_table: torch.Tensor, positives: torch.Tensor, negatives: Negatives
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    positive_repr = gather_rows(item_table, positives)
    if negatives.shared:
        neg_scores = query @ gather_rows(item_table, negatives.items[0]).T
    else:
        neg_scores = per_query_scores(query, item_table, negatives.items)
    return (query * positive_repr).sum(-1), neg_scores, positive_repr


def positive_and_candidate_rows(rows: torch.Tensor, batch: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(the positives' rows [B, d], the shared candidates' [n, d]) of `rows` [B + n, d], split rather than sliced:
    the backward writes their gradients into one [B + n, d] tensor (a `cat`) instead of a zero-filled one for each
    slice and their sum, g + 0. The same values: only the sign of an exact zero differs (-0.0 + 0 is +0.0), which
    dense Adam's sum of the sparse gradient into zeros drops too (a row-sparse optimizer's compiled sum starts from
    a row's first gradient: there it could move a parameter that is exactly ±0 to the other zero)."""
    positive_rows, candidate_rows = rows.split([batch, rows.shape[0] - batch])
    return positive_rows, candidate_rows


def shared_scores_from_rows(query: torch.Tensor, rows: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """`rows` are the positives' [B] then the shared candidates' representations."""
    positive_repr, candidates = positive_and_candidate_rows(rows, query.shape[0])
    return (query * positive_repr).sum(-1), query @ candidates.T, positive_repr


def per_query_scores_from_rows(
    query: torch.Tensor, rows: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """`rows` [B, 1 + n, d]: each query's positive then its candidates. One product for all of them, sliced after,
    so the backward never scatters into a zero-filled copy of the tall row tensor; for a few rows per query on the
    host branch, the compiled row dots (recx.kernels.row_dots)."""
    if rows.shape[1] <= FEW_CANDIDATES:
        scores = (query[:, None, :] * rows).sum(-1) if accelerator_branch(rows) else row_dots(query, rows)
    else:
        scores = torch.bmm(rows, query[:, :, None]).squeeze(-1)
    return scores[:, 0], scores[:, 1:], rows[:, 0]


def step_scores(
    model, users: torch.Tensor, positives: torch.Tensor, negatives: Negatives
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """(query [B, d], positive scores [B], negative scores [B, n], positive representations [B, d])."""
    if whole_table_pays(model.n_items, negatives):
        query, item_table = model.representations(users)
        return (query, *scores_from_table(query, item_table, positives, negatives))
    if negatives.shared:
        query, rows = model.rows(users, torch.cat([positives, negatives.items[0]]))
        return (query, *shared_scores_from_rows(query, rows))
    per_query = torch.cat([positives[:, None], negatives.items], dim=1)
    query, rows = model.rows(users, per_query.flatten())
    return (query, *per_query_scores_from_rows(query, rows.view(*per_query.shape, -1)))


def distinct_rows_norm(table: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    """½ Σ ‖row‖² over the distinct ids (each counted once), read with a row-sparse gradient. Sorting and masking
    repeats instead of `torch.unique` keeps the step free of host syncs."""
    ids = ids.sort().values
    first = torch.ones_like(ids, dtype=torch.bool)
    first[1:] = ids[1:] != ids[:-1]
    return 0.5 * (F.embedding(ids, table, sparse=True).pow(2).sum(-1) * first).sum()


def batched_decay(model, users: torch.Tensor, items: torch.Tensor) -> torch.Tensor:
    """½ Σ ‖row‖² over the distinct user and item rows the batch uses; rows outside the batch get no decay.

    Each used row gets the gradient λ·row, exactly what full-table decay (the optimizer's weight_decay) gives every
    row every step: the PRISM paper's batched weight decay (§4.1.1), P(i ∈ B) = 1 in its Theorem 3.1.
    """
    user_table, item_table = model.embedding_tables()[:2]
    return distinct_rows_norm(user_table, users) + distinct_rows_norm(item_table, items)


def batch_decay_on(config: RunConfig) -> bool:
    """Whether the run decays the batch's rows in the loss (`weight_decay_mode: batch`)."""
    return config.weight_decay_mode == "batch" and config.weight_decay > 0


def compiled_rows_fit(model, optimizer, config: RunConfig) -> bool:
    """True when the model and optimizer let a step skip autograd: a model scored by the dot product of its two
    tables (`Model.dot_tables`) on the host branch, a row-sparse optimizer that is not sync-free, and no batched
    weight decay."""
    tables = model.dot_tables()
    return (
        tables is not None
        and isinstance(optimizer, RowSparseOptimizer)
        and not optimizer.sync_free
        and not accelerator_branch(tables[0])
        and not batch_decay_on(config)
    )


def few_plain_candidates(n_items: int, negatives: Negatives) -> bool:
    """Unweighted, unsegmented per-query candidates in the range where autograd scores gathered rows by the row dots
    (so that the compiled row gradients do the same arithmetic)."""
    return (
        not negatives.shared
        and negatives.weights is None
        and negatives.segments is None
        and 1 + negatives.items.shape[1] <= FEW_CANDIDATES
        and not whole_table_pays(n_items, negatives)
    )


def input_kind(model, loss_fn, config: RunConfig, negatives: Negatives, optimizer=None) -> str:
    """The input the loss gets this step, among those it `takes`: "shared_candidates" for candidates shared by the
    batch and fewer than the catalogue; "row_gradients" for few plain per-query candidates when the model and the
    optimizer allow (`compiled_rows_fit`; optimizer None: the autograd loss); else "scores"."""
    takes = loss_fn.takes
    if "shared_candidates" in takes and negatives.shared and not whole_table_pays(model.n_items, negatives):
        return "shared_candidates"
    if (
        "row_gradients" in takes
        and optimizer is not None
        and few_plain_candidates(model.n_items, negatives)
        and compiled_rows_fit(model, optimizer, config)
    ):
        return "row_gradients"
    return "scores"


def shared_candidate_loss(
    model, loss_fn, users: torch.Tensor, positives: torch.Tensor, negatives: Negatives
) -> torch.Tensor:
    """The loss from the representations of candidates shared by the batch (input "shared_candidates")."""
    query, rows = model.rows(users, torch.cat([positives, negatives.items[0]]))
    positive_rows, candidate_rows = positive_and_candidate_rows(rows, positives.numel())
    pos_scores = (query * positive_rows).sum(-1)
    mask = None
    if loss_fn.mask_positive and not negatives.keeps_positive:
        mask = positive_mask(negatives.items, positives)
    return loss_fn.over_shared_candidates(
        query,
        candidate_rows,
        pos_scores,
        negatives.positive_log_q,
        negatives.log_q,
        mask,
        segments=negatives.segments,
    )


def row_gradient_step(model, loss_fn, optimizer, users: torch.Tensor, positives: torch.Tensor, negatives: Negatives):
    """The loss, its row gradients in one compiled pass, and the optimizer's step on them (input "row_gradients"):
    the update autograd and `optimizer.step()` make, without building the graph. Returns the detached loss."""
    user_table, item_table = model.dot_tables()
    ids = torch.cat([positives[:, None], negatives.items], dim=1)
    loss, user_grads, row_grads = loss_fn.row_gradients(user_table, item_table, users, ids)
    optimizer.step_rows([(user_table, users, user_grads), (item_table, ids.flatten(), row_grads.flatten(0, 1))])
    return loss


def train_step(model, sampler, loss_fn, optimizer, config: RunConfig, users: torch.Tensor, positives: torch.Tensor):
    """One training step on the batch (users [B], positives [B]): negatives, loss, gradients, the optimizer's
    update. Returns the detached loss."""
    negatives = sample_negatives(model, sampler, users, positives)
    if input_kind(model, loss_fn, config, negatives, optimizer) == "row_gradients":
        return row_gradient_step(model, loss_fn, optimizer, users, positives, negatives)
    loss = loss_with(model, loss_fn, config, users, positives, negatives)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    optimizer.step()
    return loss.detach()


def sample_negatives(model, sampler, users: torch.Tensor, positives: torch.Tensor) -> Negatives:
    negatives = sampler.sample(Batch(users, positives, lambda: model.query(users), model.item_table))
    return checked_draw(sampler, negatives, users.numel(), users.device)


def training_loss(
    model, sampler, loss_fn, config: RunConfig, users: torch.Tensor, positives: torch.Tensor
) -> torch.Tensor:
    """The step's loss through autograd (negatives drawn from `sampler`)."""
    negatives = sample_negatives(model, sampler, users, positives)
    return loss_with(model, loss_fn, config, users, positives, negatives)


def loss_input(model, loss_fn, users: torch.Tensor, positives: torch.Tensor, negatives: Negatives) -> LossInput:
    """What a loss receives for a step (recx.losses.base.LossInput): the scores of the positives [B] and of the
    candidates ([B, n], or [1, n] shared), the query's own positive masked among its candidates where the loss asks
    and the sampler did not keep it, the sampler's log q and weights, the ids and representations; the one assembly
    that training and the contract kit (recx.testing.losses) use."""
    query, pos_scores, neg_scores, positive_repr = step_scores(model, users, positives, negatives)
    if loss_fn.mask_positive and not negatives.keeps_positive:
        neg_scores = mask_positives(neg_scores, negatives.items, positives)
    return LossInput(
        pos_scores,
        neg_scores,
        negatives.positive_log_q,
        negatives.log_q,
        negatives.candidate_weights(),
        users,
        positives,
        query,
        positive_repr,
        negatives.segments,
    )


def loss_with(
    model, loss_fn, config: RunConfig, users: torch.Tensor, positives: torch.Tensor, negatives: Negatives
) -> torch.Tensor:
    """The step's loss through autograd, from the shared candidates' representations or from the scores
    (`input_kind`), plus the batched weight decay when the run asks for it."""
    if input_kind(model, loss_fn, config, negatives) == "shared_candidates":
        loss = shared_candidate_loss(model, loss_fn, users, positives, negatives)
    else:
        loss = loss_fn(loss_input(model, loss_fn, users, positives, negatives))
    if batch_decay_on(config):
        used = torch.cat([positives, negatives.items.flatten()]) if loss_fn.uses_negatives else positives
        loss = loss + config.weight_decay * batched_decay(model, users, used)
    return loss
