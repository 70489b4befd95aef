"""Which branch a hot path takes: the host branch (CPU) or the accelerator branch (CUDA).

The accelerator branches avoid host synchronisation: no data-dependent early exit, no result whose size depends
on the data (dense masks instead of hit lists), the maxima path of the log-sum-exp for every row. They compute the
same values as the host branches. `accelerator_branch(x)` says which one a tensor (or device) takes;
`forced_accelerator_branches()` (or RECX_FORCE_ACCELERATOR_BRANCHES=1 in the environment, for a whole process) makes
every tensor take the accelerator branch, so that CI, which has no GPU, runs each CUDA-only branch on the CPU and
compares it with the host branch (tests/test_device_paths.py, `make gpu-check`'s CPU mode).

Branches that need the CUDA runtime itself (CuPy kernels, pinned-memory copies with CUDA events) cannot be forced;
docs/design.md lists them.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

import torch

_forced = os.environ.get("RECX_FORCE_ACCELERATOR_BRANCHES") == "1"


def accelerator_branch(x: torch.Tensor | torch.device) -> bool:
    """True when `x` (a tensor or a device) takes the accelerator branch: on CUDA, or anywhere while forced."""
    device = x if isinstance(x, torch.device) else x.device
    return _forced or device.type != "cpu"


@contextmanager
def forced_accelerator_branches() -> Iterator[None]:
    """Within the block every tensor takes the accelerator branch, on the CPU too (for tests and `make gpu-check`'s
    CPU mode)."""
    global _forced
    before, _forced = _forced, True
    try:
        yield
    finally:
        _forced = before
