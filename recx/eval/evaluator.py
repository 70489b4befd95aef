"""Full-ranking evaluation, batched on the device (docs/design.md "Evaluation conventions").

Every item is ranked; items seen in training are excluded (and validation items when testing). Per-user values are
computed row by row and averaged in float64 at the end in user order, so results do not depend on the batch size.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Callable

import torch

from recx.core.errors import RecxError
from recx.data.csr import CSR
from recx.data.dataset import Dataset
from recx.eval.catalogue import HELD_OUT_SHARE, Catalogue, catalogue_of
from recx.eval.metrics.registry import (
    METRICS,
    average,
    catalogue_metrics,
    list_counts,
    listed_users,
    needs_list,
    per_user_metrics,
)
from recx.eval.strata import STRATA

# Top-K lists are scored by the metrics in groups of at least this many users (a few kernels per metric for the
# group, instead of per evaluation batch: on a GPU the per-batch launches were 5.6x the bare matmul + top-k).
METRIC_ROWS = 1 << 16


@dataclass
class Evaluation:
    """Averages over evaluated users, keyed by (metric, k, stratum), and the catalogue-level metrics' values (key
    "all" or a stratum for the stratum), with the held-out interactions' share per stratum (`heldout_share`, repeated
    at each k beside the exposure shares);
    when asked, the evaluated users (ascending id) with their top-K lists and/or their per-user values (float64 on
    the CPU, same keys, same user order; the per-user metrics only; NaN where a `needs_list` metric has no value);
    `catalogue` the facts the metrics read. `n_listed`: the evaluated users with a list (all of them for a model's
    lists), over whom the `needs_list` metrics are averaged and whose lists the catalogue-level metrics count; a
    `needs_list` metric has no average when no user has a list."""

    values: dict[tuple[str, int, str], float]
    n_users: int
    users: torch.Tensor | None = None
    topk: torch.Tensor | None = None
    per_user: dict[tuple[str, int, str], torch.Tensor] | None = None
    catalogue: Catalogue | None = None
    n_listed: int | None = None

    def listed(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(users [U], top-K lists [U, K]) of an evaluation asked for them."""
        if self.users is None or self.topk is None:
            raise ValueError("this evaluation was not asked for its top-K lists")
        return self.users, self.topk

    def per_user_values(self) -> tuple[torch.Tensor, dict[tuple[str, int, str], torch.Tensor]]:
        """(users [U], (metric, k, stratum) -> values [U]) of an evaluation asked for them."""
        if self.users is None or self.per_user is None:
            raise ValueError("this evaluation was not asked for its per-user values")
        return self.users, self.per_user


def held_out_rows(csr: CSR, users: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(indptr [U + 1], indices): the users' rows of `csr`, in their order (one host read: the entries' count)."""
    lengths = csr.row_lengths()[users]
    indptr = torch.zeros(users.numel() + 1, dtype=torch.long, device=users.device)
    indptr[1:] = torch.cumsum(lengths, 0)
    count = int(indptr[-1])
    starts = torch.repeat_interleave(csr.indptr[users], lengths, output_size=count)
    within = torch.arange(count, device=users.device) - torch.repeat_interleave(indptr[:-1], lengths, output_size=count)
    return indptr, csr.indices[starts + within].to(torch.long)


def averages(
    per_user: dict[tuple[str, int, str], torch.Tensor], whole: dict[tuple[str, int, str], torch.Tensor]
) -> dict[tuple[str, int, str], float]:
    """Each per-user key's average (`average`) and each catalogue-level value, in one host read; a key without a
    value (a `needs_list` metric when no user has a list) is left out."""
    means = torch.stack([average(key, values) for key, values in per_user.items()] + list(whole.values())).tolist()
    found = dict(zip([*per_user, *whole], means, strict=True))
    return {key: mean for key, mean in found.items() if mean == mean or not needs_list(key[0])}


def catalogue_values(
    counts: dict[int, torch.Tensor], n_lists: int, catalogue: Catalogue
) -> dict[tuple[str, int, str], torch.Tensor]:
    """The catalogue-level metrics of counts {k: [n_items]} over n_lists lists, and the held-out share per stratum
    (`heldout_share`, the same at each k): scalar float64 tensors on the evaluation's device."""
    lists = torch.tensor(float(n_lists), dtype=torch.float64, device=catalogue.popularity.device)
    values = {key: value[0] for key, value in catalogue_metrics(counts, lists, catalogue).items()}
    if catalogue.held_out_share is not None:  # at each cut-off, beside the exposure shares (it does not depend on k)
        for k in counts:
            values.update({(HELD_OUT_SHARE, k, name): catalogue.held_out_share[i] for i, name in enumerate(STRATA)})
    return values


def score_lists(dataset: Dataset, split: str, users: torch.Tensor, items: torch.Tensor, ks: list[int]) -> Evaluation:
    """Every cut-off metric of given top-K lists: items [U, K] (-1 where a list ends; a row of -1: a user without a
    list) of `users` [U] (ascending, each with a held-out item), with per-user values, as `evaluate` computes them
    from a model's lists. A user without a list counts as all misses for the accuracy metrics, is left out of the
    `needs_list` metrics, and adds no list to the catalogue-level metrics."""
    target = dataset.split(split)
    catalogue = catalogue_of(dataset.train, target)
    listed = items >= 0
    hits = target.contains(users[:, None].expand_as(items), items.clamp_min(0)) & listed
    strata = torch.where(listed, catalogue.strata[items.clamp_min(0)], -1)
    held_out = functools.partial(held_out_rows, target, users)
    per_user = per_user_metrics(hits, target.row_lengths()[users], ks, strata, items, catalogue, held_out)
    n_listed = int(listed_users(items).sum())
    whole = catalogue_values(list_counts(items, ks, dataset.n_items), n_listed, catalogue)
    per_user_cpu = {key: v.cpu() for key, v in per_user.items()}
    return Evaluation(averages(per_user, whole), users.numel(), users, items, per_user_cpu, catalogue, n_listed)


def excluded_splits(dataset: Dataset, split: str) -> list[CSR]:
    exclude = [dataset.train]
    if split == "test" and dataset.valid is not None:
        exclude.append(dataset.valid)
    return exclude


def batch_counts(users: torch.Tensor, csr: CSR, batch_size: int) -> list[int]:
    """Stored entries of the users' rows, per batch of `batch_size` users: one host read for all the batches."""
    lengths = csr.row_lengths()[users]
    n_batches = -(-users.numel() // batch_size)
    padded = torch.zeros(n_batches * batch_size, dtype=lengths.dtype, device=lengths.device)
    padded[: lengths.numel()] = lengths
    return padded.view(n_batches, batch_size).sum(1).tolist()


def seen_positions(users: torch.Tensor, csr: CSR, batch_size: int, count: int) -> torch.Tensor:
    """Where the users' stored items lie in their batches' score matrices: (user's row in its batch of
    `batch_size`) · n_cols + item, for the `count` stored entries of `users`, in user order (so each batch's are a
    slice). Computed once for a group of batches, they leave each batch one write of -inf (no host sync: `count` is
    given, not read from the device)."""
    starts, lengths = csr.indptr[users], csr.row_lengths()[users]
    local = torch.repeat_interleave(torch.arange(users.numel(), device=users.device), lengths, output_size=count)
    within = torch.arange(count, device=users.device) - torch.repeat_interleave(
        torch.cumsum(lengths, 0) - lengths, lengths, output_size=count
    )
    return (local % batch_size) * csr.n_cols + csr.indices[starts[local] + within]


def group_batches(n_users: int, batch_size: int) -> int:
    """Batches per group: the fewest whose users reach METRIC_ROWS (every user, if fewer)."""
    return max(1, min(-(-METRIC_ROWS // batch_size), -(-n_users // batch_size)))


@torch.no_grad()
def evaluate(
    model,
    dataset: Dataset,
    split: str,
    ks: list[int],
    batch_size: int = 1024,
    keep_topk: bool = False,
    auc_beta: float | None = None,
    keep_per_user: bool = False,
    after_batch: Callable[[int, int], None] | None = None,
) -> Evaluation:
    """Every registered cut-off metric at each k (recx.eval.metrics); `auc_beta` given: also the metrics of the full
    score row (AUC and OPAUC(β)), from each batch's full score matrix.
    `keep_per_user`: also each evaluated user's values (paired tests). `after_batch(users done, users in all)` is
    called after each batch (progress display)."""
    target = dataset.split(split)
    max_k = max(ks)
    if max_k > dataset.n_items:
        raise RecxError(f"K={max_k} is larger than the number of items ({dataset.n_items})")
    model.eval()
    seen = excluded_splits(dataset, split)
    catalogue = catalogue_of(dataset.train, target)
    stratum_of = catalogue.strata
    item_table = model.item_table()
    users_all = torch.nonzero(target.row_lengths() > 0).flatten()
    if users_all.numel() == 0:
        raise RecxError(f"no user has a {split} item")
    parts: dict = {}  # cut-off metrics' per-user values, then (auc_beta) the full score row's
    row_parts: dict = {}
    tops = []
    counts = {k: torch.zeros(dataset.n_items, dtype=torch.float64, device=users_all.device) for k in ks}
    seen_counts = [batch_counts(users_all, csr, batch_size) for csr in seen]  # [csr][batch]
    per_group = group_batches(users_all.numel(), batch_size)
    for first in range(0, len(seen_counts[0]), per_group):
        sizes = [counts_of[first : first + per_group] for counts_of in seen_counts]  # [csr][batch of the group]
        batches = range(first, first + len(sizes[0]))
        group = users_all[first * batch_size : batches.stop * batch_size]
        seen_at = [seen_positions(group, csr, batch_size, sum(n)).split(n) for csr, n in zip(seen, sizes, strict=True)]
        lists = []
        for batch, positions in zip(batches, zip(*seen_at, strict=True), strict=True):
            users = users_all[batch * batch_size : (batch + 1) * batch_size]
            scores = model.query(users) @ item_table.T
            for excluded in positions:  # one write of -inf per excluded split
                scores.view(-1).index_fill_(0, excluded, float("-inf"))
            topk = scores.topk(max_k, dim=1, sorted=True).indices
            lists.append(topk)
            if auc_beta is not None:
                relevant = target.dense_rows(users)
                for name in METRICS.names():
                    if not METRICS.get(name).cutoff:
                        scored = METRICS.get(name)().per_user_scores(scores, relevant, auc_beta)
                        for metric, value in scored.items():
                            row_parts.setdefault((metric, 0, "all"), []).append(value)
            if after_batch is not None:
                after_batch(batch * batch_size + users.numel(), users_all.numel())
        items = torch.cat(lists)
        hits = target.contains(group[:, None].expand_as(items), items)
        held_out = functools.partial(held_out_rows, target, group)
        n_relevant = target.row_lengths()[group]
        for key, value in per_user_metrics(hits, n_relevant, ks, stratum_of[items], items, catalogue, held_out).items():
            parts.setdefault(key, []).append(value)
        for k, at_k in list_counts(items, ks, dataset.n_items).items():
            counts[k] += at_k
        if keep_topk:
            tops.append(items)
    per_user = {key: torch.cat(chunks) for key, chunks in {**parts, **row_parts}.items()}
    whole = catalogue_values(counts, users_all.numel(), catalogue)  # every user has a list of max_k items
    return Evaluation(
        averages(per_user, whole),
        int(users_all.numel()),
        users_all if keep_topk or keep_per_user else None,
        torch.cat(tops) if keep_topk else None,
        {key: values.cpu() for key, values in per_user.items()} if keep_per_user else None,
        catalogue,
        int(users_all.numel()),
    )
