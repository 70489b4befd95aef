"""The path a user times beside a bench's kernels: `recx train` run as a user runs it (a subprocess of
`python -m recx --threads T train --config C --quiet`), its epochs read from epochs.jsonl (`seconds`: what
recx/training/fit.py times around the runner's epoch, the recorded loss and the training loop's per-step work included).

For the benches' --through-cli mode (bench/train_speed.py, bench/als_speed.py): `interleaved` runs rounds of a few
timed bench epochs (and their baselines) followed by one `recx train` run of as many epochs, so that both see the same
machine load; per round the ratio of the medians, and over the rounds the median of those paired ratios.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow.parquet as pq
import yaml

ROOT = Path(__file__).resolve().parents[1]


@dataclass
class CliRun:
    seconds: list[float]  # epochs.jsonl's `seconds`, one per epoch
    test_ndcg20: float  # results.parquet: test NDCG@20 over all users


def cli_run(config, data_root: Path, threads: int) -> CliRun:
    """Train `config` (a resolved RunConfig: its dataset, epochs and every setting) with `recx train` in a
    subprocess of this checkout; the run's config.yaml must be `config`, so that it is the bench's work."""
    with tempfile.TemporaryDirectory() as folder:
        config_file, run_dir = Path(folder) / "config.yaml", Path(folder) / "run"
        config_file.write_text(yaml.safe_dump(config.to_dict()))
        command = [sys.executable, "-m", "recx", "--threads", str(threads), "train", "--config", str(config_file)]
        command += ["--data-root", str(data_root), "--run-dir", str(run_dir), "--quiet", "--ks", "20"]
        environment = {**os.environ, "PYTHONPATH": str(ROOT)}
        subprocess.run(command, check=True, cwd=ROOT, env=environment, capture_output=True, text=True)
        recorded, ours = yaml.safe_load((run_dir / "config.yaml").read_text()), config.to_dict()
        differ = {
            key: (ours.get(key), recorded.get(key)) for key in {*ours, *recorded} if ours.get(key) != recorded.get(key)
        }
        if differ:
            raise SystemExit(f"recx train resolved another configuration than the bench's (bench, run): {differ}")
        records = [json.loads(line) for line in (run_dir / "epochs.jsonl").read_text().splitlines()]
        results = pq.read_table(run_dir / "results.parquet").to_pandas()
        test = results.query("split == 'test' and metric == 'ndcg' and k == 20 and stratum == 'all'")
        return CliRun([record["seconds"] for record in records], float(test["value"].iloc[0]))


def paired(ratios: list[float]) -> str:
    """The median of paired ratios, with their quartiles when there are at least 4."""
    if len(ratios) < 4:
        return f"{statistics.median(ratios):.2f}"
    low, middle, high = statistics.quantiles(ratios, n=4)
    return f"{middle:.2f} [{low:.2f}-{high:.2f}]"


@dataclass
class Rounds:
    """Per round: the bench's epoch seconds, each baseline's, and the `recx train` run's."""

    bench: list[list[float]] = field(default_factory=list)
    baselines: dict[str, list[list[float]]] = field(default_factory=dict)
    cli: list[CliRun] = field(default_factory=list)

    def ratios(self, ours: list[list[float]], theirs: list[list[float]]) -> list[float]:
        return [statistics.median(a) / statistics.median(b) for a, b in zip(ours, theirs, strict=True)]

    def summary(self) -> str:
        """`recx train`'s median epoch against the bench's and each baseline's (paired by round)."""
        cli = [run.seconds for run in self.cli]
        line = (
            f"recx train {statistics.median(s for run in cli for s in run):.3f} s/epoch (median of "
            f"{len(cli)} runs x {len(cli[0])} epochs), bench {statistics.median(s for r in self.bench for s in r):.3f}: "
            f"recx train / bench {paired(self.ratios(cli, self.bench))}"
        )
        for name, times in self.baselines.items():
            line += (
                f"; {name} {statistics.median(s for r in times for s in r):.3f}, "
                f"recx train / {name} {paired(self.ratios(cli, times))}"
            )
        if len(cli[0]) > 1:  # a run's first epoch also pays its fresh process's first touch of its buffers
            later = self.ratios([run[1:] for run in cli], [times[1:] for times in self.bench])
            line += f"; from each run's 2nd epoch: recx train / bench {paired(later)}"
        ndcg = [run.test_ndcg20 for run in self.cli]
        return line + f"; recx train's test NDCG@20 {min(ndcg):.4f}-{max(ndcg):.4f}"


def interleaved(
    bench_epochs: Callable[[int], tuple[list[float], dict[str, list[float]]]],
    config,
    data_root: Path,
    threads: int,
    rounds: int,
) -> Rounds:
    """`rounds` rounds of `bench_epochs(config.epochs)` (the bench's epoch seconds and its baselines', timed by the
    bench, interleaved as it does) then one `recx train` run of `config`."""
    out = Rounds()
    for _ in range(rounds):
        bench, baselines = bench_epochs(config.epochs)
        out.bench.append(bench)
        for name, times in baselines.items():
            out.baselines.setdefault(name, []).append(times)
        out.cli.append(cli_run(config, data_root, threads))
    return out
