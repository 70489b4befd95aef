"""`compiled(...)`: recx's numba kernels, cached on disk where a folder can be written, compiled with LLVM's SLP
vectoriser.

numba leaves the superword-level (SLP) vectoriser off by default (numba issue 8705: a miscompilation elsewhere), and
without it the eight interleaved partial sums of recx.kernels.lanes run as eight scalar chains: the dot products of the
ALS conjugate gradient compiled to scalar vmulss/vaddss. With it they run as one 8-lane vector (vmulps/vaddps): the
same multiplications and additions in the same order (no reassociation, no fused multiply-add), so every result is
bit-identical, and WRMF's iteration on dense data (6,040 x 8,390, 672K interactions, 64 factors, one thread) went
from 0.162 to 0.140 s. The vectoriser is switched on for the compilation of these kernels only, under numba's
compiler lock, so no other numba code of the process is compiled with it.

Where the compiled code is kept (a read-only install used by another user, a container run as a non-root user, a
shared cluster install: there numba's `cache=True` alone raises "cannot cache function ...: no locator
available" at import and every command would end in that internal error). In order, the first folder that can be
written:
1. numba's own choice: `$NUMBA_CACHE_DIR` when set, else the `__pycache__` beside the kernel's source (a writable
   install), else the user's cache folder (`$XDG_CACHE_HOME/numba`, else `~/.cache/numba`);
2. `<temp dir>/recx-numba-<uid>`, a folder of this user's only (recx.core.user_folders: a cache file is loaded as
   code, so never from a folder someone else can write);
3. none: the kernels are compiled in memory, a few seconds per process, and recx says so once.
The choice is made per kernel when its module is imported; numba's settings stay as they were for any other code.

A fresh install compiles each kernel the first time a run calls it (seconds): when one compilation of
a recx kernel has lasted COMPILE_NOTE_AFTER_S, recx says so once on stderr (`CompileNote`), under `--quiet` too.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from typing import Any

import numba
from numba.core import config, event
from numba.core.caching import NullCache
from numba.core.compiler_lock import global_compiler_lock

from recx.core.user_folders import private_folder

NO_LOCATOR = "no locator available"  # numba's RuntimeError when no cache folder can be written
IN_MEMORY_NOTE = (
    "note: no writable folder for recx's compiled kernels (not $NUMBA_CACHE_DIR, its install folder, the user cache "
    "folder nor the temp folder): they are compiled in memory, a few seconds in each recx process; set "
    "NUMBA_CACHE_DIR to a folder you can write to keep them"
)
COMPILE_NOTE_AFTER_S = 2.0
COMPILING_NOTE = "note: compiling recx's kernels, first run only (numba keeps them in its cache for the next runs)"
COMPILING_IN_MEMORY_NOTE = "note: compiling recx's kernels (in memory: again in every recx process)"
_choosing = threading.Lock()
_said: list[bool] = []


def _say_in_memory() -> None:
    if not _said:
        _said.append(True)
        print(IN_MEMORY_NOTE, file=sys.stderr)


def _dispatcher(function: Callable, options: dict) -> Any:
    """numba's dispatcher of `function`, cached in the first writable folder of the module docstring's list, else
    compiled in memory."""
    try:
        return numba.njit(cache=True, nogil=True, **options)(function)
    except RuntimeError as error:
        if NO_LOCATOR not in str(error):
            raise
    folder = private_folder("numba")
    if folder is not None:
        with _choosing:  # numba reads CACHE_DIR when it picks the kernel's cache folder, here and now only
            before, config.CACHE_DIR = config.CACHE_DIR, str(folder)
            try:
                return numba.njit(cache=True, nogil=True, **options)(function)
            except RuntimeError as error:
                if NO_LOCATOR not in str(error):
                    raise
            finally:
                config.CACHE_DIR = before
    _say_in_memory()
    return numba.njit(nogil=True, **options)(function)


def compiled(noalias: bool = False, **options: Any) -> Callable[[Callable], Any]:
    """numba.njit(cache=True, nogil=True, **options) (cache=False where no folder can be written), each compilation
    with the SLP vectoriser on. `noalias`: LLVM is told that no two array arguments share memory the kernel writes
    (numba's flag, set as numba compiles the body of a parallel loop): a block kernel writing into an output it is
    given (recx.kernels.in_threads) is then vectorised as that body was."""

    def wrap(function: Callable) -> Any:
        dispatcher = _dispatcher(function, options)
        if noalias:
            _without_aliases(dispatcher)
        compile_plain = dispatcher.compile

        def compile_vectorised(signature):
            with global_compiler_lock:
                before, config.SLP_VECTORIZE = config.SLP_VECTORIZE, 1
                try:
                    return compile_plain(signature)
                finally:
                    config.SLP_VECTORIZE = before

        dispatcher.compile = compile_vectorised
        return dispatcher

    return wrap


def _without_aliases(dispatcher: Any) -> None:
    """Compile `dispatcher` with numba's noalias flag (no option of numba.njit: its compiler's flags hook)."""
    compiler = dispatcher._compiler
    customize = compiler._customize_flags

    def with_noalias(flags):
        flags = customize(flags)
        flags.noalias = True
        return flags

    compiler._customize_flags = with_noalias


def inlined(**options: Any) -> Callable[[Callable], Any]:
    """`compiled` for a small helper of other kernels: typed and lowered once per signature, then inlined by LLVM into
    each caller (numba's forceinline), with no Python entry point. numba's `inline="always"` inlines numba IR instead,
    so a helper's body is typed and lowered again at every call site: dot_rows so inlined thirteen times was a good
    part of the conjugate gradient kernel's first compilation. Either way the caller ends as one function
    doing the same operations in the same order (bit-identical results; the same half-step time for dot_rows). For
    small leaf helpers: forced on the conjugate gradient's `_dense_part` and `_add_entries` it made the half-step
    17% slower (and calls left to LLVM's choice too), so those stay numba-inlined, each at one call site."""
    return compiled(forceinline=True, no_cpython_wrapper=True, no_cfunc_wrapper=True, **options)


class CompileNote(event.Listener):
    """Listens to numba's compilations (event `numba:compile`, sent on a cache miss only, nested for the kernels a
    kernel calls): when an outermost compilation of one of recx's kernels has lasted `after_s` seconds, calls
    `say(note)` once (from a timer thread: the compiling thread is busy), the note saying whether the kernel is
    cached for the next runs."""

    def __init__(self, after_s: float, say: Callable[[str], None], timer: Callable = threading.Timer):
        self.after_s, self.say, self.timer_class = after_s, say, timer
        self.depth, self.timer, self.said = 0, None, False

    def on_start(self, event_: event.Event) -> None:
        self.depth += 1
        dispatcher = event_.data["dispatcher"]
        if self.depth == 1 and not self.said and _is_recx(dispatcher):
            cached = not isinstance(getattr(dispatcher, "_cache", None), NullCache)
            timer = self.timer_class(self.after_s, self._say, [COMPILING_NOTE if cached else COMPILING_IN_MEMORY_NOTE])
            timer.daemon = True
            timer.start()
            self.timer = timer

    def on_end(self, event_: event.Event) -> None:
        self.depth -= 1
        if self.depth == 0 and self.timer is not None:
            self.timer.cancel()
            self.timer = None

    def _say(self, note: str) -> None:
        if not self.said:
            self.said = True
            self.say(note)


def _is_recx(dispatcher: Any) -> bool:
    return getattr(getattr(dispatcher, "py_func", None), "__module__", "").startswith("recx.")


def _to_stderr(note: str) -> None:
    print(note, file=sys.stderr, flush=True)  # a live progress display shows it above its bars


COMPILE_NOTE = CompileNote(COMPILE_NOTE_AFTER_S, _to_stderr)
event.register("numba:compile", COMPILE_NOTE)
