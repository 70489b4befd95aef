"""Benchmark: the report's sign-flip randomisation test (recx.reports.stats.randomisation, batched matrix products)
against scipy.stats.permutation_test on the same paired per-user values. Prints seconds, p-values and the ratio.

    python bench/significance_speed.py [--users 30000] [--resamples 2000] [--quick]

`--quick` (make ci-bench-quick): 1,000 users, 200 resamples.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import quick
from scipy import stats as scipy_stats

from recx.reports import stats


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--users", type=int, default=30_000)
    parser.add_argument("--resamples", type=int, default=2_000)
    quick.option(parser, users=1_000, resamples=200)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    x = rng.random(args.users)
    y = x - 0.002 + rng.normal(0, 0.1, args.users)
    started = time.perf_counter()
    ours = stats.randomisation(x, y, args.resamples)
    ours_s = time.perf_counter() - started
    started = time.perf_counter()
    reference = scipy_stats.permutation_test(
        (x, y),
        lambda a, b, axis: np.mean(a - b, axis=axis),
        vectorized=True,
        permutation_type="samples",
        n_resamples=args.resamples,
        batch=max(1, 4_000_000 // args.users),
        rng=np.random.default_rng(0),
    )
    scipy_s = time.perf_counter() - started
    print(f"{args.users} users, {args.resamples} resamples")
    print(f"recx  randomisation: {ours_s:8.3f} s  p = {ours:.4f}")
    print(f"scipy permutation_test: {scipy_s:8.3f} s  p = {reference.pvalue:.4f}")
    print(f"ratio scipy / recx: {scipy_s / ours_s:.1f}x")


if __name__ == "__main__":
    main()
