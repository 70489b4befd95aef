"""Inverse-CDF draws counted per column, a compiled CPU kernel (numba) with a guide table (Chen & Asau 1974).

The uniforms come from a counter-based generator: draw j of row r is SplitMix64 (Steele, Lea & Flood 2014, Java's
SplittableRandom) of the counter r·m + j + 1 from the call's `seed`, its top 24 bits as a float32 in [0, 1) (the
resolution of torch.rand's float32), times the row's total. Every draw is a pure function of (seed, r, j), so rows
run in parallel and the counts do not depend on the thread count; the seed is drawn from the run's generator.

Each row's cumulative sums are formed in the kernel (a float64 running sum cast to the dtype per entry: what
torch.cumsum computes on the CPU, to the bit). For each row r, the draw of a uniform u (scaled to the row's total)
is the first column k with cdf[r, k] > u
(torch.searchsorted(..., right=True), clamped to the last column). A binary search costs log2(K) dependent,
unpredictable steps per draw. Here each row's cumulative sums are put in G = 4K buckets, bucket(x) = ⌊x · G / total⌋
(monotone in x), and guide[b] counts the columns whose bucket is below b: for every u in bucket b those columns have
cdf < u, so the answer is at or after guide[b], and a forward scan finds it, almost always at once (a bucket holds a
quarter of a column on average). The columns found are exactly searchsorted's for the same uniforms.

Shapes: `probabilities` [R, K] (non-negative rows, not normalised), m draws per row; returns counts [R, K] in their
dtype.
"""

from __future__ import annotations

import numba
import numpy as np

from recx.kernels.in_threads import aligned, run_blocks
from recx.kernels.jit import compiled

ROWS_PER_BLOCK = 16  # rows that share one cdf and guide buffer (a row's buffers are 20 bytes per column)
BUCKETS_PER_COLUMN = 4  # measured on BIR's 2048 x 2048 draws: 1 -> 69 ms, 2 -> 52, 4 -> 40, 8 -> 42 (one thread)
GOLDEN_GAMMA = np.uint64(0x9E3779B97F4A7C15)
MIX1, MIX2 = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)
SHIFT30, SHIFT27, SHIFT31, SHIFT40 = np.uint64(30), np.uint64(27), np.uint64(31), np.uint64(40)
TWO_TO_MINUS_24 = np.float32(2.0**-24)


@compiled()
def splitmix_uniform(seed, counter):
    """A float32 uniform in [0, 1): SplitMix64's output for `counter` (uint64) from `seed` (uint64), top 24 bits."""
    z = seed + counter * GOLDEN_GAMMA
    z = (z ^ (z >> SHIFT30)) * MIX1
    z = (z ^ (z >> SHIFT27)) * MIX2
    z = z ^ (z >> SHIFT31)
    return np.float32(z >> SHIFT40) * TWO_TO_MINUS_24


@compiled(noalias=True)
def _count_blocks(probabilities, m, seed, counts, first_block, end_block):
    """counts of the rows of blocks first_block <= block < end_block (ROWS_PER_BLOCK rows each), its buffers reused by them all."""
    n_rows, n_columns = probabilities.shape
    n_buckets = BUCKETS_PER_COLUMN * n_columns
    cdf = np.empty(n_columns, probabilities.dtype)
    guide = np.empty(n_buckets + 2, np.int32)
    uniforms = np.empty(m, probabilities.dtype)
    row_counts = np.zeros(n_columns, np.int32)  # integer counts in cache, copied out once per row
    for block in range(first_block, end_block):
        for r in range(block * ROWS_PER_BLOCK, min(n_rows, (block + 1) * ROWS_PER_BLOCK)):
            running = 0.0  # float64, cast per entry: torch.cumsum's float32 sums on the CPU, to the bit
            for column in range(n_columns):
                running += probabilities[r, column]
                cdf[column] = running
            total = cdf[n_columns - 1]
            scale = n_buckets / total if total > 0 else 0.0
            guide[:] = 0
            for column in range(n_columns):
                guide[min(int(cdf[column] * scale), n_buckets) + 1] += 1
            for bucket in range(1, n_buckets + 1):
                guide[bucket] += guide[bucket - 1]
            first = np.uint64(r * m + 1)
            for j in range(m):  # the row's uniforms first: a loop without the searches' branches
                uniforms[j] = splitmix_uniform(seed, first + np.uint64(j)) * total
            for j in range(m):
                u = uniforms[j]
                column = guide[min(max(int(u * scale), 0), n_buckets)]
                while column < n_columns and cdf[column] <= u:
                    column += 1
                row_counts[min(column, n_columns - 1)] += 1
            for column in range(n_columns):
                counts[r, column] = row_counts[column]
                row_counts[column] = 0


def inverse_cdf_counts(probabilities: np.ndarray, m: int, seed: np.uint64) -> np.ndarray:
    """counts [R, K] of m draws per row, blocks of ROWS_PER_BLOCK rows in parallel on the compute threads
    (recx.kernels.in_threads)."""
    counts = aligned(probabilities.shape, probabilities.dtype, zeros=True)
    n_blocks = (probabilities.shape[0] + ROWS_PER_BLOCK - 1) // ROWS_PER_BLOCK
    run_blocks(_count_blocks, n_blocks, numba.get_num_threads(), (probabilities, m, seed, counts))
    return counts


SMALL_COUNTS = 4096  # counts below this are looked up in a table built per call; larger ones computed


@compiled(noalias=True)
def _negative_logs(counts, out, first, end):
    """out[r] = -log counts[r] for first <= r < end (`negative_log_counts`)."""
    table = np.full(SMALL_COUNTS, np.inf, counts.dtype)  # the fallback's expression, once per value
    for count in range(1, SMALL_COUNTS):
        table[count] = -np.log(counts.dtype.type(count))
    for r in range(first, end):
        for k in range(counts.shape[1]):
            count = counts[r, k]
            out[r, k] = table[np.int64(count)] if count < SMALL_COUNTS else -np.log(count)


def negative_log_counts(counts: np.ndarray) -> np.ndarray:
    """-log c per entry of `counts` [R, K], +inf where c = 0. Counts are whole numbers, mostly small: a table lookup
    (torch.log of zeros takes a slow path on the CPU, and a log or a branch per entry costs ~4x the lookup on a
    [2048, 2048] count matrix with 2048 draws a row), blocks of rows on the compute threads (each builds the table)."""
    out = aligned(counts.shape, counts.dtype)
    run_blocks(_negative_logs, counts.shape[0], numba.get_num_threads(), (counts, out))
    return out


@compiled(noalias=True, error_model="numpy")
def _shares(counts, m, out, first, end):
    """out[r] = counts[r] / m for first <= r < end (`shares_of_draws`), numpy's error model as numba compiled the
    parallel loop this was (no zero-divisor test in the loop: a third of the time)."""
    draws = counts.dtype.type(m)
    table = np.zeros(SMALL_COUNTS, counts.dtype)
    for count in range(1, SMALL_COUNTS):
        table[count] = counts.dtype.type(count) / draws
    for r in range(first, end):
        for k in range(counts.shape[1]):
            count = counts[r, k]
            out[r, k] = table[np.int64(count)] if count < SMALL_COUNTS else count / draws


def shares_of_draws(counts: np.ndarray, m: int) -> np.ndarray:
    """c / m per entry of `counts` [R, K] (the share of a row's m draws), small counts by a table lookup (the same
    division, done once per value): torch's counts / m divides every entry, ~3x the lookup; blocks of rows on the
    compute threads (each builds the table)."""
    out = aligned(counts.shape, counts.dtype)
    run_blocks(_shares, counts.shape[0], numba.get_num_threads(), (counts, m, out))
    return out
