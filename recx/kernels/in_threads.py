"""A compiled (numba, nogil) kernel run over blocks of an index range on several threads, where numba's
`parallel=True` would compile a second copy of it.

numba turns a `prange` loop into a separate function (a gufunc) that it links with everything the loop calls,
optimises and emits again, after parfor passes over the loop's whole body: for the conjugate gradient kernel that
was two thirds of its first compilation (35 CPU-seconds, against 11 for the same kernel serial), most of a fresh
install's 46-75 s before the first WRMF epoch. A kernel compiled once, without `parallel`, releases the GIL
(recx.kernels.jit compiles every kernel `nogil`), so Python threads run it at once on different blocks:
`run_blocks(kernel, n, threads, args)` calls `kernel(*args, first, end)` for `threads` contiguous blocks [first, end)
covering range(n), sizes differing by at most one, the calling thread running the first block. The kernel must write
nothing that another block writes. Handing a block to a thread costs tens of microseconds: for calls of milliseconds
(an ALS half-step), not a training step's kernels.
"""

from __future__ import annotations

import functools
import os
import queue
import threading
from collections.abc import Callable

import numpy as np

CACHE_LINE = 64  # bytes


class _Worker:
    """A thread of this process that runs the blocks handed to it, one after another."""

    def __init__(self, name: str):
        self.tasks: queue.SimpleQueue = queue.SimpleQueue()
        threading.Thread(target=self._serve, name=name, daemon=True).start()

    def _serve(self) -> None:
        while True:
            task, done = self.tasks.get()
            try:
                task()
            except BaseException as error:  # handed to the caller, which raises it
                done.put(error)
            else:
                done.put(None)


_workers: list[_Worker] = []
_workers_pid = 0  # the process that started `_workers`: a forked child starts its own
_workers_lock = threading.Lock()


def blocks(n: int, threads: int) -> list[tuple[int, int]]:
    """min(threads, n) contiguous blocks [first, end) covering range(n), sizes differing by at most one."""
    count = max(1, min(threads, n))
    return [(n * block // count, n * (block + 1) // count) for block in range(count)] if n > 0 else []


def _workers_for(count: int) -> list[_Worker]:
    """`count` workers of this process (started when first needed, kept for the next calls)."""
    global _workers, _workers_pid
    with _workers_lock:
        if _workers_pid != os.getpid():
            _workers, _workers_pid = [], os.getpid()
        while len(_workers) < count:
            _workers.append(_Worker(f"recx-kernel-{len(_workers) + 1}"))
        return _workers[:count]


def run_blocks(kernel: Callable, n: int, threads: int, args: tuple) -> None:
    """kernel(*args, first, end) for each block of `blocks(n, threads)`, the blocks at once: the first on the calling
    thread, block i on worker i."""
    spans = blocks(n, threads)
    if len(spans) <= 1:
        for first, end in spans:
            kernel(*args, first, end)
        return
    done: queue.SimpleQueue = queue.SimpleQueue()
    for worker, (first, end) in zip(_workers_for(len(spans) - 1), spans[1:], strict=True):
        worker.tasks.put((functools.partial(kernel, *args, first, end), done))
    try:
        kernel(*args, *spans[0])
    finally:
        errors = [done.get() for _ in spans[1:]]  # every block has ended before the call returns
    for error in errors:
        if error is not None:
            raise error


def aligned(shape: tuple[int, ...], dtype, zeros: bool = False) -> np.ndarray:
    """np.empty (np.zeros with `zeros`) starting on a cache line, as numba's own allocations do. numpy's start 16 bytes
    into one: a kernel's output allocated inside a parallel kernel was aligned, and from Python it would not be (a row
    of 64 float32 spanning five lines instead of four; shares_of_draws took a third longer)."""
    dtype = np.dtype(dtype)
    nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    raw = (np.zeros if zeros else np.empty)(nbytes + CACHE_LINE, np.uint8)
    start = -raw.ctypes.data % CACHE_LINE
    return raw[start : start + nbytes].view(dtype).reshape(shape)
