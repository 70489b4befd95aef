"""bench/graph_capture.py's dry run (the CPU's stand-in for a replay): the captured run's plumbing (static batch
buffers, the step on them, the loss read back) trains exactly as the eager run, and a replay that did not take the
new batch is found (its weights differ from the eager run's and the probe fails)."""

from __future__ import annotations

from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench"


@pytest.fixture
def gc(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCH))
    import graph_capture

    return graph_capture


def quick_main(gc, monkeypatch) -> int:
    arguments = ["--quick", "--cases", "bpr"]
    monkeypatch.setattr("sys.argv", ["graph_capture.py", *arguments])  # quick.option reads the command line
    return gc.main(arguments)


def test_the_dry_run_trains_as_the_eager_steps(gc, monkeypatch, capsys):
    assert quick_main(gc, monkeypatch) == 0
    row = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("| bpr"))
    assert row.split(" | ")[6] == "0"  # the largest weight difference


def test_a_replay_on_a_stale_batch_is_found(gc, monkeypatch, capsys):
    def stale(self, users, positives):  # the buffers never refilled: every replay trains the captured batch
        return self.step(*self.inputs)

    monkeypatch.setattr(gc.CapturedStep, "__call__", stale)
    assert quick_main(gc, monkeypatch) == 1
    row = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("| bpr"))
    assert float(row.split(" | ")[6]) > 0
