"""A four-run experiment on tiny synthetic data, and drivers of `recx sweep` in a separate process."""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import yaml
from rich.console import Console

ROOT = Path(__file__).resolve().parents[1]
EPOCHS = 15
TINY = {"format": "synthetic", "ratios": "80/10/10", "synthetic": {"n_users": 150, "n_items": 80, "mean_length": 10}}


def tiny_experiment(name: str, defaults: dict, methods: dict, **spec) -> dict:
    """An experiments file's content: one experiment `name` on the tiny synthetic dataset (150 users, 80 items),
    seeds 0 and 1, K 5 and 20, on the CPU, with `defaults`, `methods` and any other key of `spec` (a grid)."""
    experiment = {"datasets": ["tiny"], "seeds": [0, 1], "ks": [5, 20], "defaults": {**defaults, "device": "cpu"}}
    return {"datasets": {"tiny": TINY}, "experiments": {name: {**experiment, "methods": methods, **spec}}}


FOUR_RUNS = tiny_experiment(
    "four",
    {"dim": 8, "epochs": EPOCHS, "patience": EPOCHS, "batch_size": 256, "lr": 0.01},
    {
        "bpr": {"loss": "bpr", "n_negatives": 2},
        "ssm": {"loss": "softmax", "sampler": "uniform", "n_negatives": 10},
    },
)


def write_experiments(folder: Path) -> Path:
    path = folder / "experiments.yaml"
    path.write_text(yaml.safe_dump(FOUR_RUNS))
    return path


def sweep_in_process(folder: Path, out: Path, **execution) -> pd.DataFrame:
    from recx.data.prepare import PrepareOptions, prepare
    from recx.reports.report import report_sweep
    from recx.sweeps.backends import Execution
    from recx.sweeps.sweep import run_sweep

    path, data = write_experiments(folder), folder / "data"
    if not (data / "tiny").is_dir():
        prepare("tiny", PrepareOptions(**FOUR_RUNS["datasets"]["tiny"]), data)
    console = Console(file=io.StringIO(), width=200)
    outcome = run_sweep(path, "four", out, data, False, console, execution=Execution(**execution))
    report_sweep(outcome, console)
    return outcome.results


def start_driver(folder: Path, out: Path, *options: str) -> subprocess.Popen:
    """`python -m recx sweep` on the four-run experiment in a new process of a new process group (output captured),
    so that what a killed driver leaves behind can be reaped by `reap`."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    command = [
        sys.executable,
        "-m",
        "recx",
        "sweep",
        str(write_experiments(folder)),
        "-e",
        "four",
        "--out",
        str(out),
        "--data-root",
        str(folder / "data"),
        *options,
    ]
    return subprocess.Popen(
        command,
        env=env,
        cwd=folder,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )


def reap(driver: subprocess.Popen) -> None:
    """Kill whatever is left of a killed driver's process group (a local Ray cluster's agents)."""
    try:
        os.killpg(driver.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def completed(out: Path) -> dict[str, int]:
    """Run id -> mtime (ns) of its COMPLETE marker."""
    return {marker.parent.name: marker.stat().st_mtime_ns for marker in (out / "runs").glob("*/COMPLETE")}


def kill_after_first_completion(driver: subprocess.Popen, out: Path, limit_s: float = 120) -> dict[str, int]:
    """kill -9 the driver as soon as one run is complete; returns the runs complete at that moment."""
    deadline = time.monotonic() + limit_s
    while not completed(out):
        assert driver.poll() is None, driver.stdout.read()
        assert time.monotonic() < deadline, "no run completed in time"
        time.sleep(0.05)
    os.kill(driver.pid, signal.SIGKILL)
    driver.wait()
    return completed(out)
