"""What a captured training step would freeze, found on the CPU: each path's step recorded operator by operator on
two consecutive full batches, and every difference between the two listed (issue 58 §2's groundwork).

A CUDA graph (torch.cuda.CUDAGraph, or torch.compile's "reduce-overhead") replays the kernels of the step it captured
with the arguments they had then: the same operators, the same shapes and the same Python scalars. A step whose
second batch dispatches another sequence of operators, or the same operators with another scalar (a step count, a
learning rate, a bias correction computed on the host), would replay the first batch's values and train wrongly,
silently. So two consecutive steps of the same batch size must dispatch exactly the same calls for a capture to be
right; the tensors' values may differ (they are the graph's inputs and state), but for a tensor made from Python
data in the step (`torch.tensor(x)`, aten's lift_fresh), which a graph keeps as the constant it was at capture:
its first values are compared too. This bench records, below autograd
and with recx's accelerator branches forced (the branches CUDA takes), every operator call of a step as its name,
each tensor argument's shape, dtype and layout, and every other argument's value, for two consecutive batches after
`--warmup` steps, and prints per path: the calls a step, whether the two steps match, and the first differences.
It also counts what a capture needs to know beyond that: the calls that draw from a torch.Generator (on CUDA each
generator must be registered with the graph, CUDAGraph.register_generator_state, for a replay to draw anew) and the
host reads (none may happen inside a capture).

    python bench/graph_safety.py [--data-root build/dispatch-count/data] [--source ../shared/data]
                                 [--paths prism,bir,hns,rg-sm,fastvae,defaults] [--warmup 2] [--show 5]
    python bench/graph_safety.py --quick   # tiny synthetic data (CI: seconds)
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import dispatch_count
import paper_paths
import torch
import train_speed
from dispatch_count import HOST_READS, NOT_LAUNCHES, cupy_stand_ins, datasets_of, prepared, synthetic_sources
from headline_data import EXPERIMENTS, ROOT, SHARED_DATA
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from recx.core.device_paths import forced_accelerator_branches
from recx.core.threads import set_compute_threads
from recx.data.dataset import load_dataset
from recx.training.build import build_model
from recx.training.runners.registry import RUNNERS

GROUPS = ("prism", "bir", "hns", "rg-sm", "fastvae", "defaults")
HOST_VALUES = 64  # the values of a tensor made from Python data that are compared


def storage_of(tensor: torch.Tensor) -> int | None:
    """The address of a strided tensor's storage (its views share it); None for a sparse or empty one."""
    if tensor.layout != torch.strided or tensor.numel() == 0:
        return None
    return tensor.untyped_storage().data_ptr()


@dataclass
class Recording:
    """One step's operator calls in order: (operator, its arguments as `Recorder.shown`), the calls that draw from a
    torch.Generator and the host reads."""

    calls: list[tuple[str, object]] = field(default_factory=list)
    draws: int = 0
    host_reads: int = 0
    from_python: int = 0


class Recorder(TorchDispatchMode):
    """Records every operator call that moves tensor data (dispatch_count's launches) into `recording`, each tensor
    argument with where its storage comes from: the step's `inputs` (by position: a graph's static inputs, copied
    in before each replay), "made" by an earlier call of the step (the graph's own memory), or "held" at its
    address (a parameter, optimizer state, a sampler's table: read where it was at capture, so it must be the same
    storage at every step; a tensor the step's code swaps in from outside, e.g. a cache replaced by a new tensor each
    step, has another address the next step)."""

    def __init__(self, inputs: Sequence[torch.Tensor]) -> None:
        super().__init__()
        self.recording = Recording()
        self.paused = 0
        self.inputs = {storage_of(tensor): position for position, tensor in enumerate(inputs)}
        self.made: set[int] = set()
        self.kept: list[torch.Tensor] = []  # what the step made, kept alive so no later tensor reuses its address

    def shown(self, value) -> object:
        """An argument as the graph would keep it: a tensor by its shape, dtype, layout and origin (its values are
        the graph's to read), a generator by its device, anything else by its value."""
        if isinstance(value, torch.Tensor):
            storage = storage_of(value)
            if storage is None:
                origin: object = value.layout == torch.strided and "empty" or "sparse"
            elif storage in self.inputs:
                origin = ("input", self.inputs[storage])
            elif storage in self.made:
                origin = "made"
            else:
                origin = ("held", storage, value.item() if value.dim() == 0 else None)
            return ("tensor", tuple(value.shape), str(value.dtype), str(value.layout), origin)
        if isinstance(value, torch.Generator):
            return ("generator", str(value.device))
        if isinstance(value, (list, tuple)):
            return tuple(self.shown(item) for item in value)
        return value

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = func.__name__.split(".")[0]
        if not self.paused and name == "lift_fresh":  # a tensor made from Python data: a constant in a graph
            self.recording.calls.append((str(func), (tuple(args[0].flatten().tolist()[:HOST_VALUES]), ())))
            self.recording.from_python += 1
        elif not self.paused and func.namespace == "aten" and not func.is_view and name not in NOT_LAUNCHES:
            if name in HOST_READS:
                self.recording.host_reads += 1
            arguments = (self.shown(list(args)), self.shown(sorted(kwargs.items())))
            self.recording.calls.append((str(func), arguments))
            if isinstance(kwargs.get("generator"), torch.Generator):
                self.recording.draws += 1
        result = func(*args, **kwargs)
        read = {storage_of(t) for t in tree_flatten((args, kwargs))[0] if isinstance(t, torch.Tensor)}
        for tensor in tree_flatten(result)[0]:
            if isinstance(tensor, torch.Tensor) and storage_of(tensor) not in read | {None}:
                self.made.add(storage_of(tensor))
                self.kept.append(tensor)
        return result

    @contextlib.contextmanager
    def stand_in(self, name: str, launches: int):
        """A CuPy kernel's torch reference recorded as the kernel's one call (dispatch_count.cupy_stand_ins)."""
        self.paused += 1
        try:
            yield
        finally:
            self.paused -= 1
            if not self.paused:
                self.recording.calls.append((name, ()))


def recorded(step: Callable, batch: tuple) -> Recording:
    recorder = Recorder([value for value in batch if isinstance(value, torch.Tensor)])
    with recorder, cupy_stand_ins(recorder):
        step(*batch)
    return recorder.recording


def same(one: object, two: object) -> bool:
    """Whether two recorded arguments would replay alike: equal, but for a held 0-dim tensor at another address with
    the same value (a Python scalar torch wraps anew each step, `x[i] = True`: a constant under capture too)."""
    if isinstance(one, tuple) and isinstance(two, tuple) and len(one) == len(two):
        if len(one) == 3 and one[0] == two[0] == "held" and one[2] is not None and one[1] != two[1]:
            return one[2] == two[2]
        if len(one) == 3 and one[0] == two[0] == "held":
            return one[1] == two[1]
        return all(same(a, b) for a, b in zip(one, two, strict=True))
    return one == two


def differences(first: Recording, second: Recording, show: int) -> list[str]:
    """The first `show` calls where the two steps differ, each as 'call i: operator (what differs)'."""
    found = []
    if len(first.calls) != len(second.calls):
        found.append(f"{len(first.calls)} calls, then {len(second.calls)}")
    for index, (one, two) in enumerate(zip(first.calls, second.calls, strict=False)):  # unequal counts said above
        if one[0] == two[0] and same(one[1], two[1]):
            continue
        if one[0] != two[0]:
            found.append(f"call {index}: {one[0]}, then {two[0]}")
        else:
            changed = [
                f"argument {position}: {a!r} -> {b!r}"
                for position, (a, b) in enumerate(zip(one[1][0], two[1][0], strict=False))
                if not same(a, b)
            ]
            if not same(one[1][1], two[1][1]):
                changed.append(f"keywords {one[1][1]!r} -> {two[1][1]!r}")
            found.append(f"call {index}: {one[0]} ({'; '.join(changed)})")
        if len(found) >= show:
            break
    return found


@dataclass
class Verdict:
    path: str
    calls: int
    same: bool
    draws: int
    from_python: int
    host_reads: int
    found: list[str]


def verdict(path: str, step: Callable, batches: Sequence[tuple], warmup: int, show: int) -> Verdict:
    for batch in batches[:warmup]:
        step(*batch)
    first, second = recorded(step, batches[warmup]), recorded(step, batches[warmup + 1])
    found = differences(first, second, show)
    return Verdict(
        path, len(first.calls), not found, first.draws, first.from_python, first.host_reads + second.host_reads, found
    )


def interaction_verdict(options, name: str, method: str, dataset: str) -> Verdict:
    path = paper_paths.interaction_path(options.data_root, EXPERIMENTS, name, method, dataset, options.warmup + 2)
    return verdict(f"{name} {method}", path.recx_step, path.batches, options.warmup, options.show)


def users_verdict(options, name: str, method: str, dataset: str) -> Verdict:
    path = paper_paths.users_path(options.data_root, EXPERIMENTS, name, method, dataset, options.warmup + 2)
    indptr = path.runner.model.history_indptr
    sized = [(users, int((indptr[users + 1] - indptr[users]).sum())) for (users,) in path.batches]
    return verdict(f"{name} {method}", path.recx_step, sized, options.warmup, options.show)


def default_verdict(options, case: str) -> Verdict:
    label, raw = train_speed.CASES[case]
    dataset = load_dataset(options.data_root, "gowalla")
    config = train_speed.case_config(raw, "auto", torch.device("cpu"))
    model = build_model(config, dataset, torch.device("cpu"))
    runner = RUNNERS.get(model.runner)(config, dataset, model, torch.Generator().manual_seed(0))
    batches = paper_paths.run_batches(runner, config.batch_size, options.warmup + 2)
    step = functools.partial(paper_paths.runner_step, runner)
    return verdict(f"default: {label} ({config.optimizer})", step, batches, options.warmup, options.show)


def verdicts_of(options, group: str):
    if group == "defaults":
        for case in dispatch_count.DEFAULT_CASES:
            yield default_verdict(options, case)
        return
    builder = users_verdict if group == "fastvae" else interaction_verdict
    for name, method, dataset in paper_paths.PATHS[group]:
        yield builder(options, name, method, dataset)


def table(verdicts: Sequence[Verdict]) -> str:
    lines = [
        "| path | calls a step | two steps the same | draws from a generator | tensors from Python data | host reads |",
        "| --- | ---: | --- | ---: | ---: | ---: |",
    ]
    for v in verdicts:
        lines.append(
            f"| {v.path} | {v.calls} | {'yes' if v.same else '**no**'} | {v.draws} | {v.from_python} | {v.host_reads} |"
        )
    lines += ["", "Where the two steps differ (the first calls):", ""]
    lines += [f"- {v.path}: " + "; ".join(v.found) for v in verdicts if v.found] or ["- nowhere"]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-root", type=Path, default=ROOT / "build" / "dispatch-count" / "data")
    parser.add_argument("--source", type=Path, default=SHARED_DATA, help="the datasets' sources (../shared/data)")
    parser.add_argument("--paths", default=",".join(GROUPS), help=f"comma-separated, of: {', '.join(GROUPS)}")
    parser.add_argument("--warmup", type=int, default=2, help="steps before the two recorded (the optimizers' state)")
    parser.add_argument("--show", type=int, default=5, help="differences listed a path")
    parser.add_argument("--quick", action="store_true", help="tiny synthetic data (CI)")
    options = parser.parse_args(argv)
    groups = options.paths.split(",")
    unknown = sorted(set(groups) - set(GROUPS))
    if unknown:
        parser.error(f"--paths {','.join(unknown)}: not one of {', '.join(GROUPS)}")
    set_compute_threads(1)
    with contextlib.ExitStack() as stack:
        if options.quick:
            scratch = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="recx-graph-")))
            options.source, options.data_root = scratch / "source", scratch / "data"
            options.warmup = 1
            synthetic_sources(options.source, datasets_of(groups))
        prepared(datasets_of(groups), options.source, options.data_root)
        verdicts = []
        with forced_accelerator_branches():
            for group in groups:
                for found in verdicts_of(options, group):
                    verdicts.append(found)
                    print(f"{found.path}: {found.calls} calls, the same: {found.same}", flush=True)
    print()
    print(table(verdicts))
    return 0


if __name__ == "__main__":
    sys.exit(main())
