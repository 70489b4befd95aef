"""Original ids -> contiguous codes that keep the ids' ascending order (so the final ids are reproducible)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

DENSE_FACTOR = 4


def encode(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(codes, originals) with originals ascending and originals[codes] == values.

    Non-negative integers up to DENSE_FACTOR * len + 2^20 use a presence table (O(n)); anything else sorts.
    """
    if values.dtype.kind in "iu" and values.size:
        low, high = int(values.min()), int(values.max())
        if low >= 0 and high < DENSE_FACTOR * values.size + (1 << 20):
            present = np.zeros(high + 1, dtype=bool)
            present[values] = True
            originals = np.flatnonzero(present)
            lookup = np.cumsum(present, dtype=np.int64) - 1
            return lookup[values].astype(np.int32), originals.astype(values.dtype)
    originals, codes = np.unique(values, return_inverse=True)
    return codes.astype(np.int32).reshape(-1), originals


def encode_strings(column: pa.Array | pa.ChunkedArray) -> tuple[np.ndarray, np.ndarray]:
    """(codes, originals) for string ids: hash-based dictionary encoding, then the small dictionary is sorted."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    encoded = pc.dictionary_encode(column)
    dictionary = encoded.dictionary
    order = pc.sort_indices(dictionary).to_numpy()
    rank = np.empty(order.size, dtype=np.int32)
    rank[order] = np.arange(order.size, dtype=np.int32)
    codes = rank[encoded.indices.to_numpy(zero_copy_only=False)]
    return codes, dictionary.take(pa.array(order)).to_numpy(zero_copy_only=False)


def compact(codes: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
    """Drop unused codes: (new codes, kept old codes), order kept."""
    present = np.zeros(size, dtype=bool)
    present[codes] = True
    kept = np.flatnonzero(present)
    lookup = (np.cumsum(present, dtype=np.int64) - 1).astype(np.int32)
    return lookup[codes], kept
