"""Results unchanged bit for bit by a refactor: the quickstart sweep and one baseline run of every runner, run
by this checkout and by another (a git worktree of the commit before), compared by run id and by the sha256 of
every results file, the weights and the per-epoch losses.

    git worktree add /tmp/before HEAD~1
    python bench/same_results.py /tmp/before [--one-seed]
    python bench/same_results.py --quick   # make ci-bench-quick: this checkout against itself, in seconds

Prints one line per compared file (epochs.jsonl and convergence.parquet without their seconds) and `same: N of N`; exits 1 on any difference. Each tree prepares its own
synthetic dataset (the preparation is compared too). Run by hand (minutes: a quickstart sweep per tree; `--one-seed`:
its seed 0 only). `--quick`: one epoch of two baseline runs (MF BPR, WRMF) and of the quickstart's BPR with seed 0; the
other checkout is this one unless given (two runs of one tree: the same numbers from the same seed).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import quick

HERE = Path(__file__).resolve().parents[1]
# One baseline run per runner (recx.training.runners): interactions, users, alternating, none.
BASELINES = {
    "interactions": ["--model", "mf", "--loss", "bpr", "--sampler", "uniform", "--epochs", "3"],
    "interactions-softmax": ["--model", "mf", "--loss", "softmax", "--sampler", "popularity", "--epochs", "3"],
    "users": ["--model", "multvae", "--epochs", "3"],
    "alternating": ["--model", "wrmf", "--epochs", "3"],
    "none": ["--model", "popularity"],
}
QUICK_BASELINES = ("interactions", "alternating")  # --quick: each tree's processes are most of its time


def _recx(tree: Path, *args: str) -> None:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    command = [sys.executable, "-m", "recx", "--threads", "1", *args]
    done = subprocess.run(command, cwd=tree, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{tree}: {' '.join(args)} failed:\n{done.stderr}")


def _digest(path: Path) -> str:
    if path.name == "convergence.parquet":  # the curves, not the seconds
        import pandas as pd

        frame = pd.read_parquet(path).drop(columns=["seconds", "cumulative_seconds"])
        return hashlib.sha256(frame.to_csv(index=False).encode()).hexdigest()
    if path.name == "epochs.jsonl":  # the losses and validation, not the seconds
        records = [json.loads(line) for line in path.read_text().splitlines()]
        kept = [{k: v for k, v in r.items() if "seconds" not in k} for r in records]
        return hashlib.sha256(json.dumps(kept, sort_keys=True).encode()).hexdigest()
    return hashlib.sha256(path.read_bytes()).hexdigest()


def produce(tree: Path, out: Path, one_seed: bool, tiny: bool = False) -> dict[str, str]:
    """Every compared file of one tree's runs: {relative path: digest}. `tiny`: --quick's runs."""
    data = out / "data"
    _recx(tree, "prepare", "synthetic", "--format", "synthetic", "--ratios", "80/10/10", "--data-root", str(data))
    for name, args in BASELINES.items():
        if tiny and name not in QUICK_BASELINES:
            continue
        _recx(tree, "train", "--dataset", "synthetic", "--data-root", str(data), "--device", "cpu", "--quiet",
              "--run-dir", str(out / "runs" / name), *args, *(["--epochs", "1"] if tiny else []))  # fmt: skip
    sweep = ["sweep", str(tree / "experiments.yaml"), "-e", "quickstart", "--data-root", str(data)]
    narrowed = ["--seeds", "0"] if one_seed or tiny else []
    narrowed += ["--methods", "bpr+uniform", "--epochs", "1"] if tiny else []
    _recx(tree, *sweep, "--out", str(out / "quickstart"), *narrowed)
    compared = {}
    for path in sorted(out.rglob("*")):
        wanted = path.suffix == ".parquet" and "plots" not in path.parts
        wanted |= path.name in ("epochs.jsonl", "model.pt", "config.yaml")
        if path.is_file() and wanted:
            compared[path.relative_to(out).as_posix()] = _digest(path)
    return compared


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("before", type=Path, nargs="?", help="the other checkout (a git worktree)")
    parser.add_argument("--one-seed", action="store_true", help="the quickstart sweep with seed 0 only")
    quick.option(parser, before=HERE)
    options = parser.parse_args()
    if options.before is None:
        parser.error("give the other checkout (a git worktree of the commit before)")
    with tempfile.TemporaryDirectory() as scratch:
        before = produce(options.before.resolve(), Path(scratch) / "before", options.one_seed, options.quick)
        after = produce(HERE, Path(scratch) / "after", options.one_seed, options.quick)
    same = 0
    for name in sorted(set(before) | set(after)):
        verdict = "same" if before.get(name) == after.get(name) else "DIFFERS"
        if name not in before or name not in after:
            verdict = "only " + ("after" if name in after else "before")
        same += verdict == "same"
        print(f"{verdict:12} {name}")
    total = len(set(before) | set(after))
    print(f"same: {same} of {total}")
    return 0 if same == total else 1


if __name__ == "__main__":
    sys.exit(main())
