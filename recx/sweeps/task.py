"""One run of a sweep as a self-contained task: what a worker (this process, a local worker process or a Ray
task) needs to train it, and the outcome it reports back.

Never twice: a worker holds the run's claim lock (`.<run id>.claim.lock` beside the run folders, an OS lock the
kernel releases when the holder dies) while it checks the COMPLETE marker and trains, so of two sweeps that reach
the same run, one trains it and the other is told "locked" (and later finds it complete). The claim is a lock file
of its own because train_run holds the run folder's lock itself and a process must not take a lock twice.
"""

from __future__ import annotations

import json
import traceback
from dataclasses import asdict, dataclass, field
from pathlib import Path

from recx.core import plugins
from recx.core.errors import RecxError
from recx.core.lock import LockedError, exclusive
from recx.runs import store

DONE, SKIPPED, LOCKED, FAILED = "done", "skipped", "locked", "failed"


@dataclass
class RunTask:
    config: dict  # the resolved RunConfig as a dict
    folder: str
    data_root: str
    ks: list[int]
    method: str
    log: str  # where a worker writes its output and any traceback
    diagnostics: bool = False  # the experiment's `diagnostics: true`: embedding diagnostics per run
    plugins: list[str] = field(default_factory=list)  # loaded before the run's names are resolved

    @property
    def run_id(self) -> str:
        return Path(self.folder).name

    @property
    def claim(self) -> Path:
        folder = Path(self.folder)
        return folder.parent / f".{folder.name}.claim.lock"

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> "RunTask":
        return cls(**json.loads(text))


@dataclass
class Outcome:
    status: str  # done, skipped (complete already), locked (another process has it), failed
    message: str = ""


_loaded: dict = {}


def cached_dataset(root: Path, name: str):
    """The last dataset this process loaded, reused while runs in a row train on it."""
    from recx.data.dataset import load_dataset

    if (root, name) not in _loaded:
        _loaded.clear()
        _loaded[(root, name)] = load_dataset(root, name)
    return _loaded[(root, name)]


def execute(task: RunTask, progress=None) -> Outcome:
    """Train the task's run unless it is complete or claimed; RecxError and crashes become a failed outcome (the
    traceback of a crash goes to the task's log)."""
    from recx.config.run_config import resolve
    from recx.runs.train_run import tidy, train_run

    folder = Path(task.folder)
    try:
        plugins.request(*task.plugins)
        with exclusive(task.claim, f"run {task.run_id}"):
            if store.is_complete(folder):
                tidy(folder)
                return Outcome(SKIPPED)
            config = resolve(task.config, where=f"run {task.run_id}")
            dataset = cached_dataset(Path(task.data_root), config.dataset)
            train_run(
                config, dataset, folder, progress=progress, ks=task.ks, diagnostics=task.diagnostics, label=task.method
            )
            return Outcome(DONE)
    except LockedError as error:
        return Outcome(LOCKED, str(error))
    except RecxError as error:
        return Outcome(FAILED, str(error))
    except Exception as error:  # a bug, not a user error: keep the traceback for whoever reads the log
        Path(task.log).parent.mkdir(parents=True, exist_ok=True)
        with open(task.log, "a") as handle:
            handle.write(traceback.format_exc())
        return Outcome(FAILED, f"{type(error).__name__}: {error} (traceback in {task.log})")
