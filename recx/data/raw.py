"""Interactions as read from a source, before ids are made contiguous."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class RawInteractions:
    """Parallel arrays with the source's own user and item ids (any dtype), plus optional rating and timestamp."""

    user: np.ndarray
    item: np.ndarray
    rating: np.ndarray | None = None
    timestamp: np.ndarray | None = None

    def __len__(self) -> int:
        return int(self.user.shape[0])

    def take(self, index: np.ndarray) -> "RawInteractions":
        pick = lambda a: None if a is None else a[index]  # noqa: E731
        return RawInteractions(self.user[index], self.item[index], pick(self.rating), pick(self.timestamp))

    @staticmethod
    def concat(parts: list["RawInteractions"]) -> "RawInteractions":
        join = lambda name: None if getattr(parts[0], name) is None else np.concatenate([getattr(p, name) for p in parts])  # noqa: E731
        return RawInteractions(join("user"), join("item"), join("rating"), join("timestamp"))
