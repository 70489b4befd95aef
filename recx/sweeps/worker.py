"""`python -m recx.sweeps.worker THREADS DRIVER_PID`: a local worker process. It reads one task (JSON) per line on
stdin, runs it, and answers one outcome (JSON: run_id, status, message) per line on stdout; it exits at the end of
stdin.
Anything else it prints goes to stderr (the driver sends that to the worker's log), so the answers stay parseable.
A worker lives for the whole sweep so that the interpreter start and the imports are paid once per job, not per run.

A worker whose driver died (kill -9: the worker's parent is then another process than DRIVER_PID) finishes the run it
is training, as README's sweep section says, starts no other (not even a task the driver sent before dying) and
exits, saying so in its log.
"""

from __future__ import annotations

import json
import os
import sys


def driver_gone(driver: int) -> bool:
    """Whether the process that started this worker has died (the worker was given another parent)."""
    return os.getppid() != driver


def answered(answers: int, answer: str) -> bool:
    """Write one answer line to the driver; False when nobody reads it any more (the driver died)."""
    data = answer.encode()
    try:
        while data:
            data = data[os.write(answers, data) :]
    except BrokenPipeError:
        return False
    return True


def serve(threads: int, driver: int) -> None:
    from recx.core.memory import keep_freed_memory
    from recx.core.progress import make_progress
    from recx.core.threads import set_compute_threads
    from recx.sweeps.task import RunTask, execute

    keep_freed_memory()
    answers = os.dup(1)
    os.dup2(2, 1)
    set_compute_threads(threads)
    gone = "recx worker: the sweep's driver is gone"
    for line in sys.stdin:
        task = RunTask.from_json(line)
        if driver_gone(driver):
            print(f"{gone}; run {task.run_id} is not started", file=sys.stderr)
            return
        outcome = execute(task, make_progress(quiet=True))
        answer = json.dumps({"run_id": task.run_id, "status": outcome.status, "message": outcome.message}) + "\n"
        if driver_gone(driver) or not answered(answers, answer):
            print(f"{gone}; run {task.run_id} ended {outcome.status}, no other is started", file=sys.stderr)
            return
    if driver_gone(driver):
        print(f"{gone}; no run was in progress", file=sys.stderr)


if __name__ == "__main__":
    serve(int(sys.argv[1]), int(sys.argv[2]))
