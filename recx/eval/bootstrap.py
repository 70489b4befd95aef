"""Bootstrap over users for the catalogue-level metrics (coverage, Gini, entropy, exposure share, a plugin's).

A catalogue-level metric is a function of how often each item is recommended, c_j = Σ_u [j ∈ L_u@K]. A bootstrap
replicate r draws the U evaluated users with replacement (U draws, multinomial counts w_ru, Σ_u w_ru = U) and
recomputes the metric from c_rj = Σ_u w_ru [j ∈ L_u@K] (one sparse product per chunk of replicates). Replicate r's
draws come from numpy's generator seeded by (seed, r) over the users in ascending id order, so two methods evaluated
on the same users get the same resamples: the paired bootstrap compares them replicate by replicate.

Interval: a resample holds about 63% distinct users, so a metric that counts distinct items (coverage) is lower in
every resample than on all users: the resamples measure the metric's spread, not its level. The interval is
therefore the estimate plus the 2.5% and 97.5% quantiles of the replicates' deviations from their mean,
[θ + q_0.025(θ* - mean θ*), θ + q_0.975(θ* - mean θ*)]; the paired test of two methods A and B (difference
d = θ_A - θ_B, replicates d* = θ*_A - θ*_B) has p = (1 + #{|d* - mean d*| >= |d|}) / (1 + R), the share of
centred replicates as far from 0 as the observed difference (the bootstrap's null distribution).
"""

from __future__ import annotations

import numpy as np
import torch

from recx.eval.catalogue import Catalogue, exposure_counts
from recx.eval.metrics.registry import catalogue_metrics, listed_users

CHUNK_BYTES = 1 << 26  # memory of one chunk of replicates' weights or counts (float64)


def resample_weights(n_users: int, first: int, count: int, seed: int = 0) -> np.ndarray:
    """float64 [count, n_users]: replicates first .. first + count - 1, each the multinomial counts of n_users users
    drawn with replacement (replicate r from numpy's default_rng((seed, r)): independent of the chunking)."""
    weights = np.empty((count, n_users), dtype=np.float64)
    for row in range(count):
        draws = np.random.default_rng((seed, first + row)).integers(0, n_users, size=n_users)
        weights[row] = np.bincount(draws, minlength=n_users)
    return weights


def catalogue_replicates(
    items: torch.Tensor, catalogue: Catalogue, ks: list[int], resamples: int, seed: int = 0
) -> dict[tuple[str, int, str], np.ndarray]:
    """{(metric, k, key): float64 [resamples]} of every catalogue-level metric over `resamples` bootstrap
    resamples of the users of items [U, K] (rows in ascending user id, -1 where a list ends; a user without a list
    is drawn like the others and adds no list)."""
    n_users, n_items = items.shape[0], catalogue.n_items
    chunk = max(1, CHUNK_BYTES // (8 * max(n_users, n_items)))
    found: dict[tuple[str, int, str], list[np.ndarray]] = {}
    for first in range(0, resamples, chunk):
        count = min(chunk, resamples - first)
        weights = torch.from_numpy(resample_weights(n_users, first, count, seed))
        counts = {k: exposure_counts(items, k, n_items, weights) for k in ks}
        lists = weights @ listed_users(items).to(torch.float64)
        for key, values in catalogue_metrics(counts, lists, catalogue).items():
            found.setdefault(key, []).append(values.cpu().numpy())
    return {key: np.concatenate(parts) for key, parts in found.items()}


def interval(estimate: float, replicates: np.ndarray, level: float = 0.95) -> tuple[float, float]:
    """The estimate plus the quantiles of the replicates' deviations from their mean (see the module docstring)."""
    deviations = np.asarray(replicates, dtype=np.float64) - np.mean(replicates)
    low, high = np.quantile(deviations, [(1 - level) / 2, (1 + level) / 2])
    return float(estimate + low), float(estimate + high)


def paired_p(difference: float, replicates: np.ndarray) -> float:
    """Two-sided p of a difference against its paired bootstrap replicates (centred: the null distribution)."""
    centred = np.abs(np.asarray(replicates, dtype=np.float64) - np.mean(replicates))
    if difference == 0:
        return 1.0
    return float((1 + np.count_nonzero(centred >= abs(difference) * (1 - 1e-9))) / (1 + centred.size))
