"""Repeated (user, item) pairs become one interaction: the earliest by timestamp, then the first in the source."""

from __future__ import annotations

import numpy as np


def duplicate_rows(user: np.ndarray, item: np.ndarray, n_items: int, timestamp: np.ndarray | None) -> np.ndarray:
    """Indices of the rows to drop. Repeated keys user * n_items + item are found in a sorted copy of the keys; only
    rows holding a repeated key are then ordered by (key, timestamp, position)."""
    key = user.astype(np.int64) * n_items + item
    ordered = np.sort(key)
    same = ordered[1:] == ordered[:-1]
    if not same.any():
        return np.empty(0, dtype=np.int64)
    repeated = np.flatnonzero(np.isin(key, ordered[1:][same]))
    del ordered, same
    sub_key = key[repeated]
    order = np.lexsort((repeated, sub_key) if timestamp is None else (repeated, timestamp[repeated], sub_key))
    sorted_key = sub_key[order]
    later = np.concatenate([[False], sorted_key[1:] == sorted_key[:-1]])
    return np.sort(repeated[order[later]])
