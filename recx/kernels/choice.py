"""Choosing the kernel implementation: `auto` (CuPy on CUDA when installed, else torch), `torch` or `cupy`.

CuPy is imported lazily, only when a CuPy kernel is asked for, never at module import. `auto` on CUDA without
CuPy says once that the torch kernels run instead (no silent fallback).
"""

from __future__ import annotations

import importlib.util
import sys

import torch

from recx.core.errors import RecxError

KERNELS = ("auto", "torch", "cupy")


def cupy_available() -> bool:
    return importlib.util.find_spec("cupy") is not None and torch.cuda.is_available()


def resolve_kernels(kernels: str, device: torch.device | str) -> str:
    """'torch' or 'cupy' for tensors on `device`; `cupy` off CUDA or without the package is a user error."""
    if kernels not in KERNELS:
        raise RecxError(f"kernels {kernels!r}; valid: {', '.join(KERNELS)}")
    on_cuda = torch.device(device).type == "cuda"
    if kernels == "cupy":
        if not on_cuda or not cupy_available():
            raise RecxError(
                "kernels 'cupy' needs a CUDA device and the cupy package (the gpu extra for CUDA 12, gpu-cuda13 for CUDA 13)"
            )
        return "cupy"
    if kernels == "auto" and on_cuda:
        if cupy_available():
            return "cupy"
        _say_torch_kernels_on_cuda()
    return "torch"


_said: list[bool] = []


def _say_torch_kernels_on_cuda() -> None:
    if not _said:
        _said.append(True)
        print(
            "recx: CuPy is not installed: the sampler kernels run in torch on CUDA "
            "(the gpu extra, or gpu-cuda13 on CUDA 13, for the CuPy kernels; --kernels torch silences this)",
            file=sys.stderr,
        )
