"""Benchmark: time per training step of every sampler on Gowalla (MF, batch 2048, 64 dims) next to the uniform
sampler in the same process, and on CUDA the CuPy kernels against their torch references.

Prepares ../shared/data/gowalla (LightGCN split) into a temporary data root, then for each (sampler, loss) pair times
`steps` full training steps (sampling, scores, loss, backward, Adam) after `warmup` steps, and prints the mean
milliseconds per step and the ratio to uniform + BPR with one negative per query (uniform is re-timed between
samplers so that the ratio compares like with like on a shared machine).

    python bench/sampler_speed.py [--steps 20] [--warmup 3] [--device auto] [--kernels auto] [--threads 2] [--quick]

`--quick` (make ci-bench-quick): a tiny synthetic Gowalla-format source (bench/quick.py), one step after one.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import quick
import torch

from recx.config.run_config import resolve
from recx.core.device import resolve_device
from recx.core.memory import keep_freed_memory
from recx.core.threads import set_compute_threads
from recx.data.dataset import load_dataset
from recx.data.prepare import PrepareOptions, prepare
from recx.training.build import build_loss, build_model, build_sampler
from recx.training.runners.interactions import run_optimizer
from recx.training.step import training_loss

ROOT = Path(__file__).resolve().parents[1]
GOWALLA = ROOT / ".." / "shared" / "data" / "gowalla"
BASELINE = ("uniform", "bpr", 1, {})
CASES = [
    ("uniform", "softmax", 100, {}),
    ("uniform", "bpr", 1, {"exclude_train": True}),
    ("popularity", "softmax", 100, {"variant": "pow0.75"}),
    ("dns", "bpr", 1, {"m": 1, "n_candidates": 200}),
    ("dns", "bpr", 1, {"m": 10, "n_candidates": 200}),
    ("softmax_v", "bpr", 1, {"rho": 1.0, "n_candidates": 200}),
    ("self_adversarial", "bpr", 100, {"temperature": 1.0}),
    ("in_batch", "softmax", 1, {}),
    ("in_batch_pop", "softmax", 1, {}),
    ("bir", "softmax", 1, {}),
    ("xir", "softmax", 1, {"cache_size": 1024}),
]


def time_steps(case, dataset, device, kernels: str, steps: int, warmup: int) -> float:
    """Mean seconds per training step for one (sampler, loss, n_negatives, sampler_args)."""
    sampler_name, loss_name, n_negatives, sampler_args = case
    config = resolve(
        {
            "model": "mf",
            "dim": 64,
            "batch_size": 2048,
            "loss": loss_name,
            "sampler": sampler_name,
            "n_negatives": n_negatives,
            "sampler_args": sampler_args,
            "kernels": kernels,
        }
    )
    generator = torch.Generator(device=device).manual_seed(0)
    model = build_model(config, dataset, device)
    sampler = build_sampler(config, dataset, generator)
    loss_fn = build_loss(config, dataset, device)
    optimizer = run_optimizer(model, loss_fn, config)  # as the training loop
    users_of, items_of = dataset.train.row_ids(), dataset.train.indices
    order = torch.randperm(items_of.numel(), generator=generator, device=device)
    started = 0.0
    for step in range(warmup + steps):
        if step == warmup:
            synchronize(device)
            started = time.perf_counter()
        index = order[(step * 2048 + torch.arange(2048, device=device)) % order.numel()]  # wraps on small data
        loss = training_loss(model, sampler, loss_fn, config, users_of[index], items_of[index])
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
    synchronize(device)
    return (time.perf_counter() - started) / steps


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def label(case) -> str:
    sampler_name, loss_name, n_negatives, sampler_args = case
    args = ",".join(f"{k}={v}" for k, v in sampler_args.items())
    return f"{sampler_name}({args}) + {loss_name}, n={n_negatives}"


def kernel_comparison(dataset, repeats: int = 20) -> None:
    """CuPy kernels against their torch references on CUDA (alias draws; CSR membership; the MIDX draw)."""
    from recx.kernels.alias_table import build_alias, draw_torch
    from recx.kernels.choice import cupy_available
    from recx.kernels.cupy_kernels import alias_draw, csr_contains, midx_draw
    from recx.kernels.midx_draw import draw_torch as draw_torch_midx

    if not cupy_available():
        print("kernels: cupy or CUDA missing, skipped")
        return
    train = dataset.train.to("cuda")
    prob, alias = build_alias(train.column_counts().double() + 1)
    uniforms = torch.rand(2048 * 200, device="cuda", dtype=torch.float64)
    users = torch.randint(0, dataset.n_users, (2048, 1), device="cuda").expand(2048, 200)
    items = torch.randint(0, dataset.n_items, (2048, 200), device="cuda")
    pairs = {
        "alias draw, 409,600 draws": (
            lambda: draw_torch(prob, alias, uniforms),
            lambda: alias_draw(prob, alias, uniforms),
        ),
        "CSR membership, 409,600 pairs": (
            lambda: train.contains(users, items),
            lambda: csr_contains(train.indptr, train.indices, users, items),
        ),
    }
    cells = torch.randint(0, 32 * 32, (dataset.n_items,), device="cuda")  # a MIDX index: K = 32 codewords a half
    cell_ptr = torch.zeros(32 * 32 + 1, dtype=torch.int64, device="cuda")
    cell_ptr[1:] = torch.cumsum(torch.bincount(cells, minlength=32 * 32), 0)
    order, log_joint = torch.argsort(cells, stable=True), torch.randn(256, 32, 32, device="cuda")
    draws = torch.rand(256, 200, 3, device="cuda", dtype=torch.float64)
    largest = int((cell_ptr[1:] - cell_ptr[:-1]).max())
    pairs["MIDX draw, 256 x 200, K 32"] = (
        lambda: draw_torch_midx(log_joint, None, cell_ptr, order, draws, largest),
        lambda: midx_draw(log_joint, None, cell_ptr, order, draws),
    )
    for name, (reference, kernel) in pairs.items():
        mismatch = (reference() != kernel()).double().mean().item()
        assert mismatch < 1e-3, f"{name}: {mismatch:.2%} of the draws differ"  # MIDX: float ties at cell boundaries
        times = []
        for run in (reference, kernel):
            run()
            torch.cuda.synchronize()
            started = time.perf_counter()
            for _ in range(repeats):
                run()
            torch.cuda.synchronize()
            times.append((time.perf_counter() - started) / repeats)
        print(
            f"{name:32s} torch {times[0] * 1e6:8.1f} us   cupy {times[1] * 1e6:8.1f} us   "
            f"torch/cupy {times[0] / times[1]:5.2f}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--device", default="auto")
    parser.add_argument("--kernels", default="auto")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--source", type=Path, default=GOWALLA, help="Gowalla's LightGCN split (train/valid/test.txt)")
    quick.option(parser, source=quick.source, steps=1, warmup=1, threads=1)
    options = parser.parse_args()
    keep_freed_memory()  # as the recx command does (recx/memory.py)
    set_compute_threads(options.threads)
    device = resolve_device(options.device)
    with tempfile.TemporaryDirectory() as root:
        prepare("gowalla", PrepareOptions(format="lightgcn", source=options.source), Path(root))
        dataset = load_dataset(Path(root), "gowalla").to(device)
    print(
        f"Gowalla: {dataset.n_users:,} users, {dataset.n_items:,} items, {dataset.train.nnz:,} training "
        f"interactions; MF dim 64, batch 2048, {options.steps} steps after {options.warmup} warm-up; {device}"
    )
    print(f"{'sampler + loss':58s} {'ms/step':>9s} {'uniform':>9s} {'ratio':>6s}")
    for case in CASES:
        baseline = time_steps(BASELINE, dataset, device, options.kernels, options.steps, options.warmup)
        seconds = time_steps(case, dataset, device, options.kernels, options.steps, options.warmup)
        print(f"{label(case):58s} {seconds * 1e3:9.1f} {baseline * 1e3:9.1f} {seconds / baseline:6.2f}")
    if device.type == "cuda":
        kernel_comparison(dataset)
        print(f"peak GPU memory: {torch.cuda.max_memory_allocated() / 2**20:.0f} MiB")
    else:
        print("kernels: no CUDA device, CuPy comparison skipped")


if __name__ == "__main__":
    main()
