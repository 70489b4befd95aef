"""Deterministic splits of interactions into train/valid/test (numpy's PCG64 from the seed; thread-independent)."""
from __future__ import annotations

import numpy as np

from recx.errors import RecxError

SPLIT_NAMES = {2: ("train", "test"), 3: ("train", "valid", "test")}


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


def per_user_ratio_split(user: np.ndarray, ratios: tuple[float, ...], seed: int) -> dict[str, np.ndarray]:
    """Shuffle each user's interactions and cut them by the ratios.

    A user with n interactions gets round(n * train) in train (at least one), then round(n * valid) in valid, the
    rest in test. Returns the interaction indices of each split, in their original order.
    """
    rng = np.random.default_rng(seed)
    key = rng.random(user.shape[0])
    order = np.lexsort((key, user))
    sorted_user = user[order]
    starts = np.flatnonzero(np.concatenate([[True], sorted_user[1:] != sorted_user[:-1]]))
    lengths = np.diff(np.concatenate([starts, [sorted_user.shape[0]]]))
    rank = np.arange(sorted_user.shape[0]) - np.repeat(starts, lengths)
    n = np.repeat(lengths, lengths)
    cut_train = np.maximum(np.floor(n * ratios[0] + 0.5), 1)
    names = SPLIT_NAMES[len(ratios)]
    if len(ratios) == 3:
        cut_valid = cut_train + np.floor(n * ratios[1] + 0.5)
        bucket = np.where(rank < cut_train, 0, np.where(rank < cut_valid, 1, 2))
    else:
        bucket = np.where(rank < cut_train, 0, 1)
    return {name: np.sort(order[bucket == b]) for b, name in enumerate(names)}
