"""`make gpu-check`: verify recx on a CUDA machine in one command and write one Markdown report.

Checks, in order (each a row of the report's summary, with its figures below it):
1. tests: `pytest -m gpu` (CuPy kernels against their torch references, statistical where they draw; the
   sync-free steps), then tests/test_device_paths.py (every CUDA-only branch against the host branch).
2. setup: CUDA, the torch CUDA build and CuPy are found (recx refuses `--kernels cupy` without them).
3. host syncs: per training kind (interaction batches with BPR and with the shared-candidate softmax, user batches
   with Mult-VAE and FastVAE/MIDX_Uni, the alternating WRMF solver), one steady-state epoch on a small synthetic
   dataset under `torch.cuda.set_sync_debug_mode("warn")`: every warning is one host synchronisation; 0 expected
   for the gradient-trained kinds (the trainer's non-finite check included). Peak GPU memory of each.
4. benches: each GPU bench with its own baseline in the same process (eval: bare matmul + top-k; train: implicit's
   BPR and the matmul floor; FastVAE: Mult-VAE, and MIDX draws against uniform draws; samplers: CuPy against
   torch), on Gowalla when --gowalla points at it; their output is quoted whole.
5. a real run: `recx train` on Gowalla for 10 epochs on CUDA and on the CPU; test NDCG@20 and Recall@20 must agree
   within --tolerance (relative; the two devices draw different random streams, so the runs differ by training
   noise, not by method).

`--device cpu` checks the plumbing of all this on a machine without a GPU (CI runs it): step 1 runs only the forced
device-branch tests, step 3 runs each kind's epochs with the accelerator branches forced (syncs cannot be counted
on the CPU), step 4 runs the FastVAE bench on a tiny catalogue, and step 5 compares the host branches with the
forced accelerator branches on a tiny synthetic dataset (within 1e-3).
The report is written even when a check fails; the exit code is 1 then.

    python bench/gpu_check.py [--device cuda|cpu] [--report gpu-check.md] [--gowalla ../shared/data/gowalla]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
import torch

from recx.config.run_config import resolve
from recx.core.device_paths import forced_accelerator_branches
from recx.core.threads import set_compute_threads
from recx.data.dataset import load_dataset
from recx.data.prepare import PrepareOptions, prepare
from recx.training.build import build_model
from recx.training.nonfinite import NonFiniteWatch
from recx.training.runners.registry import RUNNERS

ROOT = Path(__file__).resolve().parents[1]
GOWALLA = ROOT / ".." / "shared" / "data" / "gowalla"
SYNC_CASES = {
    "interactions: bpr, uniform": {"model": "mf", "loss": "bpr", "sampler": "uniform", "n_negatives": 1},
    "interactions: softmax, 500 shared uniform, positive masked": {
        "model": "mf",
        "loss": "softmax",
        "sampler": "uniform",
        "n_negatives": 500,
        "sampler_args": {"shared": True},
    },
    "interactions: bpr, uniform, training items excluded": {
        "model": "mf",
        "loss": "bpr",
        "sampler": "uniform",
        "n_negatives": 4,
        "sampler_args": {"exclude_train": True},
    },
    "users: mult-vae": {"model": "multvae", "loss": "full_softmax", "batch_size": 128},
    "users: fastvae, midx_uni": {
        "model": "fastvae",
        "loss": "softmax",
        "sampler": "midx_uni",
        "n_negatives": 100,
        "batch_size": 128,
    },
    "alternating: wrmf": {"model": "wrmf"},
}
GRADIENT_KINDS = ("interactions", "users")


@dataclass
class Check:
    name: str
    ok: bool = True
    summary: str = ""
    lines: list[str] = field(default_factory=list)
    seconds: float = 0.0


def run_command(command: list[str], timeout: int, env: dict | None = None) -> tuple[int, str]:
    """(exit code, stdout and stderr together) of a command run from the repository root."""
    try:
        done = subprocess.run(
            command, cwd=ROOT, capture_output=True, text=True, timeout=timeout, env={**os.environ, **(env or {})}
        )
    except subprocess.TimeoutExpired as expired:
        return 124, f"timed out after {timeout} s\n{expired.stdout or ''}{expired.stderr or ''}"
    return done.returncode, done.stdout + done.stderr


def check_tests(device: str) -> Check:
    check = Check("tests")
    suites = [["-m", "gpu"], ["tests/test_device_paths.py"]] if device == "cuda" else [["tests/test_device_paths.py"]]
    for suite in suites:
        code, output = run_command([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *suite], 600)
        last = output.strip().splitlines()[-1] if output.strip() else "(no output)"
        check.lines.append(f"- `pytest {' '.join(suite)}`: {last}")
        if code != 0:
            check.ok = False
            check.lines += ["", "```", output[-4000:], "```"]
    check.summary = "; ".join(line.split(": ", 1)[1] for line in check.lines if line.startswith("- "))
    return check


def check_setup(device: str) -> Check:
    check = Check("setup")
    from recx.samplers.kernels.choice import cupy_available, resolve_kernels

    check.lines.append(
        f"- torch {torch.__version__}, CUDA build {torch.version.cuda}, "
        f"CUDA available {torch.cuda.is_available()}, CuPy usable {cupy_available()}"
    )
    if device == "cuda":
        check.ok = torch.cuda.is_available() and cupy_available()
        if check.ok:
            check.lines.append(f"- GPU: {torch.cuda.get_device_name(0)}")
        else:
            check.lines.append('- a CUDA build of torch and `pip install -e ".[gpu]"` (CuPy) are needed')
    else:
        try:
            resolve_kernels("cupy", torch.device("cpu"))
            check.ok, message = False, "`--kernels cupy` on the CPU was accepted"
        except Exception as refused:  # the message a user sees
            message = f"`--kernels cupy` on the CPU is refused: {refused}"
        check.lines.append(f"- {message}")
    check.summary = "CUDA, torch CUDA build and CuPy found" if check.ok and device == "cuda" else check.lines[-1][2:]
    return check


def tiny_dataset(root: Path, n_users: int, n_items: int):
    prepare(
        "gpu-check",
        PrepareOptions(
            format="synthetic", ratios="80/10/10", synthetic={"n_users": n_users, "n_items": n_items, "mean_length": 30}
        ),
        root,
    )
    return load_dataset(root, "gpu-check")


def epoch_syncs(raw: dict, dataset, device: torch.device) -> tuple[int | None, float, float | None, str]:
    """(host syncs in one steady-state epoch on CUDA, its seconds, peak GPU MiB, training kind)."""
    config = resolve({"seed": 0, "dim": 32, "batch_size": 512, "device": device.type, **raw})
    model = build_model(config, dataset, device)
    runner = RUNNERS.get(model.training_kind)(config, dataset, model, torch.Generator(device=device).manual_seed(0))
    losses = torch.zeros(max(runner.n_steps, 1), device=device)
    watch = NonFiniteWatch(losses, 1, config.lr)
    runner.train_epoch(1, losses, watch.after_step)
    if device.type != "cuda":
        started = time.perf_counter()
        runner.train_epoch(2, losses, NonFiniteWatch(losses, 2, config.lr).after_step)
        assert bool(torch.isfinite(losses).all()), "non-finite loss"
        return None, time.perf_counter() - started, None, model.training_kind
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    watch = NonFiniteWatch(losses, 2, config.lr)
    started = time.perf_counter()
    torch.cuda.set_sync_debug_mode("warn")
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            runner.train_epoch(2, losses, watch.after_step)
    finally:
        torch.cuda.set_sync_debug_mode("default")
    torch.cuda.synchronize()
    seconds = time.perf_counter() - started
    syncs = sum("synchroniz" in str(w.message) for w in caught)
    return syncs, seconds, torch.cuda.max_memory_allocated() / 2**20, model.training_kind


def check_syncs(device: str, work: Path) -> Check:
    check = Check("host syncs per epoch")
    dataset = tiny_dataset(work / "syncs", 3000, 2000).to(torch.device(device))
    check.lines += [
        "| case | kind | host syncs in one epoch | seconds | peak GPU MiB |",
        "| --- | --- | --- | --- | --- |",
    ]
    for name, raw in SYNC_CASES.items():
        try:
            if device == "cuda":
                syncs, seconds, peak, kind = epoch_syncs(raw, dataset, torch.device("cuda"))
            else:
                with forced_accelerator_branches():
                    syncs, seconds, peak, kind = epoch_syncs(raw, dataset, torch.device("cpu"))
        except Exception as failed:  # reported in the table, the other cases still run
            check.ok = False
            check.lines.append(f"| {name} | | failed: {type(failed).__name__}: {failed} | | |")
            continue
        if syncs is not None and syncs > 0 and kind in GRADIENT_KINDS:
            check.ok = False
        shown = "not countable on the CPU" if syncs is None else str(syncs)
        check.lines.append(f"| {name} | {kind} | {shown} | {seconds:.2f} | {'' if peak is None else f'{peak:.0f}'} |")
    check.summary = (
        "0 in every gradient-trained kind"
        if check.ok and device == "cuda"
        else ("every kind trains with the accelerator branches forced" if check.ok else "see the table")
    )
    return check


def bench_commands(device: str, gowalla: Path | None, work: Path) -> list[list[str]]:
    py = sys.executable
    if device == "cpu":
        return [
            [
                py,
                "bench/fastvae_speed.py",
                "--items",
                "3000",
                "--users",
                "400",
                "--steps",
                "1",
                "--negatives",
                "20",
                "--device",
                "cpu",
                "--skip-draws",
                "kernel,midx",
            ]
        ]
    commands = [[py, "bench/fastvae_speed.py", "--device", "cuda", "--items", "200000,1500000", "--steps", "3"]]
    if gowalla is not None:
        root = work / "bench-data"
        commands = [
            [
                py,
                "-m",
                "recx",
                "prepare",
                "gowalla",
                "--format",
                "lightgcn",
                "--source",
                str(gowalla),
                "--data-root",
                str(root),
            ],
            [py, "bench/eval_speed.py", "--device", "cuda", "--source", str(gowalla)],
            [py, "bench/train_speed.py", "--device", "cuda", "--data-root", str(root), "--epochs", "2"],
            [py, "bench/sampler_speed.py", "--device", "cuda", "--steps", "20"],
            *commands,
        ]
    return commands


def check_benches(device: str, gowalla: Path | None, work: Path) -> Check:
    check = Check("benches")
    for command in bench_commands(device, gowalla, work):
        started = time.perf_counter()
        code, output = run_command(command, 900)
        shown = " ".join(Path(part).name if part == sys.executable else part for part in command)
        check.lines += [
            f"`{shown}` (exit {code}, {time.perf_counter() - started:.0f} s)",
            "",
            "```",
            output.strip()[-6000:],
            "```",
            "",
        ]
        check.ok = check.ok and code == 0
    check.summary = f"{len(bench_commands(device, gowalla, work))} command(s), " + (
        "all ran" if check.ok else "one failed"
    )
    return check


def test_metrics(folder: Path) -> dict[str, float]:
    frame = pd.read_parquet(folder / "results.parquet")
    rows = frame[(frame.split == "test") & (frame.stratum == "all") & (frame.k == 20)]
    return {f"{metric}@20": float(value) for metric, value in zip(rows.metric, rows.value, strict=True)}


def check_real_run(device: str, gowalla: Path | None, work: Path, tolerance: float) -> Check:
    check = Check("real run")
    root = work / "run-data"
    if device == "cuda":
        if gowalla is None:
            check.ok, check.summary = False, "no Gowalla folder (--gowalla)"
            return check
        code, output = run_command(
            [
                sys.executable,
                "-m",
                "recx",
                "prepare",
                "gowalla",
                "--format",
                "lightgcn",
                "--source",
                str(gowalla),
                "--data-root",
                str(root),
            ],
            600,
        )
        sides = {"cuda": ({}, "cuda"), "cpu": ({}, "cpu")}
        args, limit = ["--dataset", "gowalla", "--epochs", "10"], tolerance
    else:
        tiny_dataset(root, 600, 300)
        sides = {
            "host branches": ({}, "cpu"),
            "accelerator branches": ({"RECX_FORCE_ACCELERATOR_BRANCHES": "1"}, "cpu"),
        }
        args, limit = ["--dataset", "gpu-check", "--epochs", "3"], 1e-3
    metrics = {}
    for side, (env, run_device) in sides.items():
        folder = work / f"run-{side.replace(' ', '-')}"
        started = time.perf_counter()
        code, output = run_command(
            [
                sys.executable,
                "-m",
                "recx",
                "train",
                *args,
                "--device",
                run_device,
                "--quiet",
                "--data-root",
                str(root),
                "--run-dir",
                str(folder),
            ],
            1800,
            env,
        )
        if code != 0:
            check.ok = False
            check.lines += [f"- {side}: exit {code}", "```", output[-3000:], "```"]
            continue
        metrics[side] = test_metrics(folder)
        check.lines.append(f"- {side} ({time.perf_counter() - started:.0f} s): {json.dumps(metrics[side])}")
    if len(metrics) == 2:
        first, second = metrics.values()
        worst = max(abs(second[k] - first[k]) / max(abs(first[k]), 1e-12) for k in first)
        check.ok = worst <= limit
        check.summary = f"largest relative difference {worst:.2e} (limit {limit:.0e})"
    return check


def render(checks: list[Check], device: str) -> str:
    lines = [
        f"# recx gpu-check ({device})",
        "",
        f"{time.strftime('%Y-%m-%d %H:%M:%S')}, torch {torch.__version__}, "
        f"{torch.cuda.get_device_name(0) if device == 'cuda' else 'CPU mode: plumbing only'}",
        "",
        "| check | result | seconds | summary |",
        "| --- | --- | --- | --- |",
    ]
    lines += [f"| {c.name} | {'ok' if c.ok else '**FAILED**'} | {c.seconds:.0f} | {c.summary} |" for c in checks]
    for c in checks:
        lines += ["", f"## {c.name}", "", *c.lines]
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--report", type=Path, default=Path("gpu-check.md"))
    parser.add_argument("--gowalla", type=Path, default=GOWALLA if GOWALLA.is_dir() else None)
    parser.add_argument(
        "--tolerance",
        type=float,
        default=0.05,
        help="relative difference allowed between the CUDA and CPU runs' test metrics",
    )
    options = parser.parse_args()
    if options.device == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda: CUDA is not available here (install a CUDA build of torch), or use --device cpu")
    set_compute_threads(max(1, min(4, os.cpu_count() or 1)))
    checks = []
    with tempfile.TemporaryDirectory(prefix="recx-gpu-check-") as scratch:
        work = Path(scratch)
        steps = [
            lambda: check_tests(options.device),
            lambda: check_setup(options.device),
            lambda: check_syncs(options.device, work),
            lambda: check_benches(options.device, options.gowalla, work),
            lambda: check_real_run(options.device, options.gowalla, work, options.tolerance),
        ]
        for step in steps:
            started = time.perf_counter()
            check = step()
            check.seconds = time.perf_counter() - started
            checks.append(check)
            print(f"{check.name}: {'ok' if check.ok else 'FAILED'} ({check.seconds:.0f} s) {check.summary}", flush=True)
    options.report.parent.mkdir(parents=True, exist_ok=True)
    options.report.write_text(render(checks, options.device))
    print(f"report: {options.report}")
    return 0 if all(c.ok for c in checks) else 1


if __name__ == "__main__":
    sys.exit(main())
