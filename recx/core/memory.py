"""Keep freed memory in the process, so that a step's large temporaries do not page-fault afresh every step.

glibc's malloc serves large blocks with mmap and hands them back to the kernel when freed, and trims the heap top
above a threshold; torch then takes a fresh, zero-filled page for every 4 KiB of every large tensor each step (a
[2048, 2000] score matrix is 4,000 page faults). With mmap off and trimming only above 1 GiB, freed blocks are reused.
Measured on Gowalla, one thread: sampled-softmax step 110 -> 69 ms, full-ranking evaluation 12.4 -> 7.8 s (page
faults 6.1M -> 0.2M), for about 15% more resident memory. Linux with glibc only; elsewhere nothing changes.
"""

from __future__ import annotations

import ctypes
import sys

M_TRIM_THRESHOLD, M_TOP_PAD, M_MMAP_MAX = -1, -2, -4


def _libc() -> ctypes.CDLL:
    """glibc by its soname; else as ctypes finds it (which runs `ldconfig -p`: a process started for every recx
    command, `--help` included)."""
    try:
        return ctypes.CDLL("libc.so.6")
    except OSError:
        from ctypes.util import find_library

        return ctypes.CDLL(find_library("c") or "libc.so.6")


def keep_freed_memory() -> bool:
    """Tune glibc's malloc as above; True when it took effect."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        mallopt = _libc().mallopt
    except (OSError, AttributeError):
        return False
    return all(
        mallopt(option, value) == 1
        for option, value in ((M_MMAP_MAX, 0), (M_TRIM_THRESHOLD, 1 << 30), (M_TOP_PAD, 64 << 20))
    )
