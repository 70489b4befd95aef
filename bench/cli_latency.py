"""Latency of the answers that need no work: `recx --help`, `recx train --help`, `recx --version`.

Median wall time of 5 runs of each (a fresh process every time, output discarded), against `python -c pass` timed
the same way in the same process: the difference is what recx itself costs. Target: under 0.5 s each. For scale,
the `--help` of a one-command Typer app (Typer's own floor: it imports rich's help panels and pydantic) is timed too.

    python bench/cli_latency.py [--runs 5] [--target 0.5] [--recx "python3 -m recx"] [--quick]

By default recx is run as `python -m recx` from this checkout (PYTHONPATH set to it), so the figures are this
tree's, not an installed copy's. Exits 1 when a median is over the target (`--quick`, make ci-bench-quick: one run
of each, and no target checked).
"""

from __future__ import annotations

import argparse
import os
import shlex
import statistics
import subprocess
import sys
import time
from pathlib import Path

import quick

ROOT = Path(__file__).resolve().parents[1]
COMMANDS = (["--help"], ["train", "--help"], ["--version"])
TYPER_FLOOR = (
    "import typer\napp = typer.Typer()\n@app.command()\ndef one(x: int = 1):\n    'Doc.'\n"
    "@app.command()\ndef two():\n    pass\napp()"
)


def median_seconds(command: list[str], runs: int, env: dict) -> float:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, check=True)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--target", type=float, default=0.5, help="seconds")
    parser.add_argument("--recx", default=f"{shlex.quote(sys.executable)} -m recx", help="how to start recx")
    quick.option(parser, runs=1)
    args = parser.parse_args()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    baseline = median_seconds([sys.executable, "-c", "pass"], args.runs, env)
    print(f"python -c pass: {baseline:.3f} s (median of {args.runs})")
    floor = median_seconds([sys.executable, "-c", TYPER_FLOOR, "one", "--help"], args.runs, env)
    print(f"a one-command Typer app's --help: {floor:.3f} s (Typer itself: {floor - baseline:+.3f} s)")
    over = 0
    for words in COMMANDS:
        seconds = median_seconds(shlex.split(args.recx) + words, args.runs, env)
        verdict = "ok" if seconds < args.target else f"OVER the {args.target} s target"
        verdict = "not checked (--quick)" if args.quick else verdict
        over += seconds >= args.target
        print(f"recx {' '.join(words):<14} {seconds:.3f} s  (recx itself: {seconds - baseline:+.3f} s)  {verdict}")
    return 1 if over and not args.quick else 0


if __name__ == "__main__":
    sys.exit(main())
