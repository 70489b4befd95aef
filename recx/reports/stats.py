"""Paired significance tests over users and multiple-comparison corrections.

- Paired t-test, computed by scipy (scipy.stats.ttest_rel): t = mean(d) / (sd(d) / sqrt(n)) over the per-user
  differences d_u = x_u - y_u, n - 1 degrees of freedom, two-sided.
- Randomisation test (the Fisher randomisation test of Smucker, Allan and Carterette, CIKM 2007): under the null
  hypothesis the two methods' values of a user are exchangeable, so each d_u keeps or flips its sign at random. With
  2^n <= `resamples` every sign assignment is enumerated and p is the share whose |mean(d)| reaches the observed
  one; otherwise `resamples` seeded random assignments give p = (1 + hits) / (1 + resamples). Computed here as one
  matrix product per batch of assignments (scipy.stats.permutation_test gives the same p-values, checked in the
  tests, but takes about 30 s for 30,000 users and 10,000 resamples).
- Holm (1979): with the m p-values sorted ascending p_(1) <= ... <= p_(m), the adjusted p_(i) is
  max_{j <= i} min(1, (m - j + 1) p_(j)); Bonferroni: min(1, m p).
"""

from __future__ import annotations

import numpy as np
from scipy import stats

CORRECTIONS = ("holm", "bonferroni")


def paired_t(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """(t statistic, two-sided p-value) of the paired t-test of x against y; (0, 1) when x and y are identical."""
    if np.array_equal(x, y):
        return 0.0, 1.0
    result = stats.ttest_rel(x, y)
    return float(result.statistic), float(result.pvalue)


def randomisation(
    x: np.ndarray, y: np.ndarray, resamples: int = 10_000, seed: int = 0, batch_cells: int = 4_000_000
) -> float:
    """Two-sided p-value of the paired randomisation (sign-flip) test of mean(x - y); memory: batch_cells floats."""
    d = np.asarray(x, dtype=np.float64) - np.asarray(y, dtype=np.float64)
    if not d.any():
        return 1.0
    n = d.size
    reach = abs(d.mean()) * (1 - 1e-9)  # an assignment as extreme as the observed one, up to rounding
    if n < 63 and 2**n <= resamples:
        bits = (np.arange(2**n)[:, None] >> np.arange(n)) & 1
        return float(np.mean(np.abs((1.0 - 2.0 * bits) @ d) / n >= reach))
    rng = np.random.default_rng(seed)
    hits, done = 0, 0
    while done < resamples:
        size = min(max(1, batch_cells // n), resamples - done)
        drawn = np.unpackbits(rng.integers(0, 256, size=(size, (n + 7) // 8), dtype=np.uint8), axis=1, count=n)
        hits += int(np.count_nonzero(np.abs((1.0 - 2.0 * drawn) @ d) / n >= reach))
        done += size
    return (1 + hits) / (1 + resamples)


def adjust(pvalues, method: str = "holm") -> np.ndarray:
    """p-values adjusted for the m comparisons of one family (Holm step-down or Bonferroni)."""
    p = np.asarray(pvalues, dtype=np.float64)
    m = p.size
    if method == "bonferroni":
        return np.minimum(1.0, m * p)
    if method != "holm":
        raise ValueError(f"correction {method!r}; valid: {', '.join(CORRECTIONS)}")
    order = np.argsort(p, kind="stable")
    stepped = np.maximum.accumulate(np.minimum(1.0, (m - np.arange(m)) * p[order]))
    adjusted = np.empty(m)
    adjusted[order] = stepped
    return adjusted
