"""The sampler contract (docs/design.md "Samplers")."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, ClassVar

import torch

from recx.core.errors import RecxError
from recx.data.dataset import Dataset
from recx.samplers.kernels import membership
from recx.samplers.kernels.choice import resolve_kernels, restore_kernels


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

    `kernels` (auto, torch or cupy) picks the implementation of the shared kernels (recx/samplers/kernels/); the
    attribute `kernels` is the one chosen: 'torch' or 'cupy' (recx.samplers.kernels.choice).
    """

    summary: ClassVar[str] = ""
    rebuild_every: str | None = None  # None, or "epoch": `rebuild` runs before each epoch
    # The proposal depends on the model (hard negatives, resampling, codebooks rebuilt from it): the training loss is
    # then not comparable across epochs, and the contract checks a fixed quantity instead (recx.testing).
    adaptive: ClassVar[bool] = False
    # Empty: the draws follow exp(log q) (up to a query's normaliser), which the contract checks by drawing. Else why
    # they do not, by design (log q is a convention the loss relies on): the law check is skipped with this reason.
    unchecked_law: ClassVar[str] = ""

    @classmethod
    def has_closed_form(cls) -> bool:
        """Whether the sampler gives the normalised log q of any item (`log_probability`)."""
        return cls.log_probability is not Sampler.log_probability

    def __setstate__(self, state: dict) -> None:
        restore_kernels(self, state)

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
        sampler diagnostics for whole distributions; samplers without a closed form do not implement it."""
        raise RecxError(f"sampler {type(self).__name__} has no closed-form proposal probability")

    def pair_log_probability(self, batch: Batch, rows: torch.Tensor, items: torch.Tensor) -> torch.Tensor:
        """[P] log q(items[p] | query rows[p]) for pairs of a query row and an item, as `log_probability` gives it:
        a query's many items, as FastVAE's positives of a user (each read against its user's query). This default
        repeats each pair's query row; samplers whose per-query terms cost more than O(1) (a normaliser, codeword
        scores) override it to compute them once per query row."""
        per_pair = Batch(batch.users[rows], items, batch.query[rows], batch.item_table)
        return self.log_probability(per_pair, items[:, None])[:, 0]
