"""Goodness of fit of draws to a law (chi-square, cells expecting fewer than 5 draws pooled)."""

from __future__ import annotations

import numpy as np
from scipy import stats


def assert_follows(draws, probabilities, min_p_value: float = 1e-3) -> None:
    """Chi-square goodness of fit of integer draws to `probabilities` (cells with zero probability must stay empty;
    cells expecting fewer than 5 draws are pooled into one, as the test's approximation needs)."""
    probabilities = np.asarray(probabilities, dtype=np.float64)
    assert_counts_follow(
        np.bincount(np.asarray(draws).ravel(), minlength=probabilities.size), probabilities, min_p_value
    )


def assert_counts_follow(observed, probabilities, min_p_value: float = 1e-3) -> None:
    """Chi-square goodness of fit of per-cell counts to `probabilities` (see assert_follows)."""
    observed = np.asarray(observed, dtype=np.float64)
    probabilities = np.asarray(probabilities, dtype=np.float64)
    if observed[probabilities == 0].sum() != 0:
        raise AssertionError("drew an item of probability 0")
    keep = probabilities > 0
    observed, expected = observed[keep], probabilities[keep] / probabilities[keep].sum() * observed.sum()
    order = np.argsort(expected)
    bins = np.minimum(np.searchsorted(np.cumsum(expected[order]), 5.0, side="right"), order.size - 1)
    small = order[: bins + 1]
    if small.size > 1:
        rest = np.setdiff1d(np.arange(expected.size), small)
        observed = np.append(observed[rest], observed[small].sum())
        expected = np.append(expected[rest], expected[small].sum())
    p_value = stats.chisquare(observed, expected).pvalue
    if not p_value > min_p_value:
        raise AssertionError(f"the draws do not follow the law: chi-square p = {p_value:.2e}")
