"""The sampler contract (DESIGN.md "Samplers and losses")."""
from __future__ import annotations

from dataclasses import dataclass

import torch

from recx.data.dataset import Dataset
from recx.errors import RecxError
from recx.samplers.kernels import membership
from recx.samplers.kernels.backend import resolve_backend


@dataclass
class Negatives:
    """`items` is [B, n] (per query) or [1, n] (shared by the whole batch); `log_q` has the same shape, or [B, n] for
    shared items whose proposal depends on the query (resampling samplers: +inf marks an item a query did not draw).

    `log_q` is the log of the probability with which each item was proposed (a normaliser shared by a query's
    candidates may be dropped). `positive_log_q` [B] is the same quantity for each query's positive item.
    `weights` (optional, detached, rows summing to 1) re-weight the candidates in pairwise losses.
    """

    items: torch.Tensor
    log_q: torch.Tensor
    positive_log_q: torch.Tensor
    weights: torch.Tensor | None = None  # detached per-candidate weights [B, n] for weighted losses

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

    def log_probability(self, batch: Batch, items: torch.Tensor) -> torch.Tensor:
        """[B, L] normalised log proposal probability of items[b, l] for query b (the law `sample` draws from, before
        any exclusion of training items). User-batch models (FastVAE) need it for a user's many positives, the
        sampler diagnostics for whole distributions; samplers without a closed form do not implement it."""
        raise RecxError(f"sampler {type(self).__name__} has no closed-form proposal probability (needed by "
                        "fastvae and the exact sampler diagnostics)")
