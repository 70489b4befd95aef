"""Checkpoints of a training run: everything that decides the rest of the run, written whole after an epoch.

A checkpoint holds the early-stopping state (epochs done, best score, best epoch and its weights, validations
without improvement), the model's weights, the epoch runner (its optimizer and optimizer state, sampler with its
caches, tables or codebooks, loss parameters, learning-rate schedule and random generator) and the global random
generators. The runner is pickled with the run's config, dataset, model and the model's parameters and buffers
replaced by references, and restored onto the ones the resuming process builds (the same run id: the same
configuration and data), so that the optimizer's state stays attached to the model's own parameters. Training on
from epoch k gives the weights and results of an uninterrupted run, bit for bit on the CPU (tests/test_resume.py).
The file is the sha256 of the pickled state followed by the state, written whole; a changed byte is reported on
load.
"""

from __future__ import annotations

import hashlib
import io
import os
import pickle
from dataclasses import dataclass
from pathlib import Path

import torch

from recx.core.errors import RecxError

DIGEST = hashlib.sha256().digest_size
# Modules whose pickled classes moved since an older recx wrote a checkpoint, by their module today, and packages
# renamed (recx.train became recx.training, so that `recx.train` is the front door's function): the run still
# resumes (tests/test_resume.py::test_a_checkpoint_of_the_recx_before_the_layers_resumes).
MOVED_MODULES = {"recx.samplers.kernel": "recx.samplers.quadratic_kernel", "recx.train.optim": "recx.optim.optimizers"}
MOVED_PACKAGES = {"recx.train.": "recx.training."}


def moved(module: str) -> str:
    """Where a pickled class's module is today."""
    if module in MOVED_MODULES:
        return MOVED_MODULES[module]
    for old, new in MOVED_PACKAGES.items():
        if module.startswith(old):
            return new + module[len(old) :]
    return module


@dataclass
class LoopState:
    """The early-stopping state after `epoch` epochs."""

    epoch: int = 0
    best_score: float = float("-inf")
    best_epoch: int = 0
    best_state: dict | None = None
    waited: int = 0


def _shared_objects(runner) -> dict[str, object]:
    """Objects the resuming process rebuilds itself, by a stable name: config, dataset (and its split tensors),
    model, and the model's parameters and buffers."""
    objects: dict[str, object] = {"config": runner.config, "dataset": runner.dataset, "model": runner.model}
    objects.update({f"parameter:{name}": p for name, p in runner.model.named_parameters()})
    objects.update({f"buffer:{name}": b for name, b in runner.model.named_buffers()})
    for split in ("train", "valid", "test"):
        csr = getattr(runner.dataset, split)
        if csr is not None:
            objects.update({f"{split}:indptr": csr.indptr, f"{split}:indices": csr.indices})
    return objects


class _Pickler(pickle.Pickler):
    def __init__(self, file, names: dict[int, str]):
        super().__init__(file, protocol=pickle.HIGHEST_PROTOCOL)
        self.names = names

    def persistent_id(self, obj):
        return self.names.get(id(obj))


class _Unpickler(pickle.Unpickler):
    def __init__(self, file, objects: dict[str, object]):
        super().__init__(file)
        self.objects = objects

    def find_class(self, module, name):
        return super().find_class(moved(module), name)

    def persistent_load(self, name):
        if name not in self.objects:
            raise pickle.UnpicklingError(f"the checkpoint refers to {name!r}, which this run does not have")
        return self.objects[name]


def save(path: Path, runner, loop: LoopState) -> None:
    """Write the checkpoint whole: a temporary file in the same folder, flushed, then renamed over `path`."""
    objects = _shared_objects(runner)
    payload = {
        "loop": loop,
        "model": runner.model.state_dict(),
        "runner": runner,
        "rng": torch.get_rng_state(),
        "cuda_rng": torch.cuda.get_rng_state_all() if torch.cuda.is_initialized() else None,
    }
    buffer = io.BytesIO()
    _Pickler(buffer, {id(obj): name for name, obj in objects.items()}).dump(payload)
    partial = path.with_name(f".{path.name}.partial-{os.getpid()}")
    try:
        with open(partial, "wb") as handle:
            handle.write(hashlib.sha256(buffer.getbuffer()).digest())
            handle.write(buffer.getbuffer())
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(partial, path)
    finally:
        partial.unlink(missing_ok=True)


def load(path: Path, runner) -> tuple[object, LoopState]:
    """(the checkpoint's runner, restored onto `runner`'s config, dataset and model; its early-stopping state). The
    model's weights and the global random generators are restored in place. A damaged file is a RecxError."""
    try:
        data = path.read_bytes()
        if hashlib.sha256(data[DIGEST:]).digest() != data[:DIGEST]:
            raise RecxError(
                f"{path}: its content does not match its checksum (changed or damaged since it was written)"
            )
        payload = _Unpickler(io.BytesIO(data[DIGEST:]), _shared_objects(runner)).load()
        runner.model.load_state_dict(payload["model"])
    except (
        OSError,
        EOFError,
        pickle.UnpicklingError,
        AttributeError,
        KeyError,
        TypeError,
        ValueError,
        RuntimeError,
        ImportError,
    ) as exc:
        raise RecxError(f"{path}: unreadable checkpoint ({type(exc).__name__}: {exc})") from None
    torch.set_rng_state(payload["rng"])
    if payload["cuda_rng"] is not None and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(payload["cuda_rng"])
    return payload["runner"], payload["loop"]
