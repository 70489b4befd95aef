"""`make reproduce-headlines-gpu`: the five headline experiments from scratch on one lent GPU machine, side by side,
within a time budget, with no install.

    PYTHONPATH=. python3 bench/gpu_headlines.py --device cuda --data .headlines-pack --out OUT --budget-s 560 --jobs 16

needs only what the lent machine has (Python 3.12, torch with CUDA, CuPy, numpy, scipy, pandas, pyarrow, typer, rich,
numba) and the pack `make headlines-pack` made (bench/headlines_pack.py: the datasets' source files). Steps:
1. setup: versions, the GPU, the pack's checksums.
2. data: every headline dataset prepared from the pack with its experiments.yaml recipe (bench/headline_data.py), all
   at once, into WORK/data (one already there is kept).
3. sweeps: `recx sweep experiments.yaml -e NAME --out WORK/NAME --jobs J --set device=DEVICE`, the five at once, the
   --jobs workers shared among them (bench/headline_jobs.py, WEIGHTS), one CPU thread each; recx's local backend puts
   every worker of a sweep on the one GPU. A progress line every 30 s. When the budget less --reserve-s is spent, the
   sweeps still running are stopped as Ctrl-C stops them: each run in training keeps its folder and its last
   checkpoint (written every 60 s) in WORK, and the same command goes on from them (on a warm lent machine too: WORK
   is an ignored build folder, kept between calls).
4. tables: each experiment's report (tables, paired tests, plots): a finished sweep wrote it; a stopped one's complete
   runs are tabulated and reported (recx.sweeps.sweep.finished_tables).
5. OUT: `headlines.md` and `headlines.json` (per experiment, method and run: state, epochs / cap, what stopped it,
   training and wall seconds, the test figure of the headline's metric beside the paper's; bench/headline_summary.py),
   `headlines.log` (the progress lines and the sweeps' last lines) and `headlines.tar.gz` (each experiment's results,
   report, plots and logs, and each run's config, epochs, results and markers: no weights, checkpoints, top-k lists or
   per-user figures), at most 15 MiB; four files, as the device tool brings back at most 8.

`--device cpu`, or `--device cuda` with RECX_GPU_CHECK_FORCE_CPU=1 (`make reproduce-headlines-gpu-cpu`, CI), is the dry
run: the same steps on the CPU (a synthetic pack), every run capped at 2 epochs, the accelerator branches forced. The
exit code is 1 on a failure (the pack, a dataset, a sweep ending in an error, a report; with --require-complete also a
run the budget stopped), 130 when interrupted, else 0: runs the budget stopped are listed, not failed.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import platform
import signal
import sys
import tarfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch
from gpu_pack import check_pack
from headline_data import EXPERIMENTS, HEADLINES, ROOT, prepare_command, recipes
from headline_jobs import Job, run_until, split_jobs
from headline_summary import RunRow, as_json, markdown, run_row
from rich.console import Console

from recx.core.threads import usable_cpus
from recx.reports.report import report_sweep
from recx.runs import store
from recx.sweeps.experiments import PlannedRun, experiment_spec, load_experiments, paper_figures, plan
from recx.sweeps.sweep import finished_tables

FORCE_CPU = "RECX_GPU_CHECK_FORCE_CPU"  # the GPU commands' dry run (bench/gpu_check.py reads it too)
DRY_EPOCHS = 2
GRACE_S = 20.0
TAR_LIMIT = 15 * 2**20  # the device tool brings back files of 16 MiB at most
TAR_FILE_LIMIT = 4 * 2**20
RUN_FILES = {"config.yaml", "environment.json", "epochs.jsonl", "results.parquet", "diagnostics.json", "error.log"}
RUN_FILES |= {store.COMPLETE, store.TRAINED, store.INCOMPLETE}


class Log:
    """Progress lines, printed and appended to headlines.log at once (a command cut short still returns them)."""

    def __init__(self, started: float, path: Path):
        self.started, self.path, self.lines = started, path, []
        path.write_text("")

    def __call__(self, text: str) -> None:
        line = f"[{time.monotonic() - self.started:5.0f} s] {text}"
        self.lines.append(line)
        print(line, flush=True)
        with open(self.path, "a") as log:
            log.write(line + "\n")


def python() -> str:
    return sys.executable


def child_env(threads: int, dry: bool) -> dict:
    env = {"PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    env.update(PYTHONUNBUFFERED="1", RECX_THREADS=str(threads), OMP_NUM_THREADS=str(threads))
    if dry:
        env["RECX_FORCE_ACCELERATOR_BRANCHES"] = "1"
    return env


def setup_line(device: str, pack: Path) -> tuple[bool, str]:
    ok, line = check_pack(pack, "make headlines-pack")
    if device == "cuda":
        name = torch.cuda.get_device_name(0)
        line = f"{name}, {torch.cuda.get_device_properties(0).total_memory / 2**30:.0f} GiB; {line}"
    else:
        line = f"CPU dry run ({usable_cpus()} CPUs); {line}"
    return ok, f"Python {platform.python_version()}, torch {torch.__version__}; {line}"


def prepare_data(names: tuple[str, ...], pack: Path, root: Path, work: Path, stop_at: float, log: Log) -> bool:
    """Every dataset the experiments read, prepared from the pack at once (those already in `root` kept)."""
    wanted = {name: recipe for name, recipe in recipes(names).items() if not (root / name / "card.json").is_file()}
    if not wanted:
        log("data: every dataset already prepared")
        return True
    jobs = [
        Job(name, prepare_command(python(), name, recipe, pack / "data", root), work / "logs" / f"prepare-{name}.log")
        for name, recipe in wanted.items()
    ]
    for job in jobs:
        job.env = child_env(1, False)
    run_until(jobs, stop_at, GRACE_S, lambda _: None, tick_s=1e9)
    for job in jobs:
        log(f"data {job.name}: exit {job.code}, {job.seconds:.0f} s" + (f" ({job.stopped})" if job.stopped else ""))
    return all(job.code == 0 for job in jobs)


def planned_runs(name: str, settings: dict) -> tuple[list[PlannedRun], dict | None]:
    """The experiment's runs as the sweep plans them with `settings` (--set), and its paper block."""
    spec = experiment_spec(load_experiments(EXPERIMENTS), name, EXPERIMENTS)
    return plan(spec, name, EXPERIMENTS, settings), paper_figures(spec, name, EXPERIMENTS)


def progress(plans: dict[str, list[PlannedRun]], work: Path, jobs: list[Job], log: Log) -> None:
    parts = []
    for job in jobs:
        folders = [work / job.name / "runs" / run.run_id for run in plans[job.name]]
        done = sum(store.is_complete(folder) for folder in folders)
        epochs = sum(store.epochs_recorded(folder) for folder in folders if folder.is_dir())
        state = "running" if job.running() else f"exit {job.code}" + (f", {job.stopped}" if job.stopped else "")
        parts.append(f"{job.name.removesuffix('-headline')} {done}/{len(folders)} ({epochs} epochs, {state})")
    log("; ".join(parts))


def sweep_command(name: str, work: Path, jobs: int, settings: dict) -> list[str]:
    forced = [part for key, value in settings.items() for part in ("--set", f"{key}={value}")]
    return [
        *(python(), "-m", "recx", "sweep", str(EXPERIMENTS), "-e", name, "--out", str(work / name)),
        *("--data-root", str(work / "data"), "--jobs", str(jobs), *forced),
    ]


def tables(name: str, work: Path, settings: dict, log: Log) -> bool:
    """A stopped sweep's complete runs tabulated and reported (a finished sweep wrote its own); False on an error."""
    try:
        outcome = finished_tables(EXPERIMENTS, name, work / name, settings)
        if outcome is None:
            log(f"tables {name}: no run complete, no report")
            return True
        report_sweep(outcome, Console(file=io.StringIO(), width=200))
        log(
            f"tables {name}: {outcome.results.method.nunique()} methods reported from its complete runs ({work / name})"
        )
        return True
    except Exception as failed:  # one report's failure is reported; the others and the summary still come
        log(f"tables {name}: FAILED: {type(failed).__name__}: {str(failed)[:300]}")
        return False


def archived(path: Path) -> bool:
    """Whether headlines.tar.gz takes the file: all of an experiment's report and logs; of a run folder, its small
    files only (no weights, checkpoints, top-k lists or per-user figures: the report has read them)."""
    if path.name.startswith("."):  # lock files
        return False
    return path.parent.parent.name != "runs" or path.name in RUN_FILES


def archive(work: Path, names: list[str], target: Path) -> list[str]:
    """headlines.tar.gz of each experiment's folder and the logs (`archived`), within TAR_LIMIT (a file over
    TAR_FILE_LIMIT, then any past the limit, left out); returns what was left out."""
    files = [
        path
        for folder in [*(work / name for name in names), work / "logs"]
        if folder.is_dir()
        for path in sorted(folder.rglob("*"))
        if path.is_file() and archived(path)
    ]
    left, total = [], 0
    with tarfile.open(target, "w:gz") as tar:
        for path in files:
            size = path.stat().st_size
            if size > TAR_FILE_LIMIT or total + size > TAR_LIMIT:
                left.append(f"{path.relative_to(work)} ({size / 2**20:.1f} MiB)")
                continue
            tar.add(path, arcname=str(path.relative_to(work)))
            total += size
    return left


def tails(jobs: list[Job], lines: int = 15) -> list[str]:
    out = []
    for job in jobs:
        text = job.log.read_text(errors="replace").splitlines() if job.log.is_file() else []
        out += [f"== {job.name}: last lines of {job.log}", *text[-lines:], ""]
    return out


@dataclass
class Headlines:
    """One command's settings and state: the experiments, their plans and sweeps, where things go, the log."""

    names: tuple[str, ...]
    device: str
    settings: dict  # the sweeps' --set values
    work: Path
    out: Path
    budget_s: float
    reserve_s: float
    log: Log
    setup: str = ""
    plans: dict = field(default_factory=dict)  # name -> (planned runs, paper block)
    split: dict = field(default_factory=dict)  # name -> workers
    jobs: list[Job] = field(default_factory=list)


def reached(run: Headlines) -> tuple[list[RunRow], dict]:
    """Every planned run's row, read from its folder, and each sweep's figures."""
    rows: list[RunRow] = []
    sweeps = {}
    for job in run.jobs:
        stopped = budget_stopped(job)
        planned, paper = run.plans[job.name]
        rows += [run_row(job.name, r, run.work / job.name / "runs" / r.run_id, paper, stopped) for r in planned]
        state = "not started" if job.process is None else f"exit {job.code}"
        state += ", stopped by the budget" if stopped else ""
        sweeps[job.name] = {
            "jobs": run.split[job.name],
            "exit": job.code,
            "stopped_by_budget": stopped,
            "seconds": round(job.seconds, 1),
            "line": f"sweep {state}, {job.seconds:.0f} s, --jobs {run.split[job.name]}",
        }
    return rows, sweeps


def summarise(run: Headlines, rows: list[RunRow], sweeps: dict, verdict: str, notes: list[str]) -> None:
    """headlines.md, .json and .log into OUT."""
    complete = sum(row.state == "complete" for row in rows)
    elapsed = time.monotonic() - run.log.started
    header = [
        f"# recx headlines on one {'GPU' if run.device == 'cuda' else 'CPU (dry run)'}: {verdict}",
        "",
        f"{time.strftime('%Y-%m-%d %H:%M:%S')}; {run.setup}",
        f"{elapsed:.0f} s of a {run.budget_s:.0f} s budget ({run.reserve_s:.0f} s kept for the tables); "
        f"{complete} of {len(rows)} runs complete; workers "
        + ", ".join(f"{name} {count}" for name, count in run.split.items()),
        f"command: {' '.join(['python3', *sys.argv])}",
        *notes,
    ]
    (run.out / "headlines.md").write_text(markdown(rows, sweeps, header))
    about = {"device": run.device, "verdict": verdict, "setup": run.setup, "budget_s": run.budget_s}
    figures = as_json(rows, sweeps, {**about, "elapsed_s": round(elapsed, 1)})
    (run.out / "headlines.json").write_text(json.dumps(figures, indent=1) + "\n")
    (run.out / "headlines.log").write_text("\n".join([*run.log.lines, "", *tails(run.jobs)]) + "\n")


def budget_stopped(job: Job) -> bool:
    """Stopped at the budget's end (or by Ctrl-C) before it ended by itself."""
    return bool(job.stopped) and job.code != 0


def start(run: Headlines, pack: Path, jobs_total: int) -> bool:
    """Plan, prepare the data, run the sweeps until they end or the budget's end; False when something failed."""
    ok, run.setup = setup_line(run.device, pack)
    run.log(f"setup: {run.setup}")
    run.plans = {name: planned_runs(name, run.settings) for name in run.names}
    run.split = split_jobs(jobs_total, {name: len(run.plans[name][0]) for name in run.names})
    for name in run.names:
        job = Job(name, sweep_command(name, run.work, run.split[name], run.settings), run.work / "logs" / f"{name}.log")
        job.env = child_env(run.split[name], run.device == "cpu")
        run.jobs.append(job)
    stop_at = run.log.started + run.budget_s - run.reserve_s
    if not (ok and prepare_data(run.names, pack, run.work / "data", run.work, stop_at, run.log)):
        return False
    run.log("sweeps: " + ", ".join(f"{job.name} --jobs {run.split[job.name]}" for job in run.jobs))
    planned = {name: run.plans[name][0] for name in run.names}
    tick = 5.0 if run.device == "cpu" else 30.0
    run_until(run.jobs, stop_at, GRACE_S, lambda jobs: progress(planned, run.work, jobs, run.log), tick)
    return all(job.code == 0 or budget_stopped(job) for job in run.jobs)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--data", type=Path, default=ROOT / ".headlines-pack", help="the pack (make headlines-pack)")
    parser.add_argument("--out", type=Path, default=ROOT / "build" / "headlines-out", help="folder for the summary")
    parser.add_argument("--work", type=Path, default=ROOT / "build" / "headlines", help="data and runs (resumable)")
    parser.add_argument("--budget-s", type=float, default=560, help="wall-clock seconds for the whole command")
    parser.add_argument("--reserve-s", type=float, default=60, help="seconds of the budget kept for the tables")
    parser.add_argument("--jobs", type=int, default=usable_cpus(), help="runs at once, all experiments together")
    parser.add_argument("--only", default="", help=f"comma-separated experiments (default: {', '.join(HEADLINES)})")
    parser.add_argument("--require-complete", action="store_true", help="a run the budget stopped is a failure")
    options = parser.parse_args()
    names = tuple(filter(None, options.only.split(","))) or HEADLINES
    if set(names) - set(HEADLINES):
        parser.error(f"--only: not a headline experiment: {', '.join(sorted(set(names) - set(HEADLINES)))}")
    device = "cpu" if os.environ.get(FORCE_CPU) == "1" else options.device
    if device == "cuda" and not torch.cuda.is_available():
        parser.error(f"--device cuda: CUDA is not available here; use --device cpu (or {FORCE_CPU}=1) for the dry run")
    signal.signal(signal.SIGTERM, interrupt)
    options.out.mkdir(parents=True, exist_ok=True)
    settings = {"device": device, **({"epochs": DRY_EPOCHS} if device == "cpu" else {})}
    log = Log(time.monotonic(), options.out / "headlines.log")
    run = Headlines(
        names, device, settings, options.work.resolve(), options.out, options.budget_s, options.reserve_s, log
    )
    interrupted = False
    try:
        ok = start(run, options.data.resolve(), options.jobs)
    except KeyboardInterrupt:
        ok, interrupted = False, True
        log("interrupted: the sweeps were stopped; their runs keep their checkpoints")
    rows, sweeps = reached(run)
    summarise(run, rows, sweeps, "tables and archive under way", [])  # in OUT before anything else
    for job in run.jobs:
        if job.process is not None and job.code != 0:
            ok = tables(job.name, run.work, settings, log) and ok
    left = archive(run.work, list(names), options.out / "headlines.tar.gz")
    notes = ["left out of headlines.tar.gz (size): " + "; ".join(left)] if left else []
    complete = sum(row.state == "complete" for row in rows)
    ok = ok and (complete == len(rows) or not options.require_complete)
    verdict = "interrupted" if interrupted else "ok" if ok else "FAILED"
    log(f"{verdict}: {complete} of {len(rows)} runs complete; summary {options.out / 'headlines.md'}")
    summarise(run, rows, sweeps, verdict, notes)
    return 130 if interrupted else 0 if ok else 1


def interrupt(signum, frame) -> None:
    """SIGTERM (a time limit's stop) handled as Ctrl-C: the sweeps are stopped and the summary written."""
    raise KeyboardInterrupt


if __name__ == "__main__":
    sys.exit(main())
