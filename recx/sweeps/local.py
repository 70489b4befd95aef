"""The local backend: runs in this process (one job), or N worker processes at once (`--jobs N`).

Each worker is a fresh interpreter (`python -m recx.sweeps.worker`, started with 'spawn' semantics: nothing is
inherited but the environment) that runs one run at a time. Job slot i's worker is pinned to one GPU through
CUDA_VISIBLE_DEVICES when its run is on CUDA and GPUs exist (GPU i mod the number of visible GPUs); every worker gets
a share of the CPU threads: OMP_NUM_THREADS (when set, it is the sweep's whole budget) or the number of cores,
divided by N, at least one. Worker output goes to `<out>/logs/worker-<i>.log`, a crash's traceback to
`<out>/logs/<run id>.log`.
"""

from __future__ import annotations

import json
import os
import selectors
import subprocess
import sys
from pathlib import Path
from typing import Any

from recx.core.cpu_share import unregister
from recx.core.threads import compute_threads, thread_environment
from recx.sweeps.task import FAILED, Outcome, RunTask, execute


class InProcess:
    """One run at a time in the driver's own process, with the training progress bar."""

    capacity = 1

    def __init__(self, progress=None):
        self.progress, self.finished = progress, []

    def start(self, task: RunTask) -> str:
        self.finished.append((task.run_id, execute(task, self.progress)))
        return task.run_id

    def poll(self, timeout: float) -> list:
        finished, self.finished = self.finished, []
        return finished

    def close(self) -> None:
        pass


def visible_gpus() -> list[str]:
    """The GPUs this process may use, as CUDA_VISIBLE_DEVICES entries (empty without CUDA)."""
    import torch

    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    listed = [part for part in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if part.strip()]
    return listed[:count] if listed else [str(index) for index in range(count)]


def wants_cuda(task: RunTask, gpus: list[str]) -> bool:
    return bool(gpus) and task.config.get("device") in ("auto", "cuda")


class Worker:
    """One worker process (recx.sweeps.worker), the GPU it is pinned to (None: not pinned) and its current run."""

    def __init__(self, env: dict, gpu: str | None, threads: int, log: Path):
        log.parent.mkdir(parents=True, exist_ok=True)
        with open(log, "a") as stderr:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "recx.sweeps.worker", str(threads), str(os.getpid())],
                env=env,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=stderr,
                text=True,
            )
        if self.process.stdin is None or self.process.stdout is None:  # not reached: both are pipes above
            raise RuntimeError("the worker process was started without its pipes")
        self.requests, self.answers = self.process.stdin, self.process.stdout
        self.gpu, self.log = gpu, log
        self.task: RunTask | None = None

    def send(self, task: RunTask) -> None:
        self.task = task
        self.requests.write(task.to_json() + "\n")
        self.requests.flush()

    def receive(self) -> Outcome:
        """The answer for the current run; a worker that died instead is reaped and its run reported failed."""
        line = self.answers.readline()
        self.task = None
        if line:
            answer = json.loads(line)
            return Outcome(answer["status"], answer["message"])
        code = self.process.wait()
        return Outcome(FAILED, f"the worker process running it exited with status {code} (log: {self.log})")


class LocalProcesses:
    """`jobs` worker processes, each running one run at a time; a worker that died, or is pinned otherwise than
    the next run needs, is replaced."""

    def __init__(self, jobs: int, logs: Path):
        self.capacity, self.logs = jobs, logs
        self.threads = max(1, compute_threads() // jobs)
        unregister()  # the workers register and compute; this process only waits on them
        self.gpus = visible_gpus()
        self.workers: dict[int, Worker] = {}

    def gpu(self, task: RunTask, slot: int) -> str | None:
        return self.gpus[slot % len(self.gpus)] if wants_cuda(task, self.gpus) else None

    def environment(self, gpu: str | None) -> dict:
        env = dict(os.environ, **thread_environment(self.threads))
        if gpu is not None:
            env["CUDA_VISIBLE_DEVICES"] = gpu
        return env

    def start(self, task: RunTask) -> str:
        slot = next(
            slot for slot in range(self.capacity) if slot not in self.workers or self.workers[slot].task is None
        )
        worker, gpu = self.workers.get(slot), self.gpu(task, slot)
        if worker is None or worker.process.poll() is not None or worker.gpu != gpu:
            if worker is not None:
                worker.requests.close()
            worker = Worker(self.environment(gpu), gpu, self.threads, self.logs / f"worker-{slot}.log")
            self.workers[slot] = worker
        worker.send(task)
        return task.run_id

    def poll(self, timeout: float) -> list:
        busy: dict[Any, Worker] = {
            worker.answers: worker for worker in self.workers.values() if worker.task is not None
        }
        if not busy:
            return []
        with selectors.DefaultSelector() as selector:
            for stream in busy:
                selector.register(stream, selectors.EVENT_READ)
            ready = selector.select(timeout)
        finished = []
        for key, _ in ready:
            worker = busy[key.fileobj]
            if worker.task is not None:  # always: `busy` holds the workers with a run
                finished.append((worker.task.run_id, worker.receive()))
        return finished

    def close(self) -> None:
        for worker in self.workers.values():
            if worker.task is not None:
                worker.process.terminate()
            else:
                worker.requests.close()
        for worker in self.workers.values():
            worker.process.wait()
