"""Device choice: `auto` takes CUDA when available, else the CPU."""

from __future__ import annotations

import torch

from recx.core.errors import RecxError


def resolve_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise RecxError("--device cuda asked for, but CUDA is not available on this machine")
    return torch.device(name)
