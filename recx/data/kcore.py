"""Iterative k-core: drop interactions of users or items with fewer than k interactions, until none is dropped."""

from __future__ import annotations

import numpy as np


def kcore(user: np.ndarray, item: np.ndarray, n_users: int, n_items: int, k: int) -> tuple[np.ndarray, list[dict]]:
    """(indices of kept rows, one record per round that removed something).

    Each round counts degrees on the current interactions and removes, at once, every interaction whose user or
    item has degree < k; a record gives the interactions, users and items removed in that round.
    """
    alive = np.arange(user.shape[0], dtype=np.int64 if user.shape[0] >= 2**31 else np.int32)
    u, i = user, item
    rounds: list[dict] = []
    user_degree = np.bincount(u, minlength=n_users)
    item_degree = np.bincount(i, minlength=n_items)
    while True:
        keep = (user_degree[u] >= k) & (item_degree[i] >= k)
        removed = int(keep.size - np.count_nonzero(keep))
        if removed == 0:
            return alive, rounds
        alive, u, i = alive[keep], u[keep], i[keep]
        new_user_degree = np.bincount(u, minlength=n_users)
        new_item_degree = np.bincount(i, minlength=n_items)
        rounds.append(
            {
                "round": len(rounds) + 1,
                "interactions": removed,
                "users": int(np.count_nonzero((user_degree > 0) & (new_user_degree == 0))),
                "items": int(np.count_nonzero((item_degree > 0) & (new_item_degree == 0))),
            }
        )
        user_degree, item_degree = new_user_degree, new_item_degree
