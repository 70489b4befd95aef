"""A compiled kernel on several threads without numba's `parallel=True` (recx.kernels.in_threads, issue 58 §6): the
blocks cover the range once, in order of their first index, each block on its own thread, and a block's error is the
call's error."""

from __future__ import annotations

import threading

import pytest

from recx.kernels.in_threads import blocks, run_blocks


@pytest.mark.parametrize("n, threads", [(0, 2), (1, 4), (7, 1), (7, 2), (7, 3), (16, 8), (5, 9)])
def test_blocks_cover_the_range_once_in_consecutive_runs_of_near_equal_size(n, threads):
    spans = blocks(n, threads)
    assert [index for first, end in spans for index in range(first, end)] == list(range(n))
    assert len(spans) == min(threads, n)
    assert all(end > first for first, end in spans)
    sizes = [end - first for first, end in spans]
    assert not sizes or max(sizes) - min(sizes) <= 1


def test_each_block_runs_once_on_its_own_thread_the_first_on_the_callers():
    seen: dict[tuple[int, int], str] = {}
    lock = threading.Lock()

    def kernel(out, first, end):
        with lock:
            seen[(first, end)] = threading.current_thread().name
        for index in range(first, end):
            out[index] += 1

    out = [0] * 10
    run_blocks(kernel, 10, 3, (out,))
    assert out == [1] * 10 and sorted(seen) == blocks(10, 3)
    assert seen[(0, 3)] == threading.current_thread().name
    assert len(set(seen.values())) == 3  # block i on worker i, whatever the timing
    run_blocks(kernel, 10, 1, (out,))  # one thread: a plain call
    assert out == [2] * 10


def test_a_blocks_error_is_raised_after_every_block_has_run():
    done = []

    def kernel(first, end):
        if first:
            raise ValueError(f"block {first}")
        done.append((first, end))

    with pytest.raises(ValueError, match="block"):
        run_blocks(kernel, 6, 3, ())
    assert done == [(0, 2)]
