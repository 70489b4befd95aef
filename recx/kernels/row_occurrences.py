"""Where each distinct row of a list of row ids occurs, for compiled (numba) kernels that sum a row's listed
gradients in listing order (the sums `index_add_` forms) with the distinct rows in parallel.

`occurrences(rows, slot)` -> (distinct [k], starts [k + 1], positions [n]): distinct rows in order of first listing,
and positions[starts[j]:starts[j + 1]] the listing indices of distinct[j], ascending. Two serial passes over the
ids, none over the gradient rows. `slot` is a scratch of the table's length holding -1, restored before returning;
`slot_scratch(n_rows)` lends one per thread (kernels release the GIL, so threads must not share one).
"""

from __future__ import annotations

import threading

import numpy as np

from recx.kernels.jit import compiled

_lent = threading.local()


def slot_scratch(n_rows: int) -> np.ndarray:
    """This thread's int64 scratch of -1, at least `n_rows` long (every kernel leaves it all -1)."""
    scratch = getattr(_lent, "slot", None)
    if scratch is None or scratch.shape[0] < n_rows:
        scratch = np.full(n_rows, -1, dtype=np.int64)
        _lent.slot = scratch
    return scratch


@compiled()
def occurrences(rows, slot):
    """(distinct rows in order of first listing [k], starts [k + 1], listing indices grouped by row [n])."""
    n = rows.shape[0]
    distinct = np.empty(n, np.int64)
    owner = np.empty(n, np.int64)
    starts = np.zeros(n + 1, np.int64)
    k = 0
    for i in range(n):
        row = rows[i]
        at = slot[row]
        if at < 0:
            at = k
            slot[row] = k
            distinct[k] = row
            k += 1
        owner[i] = at
        starts[at + 1] += 1
    for j in range(k):
        starts[j + 1] += starts[j]
        slot[distinct[j]] = -1
    filled = starts[:k].copy()
    positions = np.empty(n, np.int64)
    for i in range(n):
        at = owner[i]
        positions[filled[at]] = i
        filled[at] += 1
    return distinct[:k], starts[: k + 1], positions
