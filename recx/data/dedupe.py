"""Repeated (user, item) pairs become one interaction: the earliest by timestamp, then the first in the source."""
from __future__ import annotations

import numpy as np
import pandas as pd


def duplicate_rows(user: np.ndarray, item: np.ndarray, n_items: int, timestamp: np.ndarray | None) -> np.ndarray:
    """Indices of the rows to drop. Pairs are found by hashing (O(n)); only rows of repeated pairs are sorted."""
    key = user.astype(np.int64) * n_items + item
    repeated = np.flatnonzero(pd.Index(key).duplicated(keep=False))
    if repeated.size == 0:
        return repeated
    sub_key = key[repeated]
    order = np.lexsort((repeated, sub_key) if timestamp is None else (repeated, timestamp[repeated], sub_key))
    sorted_key = sub_key[order]
    later = np.concatenate([[False], sorted_key[1:] == sorted_key[:-1]])
    return np.sort(repeated[order[later]])
