"""Benchmark: `recx prepare` of a MovieLens-10M-sized ratings.dat against pandas' python-engine parse alone.

Writes a ratings.dat of 10,000,054 `UserID::MovieID::Rating::Timestamp` lines (69,878 users with >= 20 ratings,
10,677 movies with Zipf-like popularity, half-star ratings) to a temporary folder, then
  1. runs the whole preparation (parse, binarise, 10-core, per-user 80/20 split, write: the fastvae preset) in a
     subprocess and reports its wall time and peak RSS (resource.getrusage(RUSAGE_CHILDREN));
  2. times pandas.read_csv(sep='::', engine='python') alone, in this process.
Targets: recx time < 1/10 of the pandas parse time; peak memory < 1.5 GB.
The child then loads the prepared dataset (load_dataset, median of 3) and times its two hashes alone on the same
data: the damage check (changed_files: each split file's sha256 against card.json) and the identity
(content_hash: sha256 of the columns and id maps), so that their share of a load is printed.

    python bench/prepare_speed.py [--lines N] [--users N] [--items N] [--skip-pandas] [--quick]

`--quick` (make ci-bench-quick): 60,000 lines of 1,000 users and 800 movies, in seconds; its figures mean nothing.
"""

from __future__ import annotations

import argparse
import json
import math
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pcsv
import quick

ROOT = Path(__file__).resolve().parents[1]
CHILD = """
import json, sys, time
from pathlib import Path
sys.path.insert(0, {root!r})
from recx.data.prepare import PrepareOptions, prepare
start = time.perf_counter()
out = prepare("ml10m-bench", PrepareOptions(format="movielens", source=Path({source!r}), preset="fastvae"), Path({data!r}))
seconds = time.perf_counter() - start
card = json.loads((out / "card.json").read_text())
import statistics
from recx.data import dataset_folder as folder
from recx.data.dataset import load_dataset
def best(work):
    times = []
    for _ in range(3):
        start = time.perf_counter()
        work()
        times.append(time.perf_counter() - start)
    return statistics.median(times)
splits = {{s: folder.read_split(out, s) for s in folder.SPLITS}}
ids = folder.read_ids(out, "users"), folder.read_ids(out, "items")
load = {{"load": best(lambda: load_dataset(out.parent, out.name)), "changed_files": best(lambda: folder.changed_files(out, card)),
        "content_hash": best(lambda: folder.content_hash(splits, *ids))}}
print(json.dumps({{"seconds": seconds, "rows": card["rows"], "counts": card["counts"], "n_users": card["n_users"],
                  "n_items": card["n_items"], "load": load}}))
"""


def write_ratings(path: Path, lines: int, seed: int = 0, n_users: int = 69_878, n_items: int = 10_677) -> None:
    """A MovieLens-10M-like ratings.dat with exactly `lines` lines and no repeated (user, movie) pair (at least 20
    lines a user).

    User lengths are 20 + Pareto, capped near 7,000 (ML-10M's longest is 7,359; with fewer movies, at the movies a
    user can walk). A user's first movie comes from
    1,500 "tail" movies (Zipf: many get fewer than 10 ratings, so the 10-core has work to do); the others are the
    walk start_u + j * stride_u over the remaining 9,177 movies, distinct because each stride is coprime to 9,177
    (with fewer movies: a seventh of them in the tail, the strides coprime to the rest).
    """
    rng = np.random.default_rng(seed)
    if lines < 20 * n_users:
        raise SystemExit(f"--lines {lines:,}: at least 20 a user, {20 * n_users:,} for {n_users:,} users")
    n_tail = min(1_500, n_items // 7)
    n_head = n_items - n_tail
    longest = min(6_900, n_head - 21 - math.ceil((lines - 20 * n_users) / n_users))  # with the top-up below
    weights = rng.pareto(1.2, n_users)
    lengths = np.minimum(np.floor(weights / weights.sum() * (lines - 20 * n_users)), longest).astype(np.int64) + 20
    short = lines - int(lengths.sum())
    lengths += short // n_users
    lengths[: short % n_users] += 1
    user = np.repeat(np.arange(1, n_users + 1), lengths)
    position = np.arange(user.size) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    if lengths.max() > n_head:
        raise SystemExit(f"a user of {lengths.max():,} ratings: more than the {n_head:,} movies it walks")
    start = np.minimum(rng.zipf(1.3, n_users), n_head) - 1
    strides = np.array([s for s in (1, 2, 4, 5, 8, 10, 11, 13) if math.gcd(s, n_head) == 1])
    stride = rng.choice(strides, n_users)
    walk = (np.repeat(start, lengths) + position * np.repeat(stride, lengths)) % n_head
    tail = n_head + np.minimum(rng.zipf(1.1, n_users), n_tail) - 1
    walk[position == 0] = tail
    item_ids = np.sort(rng.choice(65_133, n_items, replace=False) + 1)
    item = item_ids[walk]
    rating = rng.integers(1, 11, user.size).astype(np.float32) / 2
    stamp = rng.integers(789_652_009, 1_231_131_736, user.size)
    table = pa.table({"u": user, "i": item, "r": rating, "t": stamp})
    tmp = path.with_suffix(".tmp")
    pcsv.write_csv(table, tmp, pcsv.WriteOptions(include_header=False, delimiter="\t", quoting_style="none"))
    path.write_bytes(tmp.read_bytes().replace(b"\t", b"::"))
    tmp.unlink()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lines", type=int, default=10_000_054)
    parser.add_argument("--users", type=int, default=69_878)
    parser.add_argument("--items", type=int, default=10_677, help="movies")
    parser.add_argument("--skip-pandas", action="store_true")
    quick.option(parser, lines=60_000, users=1_000, items=800)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        source = Path(folder) / "ratings.dat"
        start = time.perf_counter()
        write_ratings(source, args.lines, n_users=args.users, n_items=args.items)
        print(
            f"wrote {args.lines:,} lines ({source.stat().st_size / 1e6:.0f} MB) in {time.perf_counter() - start:.1f} s"
        )
        start = time.perf_counter()
        child = subprocess.run(
            [sys.executable, "-c", CHILD.format(root=str(ROOT), source=str(source), data=str(Path(folder) / "data"))],
            check=True,
            capture_output=True,
            text=True,
        )
        recx_wall = time.perf_counter() - start
        result = json.loads(child.stdout.strip().splitlines()[-1])
        peak_gb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024 / 1e9
        print(
            f"recx prepare (fastvae: binarise, 10-core, per-user 80/20, write): {result['seconds']:.2f} s "
            f"({recx_wall:.2f} s with interpreter start), peak RSS {peak_gb:.2f} GB"
        )
        print(
            f"  {result['n_users']:,} users, {result['n_items']:,} items, counts {result['counts']}, "
            f"rows {json.dumps(result['rows'])}"
        )
        load = result["load"]
        print(
            f"load_dataset: {load['load']:.3f} s (median of 3); alone on the same data: content_hash "
            f"{load['content_hash']:.3f} s ({load['content_hash'] / load['load']:.0%} of a load), changed_files "
            f"{load['changed_files']:.3f} s ({load['changed_files'] / load['load']:.0%})"
        )
        if args.skip_pandas:
            return
        import pandas as pd

        start = time.perf_counter()
        frame = pd.read_csv(source, sep="::", engine="python", header=None)
        pandas_seconds = time.perf_counter() - start
        print(f"pandas.read_csv(sep='::', engine='python'): {pandas_seconds:.2f} s for {len(frame):,} rows")
        print(
            f"ratio recx / pandas parse: {result['seconds'] / pandas_seconds:.3f} "
            f"(with interpreter start {recx_wall / pandas_seconds:.3f}; target < 0.1); "
            f"peak {peak_gb:.2f} GB (target < 1.5 GB)"
        )


if __name__ == "__main__":
    main()
