"""What `recx --version --verbose` and `recx list` report: recx's version and the accelerator stack it found.

torch is imported (seconds), CuPy only when installed; nothing here is needed by `recx --version` alone.
"""

from __future__ import annotations

import importlib
import importlib.util

RECX_VERSION = "0.1.0"  # recx.__version__; pyproject.toml's version (tests/test_layers_root.py checks both)


def _module_version(name: str) -> str:
    if importlib.util.find_spec(name) is None:
        return "not installed"
    try:
        return str(getattr(importlib.import_module(name), "__version__", "installed (version unknown)"))
    except Exception as error:  # a broken install (missing CUDA libraries for CuPy, say) is reported, not raised
        return f"installed, fails to import ({type(error).__name__}: {error})"


def _cuda() -> str:
    try:
        import torch
    except ImportError:
        return "unknown (torch not installed)"
    if torch.version.cuda is None:
        return "none (CPU build of torch)"
    found = torch.cuda.device_count() if torch.cuda.is_available() else 0
    return f"{torch.version.cuda} ({found} GPU{'s' if found != 1 else ''} available)"


def versions() -> dict[str, str]:
    """recx, torch, CUDA (the version torch was built with, and the GPUs it sees) and CuPy."""
    return {"recx": RECX_VERSION, "torch": _module_version("torch"), "CUDA": _cuda(), "CuPy": _module_version("cupy")}
