"""Benchmark: 1, 2 and 3 `recx train` processes side by side, each one's epoch time against its fair share.

Prepares the built-in synthetic dataset into a temporary data root, then for each count N in --counts starts N
identical `recx train` runs at once (different run folders, the same configuration) and reads each run's
per-epoch seconds from its epochs.jsonl (the first epoch dropped: start-up). A process's fair share is
max(1, N / usable cores) × the epoch time of one process alone (N = 1, measured first; the issue's 3/2 × alone for
three processes on two cores); the figure is each run's median epoch time over its fair share (1.0: no loss from sharing,
the issue's target ≤ 1.3). That fair share takes the time alone with every core; when N ≥ cores, N processes can at
best share the cores one thread each, so the machine's share, N / cores × the one-thread epoch alone, is printed
beside it (the issue's share is below the machine's whenever all the cores make an epoch more than 1.3x faster than
one, and then its 1.3 cannot be met by any program). Extra environment for every run (e.g. RECX_THREADS=1) goes in --env. First it measures
the machine itself the same way: N single-threaded pure-Python loops side by side, each one's time over
max(1, N / cores) × one loop alone: where the cores do not deliver N / cores of one core's speed (shared or
hyper-threaded virtual CPUs), no program's ratio can go below that one.

    python bench/shared_cores.py [--counts 1,2,3] [--epochs 6] [--env KEY=VALUE ...] [-- extra recx train args]

`--quick` (make ci-bench-quick): 2 side by side, 2 epochs, a tiny synthetic dataset (bench/quick.py), loops of
a million steps.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import quick

ROOT = Path(__file__).resolve().parents[1]


def usable_cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def side_by_side(
    count: int, root: Path, work: Path, epochs: int, env: dict, extra: list[str], tag: str = ""
) -> list[float]:
    """Median epoch seconds (epochs 2..) of each of `count` runs started together."""
    folders = [work / f"n{count}{tag}-{i}" for i in range(count)]
    command = [
        sys.executable,
        "-m",
        "recx",
        "train",
        "--dataset",
        "synthetic",
        "--data-root",
        str(root),
        "--epochs",
        str(epochs),
        "--patience",
        str(epochs),
        "--quiet",
        "--checkpoint-every",
        "0",
        *extra,
    ]
    processes = [
        subprocess.Popen(
            [*command, "--run-dir", str(folder)],
            cwd=ROOT,
            env={**os.environ, **env},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        for folder in folders
    ]
    for process in processes:
        _, err = process.communicate()
        if process.returncode != 0:
            raise SystemExit(f"recx train failed:\n{err}")
    medians = []
    for folder in folders:
        records = [json.loads(line) for line in (folder / "epochs.jsonl").read_text().splitlines()]
        medians.append(statistics.median(r["seconds"] for r in records[1:]))
    return medians


SPIN = "import time\nstarted = time.perf_counter()\ntotal = 0\nfor i in range({loop}):\n    total += i\nprint(time.perf_counter() - started)"


def machine_side_by_side(count: int, loop: int) -> list[float]:
    """Seconds of each of `count` single-threaded pure-Python loops started together: what the machine itself gives
    N processes on its cores, with no thread or library of recx's in play."""
    processes = [
        subprocess.Popen([sys.executable, "-c", SPIN.format(loop=loop)], stdout=subprocess.PIPE, text=True)
        for _ in range(count)
    ]
    return [float(process.communicate()[0]) for process in processes]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--counts", default="1,2,3")
    parser.add_argument("--epochs", type=int, default=6)
    parser.add_argument("--env", action="append", default=[], help="KEY=VALUE for every run")
    parser.add_argument("extra", nargs="*", help="more `recx train` arguments (after --)")
    parser.add_argument("--loop", type=int, default=30_000_000, help="steps of the machine's pure-Python loops")
    quick.option(parser, counts="2", epochs=2, loop=1_000_000)
    options = parser.parse_args()
    env = dict(item.split("=", 1) for item in options.env)
    cores = usable_cores()
    with tempfile.TemporaryDirectory(prefix="recx-shared-cores-") as scratch:
        work = Path(scratch)
        root = work / "data"
        if options.quick:
            root = quick.data_root("synthetic")
        else:
            subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "recx",
                    "prepare",
                    "synthetic",
                    "--format",
                    "synthetic",
                    "--ratios",
                    "80/10/10",
                    "--data-root",
                    str(root),
                ],
                cwd=ROOT,
                check=True,
                capture_output=True,
            )
        print(f"usable cores {cores}, env {env or '{}'}, epochs {options.epochs}")
        counts = [int(c) for c in options.counts.split(",")]
        machine_alone = statistics.median(machine_side_by_side(1, options.loop))
        for count in counts:
            seconds = machine_side_by_side(count, options.loop)
            fair = max(1.0, count / cores) * machine_alone
            print(
                f"machine: {count} single-threaded loops side by side: worst {max(seconds) / fair:.2f}x its fair share "
                f"(alone {machine_alone:.2f} s; the floor for any program's ratio below)"
            )
        alone = side_by_side(1, root, work, options.epochs, env, options.extra, "alone")[0]
        one_thread = side_by_side(1, root, work, options.epochs, {**env, "RECX_THREADS": "1"}, options.extra, "t1")[0]
        print(f"alone: {alone:.2f} s per epoch with its own thread count, {one_thread:.2f} s with one thread")
        for count in counts:
            started = time.perf_counter()
            medians = side_by_side(count, root, work, options.epochs, env, options.extra)
            fair = max(1.0, count / cores) * alone
            machine_share = count / cores * one_thread if count >= cores else fair
            ratios = ", ".join(f"{m:.2f} s ({m / fair:.2f}x)" for m in medians)
            print(
                f"{count} side by side ({time.perf_counter() - started:.0f} s): epoch {ratios}; "
                f"fair share {fair:.2f} s; worst {max(medians) / fair:.2f}x; "
                f"worst {max(medians) / machine_share:.2f}x of the machine's share ({machine_share:.2f} s)"
            )


if __name__ == "__main__":
    main()
