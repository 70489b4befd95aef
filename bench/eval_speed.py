"""Evaluation speed: recx's full-ranking evaluation on Gowalla's test split against a bare matmul + top-k.

Both use the same 64-dim embeddings, the same users (those with test items), the same batch size and the same K in
one process; the bare baseline computes scores and top-K only (no exclusion of seen items, no metrics). The two are
timed in turn (recx, bare, recx, bare, ...) so that a machine whose load changes slows both alike; each one's best
time is reported, and the ratio of each pair's times.
Run by hand:  python bench/eval_speed.py [--device cpu|cuda] [--batch-size 1024] [--repeats 3] [--profile]
                                         [--data-root DATA] [--quick]
(`--profile`: one more evaluation under torch.profiler, its operations by their own time and, on CUDA, its kernel
launches: where the time above the bare baseline goes. `--data-root`: Gowalla already prepared there (from
../shared/data/gowalla as a lightgcn source), not prepared again in a temporary folder.) `--quick` (make
ci-bench-quick): a tiny synthetic Gowalla-format source (bench/quick.py), one repeat, the profile.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import quick
import torch

from recx.config.run_config import resolve
from recx.core.memory import keep_freed_memory
from recx.data.dataset import load_dataset
from recx.data.prepare import PrepareOptions, prepare
from recx.eval.evaluator import evaluate
from recx.training.build import build_model

GOWALLA = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "gowalla"
KS = [10, 20, 50]


def evaluated_model(dataset, device: torch.device):
    """The model the bench evaluates: MF, dim 64, recx's default initialisation."""
    return build_model(resolve({"dataset": "gowalla", "dim": 64}), dataset, device)


def bare_topk(query: torch.Tensor, items: torch.Tensor, batch_size: int, k: int) -> torch.Tensor:
    tops = [
        (query[start : start + batch_size] @ items.T).topk(k, dim=1).indices
        for start in range(0, query.shape[0], batch_size)
    ]
    return torch.cat(tops)


def timed(work, device) -> float:
    if device.type == "cuda":
        torch.cuda.synchronize()
    started = time.perf_counter()
    work()
    if device.type == "cuda":
        torch.cuda.synchronize()
    return time.perf_counter() - started


def in_turn(repeats: int, works, device) -> list[list[float]]:
    """Each of `works` timed `repeats` times, in turn (a, b, a, b, ...): [work][repeat] seconds."""
    times: list[list[float]] = [[] for _ in works]
    for _ in range(repeats):
        for index, work in enumerate(works):
            times[index].append(timed(work, device))
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--batch-size", type=int, default=1024)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--source", type=Path, default=GOWALLA)
    parser.add_argument("--data-root", type=Path, help="Gowalla already prepared there (else prepared in a temp dir)")
    parser.add_argument("--profile", action="store_true", help="profile one more evaluation (torch.profiler)")
    quick.option(parser, source=quick.source, repeats=1, batch_size=128, profile=True)
    args = parser.parse_args()
    keep_freed_memory()  # as the recx command does (recx/memory.py)
    device = torch.device(args.device)
    if args.data_root is not None:
        dataset = load_dataset(args.data_root, "gowalla").to(device)
    else:
        with tempfile.TemporaryDirectory() as root:
            prepare("gowalla", PrepareOptions(format="lightgcn", source=args.source), Path(root))
            dataset = load_dataset(Path(root), "gowalla").to(device)
    model = evaluated_model(dataset, device)
    ks = KS
    users = torch.nonzero(dataset.test.row_lengths() > 0).flatten()
    query, items = model.query(users), model.item_table()
    evaluate(model, dataset, "test", ks, args.batch_size)  # warm-up
    recx_times, bare_times = in_turn(
        args.repeats,
        [
            lambda: evaluate(model, dataset, "test", ks, args.batch_size),
            lambda: bare_topk(query, items, args.batch_size, max(ks)),
        ],
        device,
    )
    recx_time, bare_time = min(recx_times), min(bare_times)
    pairs = sorted(ours / theirs for ours, theirs in zip(recx_times, bare_times, strict=True))
    print(
        f"device {device}, {users.numel():,} users x {dataset.n_items:,} items, dim 64, K={ks}, "
        f"batch {args.batch_size}, best of {args.repeats}"
    )
    print(f"recx evaluate (mask seen, top-K, all metrics x 3 K, strata): {recx_time:.3f} s")
    print(f"bare matmul + top-K:                                         {bare_time:.3f} s")
    print(f"ratio recx / bare: {recx_time / bare_time:.3f}")
    print(
        f"each pair's ratio (timed in turn): {', '.join(f'{r:.3f}' for r in pairs)}; median {pairs[len(pairs) // 2]:.3f}"
    )
    if device.type == "cuda":
        print(f"peak GPU memory: {torch.cuda.max_memory_allocated() / 2**20:.0f} MiB")
    if args.profile:
        profile(lambda: evaluate(model, dataset, "test", ks, args.batch_size), device)


def profile(work, device: torch.device) -> None:
    """One call of `work` under torch.profiler: its operations by their own time (device time on CUDA)."""
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as profiler

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    with profiler(activities=activities) as recorded:
        work()
        if device.type == "cuda":
            torch.cuda.synchronize()
    events = recorded.key_averages()
    if device.type == "cuda":
        launches = sum(
            e.count for e in events if e.key in ("cudaLaunchKernel", "cuLaunchKernel", "cudaLaunchKernelExC")
        )
        print(f"kernel launches in one evaluation: {launches}")
    sort = "self_cuda_time_total" if device.type == "cuda" else "self_cpu_time_total"
    print(events.table(sort_by=sort, row_limit=18, max_name_column_width=50))


if __name__ == "__main__":
    main()
