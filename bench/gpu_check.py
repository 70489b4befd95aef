"""`make gpu-check`: verify recx on a lent CUDA machine in one command, within a time budget, with no install.

    PYTHONPATH=. python3 bench/gpu_check.py --device cuda --data .gpu-pack --out OUT --budget-s 420

needs only what the lent machine already has (Python 3.12, torch >= 2.11 with CUDA, CuPy for CUDA 12 or 13, numpy
2.x, scipy, pandas, pyarrow, typer, rich, numba, pytest) and the pack `make gpu-pack` made (bench/gpu_pack.py: the
Gowalla files and the CPU side of the real runs, carried with the checkout). It writes into OUT `gpu-check.md`
(the report), `gpu-check.json` (its figures), `gpu-check.log` (every command's whole output) and each real run's
epochs (`<run>-epochs.jsonl`), rewritten after every step, so a check cut short still returns what it measured.

Steps, fast first, each started only when the time left covers its minimum (else "skipped: budget"), each command
stopped when the budget ends:
1. setup: versions, the GPU, the pack's checksums, each CuPy kernel compiled by NVRTC for this GPU's architecture.
2. kernels: `pytest -m gpu` (every CuPy kernel against its torch reference, statistical where it draws; the
   sync-free steps).
3. host syncs: one steady-state epoch per runner under torch's sync debug mode (0 expected for the
   gradient-trained kinds, the training loop's non-finite check included), with its peak GPU memory.
4. benches, each with its baseline in the same process: full-ranking evaluation on Gowalla against the bare matmul +
   top-k (target <= 1.1x); BPR and sampled-softmax epochs on Gowalla against their matmul floors, eager and captured
   as a CUDA graph (bench/graph_capture.py: issue 58 §2's probe); every sampler's
   step against uniform's and the CuPy kernels against torch; FastVAE against Mult-VAE at 200K items.
5. real: `recx train --dataset gowalla` for 10 epochs on CUDA against the pack's CPU run of the same configuration:
   test NDCG@20 and Recall@20 within --tolerance (relative; the devices draw other random streams).
6. FastVAE against Mult-VAE at 1.5M items.
7. headline: PRISM's MAWU + PRISM row on Gowalla (bench/gpu_runs.py) until early stopping or the budget ends; its
   epoch time against the pack's CPU epochs.

`--device cpu`, or `--device cuda` with RECX_GPU_CHECK_FORCE_CPU=1 (CI: `make gpu-check-cpu` runs the device's command
line so), is the dry run: every step runs its real commands on the CPU, at the dry sizes, on a synthetic pack; kernels
runs the forced accelerator-branch tests, host syncs trains each kind with the accelerator branches forced, and the real
runs train with them forced against the pack's host-branch CPU runs (within 1e-3). The exit code is 1 when a check
fails or a target is missed.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import json
import os
import platform
import re
import signal
import subprocess
import sys
import tempfile
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import pandas as pd
import torch
from gpu_pack import check_pack
from gpu_runs import HEADLINE, REAL, RUNS, PackedRun, prepare_command, train_command

from recx.config.run_config import resolve
from recx.core.device_paths import forced_accelerator_branches
from recx.core.threads import set_compute_threads
from recx.data.dataset import load_dataset
from recx.data.prepare import PrepareOptions, prepare
from recx.training.build import build_model
from recx.training.nonfinite import NonFiniteWatch
from recx.training.runners.registry import RUNNERS

ROOT = Path(__file__).resolve().parents[1]
FORCE_CPU = "RECX_GPU_CHECK_FORCE_CPU"
EVAL_TARGET = 1.1
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
    "interactions: mawu (PRISM init)": {
        "model": "mf",
        "loss": "mawu",
        "n_negatives": 1,
        "optimizer": "adam",
        "model_args": {"init": "prism"},
    },
    "interactions: softmax, xir (cache and in-batch segments)": {
        "model": "mf",
        "loss": "softmax",
        "sampler": "xir",
        "n_negatives": 1,
    },
    "interactions: softmax, bir (resampled in-batch)": {"model": "mf", "loss": "softmax", "sampler": "bir"},
    "interactions: directau (distinct rows), fixed order": {
        "model": "mf",
        "loss": "directau",
        "n_negatives": 1,
        "optimizer": "adam",
        "fixed_order": True,
    },
    "interactions: bpr, batched weight decay": {
        "model": "mf",
        "loss": "bpr",
        "sampler": "uniform",
        "n_negatives": 1,
        "weight_decay": 0.01,
        "weight_decay_mode": "batch",
    },
    "users: mult-vae": {"model": "multvae", "loss": "full_softmax", "batch_size": 128},
    "users: fastvae, midx_uni": {
        "model": "fastvae",
        "loss": "softmax",
        "sampler": "midx_uni",
        "n_negatives": 100,
        "batch_size": 128,
    },
    "graph: lightgcn": {"model": "lightgcn"},
    "alternating: wrmf": {"model": "wrmf"},
}
GRADIENT_KINDS = ("interactions", "users")
SYNC_WARNING = "synchronizing CUDA operation"  # torch's sync debug mode; its notice "Synchronization debug mode is a
# prototype feature" is no sync (the first H200 check counted it once)


@dataclass
class Check:
    name: str
    ok: bool = True
    summary: str = ""
    lines: list[str] = field(default_factory=list)
    figures: dict = field(default_factory=dict)
    seconds: float = 0.0
    skipped: bool = False


@dataclass
class Context:
    device: str  # "cuda", or "cpu" for the dry run
    pack: Path
    out: Path
    work: Path
    deadline: float
    tolerance: float
    log: list[str] = field(default_factory=list)

    @property
    def dry(self) -> bool:
        return self.device == "cpu"

    def left(self) -> float:
        return self.deadline - time.perf_counter()

    def run(self, command: list[str], cap: float, env: dict | None = None) -> tuple[int, str, float]:
        """(exit code, output, seconds) of a command run from the repository root, stopped at `cap` seconds or when
        the budget ends: first Ctrl-C (a recx run then keeps its epochs), then a kill 15 s later."""
        timeout = max(1.0, min(cap, self.left()))
        shown = " ".join("python3" if part == sys.executable else part for part in command)
        started = time.perf_counter()
        process = subprocess.Popen(
            command,
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env={
                **os.environ,
                "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
                **(env or {}),
            },
        )
        try:
            output, _ = process.communicate(timeout=timeout)
            code = process.returncode
        except subprocess.TimeoutExpired:
            process.send_signal(signal.SIGINT)
            try:
                output, _ = process.communicate(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
                output, _ = process.communicate()
            output, code = f"{output}\n(stopped after {timeout:.0f} s: the budget or its cap)", 124
        seconds = time.perf_counter() - started
        self.log += [f"$ {shown}   # exit {code}, {seconds:.1f} s", output.rstrip(), ""]
        return code, output, seconds


def python() -> str:
    return sys.executable


def quoted(command: list[str], code: int, seconds: float, output: str, limit: int = 5000) -> list[str]:
    shown = " ".join("python3" if part == sys.executable else part for part in command)
    return [f"`{shown}` (exit {code}, {seconds:.0f} s)", "", "```", output.strip()[-limit:], "```", ""]


# 1. setup


def module_version(name: str) -> str:
    try:
        return str(getattr(importlib.import_module(name), "__version__", "?"))
    except Exception as missing:  # reported, not fatal: a missing optional package is a figure of the machine
        return f"missing ({type(missing).__name__})"


def compile_kernels(check: Check) -> None:
    """Each CuPy kernel's source compiled by NVRTC for the current GPU (the architecture it targets)."""
    import cupy

    from recx.kernels import cupy_kernels

    device = cupy.cuda.Device()
    arch = device.compute_capability
    check.figures["compute_capability"] = arch
    check.figures["cupy_runtime"] = cupy.cuda.runtime.runtimeGetVersion()
    check.figures["nvrtc"] = ".".join(map(str, cupy.cuda.nvrtc.getVersion()))
    rows = ["| kernel | compile s | binary arch | PTX arch |", "| --- | --- | --- | --- |"]
    for attribute in sorted(a for a in dir(cupy_kernels) if a.endswith("_SOURCE")):
        source = getattr(cupy_kernels, attribute)
        name = re.search(r"__global__ void (\w+)\(", source).group(1)
        started = time.perf_counter()
        kernel = cupy.RawKernel(source, name)
        kernel.compile()
        attributes = kernel.attributes
        rows.append(
            f"| {name} | {time.perf_counter() - started:.2f} | sm_{attributes['binary_version']} | "
            f"compute_{attributes['ptx_version']} |"
        )
        check.figures.setdefault("kernels", {})[name] = attributes["binary_version"]
    check.lines += [f"- CuPy kernels compiled by NVRTC {check.figures['nvrtc']} for sm_{arch}:", "", *rows, ""]


def check_setup(ctx: Context) -> Check:
    check = Check("setup")
    from recx.kernels.choice import cupy_available, resolve_kernels

    versions = {
        name: module_version(name) for name in ("numpy", "scipy", "pandas", "pyarrow", "numba", "typer", "rich", "cupy")
    }
    check.figures["versions"] = {"python": platform.python_version(), "torch": torch.__version__, **versions}
    check.lines.append(
        f"- Python {platform.python_version()}, torch {torch.__version__} (CUDA build {torch.version.cuda}), "
        + ", ".join(f"{k} {v}" for k, v in versions.items())
    )
    pack_ok, pack_line = check_pack(ctx.pack, "make gpu-pack")
    check.lines.append(f"- {pack_line}")
    check.ok = pack_ok
    if not ctx.dry:
        usable = torch.cuda.is_available() and cupy_available()
        check.ok = check.ok and usable
        if torch.cuda.is_available():
            properties = torch.cuda.get_device_properties(0)
            check.figures["gpu"] = properties.name
            check.lines.append(
                f"- GPU: {properties.name}, {properties.total_memory / 2**30:.0f} GiB, "
                f"{properties.multi_processor_count} SMs, compute capability {properties.major}.{properties.minor}"
            )
        if usable:
            try:
                compile_kernels(check)
            except Exception as failed:  # reported: the kernels step then fails too
                check.ok = False
                check.lines.append(f"- CuPy kernel compilation failed: {type(failed).__name__}: {failed}")
        else:
            check.lines.append("- CUDA or CuPy missing: a CUDA build of torch and CuPy (cupy-cuda12x or cupy-cuda13x)")
    else:
        try:
            resolve_kernels("cupy", torch.device("cpu"))
            check.ok, message = False, "`--kernels cupy` on the CPU was accepted"
        except Exception as refused:  # the message a user sees
            message = f"`--kernels cupy` on the CPU is refused: {refused}"
        check.lines.append(f"- {message}")
    check.summary = check.lines[-1][2:] if not check.ok else f"{check.figures.get('gpu', 'CPU dry run')}; {pack_line}"
    return check


# 2. kernels


def gpu_test_files() -> list[str]:
    return sorted(
        str(path.relative_to(ROOT)) for path in (ROOT / "tests").glob("test_*.py") if "mark.gpu" in path.read_text()
    )


def check_kernels(ctx: Context) -> Check:
    check = Check("kernels")
    suite = ["tests/test_device_paths.py"] if ctx.dry else ["-m", "gpu", *gpu_test_files()]
    command = [python(), "-m", "pytest", "-q", "-p", "no:cacheprovider", *suite]
    code, output, seconds = ctx.run(command, 240)
    last = output.strip().splitlines()[-1] if output.strip() else "(no output)"
    check.ok = code == 0
    check.summary = last
    check.lines += quoted(command, code, seconds, output, 3000 if code else 600)
    return check


# 3. host syncs


def tiny_dataset(root: Path, name: str, n_users: int, n_items: int):
    prepare(
        name,
        PrepareOptions(
            format="synthetic", ratios="80/10/10", synthetic={"n_users": n_users, "n_items": n_items, "mean_length": 30}
        ),
        root,
    )
    return load_dataset(root, name)


@dataclass
class Syncs:
    """Host syncs of one steady-state epoch on CUDA: before the end of its first step (the epoch's start: a sampler's
    rebuild, the runner's one read of the epoch's sizes) and in its later steps, with where the later ones happen."""

    kind: str
    steps: int
    seconds: float
    at_start: int | None = None
    in_steps: int | None = None
    sites: str = ""
    peak_mib: float | None = None


def sync_sites(caught: list) -> str:
    """The source lines of recx that called a synchronising operation, most frequent first."""
    counts: dict[str, int] = {}
    for warning in caught:
        path = Path(warning.filename)
        where = f"{path.relative_to(ROOT) if path.is_relative_to(ROOT) else path.name}:{warning.lineno}"
        counts[where] = counts.get(where, 0) + 1
    return ", ".join(f"{where} x{n}" for where, n in sorted(counts.items(), key=lambda item: -item[1])[:4])


def epoch_syncs(raw: dict, dataset, device: torch.device) -> Syncs:
    config = resolve({"seed": 0, "dim": 32, "batch_size": 512, "device": device.type, **raw})
    model = build_model(config, dataset, device)
    runner = RUNNERS.get(model.runner)(config, dataset, model, torch.Generator(device=device).manual_seed(0))
    losses = torch.zeros(max(runner.n_steps, 1), device=device)
    runner.train_epoch(1, losses, NonFiniteWatch(losses, 1, config.lr).after_step)
    if device.type != "cuda":
        started = time.perf_counter()
        runner.train_epoch(2, losses, NonFiniteWatch(losses, 2, config.lr).after_step)
        assert bool(torch.isfinite(losses).all()), "non-finite loss"
        return Syncs(model.runner, runner.n_steps, time.perf_counter() - started)
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    watch = NonFiniteWatch(losses, 2, config.lr)
    seen_after: list[int] = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")

        def after_step(step: int) -> None:
            watch.after_step(step)
            seen_after.append(sum(SYNC_WARNING in str(w.message) for w in caught))

        started = time.perf_counter()
        torch.cuda.set_sync_debug_mode("warn")
        try:
            runner.train_epoch(2, losses, after_step)
        finally:
            torch.cuda.set_sync_debug_mode("default")
        torch.cuda.synchronize()
        seconds = time.perf_counter() - started
    caught = [w for w in caught if SYNC_WARNING in str(w.message)]
    first = seen_after[0] if seen_after else len(caught)
    return Syncs(
        model.runner,
        runner.n_steps,
        seconds,
        at_start=first,
        in_steps=len(caught) - first,
        sites=sync_sites(caught),
        peak_mib=torch.cuda.max_memory_allocated() / 2**20,
    )


def check_syncs(ctx: Context) -> Check:
    check = Check("host syncs per epoch")
    n_users, n_items = (600, 300) if ctx.dry else (3000, 2000)
    dataset = tiny_dataset(ctx.work / "syncs", "gpu-check", n_users, n_items).to(torch.device(ctx.device))
    check.lines += [
        "| case | kind | steps | syncs at the epoch's start (step 1 included) | in steps 2.. | where | seconds | peak GPU MiB |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for name, raw in SYNC_CASES.items():
        try:
            if ctx.dry:
                with forced_accelerator_branches():
                    syncs = epoch_syncs(raw, dataset, torch.device("cpu"))
            else:
                syncs = epoch_syncs(raw, dataset, torch.device("cuda"))
        except Exception as failed:  # reported in the table, the other cases still run
            check.ok = False
            check.lines.append(f"| {name} | | | failed: {type(failed).__name__}: {failed} | | | | |")
            continue
        if syncs.in_steps and syncs.kind in GRADIENT_KINDS:
            check.ok = False
        check.figures[name] = dataclasses.asdict(syncs)
        start, steps = ("not countable on the CPU",) * 2 if syncs.in_steps is None else (syncs.at_start, syncs.in_steps)
        peak = "" if syncs.peak_mib is None else f"{syncs.peak_mib:.0f}"
        check.lines.append(
            f"| {name} | {syncs.kind} | {syncs.steps} | {start} | {steps} | {syncs.sites} | {syncs.seconds:.3f} | {peak} |"
        )
    check.summary = (
        (
            "0 in the steps of every gradient-trained kind"
            if not ctx.dry
            else "every kind trains with the accelerator branches forced"
        )
        if check.ok
        else "see the table"
    )
    return check


# 4. data and benches


def check_data(ctx: Context) -> Check:
    check = Check("data")
    for run in RUNS:
        command = prepare_command(python(), run, ctx.pack / "data", ctx.work / "data")
        code, output, seconds = ctx.run(command, 120)
        check.ok = check.ok and code == 0
        check.lines.append(f"- {run.dataset}: exit {code}, {seconds:.1f} s")
        if code:
            check.lines += quoted(command, code, seconds, output)
    check.summary = "Gowalla (LightGCN split) and Gowalla (PRISM split) prepared" if check.ok else "see below"
    return check


def bench(
    ctx: Context, name: str, command: list[str], cap: float, read: Callable[[str, Check, bool], None], limit: int = 5000
) -> Check:
    check = Check(name)
    code, output, seconds = ctx.run(command, cap)
    check.lines += quoted(command, code, seconds, output, limit)
    check.ok = code == 0
    if check.ok:
        try:
            read(output, check, ctx.dry)
        except Exception as unreadable:  # the bench ran but printed something else: its output is quoted
            check.ok, check.summary = False, f"output not understood: {type(unreadable).__name__}: {unreadable}"
    else:
        check.summary = f"exit {code}: " + (output.strip().splitlines() or ["(no output)"])[-1][:200]
    return check


def peak_of(output: str) -> float | None:
    peaks = [float(v) for v in re.findall(r"peak GPU memory: ([\d.]+) MiB", output)]
    return max(peaks) if peaks else None


def read_eval(output: str, check: Check, dry: bool) -> None:
    ratio = float(re.search(r"ratio recx / bare: ([\d.]+)", output).group(1))
    recx = float(re.search(r"recx evaluate .*?: ([\d.]+) s", output).group(1))
    bare = float(re.search(r"bare matmul \+ top-K: +([\d.]+) s", output).group(1))
    check.figures.update(ratio=ratio, recx_s=recx, bare_s=bare, peak_mib=peak_of(output), target=EVAL_TARGET)
    check.ok = ratio <= EVAL_TARGET or dry  # the dry run's data is too small for the target to mean anything
    check.summary = f"recx {recx:.4f} s, bare {bare:.4f} s: {ratio:.2f}x (target <= {EVAL_TARGET}x)"


def read_train(output: str, check: Check, dry: bool) -> None:
    cases = {}
    for line in output.splitlines():
        match = re.match(r"^(bpr|softmax)(.{0,31}?) +(\w+) +([\d.]+) +([\d.]+) +([\d.]+)", line)
        if match:
            cases[match.group(1)] = {
                "s_epoch": float(match.group(4)),
                "floor_s": float(match.group(5)),
                "ratio": float(match.group(6)),
            }
    for match in re.finditer(r"^cuda (bpr|softmax).*host syncs inside an epoch: (\d+)", output, re.M):
        cases[match.group(1)]["syncs"] = int(match.group(2))
    if set(cases) != {"bpr", "softmax"}:
        raise ValueError(f"cases read: {sorted(cases)}")
    check.figures.update(cases=cases, peak_mib=peak_of(output))
    check.ok = all(case.get("syncs", 0) == 0 for case in cases.values())
    check.summary = "; ".join(
        f"{name} {case['s_epoch']:.3f} s/epoch, {case['ratio']:.2f}x its floor"
        + (f", {case['syncs']} syncs" if "syncs" in case else "")
        for name, case in cases.items()
    )


def read_samplers(output: str, check: Check, dry: bool) -> None:
    ratios = dict(re.findall(r"^(\S.*?) +[\d.]+ +[\d.]+ +([\d.]+)$", output, re.M))
    kernels = dict(re.findall(r"^(alias draw|CSR membership|MIDX draw).*torch/cupy +([\d.]+)", output, re.M))
    if not ratios:
        raise ValueError("no sampler rows")
    check.figures.update(
        ratio_to_uniform={k: float(v) for k, v in ratios.items()},
        torch_over_cupy={k: float(v) for k, v in kernels.items()},
        peak_mib=peak_of(output),
    )
    worst = max(ratios.items(), key=lambda item: float(item[1]))
    check.summary = f"{len(ratios)} samplers; slowest step {worst[0]} at {float(worst[1]):.2f}x uniform's" + (
        "; torch/CuPy " + ", ".join(f"{k} {float(v):.2f}" for k, v in kernels.items()) if kernels else ""
    )


def read_fastvae(output: str, check: Check, dry: bool) -> None:
    sizes = {}
    for block in re.split(r"\n== ", output)[1:]:
        items = int(block.split(" items", 1)[0].replace(",", ""))
        speedups = dict(re.findall(r"fastvae (\w+) +epoch .*?speed-up x([\d.]+)", block))
        sizes[items] = {k: float(v) for k, v in speedups.items()}
    if not sizes:
        raise ValueError("no catalogue size read")
    check.figures.update(speedup=sizes, peak_mib=peak_of(output))
    check.summary = "; ".join(
        f"{items:,} items: " + ", ".join(f"{k} x{v:.1f}" for k, v in speedups.items())
        for items, speedups in sizes.items()
    )


def eval_bench(ctx: Context) -> Check:
    """At the default eval_batch_size (the target), then at 8,192 users a batch (a figure: how much of the gap is
    per-batch dispatch)."""
    command = [python(), "bench/eval_speed.py", "--device", ctx.device, "--source", str(ctx.pack / "data" / "gowalla")]
    check = bench(ctx, "evaluation", command, 120, read_eval)
    larger = bench(ctx, "evaluation", [*command, "--batch-size", "8192"], 120, read_eval)
    check.lines += larger.lines
    check.figures["batch_8192"] = larger.figures
    if larger.figures:
        check.summary += f"; at batch 8192: {larger.figures['ratio']:.2f}x"
    return check


def train_bench(ctx: Context) -> Check:
    command = [
        *(python(), "bench/train_speed.py", "--device", ctx.device, "--data-root", str(ctx.work / "data")),
        *("--dataset", "gowalla", "--cases", "bpr,softmax", "--epochs", "1" if ctx.dry else "3"),
    ]
    return bench(ctx, "training epochs", command, 180, read_train)


def read_capture(output: str, check: Check, dry: bool) -> None:
    cases = {}
    for match in re.finditer(
        r"^\| (bpr|softmax)[^|]*\| ([\d.]+) \| ([\d.]+) \| ([^|]*)\| ([^|]*)\| ([\d.]+) \| ([^|]*)\|", output, re.M
    ):
        captured = match.group(4).strip()
        cases[match.group(1)] = {
            "eager_s": float(match.group(2)),
            "eager_ratio": float(match.group(3)),
            "captured_s": float(captured) if captured != "capture failed" else None,
            "captured_ratio": float(match.group(5)) if match.group(5).strip() else None,
            "floor_s": float(match.group(6)),
            "weight_gap": float(match.group(7)) if match.group(7).strip() else None,
        }
    if set(cases) != {"bpr", "softmax"}:
        raise ValueError(f"cases read: {sorted(cases)}")
    errors = re.findall(r"^capture failed, (.*)$", output, re.M)
    check.figures.update(cases=cases, errors=errors)
    check.summary = "; ".join(
        f"{name} eager {case['eager_ratio']:.2f}x its floor, "
        + (f"captured {case['captured_ratio']:.2f}x" if case["captured_s"] is not None else "capture failed")
        for name, case in cases.items()
    )


def capture_bench(ctx: Context) -> Check:
    """Issue 58 §2's probe (bench/graph_capture.py): the MF defaults' step captured as a CUDA graph against eager
    and the floor. A failed capture is a finding, not a failed check (recx does not capture yet); the bench's exit
    code is 1 then, so its output is read whatever the code."""
    sizes = ["--batch-size", "256", "--steps", "3", "--epochs", "1"] if ctx.dry else []
    command = [
        *(python(), "bench/graph_capture.py", "--device", ctx.device, "--data-root", str(ctx.work / "data")),
        *("--dataset", "gowalla", *sizes),
    ]
    check = Check("capture")
    code, output, seconds = ctx.run(command, 150)
    check.lines += quoted(command, code, seconds, output)
    try:
        read_capture(output, check, ctx.dry)
    except Exception as unreadable:
        check.ok, check.summary = (
            False,
            f"exit {code}; output not understood: {type(unreadable).__name__}: {unreadable}",
        )
        return check
    check.ok = code == 0 or not ctx.dry and bool(check.figures["errors"])
    return check


def sampler_bench(ctx: Context) -> Check:
    steps = ["--steps", "2", "--warmup", "1"] if ctx.dry else ["--steps", "20"]
    command = [
        *(python(), "bench/sampler_speed.py", "--device", ctx.device),
        *("--source", str(ctx.pack / "data" / "gowalla"), *steps),
    ]
    return bench(ctx, "samplers", command, 150, read_samplers)


def fastvae_bench(items: str, skip: str, in_dry_run: bool = True) -> Callable[[Context], Check]:
    def step(ctx: Context) -> Check:
        if ctx.dry and not in_dry_run:
            return Check(f"fastvae {items}", skipped=True, summary="skipped: the dry run times one catalogue size")
        if ctx.dry:
            sizes = [
                "--items",
                "3000",
                "--users",
                "400",
                "--steps",
                "1",
                "--negatives",
                "20",
                "--skip-draws",
                "kernel,midx",
            ]
        else:
            sizes = ["--items", items, "--steps", "3", "--skip-draws", skip]
        command = [python(), "bench/fastvae_speed.py", "--device", ctx.device, *sizes]
        return bench(ctx, f"fastvae {items}", command, 240, read_fastvae)

    return step


# 5. and 7. real runs


def test_metrics(folder: Path) -> dict[str, float]:
    frame = pd.read_parquet(folder / "results.parquet")
    rows = frame[(frame.split == "test") & (frame.stratum == "all") & (frame.k == 20)]
    return {f"{metric}@20": float(value) for metric, value in zip(rows.metric, rows.value, strict=True)}


def epochs_of(folder: Path) -> list[dict]:
    path = folder / "epochs.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.is_file() else []


def median(values: list[float]) -> float | None:
    values = sorted(values)
    return values[len(values) // 2] if values else None


def train_side(ctx: Context, run: PackedRun, cap: float) -> tuple[Path, int, float]:
    folder = ctx.work / "runs" / run.name
    epochs = run.dry_epochs if ctx.dry else run.epochs
    command = train_command(python(), run, ctx.work / "data", folder, ctx.device, epochs)
    env = {"RECX_FORCE_ACCELERATOR_BRANCHES": "1"} if ctx.dry else {}
    code, output, seconds = ctx.run(command, cap, env)
    if (folder / "epochs.jsonl").is_file():
        (ctx.out / f"{run.name}-epochs.jsonl").write_bytes((folder / "epochs.jsonl").read_bytes())
    if code not in (0, 124):
        raise RuntimeError(f"exit {code}: {output.strip()[-2000:]}")
    return folder, code, seconds


def side_line(label: str, epochs: list[dict], metrics: dict | None, wall: float | None = None) -> str:
    seconds = median([e["seconds"] for e in epochs if "seconds" in e])
    parts = [f"{len(epochs)} epochs", f"median {seconds:.2f} s/epoch" if seconds is not None else "no epoch timed"]
    if wall is not None:
        parts.append(f"{wall:.0f} s wall")
    if metrics:
        parts.append(", ".join(f"test {k} {v:.4f}" for k, v in metrics.items()))
    return f"- {label}: " + "; ".join(parts)


def check_real(ctx: Context) -> Check:
    check = Check("real run (10 epochs, Gowalla)")
    cpu = ctx.pack / "cpu-runs" / REAL.name
    if not (cpu / "results.parquet").is_file():
        check.ok, check.summary = False, f"no CPU run in the pack ({cpu}); make gpu-pack"
        return check
    folder, code, wall = train_side(ctx, REAL, 400)
    if code:
        check.ok, check.summary = False, "stopped by the budget before its 10 epochs"
        return check
    ours, theirs = test_metrics(folder), test_metrics(cpu)
    limit = 1e-3 if ctx.dry else ctx.tolerance
    worst = max(abs(ours[k] - theirs[k]) / max(abs(theirs[k]), 1e-12) for k in ("ndcg@20", "recall@20"))
    mine, cpu_epochs = epochs_of(folder), epochs_of(cpu)
    check.figures.update(device=ours, cpu=theirs, relative=worst, limit=limit)
    check.figures.update(
        device_s_epoch=median([e["seconds"] for e in mine]), cpu_s_epoch=median([e["seconds"] for e in cpu_epochs])
    )
    check.lines += [
        side_line("this device" + (" (accelerator branches forced)" if ctx.dry else ""), mine, ours, wall),
        side_line("the pack's CPU run", cpu_epochs, theirs),
    ]
    check.ok = worst <= limit
    check.summary = f"NDCG@20 {ours['ndcg@20']:.4f} vs CPU {theirs['ndcg@20']:.4f}; largest relative difference {worst:.1%} (limit {limit:.1%})"
    return check


def check_headline(ctx: Context) -> Check:
    check = Check("headline: PRISM MAWU + PRISM, Gowalla")
    folder, code, wall = train_side(ctx, HEADLINE, 10_000)
    mine, cpu_epochs = epochs_of(folder), epochs_of(ctx.pack / "cpu-runs" / HEADLINE.name)
    metrics = test_metrics(folder) if code == 0 else None
    ours_s = median([e["seconds"] for e in mine])
    theirs_s = median([e["seconds"] for e in cpu_epochs])
    best = max((e["valid_ndcg@20"] for e in mine if "valid_ndcg@20" in e), default=None)
    check.figures.update(epochs=len(mine), device_s_epoch=ours_s, cpu_s_epoch=theirs_s, test=metrics, best_valid=best)
    check.lines += [
        side_line("this device", mine, metrics, wall),
        side_line("the pack's CPU run (the machine that packed)", cpu_epochs, None),
        f"- stopped: {'by early stopping or its epoch cap' if code == 0 else 'by the budget (not converged)'}"
        + (f"; best validation NDCG@20 {best:.4f}" if best is not None else ""),
    ]
    speed = f"; {theirs_s / ours_s:.0f}x the CPU's epoch" if ours_s and theirs_s else ""
    check.summary = f"{len(mine)} epochs, {'done' if code == 0 else 'cut by the budget'}{speed}" + (
        f"; test NDCG@20 {metrics['ndcg@20']:.4f}" if metrics else ""
    )
    return check


# the report


def read_profile(output: str, check: Check, dry: bool) -> None:
    read_fastvae(output, check, dry)
    launches = re.findall(r"^(\w+) \w+: (\d+) kernel launches a step", output, re.M)
    check.figures["launches_per_step"] = {model: int(n) for model, n in launches}
    check.summary = "kernel launches a step: " + ", ".join(f"{model} {n}" for model, n in launches)


def vae_profile(ctx: Context) -> Check:
    sizes = ["--items", "3000", "--users", "400"] if ctx.dry else ["--items", "200000"]
    command = [
        *(python(), "bench/fastvae_speed.py", "--device", ctx.device, *sizes, "--steps", "1", "--negatives", "20"),
        *("--samplers", "uniform", "--skip-draws", "popularity,midx_uni,midx_pop,midx,kernel", "--profile"),
    ]
    return bench(ctx, "vae profile", command, 120, read_profile, limit=12000)


# (key for --only, seconds it needs at least, step), fast steps first
STEPS: list[tuple[str, float, Callable[[Context], Check]]] = [
    ("setup", 0, check_setup),
    ("kernels", 30, check_kernels),
    ("syncs", 20, check_syncs),
    ("data", 10, check_data),
    ("evaluation", 20, eval_bench),
    ("training", 30, train_bench),
    ("capture", 30, capture_bench),
    ("samplers", 30, sampler_bench),
    ("fastvae-200k", 30, fastvae_bench("200000", "")),
    ("profile", 30, vae_profile),
    ("real", 60, check_real),
    ("fastvae-1.5m", 60, fastvae_bench("1500000", "kernel", in_dry_run=False)),
    ("headline", 45, check_headline),
]


def render(checks: list[Check], ctx: Context, started: float) -> str:
    device = torch.cuda.get_device_name(0) if not ctx.dry else "CPU dry run: plumbing only"
    lines = [
        f"# recx gpu-check ({ctx.device})",
        "",
        f"{time.strftime('%Y-%m-%d %H:%M:%S')}, {device}, torch {torch.__version__}, "
        f"{time.perf_counter() - started:.0f} s of a {ctx.deadline - started:.0f} s budget",
        "",
        "| check | result | seconds | summary |",
        "| --- | --- | --- | --- |",
    ]
    for c in checks:
        result = "skipped" if c.skipped else ("ok" if c.ok else "**FAILED**")
        lines.append(f"| {c.name} | {result} | {c.seconds:.0f} | {c.summary} |")
    for c in checks:
        lines += ["", f"## {c.name}", "", *c.lines]
    return "\n".join(lines) + "\n"


def write(checks: list[Check], ctx: Context, started: float) -> None:
    (ctx.out / "gpu-check.md").write_text(render(checks, ctx, started))
    figures = {c.name: {"ok": c.ok, "skipped": c.skipped, "seconds": round(c.seconds, 1), **c.figures} for c in checks}
    (ctx.out / "gpu-check.json").write_text(json.dumps(figures, indent=1, default=str) + "\n")
    (ctx.out / "gpu-check.log").write_text("\n".join(ctx.log) + "\n")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--data", type=Path, default=ROOT / ".gpu-pack", help="the pack (make gpu-pack)")
    parser.add_argument("--out", type=Path, default=ROOT / "build" / "gpu-check", help="folder for the report")
    parser.add_argument("--budget-s", type=float, default=420, help="wall-clock seconds for the whole check")
    parser.add_argument(
        "--tolerance", type=float, default=0.05, help="relative difference allowed between the CUDA and CPU runs"
    )
    parser.add_argument(
        "--only", default="", help=f"comma-separated steps to run (default: all): {', '.join(s[0] for s in STEPS)}"
    )
    options = parser.parse_args()
    unknown = set(filter(None, options.only.split(","))) - {s[0] for s in STEPS}
    if unknown:
        parser.error(f"--only: unknown step(s) {', '.join(sorted(unknown))}; steps: {', '.join(s[0] for s in STEPS)}")
    started = time.perf_counter()
    device = "cpu" if os.environ.get(FORCE_CPU) == "1" else options.device
    if device == "cuda" and not torch.cuda.is_available():
        parser.error(f"--device cuda: CUDA is not available here; use --device cpu (or {FORCE_CPU}=1) for the dry run")
    set_compute_threads(max(1, min(4, os.cpu_count() or 1)))
    options.out.mkdir(parents=True, exist_ok=True)
    checks: list[Check] = []
    with tempfile.TemporaryDirectory(prefix="recx-gpu-check-") as scratch:
        ctx = Context(
            device, options.data.resolve(), options.out, Path(scratch), started + options.budget_s, options.tolerance
        )
        for name, needs, step in STEPS:
            if options.only and name not in options.only.split(","):
                continue
            step_started = time.perf_counter()
            if ctx.left() < needs:
                check = Check(
                    name, skipped=True, summary=f"skipped: {ctx.left():.0f} s left of the budget, needs {needs:.0f}"
                )
            else:
                try:
                    check = step(ctx)
                except Exception as failed:  # one step's failure is reported; the next steps still run
                    check = Check(name, ok=False, summary=f"{type(failed).__name__}: {str(failed)[:300]}")
            check.seconds = time.perf_counter() - step_started
            checks.append(check)
            print(
                f"{check.name}: {'skipped' if check.skipped else 'ok' if check.ok else 'FAILED'} ({check.seconds:.0f} s) {check.summary}",
                flush=True,
            )
            write(checks, ctx, started)
    print(f"report: {options.out / 'gpu-check.md'}")
    return 0 if all(c.ok or c.skipped for c in checks) else 1


if __name__ == "__main__":
    sys.exit(main())
