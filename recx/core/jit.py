"""`compiled(...)`: recx's numba kernels, cached on disk, compiled with LLVM's SLP vectoriser.

numba leaves the superword-level (SLP) vectoriser off by default (numba issue 8705: a miscompilation elsewhere), and
without it the eight interleaved partial sums of recx.core.lanes run as eight scalar chains: the dot products of the
ALS conjugate gradient compiled to scalar vmulss/vaddss. With it they run as one 8-lane vector (vmulps/vaddps): the
same multiplications and additions in the same order (no reassociation, no fused multiply-add), so every result is
bit-identical, and WRMF's iteration on dense data (6,040 x 8,390, 672K interactions, 64 factors, one thread) went
from 0.162 to 0.140 s. The vectoriser is switched on for the compilation of these kernels only, under numba's
compiler lock, so no other numba code of the process is compiled with it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numba
from numba.core import config
from numba.core.compiler_lock import global_compiler_lock


def compiled(**options: Any) -> Callable[[Callable], Any]:
    """numba.njit(cache=True, nogil=True, **options), each compilation with the SLP vectoriser on."""

    def wrap(function: Callable) -> Any:
        dispatcher = numba.njit(cache=True, nogil=True, **options)(function)
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
