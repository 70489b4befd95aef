"""Checkpoints of a training run: everything that decides the rest of the run, written whole after an epoch.

A checkpoint holds the early-stopping state (epochs done, best score, best epoch and its weights, validations
without improvement), the model's weights, the runner (its optimizer and optimizer state, sampler with its
caches, tables or codebooks, loss parameters, learning-rate schedule and random generator) and the global random
generators. The runner is pickled with the run's config, dataset, model and the model's parameters and buffers
replaced by references, and restored onto the ones the resuming process builds (the same run id: the same
configuration and data), so that the optimizer's state stays attached to the model's own parameters. Training on
from epoch k gives the weights and results of an uninterrupted run, bit for bit on the CPU (tests/test_resume.py).
A checkpoint may also be taken between two steps of an epoch (`LoopState.step` > 0, with the losses of the steps
done): the runner keeps what it needs to go on from the next step (recx.training.runners.base).

A checkpoint names its run: the run id, the hash of the resolved configuration and the data's identity
(`Dataset.data_hash`) are pickled first, and a checkpoint of any other run, configuration or data is refused before
anything is restored (one copied from a run of another lr or seed resumed silently). Checkpoints written before
they named their run have no such record and resume as they did.
The file is the sha256 of the pickled record and state followed by them, written whole: a temporary file
`.checkpoint.pt.partial-<pid>` renamed over the previous checkpoint, which a failed write (disk full, file too large)
leaves as it was. A partial file left by a process that died while writing is removed by the next run of the same
folder (`remove_partials`, under the run's lock); a changed byte is reported on load.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import pickle
import re
from dataclasses import dataclass
from pathlib import Path

import torch

from recx.core.errors import RecxError
from recx.data.dataset_folder import IDENTITY

DIGEST = hashlib.sha256().digest_size
# Modules whose pickled classes moved since an older recx wrote a checkpoint, by their module today, and packages
# renamed (recx.train became recx.training, so that `recx.train` is the front door's function; the compiled routines
# were gathered into recx.kernels, issue 47 §3): the run still resumes
# (tests/test_resume.py::test_a_checkpoint_of_the_recx_before_the_layers_resumes).
MOVED_MODULES = {
    "recx.samplers.kernel": "recx.samplers.quadratic_kernel",
    "recx.train.optim": "recx.optim.optimizers",
    "recx.core.jit": "recx.kernels.jit",
    "recx.core.lanes": "recx.kernels.lanes",
    "recx.core.prefetch": "recx.kernels.prefetch",
    "recx.core.row_occurrences": "recx.kernels.row_occurrences",
    "recx.optim.row_kernels": "recx.kernels.optimizer_rows",
    "recx.losses.bpr_rows": "recx.kernels.bpr_rows",
    "recx.models.als.cg_kernel": "recx.kernels.conjugate_gradient",
    "recx.models.row_dots": "recx.kernels.row_dots",
}
MOVED_PACKAGES = {"recx.train.": "recx.training.", "recx.samplers.kernels.": "recx.kernels."}


def moved(module: str) -> str:
    """Where a pickled class's module is today."""
    if module in MOVED_MODULES:
        return MOVED_MODULES[module]
    for old, new in MOVED_PACKAGES.items():
        if module.startswith(old):
            return new + module[len(old) :]
    return module


class WriteFailed(RecxError):
    """Writing the checkpoint failed (disk full, file too large): the previous checkpoint is unchanged. The caller
    says what else was kept (recx.runs.train_run)."""


@dataclass
class LoopState:
    """The early-stopping state after `epoch` epochs; within epoch `epoch` + 1, `step` steps done (0: at an epoch's
    end), their `losses` (host tensor) and the `seconds` they took."""

    epoch: int = 0
    best_score: float = float("-inf")
    best_epoch: int = 0
    best_state: dict | None = None
    waited: int = 0
    step: int = 0
    losses: torch.Tensor | None = None
    seconds: float = 0.0


def run_record(runner) -> dict[str, str]:
    """What a checkpoint names: the run id, the sha256 of the resolved configuration, the data hash and its kind."""
    canonical = json.dumps(runner.config.to_dict(), sort_keys=True, separators=(",", ":"))
    return {
        "run_id": runner.config.run_id(),
        "config_hash": hashlib.sha256(canonical.encode()).hexdigest(),
        "data_hash": runner.dataset.data_hash,
        "data_identity": IDENTITY,
    }


def _check_run(path: Path, saved: dict, current: dict) -> None:
    """RecxError naming what differs when the checkpoint is not of this run, configuration and data."""
    keys = [("run_id", "run id"), ("config_hash", "configuration hash")]
    if saved.get("data_identity") == current["data_identity"]:
        keys.append(("data_hash", "data hash"))
    differs = [
        f"its {label} is {str(saved.get(key))[:12]}, this run's {current[key][:12]}"
        for key, label in keys
        if saved.get(key) != current[key]
    ]
    if differs:
        raise RecxError(
            f"{path}: the checkpoint of another run ({'; '.join(differs)}); recx goes on only from a checkpoint "
            f"of run {current['run_id']} on this data"
        )


PARTIAL = re.compile(r"\.(?P<name>.+)\.partial-\d+")


def remove_partials(path: Path) -> None:
    """Delete the partial files of `path` that writers died before renaming (`.checkpoint.pt.partial-<pid>`: this
    name only). The caller holds the run's lock, so no live process is writing one."""
    for found in path.parent.glob(f".{path.name}.partial-*"):
        match = PARTIAL.fullmatch(found.name)
        if match and match["name"] == path.name and found.is_file():
            found.unlink(missing_ok=True)


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
    """Write the checkpoint whole: a temporary file in the same folder, flushed, then renamed over `path`. A failed
    write raises WriteFailed, the previous checkpoint untouched and no partial file left."""
    objects = _shared_objects(runner)
    payload = {
        "loop": loop,
        "model": runner.model.state_dict(),
        "runner": runner,
        "rng": torch.get_rng_state(),
        "cuda_rng": torch.cuda.get_rng_state_all() if torch.cuda.is_initialized() else None,
    }
    buffer = io.BytesIO()
    pickler = _Pickler(buffer, {id(obj): name for name, obj in objects.items()})
    pickler.dump(run_record(runner))
    pickler.dump(payload)
    partial = path.with_name(f".{path.name}.partial-{os.getpid()}")
    try:
        with open(partial, "wb") as handle:
            handle.write(hashlib.sha256(buffer.getbuffer()).digest())
            handle.write(buffer.getbuffer())
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(partial, path)
    except OSError as exc:
        raise WriteFailed(f"writing {path} failed ({exc.strerror or exc})") from None
    finally:
        partial.unlink(missing_ok=True)


def load(path: Path, runner) -> tuple[object, LoopState]:
    """(the checkpoint's runner, restored onto `runner`'s config, dataset and model; its early-stopping state). The
    model's weights and the global random generators are restored in place. A damaged file, or the checkpoint of
    another run, configuration or data, is a RecxError."""
    try:
        data = path.read_bytes()
        if hashlib.sha256(data[DIGEST:]).digest() != data[:DIGEST]:
            raise RecxError(
                f"{path}: its content does not match its checksum (changed or damaged since it was written)"
            )
        unpickler = _Unpickler(io.BytesIO(data[DIGEST:]), _shared_objects(runner))
        payload = unpickler.load()
        if "loop" not in payload:  # the run record; a checkpoint written before it was recorded starts with the state
            _check_run(path, payload, run_record(runner))
            payload = unpickler.load()
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
