"""The sampler contract (docs/design.md "Samplers")."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, ClassVar

import torch

from recx.core.errors import RecxError
from recx.data.dataset import Dataset
from recx.kernels import membership
from recx.kernels.choice import resolve_kernels


@dataclass
class Negatives:
    """`items` is [B, n] (per query) or [1, n] (shared by the whole batch); `log_q` has the same shape, or [B, n] for
    shared items whose proposal depends on the query (resampling samplers: +inf marks an item a query did not draw).

    `log_q` is the log of the probability with which each item was proposed. `positive_log_q` [B] is the same
    quantity for each query's positive item, with the same normaliser as its candidates (a normaliser may be dropped
    only when it is the same for a query's positive and all its candidates, since it then cancels).
    `weights` (optional, detached, rows summing to 1) re-weight the candidates in pairwise losses; given as a function,
    they are computed only when a loss reads them (`candidate_weights`).
    `keeps_positive`: the draws may hold the query's own positive on purpose (the official BIR/XIR code resamples
    the whole batch and does not mask it), so losses must not mask it.
    `segments` (optional): ((n_columns, weight), ...) splitting the candidate columns, in order, into groups whose
    softmax losses are averaged with these weights (XIR: λ · CE over the cache draws + (1 - λ) · CE over the batch's).
    """

    items: torch.Tensor
    log_q: torch.Tensor
    positive_log_q: torch.Tensor
    weights: torch.Tensor | Callable[[], torch.Tensor] | None = None  # detached [B, n] per-candidate weights
    keeps_positive: bool = False
    segments: tuple[tuple[int, float], ...] | None = None

    @property
    def shared(self) -> bool:
        return self.items.shape[0] == 1

    def candidate_weights(self) -> torch.Tensor | None:
        """The weights [B, n], computed now if they were given as a function."""
        return self.weights() if callable(self.weights) else self.weights


class Batch:
    """A step's users [B] and positives [B], with the model's detached representations: `query` [B, d] and
    `item_table` [n_items, d]. Each representation may be given as a tensor or as a function that computes it; it
    is then computed on first use only, so samplers that never read it (uniform, popularity) cost the step no
    whole-table computation."""

    def __init__(
        self,
        users: torch.Tensor,
        positives: torch.Tensor,
        query: torch.Tensor | Callable[[], torch.Tensor],
        item_table: torch.Tensor | Callable[[], torch.Tensor],
    ):
        self.users, self.positives = users, positives
        self._query, self._item_table = query, item_table

    @property
    def query(self) -> torch.Tensor:
        if callable(self._query):
            self._query = self._query()
        return self._query

    @property
    def item_table(self) -> torch.Tensor:
        if callable(self._item_table):
            self._item_table = self._item_table()
        return self._item_table


class Sampler:
    """Subclasses implement `sample`, and `log_probability` when the proposal has a closed form. `rebuild` is called
    at the point named by `rebuild_every`. `summary`: one line for `recx list`. `adaptive`: the proposal moves with
    the model; `unchecked_law`: why the draws do not follow exp(log q), when by design.

    `kernels` (auto, torch or cupy) picks the implementation of the shared kernels (recx/kernels/); the
    attribute `kernels` is the one chosen: 'torch' or 'cupy' (recx.kernels.choice).
    """

    summary: ClassVar[str] = ""
    rebuild_every: str | None = None  # None, or "epoch": `rebuild` runs before each epoch
    # Who the sampler is ("sampler 'x' of plugin p (module)") while its first draw is still to be checked
    # (`checked_draw`): set for a plugin's sampler when a run builds it, None once checked and for recx's own.
    output_check: str | None = None
    # The proposal depends on the model (hard negatives, resampling, codebooks rebuilt from it): the training loss is
    # then not comparable across epochs, and the contract checks a fixed quantity instead (recx.testing).
    adaptive: ClassVar[bool] = False
    # Empty: the draws follow exp(log q) (up to a query's normaliser), which the contract checks by drawing. Else why
    # they do not, by design (log q is a convention the loss relies on): the law check is skipped with this reason.
    unchecked_law: ClassVar[str] = ""
    # Its place in FastVAE's Figure 2 (the samplers `recx diagnose` compares by default, in this order) and the
    # arguments the figure draws it with; None: not in the figure.
    figure: ClassVar[tuple[int, dict] | None] = None

    def reference_log_q_gap(self, batch: Batch, negatives: Negatives) -> torch.Tensor | None:
        """[B, n] float64: what log_q - positive_log_q[:, None] of `negatives` (drawn for `batch`) must be, by an
        independent formula of the method's law (its paper's), which the contract checks (recx.testing.
        check_sampler_log_q). None (the default): no formula here; a sampler with a closed form is checked against
        `log_probability` instead."""
        return None

    @classmethod
    def has_closed_form(cls) -> bool:
        """Whether the sampler gives the normalised log q of any item (`log_probability`)."""
        return cls.log_probability is not Sampler.log_probability

    def __init__(self, dataset: Dataset, n_negatives: int, args, generator: torch.Generator, kernels: str = "auto"):
        self.dataset = dataset
        self.n_negatives = n_negatives
        self.args = args
        self.generator = generator
        self.kernels = resolve_kernels(kernels, generator.device)

    def is_training_item(self, users: torch.Tensor, items: torch.Tensor) -> torch.Tensor:
        """[B, n] booleans: items[b, k] is a training item of users[b] (CSR binary search)."""
        return membership.contains(self.dataset.train, users[:, None], items, self.kernels)

    def rebuild(self, query_table: torch.Tensor | None, item_table: torch.Tensor) -> None:
        """Refresh state (codebooks, tables, caches) from the current model representations."""

    def sample(self, batch: Batch) -> Negatives:
        raise NotImplementedError

    def log_probability(self, batch: Batch, items: torch.Tensor) -> torch.Tensor:
        """[B, L] normalised log proposal probability of items[b, l] for query b (the law `sample` draws from, before
        any exclusion of training items; uniform with `exclude_train` gives the per-user normaliser -log(n - |I_u|)
        that `sample` gives its candidates, so that a user's positives and candidates share it). User-batch models (FastVAE) need it for a user's many positives, the
        sampler divergence report for whole distributions; samplers without a closed form do not implement it."""
        raise RecxError(f"sampler {type(self).__name__} has no closed-form proposal probability")

    def pair_log_probability(self, batch: Batch, rows: torch.Tensor, items: torch.Tensor) -> torch.Tensor:
        """[P] log q(items[p] | query rows[p]) for pairs of a query row and an item, as `log_probability` gives it:
        a query's many items, as FastVAE's positives of a user (each read against its user's query). This default
        repeats each pair's query row; samplers whose per-query terms cost more than O(1) (a normaliser, codeword
        scores) override it to compute them once per query row."""
        per_pair = Batch(batch.users[rows], items, batch.query[rows], batch.item_table)
        return self.log_probability(per_pair, items[:, None])[:, 0]

    def sample_with_pair_log_probability(
        self, batch: Batch, rows: torch.Tensor, items: torch.Tensor
    ) -> tuple[Negatives, torch.Tensor]:
        """(`sample(batch)`, `pair_log_probability(batch, rows, items)`): a user's negatives and its positives' log q
        from one query (FastVAE's step). This default makes the two calls; samplers whose two share per-query terms
        (MIDX's proposal) override it to compute them once, with the same draws and the same numbers."""
        return self.sample(batch), self.pair_log_probability(batch, rows, items)


def output_problem(negatives, n_queries: int, n_items: int, device: torch.device) -> str | None:
    """What is wrong with a sampler's draw for a batch of `n_queries` queries over `n_items` items (the contract of
    `Negatives`), or None: its type, shapes, dtypes and device, item ids within the catalogue, no NaN or -inf log q
    (+inf only where shared items were not drawn by a query), finite weights. One host read of a few reductions."""
    if not isinstance(negatives, Negatives):
        return f"returned {type(negatives).__name__}; expected recx.Negatives(items, log_q, positive_log_q)"
    items, log_q, positive = negatives.items, negatives.log_q, negatives.positive_log_q
    for name, value in (("items", items), ("log_q", log_q), ("positive_log_q", positive)):
        if not isinstance(value, torch.Tensor):
            return f"returned {name} as {type(value).__name__}; expected a torch.Tensor"
        if value.device != device:
            return f"returned {name} on {value.device}; expected the batch's device ({device})"
    if items.dtype not in (torch.int64, torch.int32) or items.dim() != 2 or items.shape[0] not in (n_queries, 1):
        return (
            f"returned items of shape {list(items.shape)} and dtype {items.dtype}; expected integer item ids of shape "
            f"[B, n] (B = {n_queries} queries) or [1, n] (shared by the batch)"
        )
    if items.numel() == 0:
        return f"returned no items (shape {list(items.shape)}); expected at least one candidate per query"
    low, high = int(items.min()), int(items.max())
    if low < 0 or high >= n_items:
        return f"returned item ids {low}..{high}, outside the catalogue (ids 0..{n_items - 1})"
    shapes = [items.shape] + ([torch.Size([n_queries, items.shape[1]])] if items.shape[0] == 1 else [])
    if not log_q.is_floating_point() or log_q.shape not in shapes:
        return f"returned log_q of shape {list(log_q.shape)} and dtype {log_q.dtype}; expected floats of shape " + (
            " or ".join(str(list(shape)) for shape in shapes)
        )
    may_be_inf = items.shape[0] == 1 and log_q.shape[0] == n_queries  # a query did not draw a shared item
    bad = torch.isnan(log_q) | (log_q == float("-inf"))
    if not may_be_inf:
        bad |= torch.isinf(log_q)
    if bool(bad.any()):
        example = float(log_q[bad][0])
        return (
            f"returned {int(bad.sum()):,} log_q values that are not finite (e.g. {example}); expected the log "
            "probability with which each item was drawn"
        )
    if not positive.is_floating_point() or positive.shape != torch.Size([n_queries]):
        return f"returned positive_log_q of shape {list(positive.shape)}; expected floats of shape [{n_queries}]"
    if not bool(torch.isfinite(positive).all()):
        return "returned positive_log_q values that are not finite; expected each positive's log probability"
    weights = negatives.weights
    if isinstance(weights, torch.Tensor) and (
        weights.shape != torch.Size([n_queries, items.shape[1]]) or not bool(torch.isfinite(weights).all())
    ):
        return f"returned weights of shape {list(weights.shape)}, or not finite; expected finite [B, n] weights"
    return None


def constant_log_q_gap(sampler: Sampler, batch: Batch, negatives: Negatives) -> torch.Tensor:
    """The reference of a proposal constant over a query's candidates and its positive (uniform, in-batch without
    correction, the candidates of hard-negative selection): log_q - positive_log_q = 0."""
    return torch.zeros(batch.positives.numel(), negatives.items.shape[1], dtype=torch.float64)


def checked_draw(sampler: Sampler, negatives, n_queries: int, device: torch.device):
    """`negatives` as the sampler drew them; the first draw of a sampler with `output_check` set (a plugin's) is
    checked once (`output_problem`), and a bad one refused naming the sampler, its plugin and what was wrong, where
    it failed deep in the step, as an IndexError, or as a nan loss blamed on the learning rate."""
    who = getattr(sampler, "output_check", None)
    if who is None:
        return negatives
    problem = output_problem(negatives, n_queries, sampler.dataset.n_items, device)
    if problem is not None:
        raise RecxError(
            f"{who}: its sample() {problem} (checked at the first step; recx.testing.check_sampler checks the whole "
            "contract in a plugin's tests)"
        )
    sampler.output_check = None
    return negatives
