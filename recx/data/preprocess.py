"""Raw interactions -> positive interactions with contiguous ids: rating rule, duplicates, k-core; every dropped row
is counted (the card's `rows` section: read = removed by rating + duplicates + every k-core round + kept)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import overload

import numpy as np

from recx.core.errors import RecxError
from recx.data.dataset_folder import Interactions
from recx.data.dedupe import duplicate_rows
from recx.data.ids import compact, encode
from recx.data.kcore import kcore
from recx.data.rating_filter import RatingRule
from recx.data.raw import RawInteractions


@dataclass
class Positives:
    """Interactions with contiguous codes, the original id of each code, and the accounting of removed rows."""

    interactions: Interactions
    user_ids: np.ndarray
    item_ids: np.ndarray
    rows: dict


def _codes(values: np.ndarray, vocab: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    return (values, vocab) if vocab is not None else encode(values)


@overload
def _gather(array: np.ndarray, index: np.ndarray | None) -> np.ndarray: ...
@overload
def _gather(array: None, index: np.ndarray | None) -> None: ...
def _gather(array: np.ndarray | None, index: np.ndarray | None) -> np.ndarray | None:
    """array[index]; the whole array when index is None (nothing filtered), None when the column is absent."""
    return array if array is None or index is None else array[index]


def positives(raw: RawInteractions, rule: RatingRule, k: int, source: str) -> Positives:
    """Apply the rating rule, drop repeated (user, item) pairs (keeping the earliest), then the iterative k-core."""
    n_read = len(raw)
    users, user_ids = _codes(raw.user, raw.user_vocab)
    items, item_ids = _codes(raw.item, raw.item_vocab)
    rows: dict = {"read": n_read}
    mask = rule.keep(raw.rating, source)
    index = None if mask is None else np.flatnonzero(mask)
    del mask
    rows["removed_by_rating"] = 0 if index is None else n_read - int(index.size)
    if index is not None and index.size == 0:
        raise RecxError(f"{source}: the rating rule {rule.describe()} removes all {n_read} interactions")
    u, i = _gather(users, index), _gather(items, index)
    dropped = duplicate_rows(u, i, item_ids.size, _gather(raw.timestamp, index))
    rows["removed_duplicates"] = int(dropped.size)
    if dropped.size:
        kept = np.delete(np.arange(u.size, dtype=np.int64), dropped)
        u, i, index = u[kept], i[kept], kept if index is None else index[kept]
    rounds: list[dict] = []
    if k > 1:
        kept, rounds = kcore(u, i, user_ids.size, item_ids.size, k)
        if kept.size == 0:
            raise RecxError(f"{source}: the {k}-core is empty (every user or item has fewer than {k} interactions)")
        if kept.size < u.size:
            u, i, index = u[kept], i[kept], kept if index is None else index[kept]
    rows["removed_by_kcore"] = rounds
    rows["kept"] = int(u.size)
    u, user_kept = compact(u, user_ids.size)
    i, item_kept = compact(i, item_ids.size)
    inter = Interactions(u, i, _gather(raw.rating, index), _gather(raw.timestamp, index))
    return Positives(inter, user_ids[user_kept], item_ids[item_kept], rows)
