"""Item-popularity strata (the PRISM paper's 5% / 15% / 80% cut-offs).

Items are sorted by descending training popularity, ties broken by ascending item id; the first round(0.05 n)
items are "popular", the rest of the first round(0.20 n) are "neutral", the remaining items are "unpopular".
"""

from __future__ import annotations

import numpy as np
import torch

STRATA = ("popular", "neutral", "unpopular")
CUTS = (0.05, 0.20)


def popularity_strata(popularity: torch.Tensor) -> torch.Tensor:
    """Stratum index per item (0 popular, 1 neutral, 2 unpopular), int64 on popularity's device."""
    counts = popularity.detach().cpu().numpy()
    n = counts.shape[0]
    order = np.lexsort((np.arange(n), -counts))
    rank = np.empty(n, dtype=np.int64)
    rank[order] = np.arange(n)
    n_popular, n_top = round(CUTS[0] * n), round(CUTS[1] * n)
    stratum = np.where(rank < n_popular, 0, np.where(rank < n_top, 1, 2))
    return torch.from_numpy(stratum).to(popularity.device)
