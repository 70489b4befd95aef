"""One-off JIT compilation (numba) kept out of an epoch's training seconds (a fresh install's first WRMF epoch would
record ~38 s against ~1 s for the next ones).

numba compiles a routine (or loads it from its cache) the first time it is called with new argument types, under
its compiler lock; the time spent holding that lock, outermost acquisitions only, is the compilation time. An epoch's
record keeps its training seconds without it and states it apart as `compile_seconds`.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

from numba.core import event

LOCK = "numba:compiler_lock"


class CompileClock(event.Listener):
    """Seconds spent compiling while `counting` (nested compilations counted once)."""

    def __init__(self) -> None:
        self.seconds, self._depth, self._since = 0.0, 0, 0.0

    def on_start(self, _event) -> None:
        if self._depth == 0:
            self._since = time.perf_counter()
        self._depth += 1

    def on_end(self, _event) -> None:
        self._depth -= 1
        if self._depth == 0:
            self.seconds += time.perf_counter() - self._since

    @contextmanager
    def counting(self) -> Iterator["CompileClock"]:
        with event.install_listener(LOCK, self):
            yield self
