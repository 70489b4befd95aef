"""Interactions as read from a source, before ids are made contiguous."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class RawInteractions:
    """Parallel arrays with the source's own user and item ids (any dtype), plus optional rating and timestamp.

    When `user_vocab` (`item_vocab`) is set, `user` (`item`) holds codes into it instead of the ids themselves, and
    the vocabulary is sorted ascending (readers of string ids encode them this way to save memory).
    """

    user: np.ndarray
    item: np.ndarray
    rating: np.ndarray | None = None
    timestamp: np.ndarray | None = None
    user_vocab: np.ndarray | None = None
    item_vocab: np.ndarray | None = None

    def __len__(self) -> int:
        return int(self.user.shape[0])

    def take(self, index: np.ndarray) -> "RawInteractions":
        pick = lambda a: None if a is None else a[index]  # noqa: E731
        return RawInteractions(
            self.user[index],
            self.item[index],
            pick(self.rating),
            pick(self.timestamp),
            self.user_vocab,
            self.item_vocab,
        )

    @staticmethod
    def concat(parts: list["RawInteractions"]) -> "RawInteractions":
        """Concatenate parts that hold ids themselves (no vocabularies)."""
        if any(p.user_vocab is not None or p.item_vocab is not None for p in parts):
            raise ValueError("concat needs parts without vocabularies")

        def join(name):
            return None if getattr(parts[0], name) is None else np.concatenate([getattr(p, name) for p in parts])

        return RawInteractions(join("user"), join("item"), join("rating"), join("timestamp"))
