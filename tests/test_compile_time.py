"""One-off JIT compilation is not training time (issue 44, item 1): a fresh process with an empty numba cache
compiles its routines during the first epoch; that epoch's `seconds` leave the compilation out and record it as
`compile_seconds`, so the first epoch is as long as the next ones and time-to-accuracy plots start every run at the
same point."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numba
import numpy as np
import pytest

from recx.data.prepare import PrepareOptions, prepare

ROOT = Path(__file__).resolve().parents[1]


def test_a_fresh_processs_first_epoch_leaves_its_compilation_out(tmp_path):
    data = tmp_path / "data"
    prepare(
        "mid",
        PrepareOptions(
            format="synthetic", ratios="80/10/10", synthetic={"n_users": 4000, "n_items": 2000, "mean_length": 40}
        ),
        data,
    )
    run = tmp_path / "run"
    command = [sys.executable, "-m", "recx", "train", "--dataset", "mid", "--loss", "bpr", "--epochs", "3"]
    command += ["--data-root", str(data), "--run-dir", str(run), "--device", "cpu", "--quiet", "--threads", "1"]
    cache = tmp_path / "numba-cache"  # empty: every numba routine of the run compiles in this process
    env = {**os.environ, "NUMBA_CACHE_DIR": str(cache), "PYTHONPATH": str(ROOT)}
    done = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    first, *later = [json.loads(line) for line in (run / "epochs.jsonl").read_text().splitlines()]
    assert first["compile_seconds"] > 0  # BPR's row gradients and row-wise Adagrad compiled in epoch 1
    assert all("compile_seconds" not in record for record in later)


def test_the_compilation_an_epoch_holds_is_left_out_of_its_seconds(tiny, tmp_path, monkeypatch):
    """The clock is the test's: a compilation (numba's compiler lock held) during the first step moves it 1,000 s
    on, so the epoch's seconds leave it out whatever the machine's speed or load (no wall-clock bound: issue 46)."""
    from numba.core import event

    from recx.config.run_config import resolve
    from recx.core.compile_clock import LOCK
    from recx.runs import store
    from recx.runs.train_run import train_run
    from recx.training import fit as fit_module

    offset, follow = [0.0], fit_module.follow_share
    real = time.perf_counter
    monkeypatch.setattr(time, "perf_counter", lambda: real() + offset[0])

    def compiling_once():
        if not offset[0]:
            with event.trigger_event(LOCK):
                offset[0] += 1000.0
        follow()

    monkeypatch.setattr(fit_module, "follow_share", compiling_once)
    config = resolve({"dataset": "tiny", "loss": "bpr", "dim": 8, "epochs": 2, "batch_size": 256, "device": "cpu"})
    train_run(config, tiny, tmp_path / "run")
    first, second = store.read_epochs(tmp_path / "run")
    assert first["compile_seconds"] >= 1000 and 0 < first["seconds"] < 1000, first
    assert "compile_seconds" not in second and 0 < second["seconds"] < 1000, second


class FakeTimer:
    """threading.Timer's part that CompileNote uses; the test fires it (no clock: issue 46)."""

    made: list["FakeTimer"] = []

    def __init__(self, after_s, function, args):
        self.after_s, self.function, self.args = after_s, function, args
        self.daemon = self.started = self.cancelled = False
        FakeTimer.made.append(self)

    def start(self):
        self.started = True

    def cancel(self):
        self.cancelled = True

    def fire(self):
        self.function(*self.args)


@pytest.fixture
def note():
    from recx.kernels.jit import CompileNote

    FakeTimer.made.clear()
    said: list[str] = []
    return CompileNote(2.0, said.append, timer=FakeTimer), said


def compiling(dispatcher):
    from numba.core import event

    return event.trigger_event("numba:compile", data={"dispatcher": dispatcher})


def test_a_long_compilation_of_a_recx_kernel_is_said_once_under_quiet_too(note):
    """issue 58 §6: a fresh install's first WRMF epoch compiled for 75 s with nothing on screen under --quiet. The
    note does not read --quiet: it goes to stderr whatever the progress display."""
    from numba.core import event

    from recx.kernels.jit import COMPILING_NOTE
    from recx.kernels.row_occurrences import occurrences

    listener, said = note
    with event.install_listener("numba:compile", listener):
        with compiling(occurrences):
            with compiling(occurrences):  # a kernel it calls: the outermost compilation holds the one timer
                pass
            (timer,) = FakeTimer.made
            assert timer.started and timer.after_s == 2.0 and not said
            timer.fire()  # the compilation lasts past the timer
        assert timer.cancelled and said == [COMPILING_NOTE]
        with compiling(occurrences):  # said once a process
            pass
    assert len(FakeTimer.made) == 1 and said == [COMPILING_NOTE]


def test_a_compilation_that_ends_in_time_or_not_of_recx_says_nothing(note):
    from numba.core import event

    from recx.kernels.row_occurrences import occurrences

    listener, said = note
    plain = numba.njit(lambda x: x + 1)
    with event.install_listener("numba:compile", listener):
        with compiling(occurrences):
            pass
        with compiling(plain):  # not one of recx's kernels
            pass
    assert [timer.cancelled for timer in FakeTimer.made] == [True] and not said


def test_a_kernel_compiled_in_memory_says_it_compiles_again_in_every_process(note):
    from numba.core import event

    from recx.kernels.jit import COMPILING_IN_MEMORY_NOTE
    from recx.kernels.row_occurrences import occurrences

    listener, said = note
    in_memory = numba.njit(occurrences.py_func)  # cache=False: numba's NullCache, as where no folder can be written
    with event.install_listener("numba:compile", listener):
        with compiling(in_memory):
            FakeTimer.made[0].fire()
    assert said == [COMPILING_IN_MEMORY_NOTE]


def test_numba_tells_the_note_of_a_real_compilation_and_it_goes_to_stderr(note, capsys):
    """The note listens to numba's own event: a kernel compiled afresh (a new dispatcher of a recx kernel's code)
    starts its timer and cancels it when done; recx's listener is registered and writes to stderr."""
    from numba.core import event

    from recx.kernels import jit
    from recx.kernels.row_occurrences import occurrences

    listener, said = note
    with event.install_listener("numba:compile", listener):
        numba.njit(occurrences.py_func)(np.array([3, 1, 3]), np.full(5, -1))
    assert len(FakeTimer.made) == 1 and FakeTimer.made[0].cancelled
    assert jit.COMPILE_NOTE in event._registered["numba:compile"]
    capsys.readouterr()
    jit._to_stderr(jit.COMPILING_NOTE)
    assert capsys.readouterr().err == jit.COMPILING_NOTE + "\n"
