"""FastVAE vs Mult-VAE: time per epoch at growing catalogues, and time per draw of each sampler vs uniform.

Synthetic user histories (Zipf item popularity, `--users` users of about `--mean-length` items) over catalogues of
`--items` items (default 40K and 200K on CPU; 1.5M added on CUDA). For each catalogue:
- epoch time of Mult-VAE (full softmax) and FastVAE (uniform, MIDX_Uni, MIDX_Pop; `--negatives` per user), as
  codebook rebuild + steps per epoch x the mean time of `--steps` timed steps (after one warm-up step), with the
  sampler's share of it measured separately; the ratio is Mult-VAE's epoch time over FastVAE's; each step's
  optimizer time (the dense Adam over every row, which both take) too, with the speed-up it bounds (Mult-VAE's step
  over FastVAE's optimizer step; 1.5M items on the CPU: `--items 1500000 --steps 3`, ~16 GB peak);
- time of one sampling call (256 queries x `--negatives` draws, hidden size 200) of each sampler, and its ratio to
  uniform sampling (the paper: MIDX_Uni ~1.5 s vs < 0.5 s per epoch);
- time of the positives' log q of one step (the 256 users' training items as (user, item) pairs) with each
  sampler's `pair_log_probability` against the contract's default (one query row per pair), in the same process.
Run: python bench/fastvae_speed.py [--items 40000,200000] [--device cpu|cuda] [--quick]
(`--quick`, make ci-bench-quick: 1,000 items, 300 users, one step, 20 negatives, no kernel sampler, the profile.)
"""

from __future__ import annotations

import argparse
import math
import time
from pathlib import Path

import numpy as np
import quick
import torch

from recx.config.run_config import resolve
from recx.core.memory import keep_freed_memory
from recx.data.csr import CSR
from recx.data.dataset import Dataset
from recx.models.multvae import FastVAE, MultVAE, MultVAEArgs
from recx.samplers.base import Batch, Sampler
from recx.samplers.registry import SAMPLERS
from recx.training.runners.users import UserEpochs


def synthetic_dataset(n_users: int, n_items: int, mean_length: int, seed: int = 0) -> Dataset:
    rng = np.random.default_rng(seed)
    weights = 1.0 / np.arange(1, n_items + 1) ** 0.8
    lengths = 1 + rng.poisson(mean_length - 1, n_users)
    items = rng.choice(n_items, size=int(lengths.sum()), p=weights / weights.sum())
    users = np.repeat(np.arange(n_users), lengths)
    train = CSR.from_pairs(torch.from_numpy(users), torch.from_numpy(items), n_users, n_items)
    return Dataset(f"synthetic-{n_items}", n_users, n_items, train, None, train, {}, "bench", Path("."))


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


class Timed:
    """Wraps an object; accumulates the wall time of the calls to its method `method` (device synchronised)."""

    def __init__(self, target, method: str, device):
        self.target, self.method, self.device, self.seconds = target, method, device, 0.0

    def __getattr__(self, name):
        if name != self.method:
            return getattr(self.target, name)

        def timed(*args, **kwargs):
            synchronize(self.device)
            started = time.perf_counter()
            result = getattr(self.target, name)(*args, **kwargs)
            synchronize(self.device)
            self.seconds += time.perf_counter() - started
            return result

        return timed


def limit_steps(runner: UserEpochs, users: torch.Tensor, steps: int) -> None:
    """Make the runner's epoch `steps` full batches, of the first users."""
    runner.users = users[: steps * runner.config.batch_size]
    runner.n_steps = steps


def make_runner(dataset: Dataset, model_name: str, sampler: str, negatives: int, device) -> UserEpochs:
    config = resolve(
        {
            "model": model_name,
            "loss": "softmax" if model_name == "fastvae" else "full_softmax",
            "sampler": sampler,
            "n_negatives": negatives,
            "dim": 32,
            "batch_size": 256,
            "lr": 1e-3,
            "weight_decay": 0.01,
            "device": str(device),
            "kernels": "auto",
            "sampler_args": {"variant": "log"} if sampler == "midx_pop" else {},
        }
    )
    torch.manual_seed(0)
    model = (FastVAE if model_name == "fastvae" else MultVAE)(
        dataset.n_users, dataset.n_items, 32, MultVAEArgs(), dataset
    ).to(device)
    return UserEpochs(config, dataset, model, torch.Generator(device=device).manual_seed(0))


def profile_step(dataset: Dataset, model_name: str, sampler: str, negatives: int, device, rows: int = 12) -> str:
    """torch.profiler's table of 3 steps (after a warm-up step): the operators by device time, and the launches."""
    runner = make_runner(dataset, model_name, sampler, negatives, device)
    limit_steps(runner, runner.users, 1)
    runner.train_epoch(1, torch.zeros(1, device=device), lambda step: None)
    limit_steps(runner, runner.users, 3)
    activities = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
    with torch.profiler.profile(activities=activities) as profile:
        runner.train_epoch(2, torch.zeros(3, device=device), lambda step: None)
        synchronize(device)
    events = profile.key_averages()
    launches = sum(e.count for e in events if e.key in ("cudaLaunchKernel", "cuLaunchKernel", "cudaLaunchKernelExC"))
    table = events.table(sort_by="cuda_time_total" if device.type == "cuda" else "cpu_time_total", row_limit=rows)
    return f"{model_name} {sampler}: {launches / 3:.0f} kernel launches a step\n{table}"


def epoch_time(dataset: Dataset, model_name: str, sampler: str, negatives: int, steps: int, device) -> dict:
    runner = make_runner(dataset, model_name, sampler, negatives, device)
    model = runner.model
    full_steps = runner.n_steps
    rebuild = 0.0
    if runner.sampler is not None:
        synchronize(device)
        started = time.perf_counter()
        runner.sampler.rebuild(None, model.item_table())
        synchronize(device)
        rebuild = time.perf_counter() - started
        runner.sampler = Timed(runner.sampler, "sample", device)
        runner.sampler.rebuild_every = None
    runner.optimizer = Timed(runner.optimizer, "step", device)
    all_users = runner.users
    limit_steps(runner, all_users, 1)
    runner.train_epoch(1, torch.zeros(1, device=device), lambda step: None)  # warm-up
    if runner.sampler is not None:
        runner.sampler.seconds = 0.0
    runner.optimizer.seconds = 0.0
    limit_steps(runner, all_users, steps)
    synchronize(device)
    started = time.perf_counter()
    runner.train_epoch(1, torch.zeros(steps, device=device), lambda step: None)
    synchronize(device)
    per_step = (time.perf_counter() - started) / steps
    sampling = runner.sampler.seconds / steps if runner.sampler is not None else 0.0
    return {
        "epoch": rebuild + per_step * full_steps,
        "sampling": rebuild + sampling * full_steps,
        "per_step": per_step,
        "optimizer": runner.optimizer.seconds / steps,
    }


def draw_time(dataset: Dataset, name: str, negatives: int, device, repeats: int = 5) -> float:
    sampler_class = SAMPLERS.get(name)
    sampler = sampler_class(
        dataset, negatives, sampler_class.Args(), torch.Generator(device=device).manual_seed(0), "auto"
    )
    generator = torch.Generator(device=device).manual_seed(1)
    items = torch.randn(dataset.n_items, 200, generator=generator, device=device) * 0.1
    query = torch.randn(256, 200, generator=generator, device=device)
    users = torch.arange(256, device=device) % dataset.n_users
    batch = Batch(users, dataset.train.indices[dataset.train.indptr[users]], query, items)
    sampler.rebuild(None, items)
    sampler.sample(batch)
    synchronize(device)
    started = time.perf_counter()
    for _ in range(repeats):
        sampler.sample(batch)
    synchronize(device)
    return (time.perf_counter() - started) / repeats


def positives_log_q_time(dataset: Dataset, name: str, device, repeats: int = 3) -> tuple[float, float]:
    """(default per-pair seconds, the sampler's own seconds) for the log q of the first 256 users' training items."""
    sampler_class = SAMPLERS.get(name)
    sampler = sampler_class(dataset, 1, sampler_class.Args(), torch.Generator(device=device).manual_seed(0), "auto")
    generator = torch.Generator(device=device).manual_seed(1)
    items = torch.randn(dataset.n_items, 200, generator=generator, device=device) * 0.1
    query = torch.randn(256, 200, generator=generator, device=device)
    users = torch.arange(256, device=device)
    end = int(dataset.train.indptr[256])
    rows, positives = dataset.train.row_ids()[:end], dataset.train.indices[:end]
    batch = Batch(users, positives[:256], query, items)
    sampler.rebuild(None, items)
    seconds = []
    for method in (
        lambda: Sampler.pair_log_probability(sampler, batch, rows, positives),
        lambda: sampler.pair_log_probability(batch, rows, positives),
    ):
        method()
        synchronize(device)
        started = time.perf_counter()
        for _ in range(repeats):
            method()
        synchronize(device)
        seconds.append((time.perf_counter() - started) / repeats)
    return seconds[0], seconds[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--items", default=None, help="comma-separated catalogue sizes")
    parser.add_argument("--users", type=int, default=30_000)
    parser.add_argument("--mean-length", type=int, default=30)
    parser.add_argument("--negatives", type=int, default=200)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--skip-draws", default="", help="comma-separated samplers not to time per draw")
    parser.add_argument("--samplers", default="uniform,midx_uni,midx_pop", help="FastVAE's samplers to time per epoch")
    parser.add_argument("--profile", action="store_true", help="also profile Mult-VAE's and FastVAE's steps")
    quick.option(parser, items="1000", users=300, steps=1, negatives=20, skip_draws="kernel", profile=True)
    args = parser.parse_args()
    keep_freed_memory()  # as the recx command does (recx/memory.py)
    device = torch.device(args.device)
    sizes = (
        [int(s) for s in args.items.split(",")]
        if args.items
        else ([40_000, 200_000, 1_500_000] if device.type == "cuda" else [40_000, 200_000])
    )
    print(
        f"device {device}, {args.users} users, ~{args.mean_length} items each, {args.negatives} negatives, "
        f"threads {torch.get_num_threads()}"
    )
    for n_items in sizes:
        dataset = synthetic_dataset(args.users, n_items, args.mean_length).to(device)
        if device.type == "cuda":
            torch.cuda.reset_peak_memory_stats()
        print(f"\n== {n_items:,} items, {math.ceil(args.users / 256)} steps per epoch (batch 256 users)")
        baseline = epoch_time(dataset, "multvae", "full", args.negatives, args.steps, device)
        print(
            f"  mult-vae          epoch {baseline['epoch']:8.2f} s  (step {baseline['per_step'] * 1e3:7.1f} ms, "
            f"optimizer {baseline['optimizer'] * 1e3:7.1f} ms)"
        )
        for sampler in args.samplers.split(","):
            fast = epoch_time(dataset, "fastvae", sampler, args.negatives, args.steps, device)
            print(
                f"  fastvae {sampler:9s} epoch {fast['epoch']:8.2f} s  (step {fast['per_step'] * 1e3:7.1f} ms, "
                f"optimizer {fast['optimizer'] * 1e3:7.1f} ms, sampling {fast['sampling']:6.2f} s/epoch incl. k-means)  "
                f"speed-up x{baseline['epoch'] / fast['epoch']:.2f}, at most x{baseline['per_step'] / fast['optimizer']:.2f} "
                f"with its optimizer's step"
            )
        skip = set(filter(None, args.skip_draws.split(",")))
        uniform = draw_time(dataset, "uniform", args.negatives, device)
        print(f"  sampling 256 x {args.negatives}: uniform {uniform * 1e3:.2f} ms")
        for name in ("popularity", "midx_uni", "midx_pop", "midx", "kernel"):
            if name in skip:
                continue
            seconds = draw_time(dataset, name, args.negatives, device, repeats=1 if name == "kernel" else 5)
            print(
                f"  sampling 256 x {args.negatives}: {name:10s} {seconds * 1e3:9.2f} ms  ratio to uniform "
                f"x{seconds / uniform:.2f}"
            )
        for name in ("midx_uni", "midx_pop", "midx", "kernel"):
            if name in skip:
                continue
            default, own = positives_log_q_time(dataset, name, device, repeats=1 if name in ("midx", "kernel") else 5)
            print(
                f"  positives' log q of 256 users: {name:10s} {own * 1e3:9.2f} ms  (one query row per pair "
                f"{default * 1e3:9.2f} ms, x{default / own:.1f})"
            )
        if device.type == "cuda":
            print(f"  peak GPU memory: {torch.cuda.max_memory_allocated() / 2**20:.0f} MiB")
        if args.profile:
            for model_name, sampler in (("multvae", "full"), ("fastvae", "uniform")):
                print(profile_step(dataset, model_name, sampler, args.negatives, device))


if __name__ == "__main__":
    main()
