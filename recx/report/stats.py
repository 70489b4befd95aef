"""Paired significance tests over users, computed by scipy, and multiple-comparison corrections.

- Paired t-test (scipy.stats.ttest_rel): t = mean(d) / (sd(d) / sqrt(n)) over the per-user differences
  d_u = x_u - y_u, n - 1 degrees of freedom, two-sided.
- Randomisation test (scipy.stats.permutation_test, permutation_type="samples"): under the null hypothesis the two
  methods' values of a user are exchangeable, so each d_u keeps or flips its sign at random; the p-value is the
  share of sign assignments whose |mean(d)| is at least the observed one (exact when 2^n <= the resamples asked for,
  else Monte Carlo, seeded). This is the Fisher randomisation test of Smucker, Allan and Carterette (CIKM 2007).
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


def _mean_difference(x, y, axis):
    return np.mean(x - y, axis=axis)


def randomisation(x: np.ndarray, y: np.ndarray, resamples: int = 10_000, seed: int = 0) -> float:
    """Two-sided p-value of the paired randomisation (sign-flip) test of mean(x - y)."""
    if np.array_equal(x, y):
        return 1.0
    result = stats.permutation_test((x, y), _mean_difference, permutation_type="samples", vectorized=True,
                                    n_resamples=resamples, batch=max(1, 2_000_000 // max(1, len(x))),
                                    alternative="two-sided", rng=np.random.default_rng(seed))
    return float(result.pvalue)


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
