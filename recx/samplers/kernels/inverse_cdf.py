"""Inverse-CDF draws counted per column, a compiled CPU kernel (numba) with a guide table (Chen & Asau 1974).

For each row r, the draw of a uniform u (already scaled to the row's total) is the first column k with cdf[r, k] > u
(torch.searchsorted(..., right=True), clamped to the last column). A binary search costs log2(K) dependent steps per
draw; here each row first buckets its cumulative sums (bucket(x) = ⌊x / total · K⌋, monotone in x), so that
guide[b], the first column whose bucket is ≥ b, is a column no later than the answer for every u in bucket b; a
forward scan from there finds it, one step per draw on average. The columns found are exactly searchsorted's.

Shapes: `cdf` [R, K] (non-decreasing rows), `uniforms` [R, m]; returns counts [R, K] in the cdf's dtype.
"""

from __future__ import annotations

import numba
import numpy as np


@numba.njit(cache=True, nogil=True, parallel=True)
def inverse_cdf_counts(cdf, uniforms):
    n_rows, n_columns = cdf.shape
    counts = np.zeros_like(cdf)
    for r in numba.prange(n_rows):
        total = cdf[r, n_columns - 1]
        scale = n_columns / total if total > 0 else 0.0
        guide = np.empty(n_columns + 1, np.int64)
        column = 0
        for bucket in range(n_columns + 1):
            while column < n_columns and min(int(cdf[r, column] * scale), n_columns) < bucket:
                column += 1
            guide[bucket] = column
        for j in range(uniforms.shape[1]):
            u = uniforms[r, j]
            column = guide[min(max(int(u * scale), 0), n_columns)]
            while column < n_columns and cdf[r, column] <= u:
                column += 1
            counts[r, min(column, n_columns - 1)] += 1
    return counts
