"""Choosing a sweep's backend from the command line's --backend, --jobs and --address."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from recx.core.errors import RecxError

BACKENDS = ("local", "ray")


@dataclass
class Execution:
    """local: `jobs` runs at once (1: in this process; more: worker processes); ray: `jobs` Ray tasks at once on
    the cluster at `address` (default: a local cluster with `jobs` CPUs)."""

    backend: str = "local"
    jobs: int = 1
    address: str | None = None

    def validate(self) -> None:
        if self.backend not in BACKENDS:
            raise RecxError(f"--backend {self.backend!r}; valid: {', '.join(BACKENDS)}")
        if self.jobs < 1:
            raise RecxError(f"--jobs {self.jobs}: expected at least 1")
        if self.address and self.backend != "ray":
            raise RecxError("--address is the address of a Ray cluster: use it with --backend ray")


def make_backend(execution: Execution, logs: Path, progress=None):
    execution.validate()
    if execution.backend == "ray":
        from recx.sweeps.ray_backend import RayCluster

        return RayCluster(execution.jobs, execution.address)
    from recx.sweeps.local import InProcess, LocalProcesses

    return InProcess(progress) if execution.jobs == 1 else LocalProcesses(execution.jobs, logs)
