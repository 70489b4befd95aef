"""The sampler contract (DESIGN.md "Samplers and losses")."""
from __future__ import annotations

from dataclasses import dataclass

import torch

from recx.data.dataset import Dataset
from recx.samplers.kernels import membership
from recx.samplers.kernels.backend import resolve_backend


@dataclass
class Negatives:
    """`items` is [B, n] (per query) or [1, n] (shared by the whole batch); `log_q` has the same shape, or [B, n] for
    shared items whose proposal depends on the query (resampling samplers: +inf marks an item a query did not draw).

    `log_q` is the log of the probability with which each item was proposed. `positive_log_q` [B] is the same
    quantity for each query's positive item, with the same normaliser as its candidates (a normaliser may be dropped
    only when it is the same for a query's positive and all its candidates, since it then cancels).
    `weights` (optional, detached, rows summing to 1) re-weight the candidates in pairwise losses.
    `keeps_positive`: the draws may hold the query's own positive on purpose (the official BIR/XIR code resamples
    the whole batch and does not mask it), so losses must not mask it.
    `segments` (optional): ((n_columns, weight), ...) splitting the candidate columns, in order, into groups whose
    softmax losses are averaged with these weights (XIR: λ · CE over the cache draws + (1 - λ) · CE over the batch's).
    """

    items: torch.Tensor
    log_q: torch.Tensor
    positive_log_q: torch.Tensor
    weights: torch.Tensor | None = None  # detached per-candidate weights [B, n] for weighted losses
    keeps_positive: bool = False
    segments: tuple[tuple[int, float], ...] | None = None

    @property
    def shared(self) -> bool:
        return self.items.shape[0] == 1


@dataclass
class Batch:
    users: torch.Tensor  # [B]
    positives: torch.Tensor  # [B]
    query: torch.Tensor  # [B, d], detached
    item_table: torch.Tensor  # [n_items, d], detached


class Sampler:
    """Subclasses implement `sample`. `rebuild` is called at the point named by `rebuild_every`.

    `kernels` (auto, torch or cupy) picks the implementation of the shared kernels (recx/samplers/kernels/).
    """

    rebuild_every: str | None = None  # None, or "epoch": `rebuild` runs before each epoch

    def __init__(self, dataset: Dataset, n_negatives: int, args, generator: torch.Generator, kernels: str = "auto"):
        self.dataset = dataset
        self.n_negatives = n_negatives
        self.args = args
        self.generator = generator
        self.kernels = kernels
        self.backend = resolve_backend(kernels, generator.device)

    def is_training_item(self, users: torch.Tensor, items: torch.Tensor) -> torch.Tensor:
        """[B, n] booleans: items[b, k] is a training item of users[b] (CSR binary search)."""
        return membership.contains(self.dataset.train, users[:, None], items, self.backend)

    def rebuild(self, query_table: torch.Tensor | None, item_table: torch.Tensor) -> None:
        """Refresh state (codebooks, tables, caches) from the current model representations."""

    def sample(self, batch: Batch) -> Negatives:
        raise NotImplementedError
