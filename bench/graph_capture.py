"""Issue 58 §2's probe on a GPU: the MF defaults' training step (bench/train_speed.py's BPR and shared-softmax cases
on Gowalla) captured once as a CUDA graph and replayed batch after batch, against the same steps run eagerly and
against the step's matmul floor. It changes nothing in recx: it measures what capturing would give and finds what
breaks first, so that the next lent GPU answers both before recx's runners capture.

Per case, two runs from the same seed (the same weights, the run's generator seeded alike) over the same batches:
- eager: `train_step` on each full batch, as InteractionEpochs.train_epoch runs it;
- captured: `--warmup` eager steps (the optimizers' lazy state; on a side stream on CUDA, as torch asks), then one
  step captured into a torch.cuda.CUDAGraph on static batch buffers (the run's generator registered with the graph
  where torch has CUDAGraph.register_generator_state), then each batch copied into the buffers and the graph
  replayed. Without CUDA (`--device cpu`, the dry run) the "replay" calls the step on the static buffers: the
  plumbing runs (with recx's accelerator branches forced: the steps CUDA takes), and its weights must equal the
  eager run's bit for bit.
It prints, per case: the seconds of an epoch's full batches (the last partial batch left out of both) eager,
captured and for the floor (train_speed.floor_epoch), the ratios to the floor, the largest weight difference
between the two runs after the same steps (on CUDA the same draws give differences of rounding size: atomics in the
row sums; other draws give differences of the weights' own size) and both runs' mean loss over the compared steps.
A capture that fails prints its error and the case goes on to the next.

    python bench/graph_capture.py --device cuda --data-root DATA [--dataset gowalla] [--cases bpr,softmax]
                                  [--steps 50] [--warmup 3] [--epochs 3]
    python bench/graph_capture.py --quick   # tiny synthetic data on the CPU (CI)
"""

from __future__ import annotations

import argparse
import contextlib
import math
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import quick
import torch
import train_speed

from recx.core.device import resolve_device
from recx.core.device_paths import forced_accelerator_branches
from recx.core.threads import set_compute_threads
from recx.data.dataset import load_dataset
from recx.training.build import build_model
from recx.training.runners.registry import RUNNERS
from recx.training.step import train_step

CASES = ("bpr", "softmax")


@dataclass
class Run:
    """A fresh model and runner of `config` (weights from config.seed, the run's generator seeded 0) and the full
    batches of one shuffled epoch."""

    model: torch.nn.Module
    runner: object
    batches: list[tuple[torch.Tensor, torch.Tensor]]

    def step(self, users: torch.Tensor, positives: torch.Tensor) -> torch.Tensor:
        runner = self.runner
        return train_step(self.model, runner.sampler, runner.loss_fn, runner.optimizer, runner.config, users, positives)


def fresh_run(config, dataset, device: torch.device) -> Run:
    model = build_model(config, dataset, device)
    runner = RUNNERS.get(model.runner)(config, dataset, model, torch.Generator(device=device).manual_seed(0))
    if runner.sampler.rebuild_every == "epoch":
        runner.sampler.rebuild(None, model.item_table())
    order = torch.randperm(runner.items_of.numel(), generator=torch.Generator().manual_seed(1)).to(device)
    users_of, items_of = runner.users_of.index_select(0, order), runner.items_of.index_select(0, order)
    size, full = config.batch_size, runner.items_of.numel() // config.batch_size
    batches = [(users_of[s * size : (s + 1) * size], items_of[s * size : (s + 1) * size]) for s in range(full)]
    return Run(model, runner, batches)


class CapturedStep:
    """`step` captured on CUDA as one graph over static (users, positives) buffers and replayed: `__call__` copies
    a batch into the buffers and replays, returning the captured loss tensor (rewritten by each replay). On the CPU
    it calls `step` on the buffers (the dry run's stand-in for a replay)."""

    def __init__(self, step: Callable, example: tuple[torch.Tensor, torch.Tensor], generator: torch.Generator):
        self.step = step
        self.inputs = tuple(tensor.clone() for tensor in example)
        self.graph = None
        self.loss: torch.Tensor | None = None
        if self.inputs[0].is_cuda:
            self.graph = torch.cuda.CUDAGraph()
            if hasattr(self.graph, "register_generator_state"):
                self.graph.register_generator_state(generator)
            with torch.cuda.graph(self.graph):
                self.loss = step(*self.inputs)

    def __call__(self, users: torch.Tensor, positives: torch.Tensor) -> torch.Tensor:
        self.inputs[0].copy_(users)
        self.inputs[1].copy_(positives)
        if self.graph is None:
            return self.step(*self.inputs)
        self.graph.replay()
        return self.loss


def warmed_up(run: Run, warmup: int) -> None:
    """The first `warmup` batches' eager steps, on a side stream on CUDA (torch's rule before a capture)."""
    device = run.batches[0][0].device
    stream = torch.cuda.Stream() if device.type == "cuda" else None
    with torch.cuda.stream(stream) if stream is not None else contextlib.nullcontext():
        for users, positives in run.batches[:warmup]:
            run.step(users, positives)
    if stream is not None:
        torch.cuda.current_stream().wait_stream(stream)


def timed(steps: Callable[[], None], device: torch.device) -> float:
    train_speed.synchronize(device)
    started = time.perf_counter()
    steps()
    train_speed.synchronize(device)
    return time.perf_counter() - started


def weight_gap(one: torch.nn.Module, two: torch.nn.Module) -> float:
    return max(
        (a - b).abs().max().item() for a, b in zip(one.state_dict().values(), two.state_dict().values(), strict=True)
    )


@dataclass
class Outcome:
    label: str
    eager_s: float
    captured_s: float | None
    floor_s: float
    gap: float | None
    eager_loss: float
    captured_loss: float | None
    error: str = ""


def compared(config, dataset, device: torch.device, steps: int, warmup: int) -> tuple[float, float, float]:
    """Both runs through batches [0, warmup + steps): (largest weight difference, eager mean loss, captured mean loss
    over the steps after the warm-up)."""
    eager, captured = fresh_run(config, dataset, device), fresh_run(config, dataset, device)
    span = eager.batches[: warmup + steps]
    eager_losses = torch.stack([eager.step(users, positives) for users, positives in span])[warmup:]
    warmed_up(captured, warmup)
    step = CapturedStep(captured.step, span[warmup], captured.runner.generator)
    captured_losses = torch.stack([step(users, positives).clone() for users, positives in span[warmup:]])
    gap = weight_gap(eager.model, captured.model)
    return gap, eager_losses.mean().item(), captured_losses.mean().item()


def eager_times(config, dataset, device: torch.device, epochs: int) -> list[float]:
    """Seconds of an epoch's full batches run eagerly, `epochs` times, from a fresh run."""
    run = fresh_run(config, dataset, device)
    return [timed(lambda: [run.step(u, p) for u, p in run.batches], device) for _ in range(epochs)]


def replay_times(config, dataset, device: torch.device, warmup: int, epochs: int) -> list[float]:
    """Seconds of an epoch's full batches replayed, `epochs` times, from a fresh run after the warm-up and the
    capture."""
    run = fresh_run(config, dataset, device)
    warmed_up(run, warmup)
    step = CapturedStep(run.step, run.batches[warmup], run.runner.generator)
    return [timed(lambda: [step(u, p) for u, p in run.batches], device) for _ in range(epochs)]


def outcome(case: str, dataset, device: torch.device, options) -> Outcome:
    label, raw = train_speed.CASES[case]
    config = train_speed.case_config({**raw, "batch_size": options.batch_size}, "auto", device, options.dataset)
    label = f"{label} ({config.optimizer})"
    n_full = dataset.train.nnz // config.batch_size
    floor = train_speed.floor_epoch(n_full, config.batch_size, config.dim, train_speed.FLOOR_SHARED[case], device)
    floor_s = statistics.median(floor() for _ in range(options.epochs))
    eager_s = statistics.median(eager_times(config, dataset, device, options.epochs))
    try:
        gap, eager_loss, captured_loss = compared(config, dataset, device, options.steps, options.warmup)
        captured_s = statistics.median(replay_times(config, dataset, device, options.warmup, options.epochs))
    except Exception as failed:  # the probe's finding: what breaks a capture first
        first = str(failed).splitlines()[0] if str(failed) else ""
        return Outcome(label, eager_s, None, floor_s, None, math.nan, None, f"{type(failed).__name__}: {first}")
    return Outcome(label, eager_s, captured_s, floor_s, gap, eager_loss, captured_loss)


def report(found: Sequence[Outcome], device: torch.device, steps: int) -> str:
    lines = [
        f"device {device}; an epoch: the full batches; weights compared after the same {steps} steps",
        "",
        "| case | eager s/epoch | x floor | captured s/epoch | x floor | floor s | weight difference | mean loss eager "
        "/ captured |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for o in found:
        if o.error:
            lines.append(
                f"| {o.label} | {o.eager_s:.4f} | {o.eager_s / o.floor_s:.2f} | capture failed | | "
                f"{o.floor_s:.4f} | | |"
            )
            continue
        lines.append(
            f"| {o.label} | {o.eager_s:.4f} | {o.eager_s / o.floor_s:.2f} | {o.captured_s:.4f} | "
            f"{o.captured_s / o.floor_s:.2f} | {o.floor_s:.4f} | {o.gap:.3g} | {o.eager_loss:.6f} / "
            f"{o.captured_loss:.6f} |"
        )
    lines += ["", *(f"capture failed, {o.label}: {o.error}" for o in found if o.error)]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda", help="cuda, or cpu for the dry run")
    parser.add_argument("--data-root", type=Path, default=Path("data"))
    parser.add_argument("--dataset", default="gowalla")
    parser.add_argument("--cases", default=",".join(CASES), help=f"comma-separated, of: {', '.join(CASES)}")
    parser.add_argument("--batch-size", type=int, default=2048)
    parser.add_argument("--steps", type=int, default=50, help="steps compared after the warm-up")
    parser.add_argument("--warmup", type=int, default=3, help="eager steps before the capture")
    parser.add_argument("--epochs", type=int, default=3, help="timed epochs of each kind (their median)")
    quick.option(
        parser,
        device="cpu",
        data_root=lambda: quick.data_root("quick"),
        dataset="quick",
        batch_size=64,
        steps=3,
        epochs=1,
    )
    options = parser.parse_args(argv)
    cases = options.cases.split(",")
    if set(cases) - set(CASES):
        parser.error(f"--cases: each of {', '.join(CASES)}")
    set_compute_threads(1)
    device = resolve_device(options.device)
    dataset = load_dataset(options.data_root, options.dataset).to(device)
    found = []
    with forced_accelerator_branches() if device.type == "cpu" else contextlib.nullcontext():
        for case in cases:
            found.append(outcome(case, dataset, device, options))
            print(f"{found[-1].label}: {found[-1].error or 'captured'}", flush=True)
    print()
    print(report(found, device, options.steps))
    failed = [o for o in found if o.error or (device.type == "cpu" and o.gap != 0.0)]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
