"""Benchmark: prepare a Netflix-Prize-sized input (100M ratings in `combined_data_*.txt` format) within 8 GB.

Writes four combined_data_*.txt files (17,770 movies, 480,189 customers with ids up to 2,649,429, ratings 1-5, dates
1999-2005; no repeated (customer, movie) pair; Netflix's spread of movie popularity and of customer degrees, and a
latent taste structure: `draw_pairs`) to a folder, then runs the whole
preparation (parse, binarise, 10-core, per-user 80/20, write: the fastvae preset) in a subprocess and reports its
wall time and peak RSS (resource.getrusage(RUSAGE_CHILDREN)). Target: peak memory < 8 GB. With --epoch it then
trains one epoch of `recx train`'s defaults on that data in another subprocess (its epochs.jsonl seconds, its peak
RSS, the test NDCG@10 after it; targets: <= 10 min at 2 threads, <= 10 GB), through the `recx` entry point a user
runs (its thread setting and malloc tuning, recx.core.memory, happen there, before the command).

    python bench/netflix_scale.py [--ratings N] [--folder DIR] [--epoch] [--threads 2]
    python bench/netflix_scale.py --prepared DATA_ROOT [--threads 2]   # the epoch alone, on data prepared before
    python bench/netflix_scale.py --quick   # make ci-bench-quick: 100,000 ratings of 2,000 customers and 600 movies
                                            # (--customers, --movies), then the epoch at one thread, in seconds
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.csv as pcsv
import quick

ROOT = Path(__file__).resolve().parents[1]
N_MOVIES, N_CUSTOMERS, MAX_CUSTOMER = 17_770, 480_189, 2_649_429
REPEATS = 1.35  # draws per kept rating: the share of repeated (customer, movie) draws dropped at 100M
CHILD = """
import json, sys, time
from pathlib import Path
sys.path.insert(0, {root!r})
from recx.data.prepare import PrepareOptions, prepare
start = time.perf_counter()
out = prepare("netflix-bench", PrepareOptions(format="netflix", source=Path({source!r}), preset="fastvae"), Path({data!r}))
seconds = time.perf_counter() - start
card = json.loads((out / "card.json").read_text())
print(json.dumps({{"seconds": seconds, "rows": card["rows"], "counts": card["counts"], "n_users": card["n_users"],
                  "n_items": card["n_items"]}}))
"""
TRAIN = """
import json, resource, runpy, sys
sys.path.insert(0, {root!r})
sys.argv = ["recx", "--threads", {threads!r}, "train", "--dataset", "netflix-bench", "--epochs", "1", "--data-root",
            {data!r}, "--run-dir", {run!r}, "--quiet", "--checkpoint-every", "0", "--ks", "10"]
try:
    runpy.run_module("recx", run_name="__main__")  # the entry point a user runs: threads, then malloc's tuning
except SystemExit as done:
    assert not done.code, done.code
print(json.dumps({{"peak_gb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 1e9}}))
"""


def user_degrees(ratings: int, rng: np.random.Generator, customers: int = N_CUSTOMERS) -> np.ndarray:
    """Ratings per customer as Netflix's spread them (mean 209, median 96, at most ~17,000): lognormal with median
    96 and σ = sqrt(2 ln(209 / 96)), clipped to [2, 17,000], scaled to sum to about `ratings`."""
    degrees = np.clip(rng.lognormal(np.log(96.0), np.sqrt(2 * np.log(209 / 96)), customers), 2, 17_000)
    return np.maximum(np.round(degrees * ratings / degrees.sum()), 1).astype(np.int64)


def movie_weights(rng: np.random.Generator, movies: int = N_MOVIES) -> np.ndarray:
    """Popularity of each movie as Netflix's counts spread (median 561, mean 5,654, at most 232,944 ratings): lognormal
    with σ = sqrt(2 ln(5654 / 561)), clipped at 415x its median."""
    return np.minimum(rng.lognormal(0.0, np.sqrt(2 * np.log(5654 / 561)), movies), 415.0)


def draw_pairs(
    ratings: int,
    rng: np.random.Generator,
    tastes: int = 64,
    dim: int = 16,
    strength: float = 1.0,
    customers: int = N_CUSTOMERS,
    n_movies: int = N_MOVIES,
):
    """(movie index, customer index) pairs, movie-major, without repeats. Each customer belongs to one of `tastes`
    groups; a group draws movie m with probability ∝ popularity_m · exp(strength · c_g · q_m / sqrt(dim)) (latent
    movie vectors q, group centres c, both N(0, I)); a customer draws its degree's worth of movies from its group
    (with replacement; repeats are dropped, so heavy raters end with fewer: REPEATS more draws make up the total).
    Learnable, but far from trivially. At 100M draws (before this factor; strength 1.0): 72.6M distinct pairs,
    customers' degrees mean 151, median 87, max 3,949 (Netflix: 209, 96, 17,653); movies' counts median 611, max
    157,616 = 0.22% (Netflix: 561, 232,944 = 0.23%)."""
    degrees, weights = user_degrees(int(ratings * REPEATS), rng, customers), movie_weights(rng, n_movies)
    movies, centres = rng.standard_normal((n_movies, dim)), rng.standard_normal((tastes, dim))
    group = rng.integers(0, tastes, customers)
    keys = []
    for g in range(tastes):
        members = np.flatnonzero(group == g)
        law = weights * np.exp(strength * movies @ centres[g] / np.sqrt(dim))
        cumulative = np.cumsum(law / law.sum())
        drawn = np.minimum(np.searchsorted(cumulative, rng.random(int(degrees[members].sum()))), n_movies - 1)
        keys.append(drawn.astype(np.int64) * customers + np.repeat(members, degrees[members]))
    pairs = np.unique(np.concatenate(keys))  # movie-major, repeats dropped
    return (pairs // customers).astype(np.int32), (pairs % customers).astype(np.int32)


def write_file(path: Path, movies: np.ndarray, counts: np.ndarray, customers: np.ndarray, rng) -> None:
    """One combined_data file: per movie, a `MovieID:` line then its customers' `id,rating,date` lines (`customers`:
    the customer ids of `movies` in order, `counts[i]` of them for movies[i])."""
    offsets = np.concatenate([[0], np.cumsum(counts)])
    with open(path, "wb") as out:
        for chunk in np.array_split(np.arange(movies.size), max(1, int(counts.sum()) // 4_000_000)):
            n = counts[chunk]
            customer = customers[offsets[chunk[0]] : offsets[chunk[-1] + 1]] if chunk.size else customers[:0]
            day = rng.integers(10_550, 13_140, customer.size).astype(np.int32)
            table = pa.table(
                {
                    "c": customer,
                    "r": rng.integers(1, 6, customer.size).astype(np.int8),
                    "d": pa.array(day).cast(pa.date32()),
                }
            )
            sink = pa.BufferOutputStream()
            pcsv.write_csv(table, sink, pcsv.WriteOptions(include_header=False, quoting_style="none"))
            body = sink.getvalue().to_pybytes()
            ends = np.concatenate([[0], np.flatnonzero(np.frombuffer(body, np.uint8) == 10) + 1])
            cuts = ends[np.cumsum(n) - n]
            bounds = np.append(cuts, len(body))
            out.write(
                b"".join(
                    b"%d:\n" % m + body[a:b] for m, a, b in zip(movies[chunk], bounds[:-1], bounds[1:], strict=True)
                )
            )


def write_netflix(
    folder: Path, ratings: int, seed: int = 0, customers: int = N_CUSTOMERS, n_movies: int = N_MOVIES
) -> int:
    """The four combined_data files of about `ratings` ratings (draw_pairs) of `customers` customers (ids up to
    MAX_CUSTOMER) and `n_movies` movies; returns how many were written."""
    rng = np.random.default_rng(seed)
    ids = np.sort(rng.choice(MAX_CUSTOMER, customers, replace=False) + 1).astype(np.int32)
    movie, customer = draw_pairs(ratings, rng, customers=customers, n_movies=n_movies)
    counts = np.bincount(movie, minlength=n_movies)
    offsets = np.concatenate([[0], np.cumsum(counts)])
    for part, movies in enumerate(np.array_split(np.arange(n_movies), 4), start=1):
        chosen = ids[customer[offsets[movies[0]] : offsets[movies[-1] + 1]]]
        write_file(folder / f"combined_data_{part}.txt", movies + 1, counts[movies], chosen, rng)
    return int(movie.size)


def time_epoch(data: Path, run: Path, threads: int) -> None:
    """One epoch of `recx train`'s defaults on `data`/netflix-bench, through the `recx` entry point, in a subprocess:
    its epochs.jsonl seconds, its own peak RSS and the test NDCG@10 after it."""
    code = TRAIN.format(root=str(ROOT), threads=str(threads), data=str(data), run=str(run))
    child = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    peak = json.loads(child.stdout.strip().splitlines()[-1])["peak_gb"]
    epoch = json.loads((run / "epochs.jsonl").read_text().splitlines()[0])
    results = pd.read_parquet(run / "results.parquet")
    ndcg = results[(results.split == "test") & (results.metric == "ndcg") & (results.stratum == "all")].value
    print(
        f"recx train, one epoch of its defaults at {threads} threads: {epoch['seconds']:.0f} s "
        f"(target <= 600), peak RSS {peak:.2f} GB (target <= 10), test NDCG@10 {float(ndcg.iloc[0]):.4f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ratings", type=int, default=100_000_000)
    parser.add_argument("--folder", type=Path, help="where to write the files (default: a temporary folder)")
    parser.add_argument("--epoch", action="store_true", help="then time one epoch of recx train's defaults")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument(
        "--prepared", type=Path, help="only time the epoch, on the data root DIR holding a prepared netflix-bench"
    )
    parser.add_argument("--customers", type=int, default=N_CUSTOMERS)
    parser.add_argument("--movies", type=int, default=N_MOVIES)
    quick.option(parser, ratings=100_000, customers=2_000, movies=600, epoch=True, threads=1)
    args = parser.parse_args()
    if args.prepared is not None:
        with tempfile.TemporaryDirectory(dir=args.folder) as folder:
            time_epoch(args.prepared, Path(folder) / "run", args.threads)
        return
    with tempfile.TemporaryDirectory(dir=args.folder) as folder:
        source = Path(folder) / "netflix"
        source.mkdir()
        start = time.perf_counter()
        written = write_netflix(source, args.ratings, customers=args.customers, n_movies=args.movies)
        size = sum(p.stat().st_size for p in source.iterdir())
        print(f"wrote {written:,} ratings ({size / 1e9:.2f} GB in 4 files) in {time.perf_counter() - start:.0f} s")
        start = time.perf_counter()
        child = subprocess.run(
            [sys.executable, "-c", CHILD.format(root=str(ROOT), source=str(source), data=str(Path(folder) / "data"))],
            check=True,
            capture_output=True,
            text=True,
        )
        wall = time.perf_counter() - start
        result = json.loads(child.stdout.strip().splitlines()[-1])
        peak_gb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024 / 1e9
        print(
            f"recx prepare (fastvae): {result['seconds']:.1f} s ({wall:.1f} s with interpreter start), "
            f"peak RSS {peak_gb:.2f} GB (target < 8 GB)"
        )
        print(
            f"  {result['n_users']:,} users, {result['n_items']:,} items, counts {result['counts']}, "
            f"rows {json.dumps(result['rows'])}"
        )
        if args.epoch:
            time_epoch(Path(folder) / "data", Path(folder) / "run", args.threads)


if __name__ == "__main__":
    main()
