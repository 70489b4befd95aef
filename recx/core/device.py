"""Device choice: `auto` takes CUDA when available, else the CPU; torch's deterministic algorithms for a run."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

import torch

from recx.core.errors import RecxError


def resolve_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise RecxError("--device cuda asked for, but CUDA is not available on this machine")
    return torch.device(name)


CUBLAS_WORKSPACE = "CUBLAS_WORKSPACE_CONFIG"
DETERMINISTIC_WORKSPACES = (":4096:8", ":16:8")  # the cuBLAS workspace sizes torch accepts as deterministic


@contextmanager
def deterministic_algorithms(enabled: bool, device: torch.device) -> Iterator[None]:
    """With `enabled` on CUDA: torch's deterministic algorithms within the block (`torch.use_deterministic_algorithms`,
    cuBLAS's workspace :4096:8 unless the environment sets a deterministic one), so that a seed's run repeats bit for
    bit there as on the CPU (whose kernels are deterministic already: nothing changes there). The previous mode is
    restored after the block."""
    if not enabled or device.type != "cuda":
        yield
        return
    workspace = os.environ.setdefault(CUBLAS_WORKSPACE, DETERMINISTIC_WORKSPACES[0])
    if workspace not in DETERMINISTIC_WORKSPACES:
        raise RecxError(
            f"deterministic = true on CUDA: the environment sets {CUBLAS_WORKSPACE}={workspace!r}; expected "
            f"{' or '.join(DETERMINISTIC_WORKSPACES)} (cuBLAS's deterministic workspaces), or leave it unset"
        )
    before = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(True)
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(before)
