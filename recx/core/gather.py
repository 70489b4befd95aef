"""Rows of a table picked by ids, with a backward whose sum over repeated ids does not depend on the thread count.

`table[ids]` differentiates through `index_put_(..., accumulate=True)`, whose order of summing the gradients of a
repeated id follows the CPU thread count (so a seeded run changed in the last digits with `--threads`);
`index_select` differentiates through `index_add_`, which sums them in the order the ids are listed.
"""

from __future__ import annotations

import torch


def gather_rows(table: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    """table[ids]: [*ids.shape, *table.shape[1:]] from `table` [N, ...] and integer `ids` of any shape."""
    return table.index_select(0, ids.reshape(-1)).view(*ids.shape, *table.shape[1:])
