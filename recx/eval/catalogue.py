"""What a metric may know about the catalogue (docs/design.md "Evaluation conventions"): each item's training
popularity and popularity stratum, the number of items and of training users, and the share of the evaluated
split's held-out interactions in each stratum; and `Exposure`, how often each item is recommended, from which the
catalogue-level metrics (coverage, Gini, entropy, exposure share) are computed.

The strata are recx's (recx.eval.strata): "popular" the first round(0.05 n) items by training popularity, "neutral"
the rest of the first round(0.20 n), "unpopular" (the long tail) the remaining 80%.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from recx.data.csr import CSR
from recx.eval.strata import STRATA, popularity_strata

HELD_OUT_SHARE = (
    "heldout_share"  # results' rows (one per stratum, at each k): the held-out interactions' stratum shares
)


@dataclass(frozen=True)
class Catalogue:
    """popularity: float64 [n_items], each item's training interactions (φ(i), RecBole's `data.count_items`);
    strata: int64 [n_items], 0 popular, 1 neutral, 2 unpopular (recx.eval.strata.STRATA); n_users: the users with a
    training interaction (Elliot's |U| of p(seen | i)); held_out_share: float64 [3], the share of the evaluated
    split's held-out interactions on each stratum's items (None when not evaluating a split). Tensors on the
    evaluation's device."""

    popularity: torch.Tensor
    strata: torch.Tensor
    n_users: int
    held_out_share: torch.Tensor | None = None

    @property
    def n_items(self) -> int:
        return self.popularity.shape[0]

    @property
    def tail(self) -> torch.Tensor:
        """bool [n_items]: the long tail, recx's "unpopular" stratum (the items outside the top 20% by popularity)."""
        return self.strata == STRATA.index("unpopular")

    def to(self, device: torch.device) -> "Catalogue":
        share = None if self.held_out_share is None else self.held_out_share.to(device)
        return Catalogue(self.popularity.to(device), self.strata.to(device), self.n_users, share)


def catalogue_of(train: CSR, held_out: CSR | None = None, strata: torch.Tensor | None = None) -> Catalogue:
    """The catalogue of a training split (and the held-out split evaluated): one host read (the training users)."""
    counts = train.column_counts()
    strata = popularity_strata(counts) if strata is None else strata
    share = None
    if held_out is not None:
        per_stratum = torch.zeros(len(STRATA), dtype=torch.float64, device=strata.device)
        ones = torch.ones(held_out.indices.numel(), dtype=torch.float64, device=strata.device)
        per_stratum.index_add_(0, strata[held_out.indices.to(torch.long)], ones)  # no host sync (bincount reads max)
        share = per_stratum / per_stratum.sum().clamp_min(1)
    return Catalogue(counts.to(torch.float64), strata, int((train.row_lengths() > 0).sum()), share)


@dataclass
class Exposure:
    """How often the lists recommend each item within a cut-off: counts float64 [R, n_items], for R weightings of
    the evaluated users (R = 1: each user once, the metric's value; a bootstrap: R resamples of the users, each
    user counted as often as it was drawn), lists float64 [R] (the weighted number of lists that hold an item: a
    user without a list adds none) and the catalogue.
    Σ_j counts[r, j] is the number of recommendations (lists x K, less the places of lists shorter than K)."""

    counts: torch.Tensor
    lists: torch.Tensor
    catalogue: Catalogue

    @property
    def recommendations(self) -> torch.Tensor:
        """float64 [R]: Σ_j counts[r, j]."""
        return self.counts.sum(1)

    def shares(self) -> torch.Tensor:
        """float64 [R, n_items]: p_r(j) = counts[r, j] / Σ_j counts[r, j] (0 for a weighting without any)."""
        return self.counts / self.recommendations.clamp_min(1e-300)[:, None]


def exposure_counts(items: torch.Tensor, k: int, n_items: int, weights: torch.Tensor | None = None) -> torch.Tensor:
    """float64 [n_items] (or [R, n_items] with weights [R, U]): how many of the lists items [U, K] (-1 where a list
    ends) hold each item within the first k places, each list counted with its weight. Exact for integer counts
    (float64 sums below 2^53) whatever the order of the sums; no host sync on a GPU (index_add_)."""
    top = items[:, :k]
    listed = top >= 0
    index = top.clamp_min(0).reshape(-1)
    if weights is None:
        counts = torch.zeros(n_items, dtype=torch.float64, device=items.device)
        return counts.index_add_(0, index, listed.reshape(-1).to(torch.float64))
    users = torch.arange(top.shape[0], device=items.device).repeat_interleave(top.shape[1])
    keep = listed.reshape(-1)
    placed = torch.sparse_coo_tensor(  # items x users: 1 where the user's list holds the item
        torch.stack([index[keep], users[keep]]),
        torch.ones(int(keep.sum()), dtype=torch.float64, device=items.device),
        (n_items, top.shape[0]),
        check_invariants=False,
    )
    return torch.sparse.mm(placed, weights.to(torch.float64).T).T


def cutoff_counts(items: torch.Tensor, ks: list[int], n_items: int) -> torch.Tensor:
    """float64 [len(ks), n_items]: row i is `exposure_counts(items, ks[i], n_items)`, for every cut-off at once (one
    `index_add_` of each place into its band between consecutive cut-offs, then a running sum over the bands: exact
    for integer counts, as there)."""
    bounds = sorted(set(ks))
    items = items[:, : bounds[-1]]
    places = torch.arange(items.shape[1], device=items.device)
    inner = [bound for bound in bounds[:-1] if bound < items.shape[1]]  # the bands' starts after the first
    band = torch.bucketize(places, torch.stack([places[b] for b in inner]), right=True) if inner else places * 0
    index = (band * n_items)[None, :] + items.clamp_min(0)
    counts = torch.zeros(len(bounds) * n_items, dtype=torch.float64, device=items.device)
    counts.index_add_(0, index.reshape(-1), (items >= 0).reshape(-1).to(torch.float64))
    within = counts.view(len(bounds), n_items).cumsum(0)
    return within if bounds == list(ks) else torch.stack([within[bounds.index(k)] for k in ks])
