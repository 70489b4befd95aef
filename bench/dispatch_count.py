"""Launches per step, counted on the CPU: the operators each paper path's training step dispatches against its
plain-torch floor's, and an evaluation batch's against the bare product + top-k (issue 58 §1).

On a GPU a step's cost at these sizes is its number of kernel launches, not its flops; this bench counts them
without a GPU. What is counted: every operator call that reaches the dispatcher below autograd (a
TorchDispatchMode: the forward's operators, the backward's as the autograd engine runs them, the optimizer's), in
the branches CUDA takes (recx.core.device_paths' accelerator branches forced, so no compiled CPU kernel hides work
and no host-only shortcut is taken). Each call is one of
- a launch: an aten operator that computes or writes tensor data (on CUDA one kernel as a first approximation: a
  few launch several, e.g. sort, unique, multinomial, the sparse embedding backward, and the foreach/fused
  optimizer operators one per group of tensors; an operator on tensors CUDA keeps on the host, e.g. foreach Adam's
  step counters, is counted all the same);
- not counted: views and aliases (an argument aliased without a write in the schema: view, t, expand, slice,
  select, detach, split, ..., and _unsafe_view), allocations without a fill (empty, empty_strided, empty_like,
  new_empty, ...), metadata (set_, resize_, the sparse constructors) and other namespaces (the profiler's marks);
- a host read (`_local_scalar_dense`: .item(), .tolist(), a tensor in an `if`; `_linalg_check_errors`, linalg's
  check of its error codes), listed apart: on CUDA a synchronisation, not a launch (foreach Adam's reads of its
  step counters are reads of host tensors on CUDA too, no synchronisation).
A CuPy kernel, which CUDA runs where the CPU runs its torch reference (recx.kernels: the alias draw, CSR
membership, the MIDX draw), is counted as the launches of its CuPy wrapper (`STAND_INS`); `--torch-kernels`
counts the torch reference instead.

Rows: each path of bench/paper_paths.py (PATHS: its `<paper>-headline` method as `recx sweep` resolves it;
`train_step`, or the users runner's loop body, against paper_paths.Floor / VAEFloor; an RG² or RG× iteration
against the exact half-steps' floor), the MF defaults of bench/train_speed.py (bpr, dns, softmax on Gowalla:
`train_step` against train_speed.floor_step, the score products' forward and backward alone, no optimizer) and
one evaluation batch (recx.eval.evaluator.evaluate on Gowalla's test split at bench/eval_speed.py's K and batch
size, per batch, against eval_speed.bare_topk). The floors' Adam runs with foreach=True, the implementation torch
picks on CUDA (on the CPU it defaults to a loop over the tensors). A step is counted after `--warmup` uncounted
ones (the optimizers' state is made on the first), averaged over `--steps`.

    python bench/dispatch_count.py [--data-root build/dispatch-count/data] [--source ../shared/data]
                                   [--paths prism,bir,hns,rg-sm,rg,fastvae,defaults,eval] [--steps 2] [--detail]
    python bench/dispatch_count.py --quick   # tiny synthetic data (CI: seconds)

Datasets missing from --data-root are prepared there from --source with their experiments.yaml recipes.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import math
import sys
import tempfile
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import eval_speed
import paper_paths
import torch
import train_speed
from headline_data import EXPERIMENTS, ROOT, SHARED_DATA, packed_path, synthetic_mat
from torch.utils._python_dispatch import TorchDispatchMode

from recx.core.device_paths import forced_accelerator_branches
from recx.core.threads import set_compute_threads
from recx.data.dataset import load_dataset
from recx.data.prepare import PrepareOptions, prepare
from recx.eval.evaluator import evaluate
from recx.sweeps.experiments import load_experiments
from recx.training.build import build_model
from recx.training.runners.registry import RUNNERS

GROUPS = ("prism", "bir", "hns", "rg-sm", "rg", "fastvae", "defaults", "eval")
DEFAULT_CASES = ("bpr", "dns", "softmax")  # train_speed's MF cases, each with its floor
EVAL_BATCH = 1024  # eval_speed's default batch size, the run config's eval_batch_size
TARGET = 1.5
NOT_LAUNCHES = {  # aten operators that move no tensor data: allocations, metadata, views the schema does not mark
    "empty",
    "empty_strided",
    "empty_like",
    "new_empty",
    "new_empty_strided",
    "_unsafe_view",
    "_reshape_alias",
    "lift_fresh",
    "set_",
    "resize_",
    "_sparse_coo_tensor_with_dims_and_tensors",
    "_coalesced_",
    "squeeze_",
    "unsqueeze_",
    "t_",
    "transpose_",
    "as_strided_",
    "detach_",
    "_nnz",
    "sparse_dim",
    "dense_dim",
    "is_coalesced",
}
HOST_READS = {"_local_scalar_dense", "_linalg_check_errors"}  # .item() and the like; linalg's error-code check
# module, function: the CuPy wrapper's launches on CUDA (recx/kernels/cupy_kernels.py), counted in place of the
# torch reference the CPU runs: the alias draw and the CSR membership one kernel each; the MIDX draw its kernel and
# the max, subtraction and exponential of the cells' joint weights before it.
STAND_INS = {
    ("recx.kernels.alias_table", "draw_torch"): ("cupy alias_draw", 1),
    ("recx.kernels.membership", "contains"): ("cupy csr_contains", 1),
    ("recx.kernels.midx_draw", "draw_torch"): ("cupy midx_draw", 4),
}


class DispatchCount(TorchDispatchMode):
    """Counts the operator calls reaching the dispatcher while active, by kind (module docstring): `launches` and
    `reads` by operator name, `others` the calls not counted."""

    def __init__(self) -> None:
        super().__init__()
        self.launches: Counter[str] = Counter()
        self.reads: Counter[str] = Counter()
        self.others: Counter[str] = Counter()
        self.paused = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if not self.paused:
            self.kind(func)[func.__name__.split(".")[0] if func.namespace == "aten" else str(func)] += 1
        return func(*args, **(kwargs or {}))

    def kind(self, func) -> Counter[str]:
        name = func.__name__.split(".")[0]
        if func.namespace != "aten" or func.is_view or name in NOT_LAUNCHES:
            return self.others
        return self.reads if name in HOST_READS else self.launches

    @contextlib.contextmanager
    def stand_in(self, name: str, launches: int) -> Iterator[None]:
        """Within the block nothing is counted but `launches` launches of `name`."""
        self.paused += 1
        try:
            yield
        finally:
            self.paused -= 1
            if not self.paused:
                self.launches[name] += launches


@contextlib.contextmanager
def cupy_stand_ins(counter: DispatchCount) -> Iterator[None]:
    """Each STAND_INS function, while the block runs, counted as its CuPy kernel's launches."""
    import importlib

    saved = []
    for (module_name, attribute), (name, launches) in STAND_INS.items():
        module = importlib.import_module(module_name)
        original = getattr(module, attribute)

        def standing(*args, _original=original, _name=name, _launches=launches, **kwargs):
            with counter.stand_in(_name, _launches):
                return _original(*args, **kwargs)

        saved.append((module, attribute, original))
        setattr(module, attribute, standing)
    try:
        yield
    finally:
        for module, attribute, original in saved:
            setattr(module, attribute, original)


@dataclass
class Count:
    """Operator calls of one side, per step: launches and host reads by operator name."""

    steps: int
    launches: Counter[str] = field(default_factory=Counter)
    reads: Counter[str] = field(default_factory=Counter)

    @property
    def per_step(self) -> float:
        return sum(self.launches.values()) / self.steps

    @property
    def reads_per_step(self) -> float:
        return sum(self.reads.values()) / self.steps


def counted(step: Callable, batches: Sequence[tuple], warmup: int, per: int = 1, torch_kernels: bool = False) -> Count:
    """`step(*batch)` over `batches`, the first `warmup` uncounted; the rest counted, as `per` steps each."""
    for batch in batches[:warmup]:
        step(*batch)
    counter = DispatchCount()
    with counter, contextlib.nullcontext() if torch_kernels else cupy_stand_ins(counter):
        for batch in batches[warmup:]:
            step(*batch)
    return Count((len(batches) - warmup) * per, counter.launches, counter.reads)


@dataclass
class Row:
    path: str
    recx: Count
    floor: Count
    note: str = ""

    @property
    def ratio(self) -> float:
        return self.recx.per_step / self.floor.per_step

    def excess(self, top: int) -> list[tuple[str, float]]:
        """The operators recx calls more often than the floor, most first: (name, extra calls per step)."""
        names = set(self.recx.launches) | set(self.floor.launches)
        extra = {
            n: (self.recx.launches[n] / self.recx.steps - self.floor.launches[n] / self.floor.steps) for n in names
        }
        return sorted(((n, v) for n, v in extra.items() if v > 0), key=lambda item: (-item[1], item[0]))[:top]


def foreach_adam(optimizer: torch.optim.Optimizer) -> None:
    """torch.optim.Adam as torch picks it on CUDA (foreach) rather than on the CPU (a loop over the tensors)."""
    for group in optimizer.param_groups:
        if group.get("fused") is not True:
            group["foreach"] = True


def interaction_row(options, name: str, method: str, dataset: str) -> Row:
    path = paper_paths.interaction_path(
        options.data_root, EXPERIMENTS, name, method, dataset, options.warmup + options.steps
    )
    foreach_adam(path.floor.optimizer)
    kernels = options.torch_kernels
    return Row(
        f"{name} {method}",
        counted(path.recx_step, path.batches, options.warmup, torch_kernels=kernels),
        counted(path.floor.step, path.batches, options.warmup, torch_kernels=kernels),
    )


def users_row(options, name: str, method: str, dataset: str) -> Row:
    path = paper_paths.users_path(options.data_root, EXPERIMENTS, name, method, dataset, options.warmup + options.steps)
    indptr = path.runner.model.history_indptr
    sized = [(users, int((indptr[users + 1] - indptr[users]).sum())) for (users,) in path.batches]
    kernels = options.torch_kernels
    return Row(
        f"{name} {method}",
        counted(path.recx_step, sized, options.warmup, torch_kernels=kernels),
        counted(path.floor.step, path.batches, options.warmup, torch_kernels=kernels),
        "the epoch's one read of its history sizes left out, as train_epoch does",
    )


def alternating_row(options, name: str, method: str, dataset: str) -> Row:
    iteration, floor = paper_paths.alternating_path(options.data_root, EXPERIMENTS, name, method, dataset)
    kernels = options.torch_kernels
    return Row(
        f"{name} {method}",
        counted(iteration, [()] * 2, 1, torch_kernels=kernels),
        counted(floor, [()] * 2, 1, torch_kernels=kernels),
        "a step: one iteration, both half-steps",
    )


def default_row(options, case: str) -> Row:
    """A train_speed MF case as `recx train` resolves it on Gowalla, against its floor (the score products alone)."""
    label, raw = train_speed.CASES[case]
    device = torch.device("cpu")
    dataset = load_dataset(options.data_root, "gowalla")
    config = train_speed.case_config(raw, "auto", device)
    model = build_model(config, dataset, device)
    runner = RUNNERS.get(model.runner)(config, dataset, model, torch.Generator().manual_seed(0))
    batches = paper_paths.run_batches(runner, config.batch_size, options.warmup + options.steps)
    step = functools.partial(paper_paths.runner_step, runner)
    floor = train_speed.floor_step(config.batch_size, config.dim, train_speed.FLOOR_SHARED[raw["loss"]], device)
    kernels = options.torch_kernels
    return Row(
        f"default: {label} ({config.optimizer})",
        counted(step, batches, options.warmup, torch_kernels=kernels),
        counted(lambda *_: floor(), batches, options.warmup, torch_kernels=kernels),
        "floor: the score products' forward and backward, no draws, no optimizer",
    )


def evaluation_row(options) -> Row:
    """recx's whole evaluation of Gowalla's test split and eval_speed's bare product + top-k of the same users, each
    counted once and divided by the number of batches."""
    device = torch.device("cpu")
    dataset = load_dataset(options.data_root, "gowalla")
    model = eval_speed.evaluated_model(dataset, device)
    users = torch.nonzero(dataset.test.row_lengths() > 0).flatten()
    query, items = model.query(users).detach(), model.item_table().detach()
    n_batches = math.ceil(users.numel() / EVAL_BATCH)
    kernels = options.torch_kernels
    ours = lambda: evaluate(model, dataset, "test", eval_speed.KS, EVAL_BATCH)  # noqa: E731
    theirs = lambda: eval_speed.bare_topk(query, items, EVAL_BATCH, max(eval_speed.KS))  # noqa: E731
    return Row(
        f"evaluation: a batch of {EVAL_BATCH:,} users",
        counted(ours, [()] * 2, 1, n_batches, torch_kernels=kernels),
        counted(theirs, [()] * 2, 1, n_batches, torch_kernels=kernels),
        f"one evaluation ({users.numel():,} users, K {eval_speed.KS}) divided by its {n_batches} batch(es)",
    )


def rows_of(options, group: str) -> Iterator[Row]:
    if group == "defaults":
        for case in DEFAULT_CASES:
            yield default_row(options, case)
    elif group == "eval":
        yield evaluation_row(options)
    else:
        builder = {"rg": alternating_row, "fastvae": users_row}.get(group, interaction_row)
        for name, method, dataset in paper_paths.PATHS[group]:
            yield builder(options, name, method, dataset)


def datasets_of(groups: Sequence[str]) -> list[str]:
    names = {dataset for group in groups if group in paper_paths.PATHS for _, _, dataset in paper_paths.PATHS[group]}
    return sorted(names | ({"gowalla"} if {"defaults", "eval"} & set(groups) else set()))


def prepared(names: Sequence[str], source: Path, root: Path) -> None:
    """Each dataset of `names` missing from `root` prepared there with its experiments.yaml recipe, its source file
    read from `source` (a folder laid out as ../shared/data)."""
    recipes = load_experiments(EXPERIMENTS)["datasets"]
    for name in names:
        if (root / name / "card.json").is_file():
            continue
        recipe = dict(recipes[name])
        recipe["source"] = source / packed_path(recipe)
        prepare(name, PrepareOptions(**recipe), root)
        print(f"prepared {name} in {root}", flush=True)


def synthetic_sources(folder: Path, names: Sequence[str]) -> None:
    """Tiny sources in ../shared/data's layout for `names` (--quick): LightGCN lines for gowalla, .mat files large
    enough for the headline settings (more items than 8x DNS's 200 candidates, so the same branches are taken)."""
    from gpu_pack import synthetic_source

    synthetic_source(folder, n_users=600, n_items=3000)
    recipes = load_experiments(EXPERIMENTS)["datasets"]
    mats = sorted({packed_path(recipes[name]) for name in names} - {"gowalla"})
    for seed, path in enumerate(mats):
        synthetic_mat(folder / path, n_users=1000, n_items=2500, per_user=60, seed=seed)


def figure(value: float) -> str:
    """A count as printed: whole, else to one decimal."""
    return f"{value:.0f}" if value == round(value) else f"{value:.1f}"


def table(rows: Sequence[Row], top: int) -> str:
    lines = [
        "| path | recx ops/step | floor ops/step | recx / floor | host reads recx / floor |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for row in rows:
        reads = f"{figure(row.recx.reads_per_step)} / {figure(row.floor.reads_per_step)}"
        lines.append(
            f"| {row.path} | {figure(row.recx.per_step)} | {figure(row.floor.per_step)} | {row.ratio:.2f} | {reads} |"
        )
    over = [row for row in rows if row.ratio > TARGET]
    lines += ["", f"Above {TARGET}x, the operators recx calls more often than its floor (extra calls a step):", ""]
    for row in over:
        extra = ", ".join(f"{name} +{figure(value)}" for name, value in row.excess(top))
        lines.append(f"- {row.path} ({row.ratio:.2f}x): {extra}")
    if not over:
        lines.append("- none")
    notes = [f"- {row.path}: {row.note}" for row in rows if row.note]
    return "\n".join(lines + ["", "Notes:", *notes])


def detail(row: Row) -> str:
    parts = []
    for side, count in (("recx", row.recx), ("floor", row.floor)):
        ops = ", ".join(f"{name} {figure(value / count.steps)}" for name, value in count.launches.most_common())
        reads = ", ".join(f"{name} {figure(value / count.steps)}" for name, value in count.reads.most_common())
        parts.append(f"  {side}: {ops}" + (f"; host reads: {reads}" if reads else ""))
    return "\n".join([row.path, *parts])


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-root", type=Path, default=ROOT / "build" / "dispatch-count" / "data")
    parser.add_argument("--source", type=Path, default=SHARED_DATA, help="the datasets' sources (../shared/data)")
    parser.add_argument("--paths", default=",".join(GROUPS), help=f"comma-separated, of: {', '.join(GROUPS)}")
    parser.add_argument("--steps", type=int, default=2, help="counted steps a path, after --warmup")
    parser.add_argument("--warmup", type=int, default=2, help="uncounted steps first (the optimizers' state)")
    parser.add_argument("--top", type=int, default=6, help="operators listed for a path above the target")
    parser.add_argument("--detail", action="store_true", help="every path's operators, recx's and the floor's")
    parser.add_argument("--torch-kernels", action="store_true", help="count the CuPy kernels' torch references")
    parser.add_argument("--quick", action="store_true", help="tiny synthetic data, one counted step (CI)")
    options = parser.parse_args(argv)
    groups = options.paths.split(",")
    unknown = sorted(set(groups) - set(GROUPS))
    if unknown:
        parser.error(f"--paths {','.join(unknown)}: not one of {', '.join(GROUPS)}")
    set_compute_threads(1)
    with contextlib.ExitStack() as stack:
        if options.quick:
            scratch = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="recx-dispatch-")))
            options.source, options.data_root = scratch / "source", scratch / "data"
            options.steps, options.warmup = 1, 1
            synthetic_sources(options.source, datasets_of(groups))
        prepared(datasets_of(groups), options.source, options.data_root)
        rows = []
        with forced_accelerator_branches():
            for group in groups:
                for row in rows_of(options, group):
                    rows.append(row)
                    print(
                        f"{row.path}: recx {figure(row.recx.per_step)}, floor {figure(row.floor.per_step)}", flush=True
                    )
                    if options.detail:
                        print(detail(row), flush=True)
    print()
    print(table(rows, options.top))
    return 0


if __name__ == "__main__":
    sys.exit(main())
