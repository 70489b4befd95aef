"""Bootstrap replicates of the catalogue-level metrics of report rows (recx.eval.bootstrap), from each run's top-K
lists and catalogue (recx.runs.per_user: topk_<split>.parquet, catalogue.parquet).

A row's (method's) replicate r is the mean over its runs (seeds) of each run's replicate r: every run of a dataset
and split is resampled over the same users with the same draws, so two rows are compared replicate by replicate.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from recx.eval.bootstrap import catalogue_replicates
from recx.runs.per_user import has_topk, read_catalogue, read_topk

DEFAULT_RESAMPLES = 1_000


class Resampled:
    """Replicates per (run, k), computed once for every catalogue-level metric at that cut-off."""

    def __init__(self, folders: dict[str, Path], split: str, resamples: int = DEFAULT_RESAMPLES, seed: int = 0):
        self.folders, self.split, self.resamples, self.seed = folders, split, resamples, seed
        self._runs: dict[tuple[str, int], tuple[np.ndarray, dict] | None] = {}

    def run(self, run_id: str, k: int) -> tuple[np.ndarray, dict] | None:
        """(the run's evaluated users, {(metric, k, key): [R]}), or None when the run kept no lists."""
        if (run_id, k) not in self._runs:
            folder = self.folders.get(run_id)
            if folder is None or not has_topk(folder, self.split):
                self._runs[(run_id, k)] = None
            else:
                users, items = read_topk(folder, self.split)
                found = catalogue_replicates(
                    torch.from_numpy(items), read_catalogue(folder), [k], self.resamples, self.seed
                )
                self._runs[(run_id, k)] = (users, found)
        return self._runs[(run_id, k)]

    def row(self, run_ids, key: tuple[str, int, str]) -> tuple[np.ndarray, np.ndarray] | None:
        """(users, replicates [R] averaged over the runs), or None when a run has no lists, the metric, or the same
        users as the others."""
        users, parts = None, []
        for run_id in run_ids:
            found = self.run(run_id, key[1])
            if found is None or key not in found[1]:
                return None
            if users is not None and not np.array_equal(users, found[0]):
                return None
            users = found[0]
            parts.append(found[1][key])
        if users is None:
            return None
        return users, np.mean(parts, axis=0)
