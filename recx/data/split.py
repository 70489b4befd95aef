"""Deterministic splits of interactions into train/valid/test (numpy's PCG64 from the seed; thread-independent).

Every split returns, for each split name, the indices of its interactions in their original order. `ratios` are
normalised fractions (train, [valid,] test) from `parse_ratios`.
"""

from __future__ import annotations

import numpy as np

from recx.core.errors import RecxError

SPLIT_NAMES = {2: ("train", "test"), 3: ("train", "valid", "test")}
METHODS = ("per-user-random", "per-user-temporal", "global-random", "leave-one-out-random", "leave-one-out-latest")


def parse_ratios(text: str) -> tuple[float, ...]:
    """'80/20', '0.8,0.1,0.1' or '80/10/10' -> normalised fractions (train, [valid,] test)."""
    parts = [p for p in text.replace(",", "/").split("/") if p.strip()]
    try:
        values = np.array([float(p) for p in parts])
    except ValueError:
        raise RecxError(f"--ratios {text!r}: expected numbers like 80/20 or 80/10/10") from None
    if len(values) not in SPLIT_NAMES or (values <= 0).any():
        raise RecxError(f"--ratios {text!r}: expected two or three positive parts (train/test or train/valid/test)")
    return tuple((values / values.sum()).tolist())


def _by_bucket(order: np.ndarray, bucket: np.ndarray, n_parts: int) -> dict[str, np.ndarray]:
    """Rows order[j] go to split bucket[j]; each split's rows come back in their original order."""
    of_row = np.empty(order.shape[0], dtype=np.int8)
    of_row[order] = bucket
    return {name: np.flatnonzero(of_row == b) for b, name in enumerate(SPLIT_NAMES[n_parts])}


def _user_order(user: np.ndarray, seed: int, timestamp: np.ndarray | None = None) -> tuple[np.ndarray, ...]:
    """(order, rank within user, user of each ordered row, rows per user): rows grouped by user, each user's rows in
    random order or, given timestamps, by ascending time (ties in random order). Users are codes 0..n-1."""
    noise = np.random.default_rng(seed).permutation(user.shape[0]).view(np.uint64)
    if timestamp is None:
        noise |= user.astype(np.uint64) << np.uint64(32)  # unique keys: any sort algorithm gives this order
        order = np.argsort(noise)
    else:
        order = np.lexsort((noise, timestamp, user))
    del noise
    counts = np.bincount(user)
    starts = np.cumsum(counts) - counts
    sorted_user = user[order]
    rank = np.arange(user.shape[0], dtype=np.int64)
    rank -= starts[sorted_user]
    return order, rank, sorted_user, counts


def _ratio_buckets(
    rank: np.ndarray, sorted_user: np.ndarray, counts: np.ndarray, ratios: tuple[float, ...]
) -> np.ndarray:
    """The first max(round(n * train), 1) of a user's ordered rows train, the next round(n * valid) valid, rest test."""
    cut_train = np.maximum(np.floor(counts * ratios[0] + 0.5), 1).astype(np.int64)
    bucket = (rank >= cut_train[sorted_user]).astype(np.int8)
    if len(ratios) == 3:
        cut_valid = cut_train + np.floor(counts * ratios[1] + 0.5).astype(np.int64)
        bucket += rank >= cut_valid[sorted_user]
    return bucket


def per_user_ratio_split(
    user: np.ndarray, ratios: tuple[float, ...], seed: int, timestamp: np.ndarray | None = None
) -> dict[str, np.ndarray]:
    """Each user's rows, shuffled (or ordered by time when `timestamp` is given), cut by the ratios.

    A user with n interactions gets round(n * train) in train (at least one), then round(n * valid) in valid, the
    rest in test; temporally, the earliest rows train and the latest test.
    """
    order, rank, sorted_user, counts = _user_order(user, seed, timestamp)
    return _by_bucket(order, _ratio_buckets(rank, sorted_user, counts, ratios), len(ratios))


def leave_one_out_split(
    user: np.ndarray, n_parts: int, seed: int, timestamp: np.ndarray | None = None
) -> dict[str, np.ndarray]:
    """Each user's last row (random, or latest by time) is test when the user has >= 2 rows; with three parts the one
    before it is valid when the user has >= 3 rows. Everything else is train, so every user keeps a train row."""
    order, rank, sorted_user, counts = _user_order(user, seed, timestamp)
    n = counts[sorted_user]
    from_end = n - 1 - rank
    bucket = np.zeros(order.shape[0], dtype=np.int8)
    bucket[(from_end == 0) & (n >= 2)] = n_parts - 1
    if n_parts == 3:
        bucket[(from_end == 1) & (n >= 3)] = 1
    return _by_bucket(order, bucket, n_parts)


def global_random_split(n_rows: int, ratios: tuple[float, ...], seed: int) -> dict[str, np.ndarray]:
    """A random permutation of all rows: the first round(n * train) train, the next round(n * valid) valid, the rest
    test (users may lack train rows: the PRISM protocol)."""
    order = np.random.default_rng(seed).permutation(n_rows)
    cuts = np.floor(np.cumsum(ratios)[:-1] * n_rows + 0.5).astype(np.int64)
    bucket = np.searchsorted(cuts, np.arange(n_rows), side="right").astype(np.int8)
    return _by_bucket(order, bucket, len(ratios))


def split_rows(
    method: str, user: np.ndarray, timestamp: np.ndarray | None, ratios: tuple[float, ...], seed: int, source: str
) -> dict[str, np.ndarray]:
    """Dispatch on the split method name (METHODS); temporal methods need timestamps."""
    if method not in METHODS:
        raise RecxError(f"--split {method!r}: expected one of {', '.join(METHODS)}")
    if method in ("per-user-temporal", "leave-one-out-latest") and timestamp is None:
        raise RecxError(f"--split {method} needs timestamps, and {source} has none")
    if method == "global-random":
        return global_random_split(user.shape[0], ratios, seed)
    if method.startswith("leave-one-out"):
        return leave_one_out_split(user, len(ratios), seed, timestamp if method.endswith("latest") else None)
    return per_user_ratio_split(user, ratios, seed, timestamp if method == "per-user-temporal" else None)
