"""Whether `recx sweep --jobs N` fits N runs at once on one GPU: each pending run's memory estimated from its
dataset's card and its settings, N times the largest (plus each worker's CUDA context) held against the device's
free memory before any run starts, so that a sweep that cannot fit is refused at once rather than with an
out-of-memory error hours in.

The estimate is an upper bound of the float32 tensors a run holds at its peak, in bytes:
    tables  4 (U + I) d          the weights, their gradient and Adam's two moments
    step    3 B (1 + n) (d + 1)  the gathered rows of a batch of B queries with n candidates each, their scores, and
                                 the gradients of both (a model trained a user at a time, Mult-VAE's runner: 3 B I,
                                 the scores over the whole catalogue; an alternating model's exact (cholesky) solver:
                                 2 G + 3 S, a chunk's gathered rows and their weighted copy within G elements and
                                 its systems and their factors within S, recx.models.als.layout, times 2 in float64)
    eval    3 E I                an evaluation batch of E users' scores over the I items, its mask and top-k work
times 4 bytes. Workers run in processes of their own, each with a CUDA context (CONTEXT_BYTES).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from recx.core.errors import RecxError
from recx.models.als.layout import ACCELERATOR_GATHERED, ACCELERATOR_SYSTEMS
from recx.models.registry import MODELS
from recx.sweeps.experiments import PlannedRun

CONTEXT_BYTES = 600 * 2**20  # a CUDA context with torch's kernels loaded, per process
FLOAT = 4
GIB = 2**30


@dataclass(frozen=True)
class RunMemory:
    """One run's estimate: its parts in bytes."""

    method: str
    dataset: str
    tables: int
    step: int
    evaluation: int

    @property
    def total(self) -> int:
        return self.tables + self.step + self.evaluation


def run_memory(run: PlannedRun, n_users: int, n_items: int) -> RunMemory:
    """The module docstring's estimate for `run` on a dataset of `n_users` users and `n_items` items."""
    config = run.config
    model = MODELS.get(config.model)
    if model.runner == "users":
        step = 3 * config.batch_size * n_items
    elif config.model_args.get("solver") == "cholesky":
        width = 2 if config.model_args.get("dtype") == "float64" else 1
        step = width * (2 * ACCELERATOR_GATHERED + 3 * ACCELERATOR_SYSTEMS)
    else:
        step = 3 * config.batch_size * (1 + config.n_negatives) * (config.dim + 1)
    return RunMemory(
        run.method,
        config.dataset,
        tables=FLOAT * 4 * (n_users + n_items) * config.dim,
        step=FLOAT * step,
        evaluation=FLOAT * 3 * config.eval_batch_size * n_items,
    )


def largest_run(runs: list[PlannedRun], data_root: Path) -> RunMemory | None:
    """The pending run of the largest estimate (None when no dataset card is there to read)."""
    largest = None
    for run in runs:
        card = data_root / run.config.dataset / "card.json"
        if not card.is_file():
            continue
        sizes = json.loads(card.read_text())
        estimate = run_memory(run, int(sizes["n_users"]), int(sizes["n_items"]))
        if largest is None or estimate.total > largest.total:
            largest = estimate
    return largest


def check_fits(runs: list[PlannedRun], data_root: Path, jobs: int, free_bytes: int, device: str) -> None:
    """RecxError when `jobs` runs at once, each as large as the largest pending run, do not fit `free_bytes`,
    naming the run, its estimate's parts, the device's free memory and the most jobs that fit."""
    largest = largest_run(runs, data_root)
    if largest is None or jobs < 2:
        return
    each = largest.total + CONTEXT_BYTES
    if jobs * each <= free_bytes:
        return
    fit = free_bytes // each
    parts = (
        f"tables {largest.tables / GIB:.2f}, a step {largest.step / GIB:.2f}, an evaluation batch "
        f"{largest.evaluation / GIB:.2f}, a CUDA context {CONTEXT_BYTES / GIB:.2f} GiB"
    )
    advice = (
        f"run at most --jobs {fit}" if fit >= 1 else "one run alone does not fit: lower eval_batch_size or batch_size"
    )
    raise RecxError(
        f"--jobs {jobs} on {device}: {jobs} runs at once need about {jobs * each / GIB:.1f} GiB (the largest, method "
        f"{largest.method!r} on {largest.dataset!r}: {parts}), and {device} has {free_bytes / GIB:.1f} GiB free; "
        f"{advice}"
    )
