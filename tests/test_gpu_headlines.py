"""bench/gpu_headlines.py's logic: the workers shared among the experiments, the sweeps stopped at the deadline
(SIGINT to each group, SIGKILL after the grace), and the summary's rows read from run folders."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml

BENCH = Path(__file__).resolve().parents[1] / "bench"
HEADLINE_RUNS = {"prism-headline": 8, "hns-headline": 3, "bir-headline": 3, "fastvae-headline": 6, "rg-headline": 26}


@pytest.fixture
def bench(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCH))


def test_the_workers_are_shared_by_weight_at_least_one_each_and_never_more_than_the_runs(bench):
    from headline_jobs import split_jobs

    assert split_jobs(16, HEADLINE_RUNS) == {
        "prism-headline": 8,
        "hns-headline": 1,
        "bir-headline": 2,
        "fastvae-headline": 3,
        "rg-headline": 2,
    }
    assert set(split_jobs(1, HEADLINE_RUNS).values()) == {1}
    assert split_jobs(64, {"hns-headline": 3}) == {"hns-headline": 3}
    assert split_jobs(32, HEADLINE_RUNS)["prism-headline"] == 8  # all its runs at once, no idle worker


def child(tmp_path: Path, name: str, body: str) -> list[str]:
    """A job's command: a Python child that writes NAME.ready once its signal handling is set, then runs `body`."""
    script = tmp_path / f"{name}.py"
    script.write_text(
        "import os, signal, subprocess, sys, time\n"
        f"{body}\n"
        f"open({str(tmp_path / (name + '.ready'))!r}, 'w').close()\n"
        "time.sleep(60)\n"
    )
    return [sys.executable, str(script)]


def gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return True
    return state in ("Z", "X")


def test_at_the_deadline_each_sweep_gets_sigint_then_sigkill_after_the_grace_and_its_workers_end_too(bench, tmp_path):
    from headline_jobs import Job, run_until

    polite = (
        "def stop(*_):\n"
        f"    open({str(tmp_path / 'kept')!r}, 'w').write('checkpoint kept')\n"
        "    sys.exit(130)\n"
        "signal.signal(signal.SIGINT, stop)"
    )
    stubborn = (
        "signal.signal(signal.SIGINT, signal.SIG_IGN)\n"
        "worker = subprocess.Popen([sys.executable, '-c', 'import signal, time; signal.signal(signal.SIGINT, signal.SIG_IGN); time.sleep(60)'])\n"
        f"open({str(tmp_path / 'worker')!r}, 'w').write(str(worker.pid))"
    )
    jobs = [
        Job("quick", [sys.executable, "-c", "pass"], tmp_path / "logs" / "quick.log"),
        Job("polite", child(tmp_path, "polite", polite), tmp_path / "logs" / "polite.log"),
        Job("stubborn", child(tmp_path, "stubborn", stubborn), tmp_path / "logs" / "stubborn.log"),
    ]

    def clock() -> float:  # the deadline comes once the quick job has ended and the others are ready
        ready = all((tmp_path / f"{name}.ready").exists() for name in ("polite", "stubborn"))
        quick = jobs[0].process
        return time.monotonic() + (1000 if ready and quick is not None and quick.poll() is not None else 0)

    ticks = []
    started = time.monotonic()
    run_until(jobs, time.monotonic() + 500, 1.0, lambda js: ticks.append([j.running() for j in js]), clock=clock)
    assert time.monotonic() - started < 50
    quick, kind, hard = jobs
    assert (quick.code, quick.stopped) == (0, "")
    assert (kind.code, kind.stopped) == (130, "interrupted")
    assert (tmp_path / "kept").read_text() == "checkpoint kept"
    assert (hard.code, hard.stopped) == (-9, "killed")
    assert gone(int((tmp_path / "worker").read_text()))  # the group's other processes (a sweep's workers) too
    assert ticks and ticks[-1] == [False, False, False]


def test_ctrl_c_stops_the_running_sweeps_then_is_raised_again(bench, tmp_path):
    from headline_jobs import Job, run_until

    body = f"signal.signal(signal.SIGINT, lambda *_: (open({str(tmp_path / 'kept')!r}, 'w').close(), sys.exit(130)))"
    job = Job("polite", child(tmp_path, "polite", body), tmp_path / "polite.log")

    def tick(jobs) -> None:
        if (tmp_path / "polite.ready").exists():
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_until([job], time.monotonic() + 500, 5.0, tick, tick_s=0.2)
    assert (job.code, job.stopped) == (130, "interrupted") and (tmp_path / "kept").is_file()


def planned(method: str, **settings):
    from recx.config.run_config import resolve
    from recx.sweeps.experiments import PlannedRun

    config = resolve({"dataset": "tiny", "epochs": 10, "patience": 2, "valid_metric": "ndcg@20", **settings})
    return PlannedRun(method, {"lr": config.lr}, config, config.run_id())


def started_folder(folder: Path, run, epochs: int) -> None:
    folder.mkdir(parents=True)
    (folder / "config.yaml").write_text(yaml.safe_dump(run.config.to_dict()))
    records = [{"epoch": e, "loss": 1.0, "seconds": 2.0, "valid_ndcg@20": 0.1} for e in range(1, epochs + 1)]
    (folder / "epochs.jsonl").write_text("".join(json.dumps(record) + "\n" for record in records))


def test_the_summary_says_what_each_run_reached_and_what_stopped_it(bench, tmp_path):
    from headline_summary import as_json, markdown, run_row

    paper = {"epochs": 1000, "values": [{"dataset": "tiny", "method": "a", "metric": "ndcg", "k": 20, "value": 0.12}]}
    done, stopped, fresh = planned("a"), planned("b", lr=0.01), planned("c", lr=0.1)
    started_folder(tmp_path / "done", done, 3)
    rows = [
        {"split": s, "stratum": "all", "metric": "ndcg", "k": 20, "value": v}
        for s, v in [("valid", 0.2), ("test", 0.11)]
    ]
    pd.DataFrame(rows).to_parquet(tmp_path / "done" / "results.parquet")
    (tmp_path / "done" / "COMPLETE").write_text("ok\n")
    started_folder(tmp_path / "stopped", stopped, 2)
    (tmp_path / "stopped" / "INCOMPLETE").write_text("training started; not finished\n")
    (tmp_path / "stopped" / "checkpoint.pt").write_bytes(b"")

    a = run_row("x-headline", done, tmp_path / "done", paper, sweep_stopped=True)
    assert (a.state, a.epochs, a.cap, a.stopped_by) == ("complete", 3, 10, "early stopping (patience 2)")
    assert (a.metric, a.test, a.paper, a.train_s) == ("ndcg@20", 0.11, 0.12, 6.0)
    b = run_row("x-headline", stopped, tmp_path / "stopped", paper, sweep_stopped=True)
    assert (b.state, b.epochs, b.stopped_by, b.test) == ("stopped", 2, "the time budget (checkpoint kept)", None)
    (tmp_path / "stopped" / "checkpoint.pt").unlink()
    assert run_row("x", stopped, tmp_path / "stopped", paper, True).stopped_by.endswith("restarts from epoch 1)")
    assert (
        run_row("x", stopped, tmp_path / "stopped", paper, False).stopped_by == "its sweep's end (see the sweep's log)"
    )
    c = run_row("x-headline", fresh, tmp_path / "absent", paper, sweep_stopped=True)
    assert (c.state, c.epochs, c.stopped_by) == ("not started", 0, "the time budget (not started)")

    sweeps = {"x-headline": {"exit": 130, "stopped_by_budget": True, "line": "sweep exit 130, stopped by the budget"}}
    text = markdown([a, b, c], sweeps, ["# title"])
    assert "1 of 3 runs complete; sweep exit 130, stopped by the budget" in text
    assert "| tiny | a | lr=" in text and "| complete | 3 / 10 | early stopping (patience 2) | 6 |" in text
    assert "ndcg@20 0.1100 | 0.1200 |" in text
    figures = as_json([a, b, c], sweeps, {"budget_s": 570})
    assert figures["budget_s"] == 570 and [r["state"] for r in figures["experiments"]["x-headline"]["runs"]] == [
        "complete",
        "stopped",
        "not started",
    ]
