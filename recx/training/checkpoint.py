"""Checkpoints of a training run: everything that decides the rest of the run, written whole after an epoch.

A checkpoint holds the early-stopping state (epochs done, best score, best epoch and its weights, validations
without improvement), the model's weights, the runner's state (its optimizer and schedule state, the sampler's
caches, tables or codebooks, the loss's parameters, the run's random generator: recx.training.state) and the global
random generators. It is data only: tensors, numbers, strings and lists and dicts of them, read back with torch's
`weights_only` loader, which runs no code; the state goes onto the runner the resuming process builds from the same
run id (the same configuration and data). Training on from epoch k gives the weights and results of an uninterrupted
run, bit for bit on the CPU (tests/test_resume.py). A checkpoint may also be taken between two steps of an epoch
(`LoopState.step` > 0, with the losses of the steps done): the runner keeps what it needs to go on from the next step
(recx.training.runners.base).

A checkpoint names its run: the run id, the hash of the resolved configuration and the data's identity
(`Dataset.data_hash`) are stored first, and a checkpoint of any other run, configuration or data is refused before
anything is restored.
The file is `MAGIC`, the sha256 of the rest, then torch.save's archive of the record and the state, written whole: a
temporary file `.checkpoint.pt.partial-<pid>` renamed over the previous checkpoint, which a failed write (disk full,
file too large) leaves as it was. A partial file left by a process that died while writing is removed by the next
run of the same folder (`remove_partials`, under the run's lock); a changed byte is reported on load. A file without
`MAGIC` was written by an older recx, which pickled whole objects (a file that could run code when read): it is
refused unread.
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import os
import pickle
import re
import zipfile
from dataclasses import dataclass
from pathlib import Path

import torch

from recx.core.errors import RecxError
from recx.data.dataset_folder import IDENTITY
from recx.training import state

MAGIC = b"recx checkpoint 2\n"
DIGEST = hashlib.sha256().digest_size


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
    """Objects the resuming process builds itself, by a stable name: config, dataset (and its split tensors),
    model, and the model's parameters and buffers."""
    objects: dict[str, object] = {"config": runner.config, "dataset": runner.dataset, "model": runner.model}
    objects.update({f"parameter:{name}": p for name, p in runner.model.named_parameters()})
    objects.update({f"buffer:{name}": b for name, b in runner.model.named_buffers()})
    for split in ("train", "valid", "test"):
        csr = getattr(runner.dataset, split)
        if csr is not None:
            objects.update({f"{split}:indptr": csr.indptr, f"{split}:indices": csr.indices})
    return objects


def save(path: Path, runner, loop: LoopState) -> None:
    """Write the checkpoint whole: a temporary file in the same folder, flushed, then renamed over `path`. A failed
    write raises WriteFailed, the previous checkpoint untouched and no partial file left."""
    payload = {
        "run": run_record(runner),
        "loop": {field.name: getattr(loop, field.name) for field in dataclasses.fields(loop)},
        "model": runner.model.state_dict(),
        "runner": state.state_of(runner, _shared_objects(runner)),
        "rng": torch.get_rng_state(),
        "cuda_rng": torch.cuda.get_rng_state_all() if torch.cuda.is_initialized() else None,
    }
    buffer = io.BytesIO()
    torch.save(payload, buffer)
    partial = path.with_name(f".{path.name}.partial-{os.getpid()}")
    try:
        with open(partial, "wb") as handle:
            handle.write(MAGIC)
            handle.write(hashlib.sha256(buffer.getbuffer()).digest())
            handle.write(buffer.getbuffer())
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(partial, path)
    except OSError as exc:
        raise WriteFailed(f"writing {path} failed ({exc.strerror or exc})") from None
    finally:
        partial.unlink(missing_ok=True)


def load(path: Path, runner) -> LoopState:
    """Restore the checkpoint onto `runner` (built for this run: its config, dataset and model), the model's weights
    and the global random generators in place; the early-stopping state. A damaged file, one of an older recx, one
    that holds anything but data, or the checkpoint of another run, configuration or data is a RecxError."""
    try:
        data = path.read_bytes()
        if not data.startswith(MAGIC):
            raise RecxError(
                f"{path}: a checkpoint of an older recx, which stored pickled objects (a file that can run code "
                "when read): it is not read"
            )
        body = memoryview(data)[len(MAGIC) + DIGEST :]
        if hashlib.sha256(body).digest() != data[len(MAGIC) : len(MAGIC) + DIGEST]:
            raise RecxError(
                f"{path}: its content does not match its checksum (changed or damaged since it was written)"
            )
        payload = torch.load(io.BytesIO(body), weights_only=True)
        _check_run(path, payload["run"], run_record(runner))
        runner.model.load_state_dict(payload["model"])
        state.restore(runner, payload["runner"], _shared_objects(runner))
        loop = LoopState(**payload["loop"])
        torch.set_rng_state(payload["rng"])
    except (
        OSError,
        EOFError,
        pickle.UnpicklingError,
        zipfile.BadZipFile,
        AttributeError,
        KeyError,
        TypeError,
        ValueError,
        RuntimeError,
    ) as exc:
        raise RecxError(f"{path}: unreadable checkpoint ({type(exc).__name__}: {exc})") from None
    if payload["cuda_rng"] is not None and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(payload["cuda_rng"])
    return loop
