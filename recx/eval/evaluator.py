"""Full-ranking evaluation, batched on the device (docs/design.md "Evaluation conventions").

Every item is ranked; items seen in training are excluded (and validation items when testing). Per-user values are
computed row by row and averaged in float64 at the end in user order (one reduction, each (metric, k, stratum) row
summed on its own), so results depend neither on the batch size nor on the thread count.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import torch

from recx.core.errors import RecxError
from recx.data.csr import CSR
from recx.data.dataset import Dataset
from recx.eval.catalogue import HELD_OUT_SHARE, Catalogue, catalogue_of, cutoff_counts
from recx.eval.metrics.registry import (
    METRICS,
    catalogue_metrics,
    list_counts,
    listed_users,
    needs_list,
    per_user_table,
)
from recx.eval.strata import STRATA

# Top-K lists are scored by the metrics in groups of at least this many users (the metrics' kernels once a group,
# not once a batch: on a GPU the per-batch launches were 5.6x the bare matmul + top-k); all the metrics at all the
# cut-offs in all the strata of a group take one set of kernels (recx.eval.metrics.registry.per_user_table).
METRIC_ROWS = 1 << 16
ALIGNMENT = 64  # bytes: where the CPU allocator starts every tensor (c10's gAlignment)


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


def averaged(
    keys: list[tuple[str, int, str]], per_user: torch.Tensor, whole: dict[tuple[str, int, str], torch.Tensor]
) -> dict[tuple[str, int, str], float]:
    """{key: value}: each per-user key's average (per_user float64 [len(keys), U]: one reduction over every row,
    each row summed on its own, in user order, whatever the thread count; a `needs_list` metric's over the users
    with a value, as Tensor.nanmean: nansum / their count) and each catalogue-level value, in one host read; a key
    without a value (a `needs_list` metric when no user has a list) is left out."""
    means = per_user.mean(1)
    valued = [needs_list(key[0]) for key in keys]
    if any(valued):  # a needs_list metric's rows: over the users with a value (Tensor.nanmean: nansum / their count)
        over_valued = per_user.nansum(1) / (per_user == per_user).sum(1)
        cuts = [0, *(index for index in range(1, len(keys)) if valued[index] != valued[index - 1]), len(keys)]
        means = torch.cat([(over_valued if valued[a] else means)[a:b] for a, b in itertools.pairwise(cuts)])
    values = torch.cat([means, *(value.reshape(1) for value in whole.values())]).tolist()
    found = dict(zip([*keys, *whole], values, strict=True))
    return {key: value for key, value in found.items() if value == value or not needs_list(key[0])}


def catalogue_values(
    counts: dict[int, torch.Tensor], n_lists: int, catalogue: Catalogue
) -> dict[tuple[str, int, str], torch.Tensor]:
    """The catalogue-level metrics of counts {k: [n_items]} over n_lists lists, and the held-out share per stratum
    (`heldout_share`, the same at each k): scalar float64 tensors on the evaluation's device."""
    lists = torch.full((), float(n_lists), dtype=torch.float64, device=catalogue.popularity.device)  # no host copy
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
    keys, per_user = per_user_table(hits, target.row_lengths()[users], ks, strata, items, catalogue, held_out)
    n_listed = int(listed_users(items).sum())
    whole = catalogue_values(list_counts(items, ks, dataset.n_items), n_listed, catalogue)
    per_user_cpu = dict(zip(keys, per_user.cpu(), strict=True))
    return Evaluation(averaged(keys, per_user, whole), users.numel(), users, items, per_user_cpu, catalogue, n_listed)


def excluded_splits(dataset: Dataset, split: str) -> list[CSR]:
    exclude = [dataset.train]
    if split == "test" and dataset.valid is not None:
        exclude.append(dataset.valid)
    return exclude


def batch_counts(users: torch.Tensor, csrs: list[CSR], batch_size: int) -> list[list[int]]:
    """[batch][csr]: the stored entries of the users' rows of each csr, per batch of `batch_size` users: one host
    read for all the batches and splits."""
    lengths = torch.stack([csr.row_lengths()[users] for csr in csrs], 1)
    n_batches = -(-users.numel() // batch_size)
    padded = lengths.new_zeros((n_batches * batch_size, len(csrs)))
    padded[: users.numel()] = lengths
    return padded.view(n_batches, batch_size, len(csrs)).sum(1).tolist()


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


def excluded_positions(
    users: torch.Tensor, csrs: list[CSR], batch_size: int, counts: list[list[int]]
) -> list[torch.Tensor]:
    """Per batch of `batch_size` users of `users` (a group of batches, counts [batch][csr] their entries), the
    positions of every excluded split's items in the batch's score matrix (`seen_positions`): one write of -inf a
    batch whatever the number of excluded splits."""
    per_csr = [
        seen_positions(users, csr, batch_size, sum(row[i] for row in counts)).split([row[i] for row in counts])
        for i, csr in enumerate(csrs)
    ]
    if len(csrs) == 1:
        return list(per_csr[0])
    merged = torch.cat([part for batch in zip(*per_csr, strict=True) for part in batch])
    return list(merged.split([sum(row) for row in counts]))


def batch_queries(model, users: torch.Tensor, batch_size: int) -> Iterator[torch.Tensor]:
    """Each batch's queries in turn: [len(batch), d] for the batches `users.split(batch_size)`, bit for bit
    `model.query(batch)`. A model whose query is row by row (`row_queries`: recx.models.base.Model) computes every
    user's at once, [U, d], and each batch is a slice of it: no operator a batch (the slice copied only where it
    does not start on ALIGNMENT bytes, as a fresh tensor does: MKL's matrix product rounds otherwise off that
    alignment); any other model's query runs once a batch."""
    if not getattr(model, "row_queries", False):
        yield from (model.query(batch) for batch in users.split(batch_size))
        return
    for rows in model.query(users).split(batch_size):
        yield rows if rows.data_ptr() % ALIGNMENT == 0 else rows.clone()


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
    called after each batch (progress display).

    A batch is the product of its users' queries with the item table (the queries of every user computed at once
    when the model's are row by row: `batch_queries`), one write of -inf at the excluded items and the top-k; its
    lists are scored with those of the other batches of its group (>= METRIC_ROWS users): every per-user metric at
    every k in every stratum from one hit matrix (`per_user_table`) and the items' counts at every k
    (`cutoff_counts`). The per-user values stay on the device and are averaged once, at the end: between the
    first batch and that read, the evaluator and recx's cut-off metrics neither read the device nor copy to it from
    the host (`auc_beta` reads each batch's held-out count): the host queues work ahead of a GPU, never waiting."""
    target = dataset.split(split)
    max_k = max(ks)
    if max_k > dataset.n_items:
        raise RecxError(f"K={max_k} is larger than the number of items ({dataset.n_items})")
    model.eval()
    seen = excluded_splits(dataset, split)
    catalogue = catalogue_of(dataset.train, target)
    item_table = model.item_table()
    users_all = torch.nonzero(target.row_lengths() > 0).flatten()
    if users_all.numel() == 0:
        raise RecxError(f"no user has a {split} item")
    full_row = [METRICS.get(name)() for name in METRICS.names() if not METRICS.get(name).cutoff]
    keys: list[tuple[str, int, str]] = []
    parts, row_parts, row_keys, tops = [], [], [], []  # cut-off metrics' [keys, group], full rows' [keys, batch]
    counts = torch.zeros(len(ks), dataset.n_items, dtype=torch.float64, device=users_all.device)
    seen_counts = batch_counts(users_all, seen, batch_size)  # [batch][csr]
    per_group = group_batches(users_all.numel(), batch_size)
    queries = batch_queries(model, users_all, batch_size)
    for first in range(0, len(seen_counts), per_group):
        batches = range(first, min(first + per_group, len(seen_counts)))
        group = users_all[first * batch_size : batches.stop * batch_size]
        excluded = excluded_positions(group, seen, batch_size, seen_counts[first : batches.stop])
        lists = []
        for batch, positions in zip(batches, excluded, strict=True):
            users = users_all[batch * batch_size : (batch + 1) * batch_size]
            scores = next(queries) @ item_table.T
            scores.view(-1).index_fill_(0, positions, float("-inf"))
            lists.append(scores.topk(max_k, dim=1, sorted=True).indices)
            if auc_beta is not None:
                relevant = target.dense_rows(users)
                scored = {
                    key: v
                    for metric in full_row
                    for key, v in metric.per_user_scores(scores, relevant, auc_beta).items()
                }
                row_keys = [(metric, 0, "all") for metric in scored]
                row_parts.append(torch.stack(list(scored.values())))
            if after_batch is not None:
                after_batch(batch * batch_size + users.numel(), users_all.numel())
        items = torch.cat(lists) if len(lists) > 1 else lists[0]
        hits = target.contains(group[:, None].expand_as(items), items)
        held_out = functools.partial(held_out_rows, target, group)
        n_relevant = target.row_lengths()[group]
        keys, values = per_user_table(hits, n_relevant, ks, catalogue.strata[items], items, catalogue, held_out)
        parts.append(values)
        counts += cutoff_counts(items, ks, dataset.n_items)
        if keep_topk:
            tops.append(items)
    per_user = torch.cat(parts, 1) if len(parts) > 1 else parts[0]  # [keys, users]
    if row_parts:
        keys, per_user = keys + row_keys, torch.cat([per_user, torch.cat(row_parts, 1)])
    whole = catalogue_values(dict(zip(ks, counts, strict=True)), users_all.numel(), catalogue)  # every list: max_k
    return Evaluation(
        averaged(keys, per_user, whole),
        int(users_all.numel()),
        users_all if keep_topk or keep_per_user else None,
        torch.cat(tops) if keep_topk else None,
        dict(zip(keys, per_user.cpu(), strict=True)) if keep_per_user else None,
        catalogue,
        int(users_all.numel()),
    )
