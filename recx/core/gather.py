"""Rows of a table picked by ids, with a backward whose sum over repeated ids does not depend on the thread count.

`table[ids]` differentiates through `index_put_(..., accumulate=True)`, whose order of summing the gradients of a
repeated id follows the CPU thread count (so a seeded run changed in the last digits with `--threads`);
`index_select` differentiates through `index_add_`, which sums them in the order the ids are listed.

With `sparse=True` the table's gradient is a row-sparse tensor (the ids and their gradient rows, as
F.embedding(..., sparse=True) gives): added to a dense gradient the table already holds, it is summed into that
buffer in place, in the order the ids are listed (the same sums as `index_add_`), instead of a fresh zero-filled
table-sized gradient each step. The caller keeps dense gradients allocated (recx.training.runners.users).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def gather_rows(table: torch.Tensor, ids: torch.Tensor, sparse: bool = False) -> torch.Tensor:
    """table[ids]: [*ids.shape, *table.shape[1:]] from `table` [N, ...] and integer `ids` of any shape; `sparse`:
    a 2-D table's gradient comes back row-sparse."""
    flat = ids.reshape(-1)
    rows = F.embedding(flat, table, sparse=True) if sparse and table.dim() == 2 else table.index_select(0, flat)
    return rows.view(*ids.shape, *table.shape[1:])
