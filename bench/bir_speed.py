"""Benchmark: BIR's training step against SSL-Pop's (the in-batch softmax with popularity correction) at the same
batch size, both in this process, as seconds per epoch (the median step time × the epoch's steps).

BIR (recx/samplers/bir.py) adds to SSL-Pop's step a [B, B] softmax of the resampling weights and B draws per query
counted over the batch (recx/kernels/inverse_cdf.py on the CPU). Both with the softmax loss and its default
optimizer, MF with 64 dimensions; the issue's target: BIR ≤ 3× SSL-Pop at batch 2048 and 4096.

    python bench/bir_speed.py --data-root /work/data [--dataset gowalla] [--batches 2048,4096] [--steps 15]
                              [--threads 1] [--quick]

`--quick` (make ci-bench-quick): tiny synthetic data (bench/quick.py), batches of 128 and 256, 2 steps.
"""

from __future__ import annotations

import argparse
import math
import statistics
import time
from pathlib import Path

import quick
import torch

from recx.config.run_config import resolve
from recx.core.memory import keep_freed_memory
from recx.core.threads import set_compute_threads
from recx.data.dataset import load_dataset
from recx.training.build import build_model
from recx.training.runners.interactions import InteractionEpochs
from recx.training.step import training_loss


def step_seconds(dataset, sampler: str, batch_size: int, steps: int) -> float:
    """Median seconds of one full training step (sampling, scores, loss, backward, optimizer) over `steps` steps."""
    config = resolve({"model": "mf", "dim": 64, "batch_size": batch_size, "loss": "softmax", "sampler": sampler})
    model = build_model(config, dataset, torch.device("cpu"))
    runner = InteractionEpochs(config, dataset, model, torch.Generator().manual_seed(0))
    order = torch.randperm(runner.items_of.numel(), generator=torch.Generator().manual_seed(1))
    times = []
    for step in range(steps + 2):
        chosen = order[step * batch_size : (step + 1) * batch_size]
        started = time.perf_counter()
        loss = training_loss(
            model, runner.sampler, runner.loss_fn, config, runner.users_of[chosen], runner.items_of[chosen]
        )
        runner.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        runner.optimizer.step()
        if step >= 2:
            times.append(time.perf_counter() - started)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-root", type=Path, default=Path("data"))
    parser.add_argument("--dataset", default="gowalla")
    parser.add_argument("--batches", default="2048,4096")
    parser.add_argument("--steps", type=int, default=15)
    parser.add_argument("--threads", type=int, default=1)
    quick.option(parser, data_root=lambda: quick.data_root("quick"), dataset="quick", batches="128,256", steps=2)
    options = parser.parse_args()
    keep_freed_memory()
    set_compute_threads(options.threads)
    dataset = load_dataset(options.data_root, options.dataset)
    print(f"{options.dataset}: {dataset.train.nnz:,} training interactions; {options.threads} thread(s)")
    print(f"{'batch':>6s} {'SSL-Pop s/epoch':>16s} {'BIR s/epoch':>12s} {'BIR/SSL-Pop':>12s}")
    for batch_size in (int(size) for size in options.batches.split(",")):
        n_steps = math.ceil(dataset.train.nnz / batch_size)
        ssl_pop = step_seconds(dataset, "in_batch_pop", batch_size, options.steps) * n_steps
        bir = step_seconds(dataset, "bir", batch_size, options.steps) * n_steps
        print(f"{batch_size:6d} {ssl_pop:16.2f} {bir:12.2f} {bir / ssl_pop:12.2f}", flush=True)


if __name__ == "__main__":
    main()
