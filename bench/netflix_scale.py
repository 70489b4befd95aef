"""Benchmark: prepare a Netflix-Prize-sized input (100M ratings in `combined_data_*.txt` format) within 8 GB.

Writes four combined_data_*.txt files (17,770 movies with Zipf-like popularity, 480,189 customers with ids up to
2,649,429, ratings 1-5, dates 1999-2005; no repeated (customer, movie) pair) to a folder, then runs the whole
preparation (parse, binarise, 10-core, per-user 80/20, write: the fastvae preset) in a subprocess and reports its
wall time and peak RSS (resource.getrusage(RUSAGE_CHILDREN)). Target: peak memory < 8 GB.

    python bench/netflix_scale.py [--ratings N] [--folder DIR]
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
import pyarrow as pa
import pyarrow.csv as pcsv

ROOT = Path(__file__).resolve().parents[1]
N_MOVIES, N_CUSTOMERS, MAX_CUSTOMER = 17_770, 480_189, 2_649_429
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


def movie_counts(ratings: int, rng: np.random.Generator) -> np.ndarray:
    """Ratings per movie: Zipf-like weights, each movie between 3 and N_CUSTOMERS / 2 ratings, summing to `ratings`."""
    weights = 1.0 / np.arange(1, N_MOVIES + 1) ** 0.8
    counts = np.clip(np.floor(weights / weights.sum() * ratings), 3, N_CUSTOMERS // 2).astype(np.int64)
    short = ratings - int(counts.sum())
    room = N_CUSTOMERS // 2 - counts
    add = np.minimum(room, np.ceil(short * room / room.sum()).astype(np.int64))
    add[np.cumsum(add) > short] = 0
    counts += add
    counts[-1] += ratings - int(counts.sum())
    return rng.permutation(counts)


def write_file(path: Path, movies: np.ndarray, counts: np.ndarray, customers: np.ndarray, rng) -> None:
    """One combined_data file: per movie, a `MovieID:` line then its distinct customers' `id,rating,date` lines."""
    with open(path, "wb") as out:
        for chunk in np.array_split(np.arange(movies.size), max(1, int(counts.sum()) // 4_000_000)):
            n = counts[chunk]
            position = np.arange(int(n.sum())) - np.repeat(np.cumsum(n) - n, n)
            start = np.repeat(rng.integers(0, N_CUSTOMERS, chunk.size), n)
            customer = customers[(start + position * 7) % N_CUSTOMERS]
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


def write_netflix(folder: Path, ratings: int, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    customers = np.sort(rng.choice(MAX_CUSTOMER, N_CUSTOMERS, replace=False) + 1).astype(np.int32)
    counts = movie_counts(ratings, rng)
    for part, movies in enumerate(np.array_split(np.arange(1, N_MOVIES + 1), 4), start=1):
        write_file(folder / f"combined_data_{part}.txt", movies, counts[movies - 1], customers, rng)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ratings", type=int, default=100_000_000)
    parser.add_argument("--folder", type=Path, help="where to write the files (default: a temporary folder)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=args.folder) as folder:
        source = Path(folder) / "netflix"
        source.mkdir()
        start = time.perf_counter()
        write_netflix(source, args.ratings)
        size = sum(p.stat().st_size for p in source.iterdir())
        print(f"wrote {args.ratings:,} ratings ({size / 1e9:.2f} GB in 4 files) in {time.perf_counter() - start:.0f} s")
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


if __name__ == "__main__":
    main()
